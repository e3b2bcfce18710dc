// Movement and indexing functions: each builds its op with the right attributes and evaluates
// to what an index loop in the test computes.
#include <gtest/gtest.h>

#include <limits>
#include <numeric>

#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Evaluator.h"

using namespace kiln;
using namespace kiln::frontend;
using ir::OpKind;

namespace {

OpKind opOf(const Var &v) { return v.value()->producer()->op(); }

/// 0, 1, 2, ... as f32 of `shape`.
Tensor counting(Shape shape) {
  Tensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.setDouble(i, static_cast<double>(i));
  return t;
}

std::vector<Tensor> runAll(GraphBuilder &gb, const std::vector<Var> &outputs, const std::vector<Tensor> &inputs) {
  auto graph = gb.finish(outputs);
  return ir::evaluate(*graph, inputs);
}

} // namespace

TEST(FrontendMovement, ReshapeInfersMinusOne) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2, 3, 4});
  Var y = reshape(x, {4, -1});
  EXPECT_EQ(opOf(y), OpKind::Reshape);
  EXPECT_EQ(y.shape(), (Shape{4, 6}));
  EXPECT_EQ(reshape(x, {-1}).shape(), (Shape{24}));
  Var e = gb.input("e", DType::F32, {0, 5});
  EXPECT_EQ(reshape(e, {5, 0}).shape(), (Shape{5, 0}));
  Tensor out = runAll(gb, {y}, {counting({2, 3, 4}), Tensor(DType::F32, {0, 5})})[0];
  EXPECT_EQ(out.toDoubles(), counting({24}).toDoubles()); // same row-major order
}

TEST(FrontendMovement, PermuteAndTranspose) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2, 3, 4});
  Var p = permute(x, {2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  Var t = transpose(x, -1, 0);
  EXPECT_EQ(opOf(t), OpKind::Permute);
  EXPECT_EQ(t.value()->producer()->attrInts("perm"), (std::vector<int64_t>{2, 1, 0}));
  auto out = runAll(gb, {p, t}, {counting({2, 3, 4})});
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c) {
        double v = a * 12 + b * 4 + c;
        EXPECT_EQ(out[0].getDouble(c * 6 + a * 3 + b), v);
        EXPECT_EQ(out[1].getDouble(c * 6 + b * 2 + a), v);
      }
}

TEST(FrontendMovement, BroadcastTo) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::I32, {3, 1});
  Var y = broadcastTo(x, {2, 3, 4});
  EXPECT_EQ(opOf(y), OpKind::Broadcast);
  Tensor out = runAll(gb, {y}, {Tensor::fromDoubles(DType::I32, {3, 1}, {7, 8, 9})})[0];
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(out.getInt(i), 7 + (i / 4) % 3);
}

TEST(FrontendMovement, SliceAndNarrow) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {4, 5});
  Var s = slice(x, {1, -1}, {4, 0}, {0, 1}, {2, -2}); // rows 1,3; cols 4,2
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  Var n = narrow(x, 1, -3, 2); // cols 2,3
  EXPECT_EQ(n.shape(), (Shape{4, 2}));
  auto out = runAll(gb, {s, n}, {counting({4, 5})});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{9, 7, 19, 17}));
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(out[1].getDouble(r * 2), r * 5 + 2);
    EXPECT_EQ(out[1].getDouble(r * 2 + 1), r * 5 + 3);
  }
}

TEST(FrontendMovement, NarrowRejectsRangesOutsideTheAxis) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {4, 5});
  EXPECT_THROW(narrow(x, 1, 4, 2), Error);
  EXPECT_THROW(narrow(x, 1, 0, -1), Error);
  EXPECT_THROW(narrow(x, 2, 0, 1), Error);
  // Extreme starts and lengths are refused without overflowing start + length.
  EXPECT_THROW(narrow(x, 1, 1, std::numeric_limits<int64_t>::max()), Error);
  EXPECT_THROW(narrow(x, 1, std::numeric_limits<int64_t>::max(), 1), Error);
  EXPECT_THROW(narrow(x, 1, std::numeric_limits<int64_t>::min(), 1), Error);
}

