// Batch tiling (ir/BatchTiling.h): which graphs compute each row of the batch from its own
// rows, where each value holds the batch (merged with heads or the sequence too), what makes a
// graph not separable (named), and the tile copies: every separable graph here is evaluated
// whole and, retiled, tile by tile on the rows of the same inputs, and the rows must agree.
#include <gtest/gtest.h>

#include <cstring>

#include "core/SymbolicDim.h"
#include "core/Tensor.h"
#include "ir/BatchTiling.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "tests/ErrorMatchers.h"

namespace kiln::ir {
namespace {

using test::expectErrorContaining;

TensorType f32(Shape shape) { return {DType::F32, std::move(shape)}; }

Value *weight(Builder &b, Shape shape, uint64_t seed) { return b.constant(randomTensor(f32(std::move(shape)), seed)); }

/// Rows [first, first + count) of axis 0.
Tensor rowsOf(const Tensor &t, int64_t first, int64_t count) {
  Shape shape = t.shape();
  int64_t rowBytes = static_cast<int64_t>(t.byteSize()) / shape[0];
  shape[0] = count;
  Tensor cut(t.dtype(), shape);
  std::memcpy(cut.data(), static_cast<const char *>(t.data()) + first * rowBytes, static_cast<size_t>(count * rowBytes));
  return cut;
}

/// Evaluates `graph` whole and its copy retiled to `tile` rows on each run of rows of the
/// batched inputs; every output row must agree (the reference evaluator's products may sum
/// in another order at another size, hence a tolerance).
void expectTilesAgree(const Graph &graph, int64_t tile, int64_t rows, uint64_t seed) {
  BatchAxes axes = findBatchAxes(graph);
  ASSERT_TRUE(axes.separable) << axes.reason;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    Shape shape = graph.inputs()[i]->shape();
    if (axes.axisOf.count(graph.inputs()[i]))
      shape[0] = rows; // a symbolic batch takes `rows`
    inputs.push_back(randomTensor({graph.inputs()[i]->dtype(), shape}, seed + i));
  }
  std::vector<Tensor> whole = evaluate(graph, inputs);
  std::unique_ptr<Graph> tiled = retileBatch(graph, tile);
  for (int64_t first = 0; first < rows; first += tile) {
    std::vector<Tensor> cut;
    for (size_t i = 0; i < inputs.size(); ++i)
      cut.push_back(axes.axisOf.count(graph.inputs()[i]) ? rowsOf(inputs[i], first, tile) : inputs[i]);
    std::vector<Tensor> part = evaluate(*tiled, cut);
    for (size_t o = 0; o < part.size(); ++o) {
      Tensor want = rowsOf(whole[o], first, tile);
      ASSERT_EQ(part[o].type(), want.type()) << "output " << o;
      for (int64_t e = 0; e < want.numElements(); ++e)
        ASSERT_NEAR(part[o].getDouble(e), want.getDouble(e), 1e-5 * (1 + std::abs(want.getDouble(e))))
            << "output " << o << " element " << e << " of rows from " << first;
    }
  }
}

TEST(BatchTiling, ConvolutionsPoolsAndAClassifierHead) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({4, 3, 8, 8}), "x");
  Value *y = b.create(OpKind::Conv, {x, weight(b, {6, 3, 3, 3}, 1)}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  y = b.create(OpKind::Relu, {b.create(OpKind::Add, {y, weight(b, {6, 1, 1}, 2)})});
  y = b.create(OpKind::MaxPool, {y}, {{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  Value *pooled = b.create(OpKind::ReduceMean, {y}, {{"axes", std::vector<int64_t>{2, 3}}});
  Value *flat = b.create(OpKind::Reshape, {pooled}, {{"shape", std::vector<int64_t>{4, 6}}});
  Value *logits = b.create(OpKind::Linear, {flat, weight(b, {5, 6}, 3)});
  g.setOutputs({b.create(OpKind::Softmax, {logits}, {{"axis", int64_t(-1)}})});

  BatchAxes axes = findBatchAxes(g);
  ASSERT_TRUE(axes.separable) << axes.reason;
  EXPECT_EQ(axes.extent, 4);
  EXPECT_EQ(axes.axisOf.at(pooled), (BatchAxis{0, 1, 1}));
  std::unique_ptr<Graph> one = retileBatch(g, 1);
  EXPECT_EQ(one->inputs()[0]->type().toString(), "f32[1,3,8,8]");
  EXPECT_EQ(one->outputs()[0]->type().toString(), "f32[1,5]");
  for (int64_t tile : {1, 2})
    expectTilesAgree(g, tile, 4, 10 + tile);
}

TEST(BatchTiling, AttentionWithTheBatchMergedIntoHeadsAndTheSequence) {
  // torch's MultiheadAttention layout: [N, S, E] -> [S, N, E], heads merged into the batch
  // ([S, N*H, D], inner factor H), the projections over [S*N, E] (outer factor S).
  const int64_t n = 2, s = 5, h = 3, d = 4, e = h * d;
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({n, s, e}), "x");
  Value *seq = b.create(OpKind::Permute, {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}}); // [S, N, E]
  Value *rows = b.create(OpKind::Reshape, {seq}, {{"shape", std::vector<int64_t>{s * n, e}}});
  Value *proj = b.create(OpKind::MatMul, {rows, weight(b, {e, e}, 4)});
  Value *heads = b.create(OpKind::Reshape, {proj}, {{"shape", std::vector<int64_t>{s, n * h, d}}});
  Value *q = b.create(OpKind::Permute, {heads}, {{"perm", std::vector<int64_t>{1, 0, 2}}}); // [N*H, S, D]
  Value *kt = b.create(OpKind::Permute, {q}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Value *scores = b.create(OpKind::Softmax, {b.create(OpKind::MatMul, {q, kt})}, {{"axis", int64_t(-1)}});
  Value *mixed = b.create(OpKind::MatMul, {scores, q});                                         // [N*H, S, D]
  Value *back = b.create(OpKind::Permute, {mixed}, {{"perm", std::vector<int64_t>{1, 0, 2}}}); // [S, N*H, D]
  Value *joined = b.create(OpKind::Reshape, {back}, {{"shape", std::vector<int64_t>{s * n, e}}});
  Value *out = b.create(OpKind::Reshape, {joined}, {{"shape", std::vector<int64_t>{s, n, e}}});
  g.setOutputs({b.create(OpKind::Permute, {out}, {{"perm", std::vector<int64_t>{1, 0, 2}}})});

  BatchAxes axes = findBatchAxes(g);
  ASSERT_TRUE(axes.separable) << axes.reason;
  EXPECT_EQ(axes.axisOf.at(rows), (BatchAxis{0, s, 1}));
  EXPECT_EQ(axes.axisOf.at(heads), (BatchAxis{1, 1, h}));
  EXPECT_EQ(axes.axisOf.at(scores), (BatchAxis{0, 1, h}));
  std::unique_ptr<Graph> one = retileBatch(g, 1);
  EXPECT_EQ(one->outputs()[0]->type().toString(), "f32[1,5,12]");
  expectTilesAgree(g, 1, n, 20);
}

TEST(BatchTiling, ABroadcastTokenJoinsEveryRow) {
  // ViT's class token: a [1, 1, E] weight broadcast to every image, joined to its patches.
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({3, 4, 6}), "x");
  Value *token = b.create(OpKind::Broadcast, {weight(b, {1, 1, 6}, 5)}, {{"shape", std::vector<int64_t>{3, 1, 6}}});
  g.setOutputs({b.create(OpKind::Concat, {token, x}, {{"axis", int64_t(1)}})});
  expectTilesAgree(g, 1, 3, 30);
}

TEST(BatchTiling, ASymbolicBatchTilesToAStaticGraph) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({symbolDim("N"), 7}), "x");
  Value *h = b.create(OpKind::Tanh, {b.create(OpKind::Linear, {x, weight(b, {3, 7}, 6)})});
  g.setOutputs({b.create(OpKind::LogSoftmax, {h}, {{"axis", int64_t(1)}})});
  BatchAxes axes = findBatchAxes(g);
  ASSERT_TRUE(axes.separable) << axes.reason;
  EXPECT_EQ(dimToString(axes.extent), "N");
  std::unique_ptr<Graph> tiled = retileBatch(g, 2);
  EXPECT_EQ(tiled->inputs()[0]->type().toString(), "f32[2,7]");
  expectTilesAgree(g, 2, 6, 40);
}

TEST(BatchTiling, RecurrenceWithConstantInitialStates) {
  // An LSTM over a batch-first sequence: xw [T, B, 4H] from a permute, initial states exported
  // as zeros constants of the batch's extent (cut to the tile), outputs back batch-first.
  const int64_t batch = 4, steps = 3, hidden = 2;
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({batch, steps, 4 * hidden}), "x");
  Value *xw = b.create(OpKind::Permute, {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  Value *zeros = b.constant(Tensor(f32({1, batch, hidden})));
  Value *zeros2 = b.constant(Tensor(f32({1, batch, hidden})));
  std::vector<Value *> outs =
      b.createMulti(OpKind::LstmSequence,
                    {xw, weight(b, {1, 4 * hidden, hidden}, 7), weight(b, {1, 4 * hidden}, 8), zeros, zeros2});
  g.setOutputs({b.create(OpKind::Permute, {outs[0]}, {{"perm", std::vector<int64_t>{1, 0, 2, 3}}}),
                b.create(OpKind::Permute, {outs[1]}, {{"perm", std::vector<int64_t>{1, 0, 2}}})});
  BatchAxes axes = findBatchAxes(g);
  ASSERT_TRUE(axes.separable) << axes.reason;
  EXPECT_EQ(axes.axisOf.at(zeros), (BatchAxis{1, 1, 1}));
  for (int64_t tile : {1, 2})
    expectTilesAgree(g, tile, batch, 50 + tile);
}

/// A graph on x f32[4, 3] (and y f32[4, 3]) whose one output `build` makes.
std::string reasonFor(const std::function<Value *(Builder &, Value *)> &build) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({4, 3}), "x");
  g.setOutputs({build(b, x)});
  BatchAxes axes = findBatchAxes(g);
  EXPECT_FALSE(axes.separable);
  return axes.reason;
}