TEST(FrontendMovement, PadModes) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {3});
  Var c = pad(x, {2, 1}, "constant", -1.0);
  Var r = pad(x, {2, 1}, "reflect");
  Var e = pad(x, {2, 1}, "edge");
  EXPECT_EQ(opOf(c), OpKind::Pad);
  auto out = runAll(gb, {c, r, e}, {Tensor::fromDoubles(DType::F32, {3}, {1, 2, 3})});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{-1, -1, 1, 2, 3, -1}));
  EXPECT_EQ(out[1].toDoubles(), (std::vector<double>{3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(out[2].toDoubles(), (std::vector<double>{1, 1, 1, 2, 3, 3}));
}

TEST(FrontendMovement, ConcatPromotesOperands) {
  GraphBuilder gb;
  Var a = gb.input("a", DType::I32, {2, 1});
  Var b = gb.input("b", DType::F32, {2, 2});
  Var y = concat({a, b}, -1);
  EXPECT_EQ(opOf(y), OpKind::Concat);
  EXPECT_EQ(y.type(), (TensorType{DType::F32, {2, 3}}));
  Tensor out = runAll(gb, {y}, {Tensor::fromDoubles(DType::I32, {2, 1}, {1, 2}),
                                Tensor::fromDoubles(DType::F32, {2, 2}, {0.5, 1.5, 2.5, 3.5})})[0];
  EXPECT_EQ(out.toDoubles(), (std::vector<double>{1, 0.5, 1.5, 2, 2.5, 3.5}));
  EXPECT_THROW(concat({}, 0), Error);
}

TEST(FrontendMovement, SplitAndChunk) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {5, 2});
  auto parts = split(x, {1, 4}, 0);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(parts[1].shape(), (Shape{4, 2}));
  EXPECT_EQ(parts[0].value()->producer(), parts[1].value()->producer()); // one multi-output node
  auto chunks = chunk(x, 2, 0); // torch: sizes 3 and 2
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(chunks[1].shape(), (Shape{2, 2}));
  EXPECT_EQ(chunk(x, 4, 0).size(), 3u); // torch: ceil(5/4) = 2 per chunk, so 3 chunks
  EXPECT_THROW(chunk(x, 0, 0), Error);
  EXPECT_EQ(chunk(x, std::numeric_limits<int64_t>::max(), 0).size(), 5u); // one row each, no overflow
  auto out = runAll(gb, {parts[1], chunks[1]}, {counting({5, 2})});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(out[1].toDoubles(), (std::vector<double>{6, 7, 8, 9}));
}

TEST(FrontendMovement, SqueezeUnsqueezeFlatten) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {1, 3, 1, 2});
  EXPECT_EQ(squeeze(x).shape(), (Shape{3, 2}));
  EXPECT_EQ(squeeze(x, {-2}).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(opOf(squeeze(x)), OpKind::Squeeze);
  EXPECT_EQ(unsqueeze(x, 0).shape(), (Shape{1, 1, 3, 1, 2}));
  EXPECT_EQ(unsqueeze(x, {-1, 1}).shape(), (Shape{1, 1, 3, 1, 2, 1}));
  EXPECT_EQ(opOf(unsqueeze(x, 0)), OpKind::Unsqueeze);
  EXPECT_EQ(flatten(x).shape(), (Shape{6}));
  EXPECT_EQ(flatten(x, 1).shape(), (Shape{1, 6}));
  EXPECT_EQ(flatten(x, 1, 2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(opOf(flatten(x)), OpKind::Flatten);
  Var s = gb.input("s", DType::F32, {});
  EXPECT_EQ(unsqueeze(s, 0).shape(), (Shape{1}));
  Var f = flatten(x, 1);
  Tensor out = runAll(gb, {f}, {counting({1, 3, 1, 2}), Tensor::scalar(DType::F32, 0)})[0];
  EXPECT_EQ(out.toDoubles(), counting({6}).toDoubles());
}

TEST(FrontendMovement, GatherTakesAlongAnAxis) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {3, 4});
  Var idx = gb.input("idx", DType::I64, {2, 2});
  Var rows = gather(x, idx, 0);
  EXPECT_EQ(opOf(rows), OpKind::Gather);
  EXPECT_EQ(rows.shape(), (Shape{2, 2, 4}));
  Var cols = gather(x, idx, -1);
  EXPECT_EQ(cols.shape(), (Shape{3, 2, 2}));
  std::vector<double> idxValues{2, 0, -1, 1};
  auto out = runAll(gb, {rows, cols}, {counting({3, 4}), Tensor::fromDoubles(DType::I64, {2, 2}, idxValues)});
  for (int64_t k = 0; k < 4; ++k) {
    int64_t row = (static_cast<int64_t>(idxValues[k]) + 3) % 3;
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_EQ(out[0].getDouble(k * 4 + c), row * 4 + c);
  }
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t k = 0; k < 4; ++k) {
      int64_t col = (static_cast<int64_t>(idxValues[k]) + 4) % 4;
      EXPECT_EQ(out[1].getDouble(r * 4 + k), r * 4 + col);
    }
}

TEST(FrontendMovement, ScatterAddAccumulatesRepeatedIndices) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2, 3});
  Var idx = gb.input("idx", DType::I64, {2, 2});
  Var upd = gb.input("upd", DType::F32, {2, 2});
  Var y = scatterAdd(x, idx, upd, 1);
  EXPECT_EQ(opOf(y), OpKind::ScatterAdd);
  Tensor out = runAll(gb, {y}, {Tensor(DType::F32, {2, 3}), Tensor::fromDoubles(DType::I64, {2, 2}, {0, 0, 2, 1}),
                                Tensor::fromDoubles(DType::F32, {2, 2}, {1, 2, 3, 4})})[0];
  // Row 0: both updates land in column 0; row 1: column 2 gets 3, column 1 gets 4.
  EXPECT_EQ(out.toDoubles(), (std::vector<double>{3, 0, 0, 0, 4, 3}));
}