TEST(BatchTiling, WhatMixesRowsIsNamed) {
  using V = Value *;
  EXPECT_EQ(reasonFor([](Builder &b, V x) { return b.create(OpKind::Softmax, {x}, {{"axis", int64_t(0)}}); }),
            "softmax computes along the batch axis");
  EXPECT_EQ(reasonFor([](Builder &b, V x) {
              V total = b.create(OpKind::ReduceSum, {x}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(1)}});
              return b.create(OpKind::Sub, {x, total});
            }),
            "reduce_sum computes along the batch axis");
  EXPECT_EQ(reasonFor([](Builder &b, V x) {
              V xt = b.create(OpKind::Permute, {x}, {{"perm", std::vector<int64_t>{1, 0}}});
              return b.create(OpKind::MatMul, {x, b.create(OpKind::MatMul, {xt, x})});
            }),
            "matmul contracts the batch axis");
  EXPECT_EQ(reasonFor([](Builder &b, V x) { return b.create(OpKind::Concat, {x, x}, {{"axis", int64_t(0)}}); }),
            "concat joins along the batch axis");
  EXPECT_EQ(reasonFor([](Builder &b, V x) { return b.create(OpKind::Add, {x, weight(b, {4, 3}, 9)}); }),
            "add broadcasts operand 1 (no batch, extent 4 on the batch axis) against the batch");
  EXPECT_EQ(reasonFor([](Builder &b, V x) {
              return b.create(OpKind::Slice, {x}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{3}}});
            }),
            "slice slices the batch axis");
  EXPECT_EQ(reasonFor([](Builder &b, V x) {
              return b.create(OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>{2, 6}}});
            }),
            "reshape [4,3] -> [2,6] splits or merges the batch axis");
  EXPECT_EQ(reasonFor([](Builder &b, V x) { return b.create(OpKind::Permute, {x}, {{"perm", std::vector<int64_t>{1, 0}}}); }),
            "output '' does not hold the batch on axis 0");
}

TEST(BatchTiling, AnOpWhoseMeaningChangesAtATileOfOneRowIsRefused) {
  // squeeze with no axes drops every dim of extent 1: at a tile of one row, the batch too.
  Graph g;
  Builder b(g);
  Value *x = g.addInput(f32({4, 1, 3}), "x");
  g.setOutputs({b.create(OpKind::Squeeze, {x})});
  EXPECT_EQ(findBatchAxes(g).reason, "squeeze drops every dim of extent 1, the batch's too at a tile of one row");
  expectErrorContaining([&] { retileBatch(g, 2); }, "graph @main is not batch-separable: squeeze drops every dim");
}

} // namespace
} // namespace kiln::ir
