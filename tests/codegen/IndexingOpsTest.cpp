// gather_elements, gather_nd (indirect loads), scatter_elements, scatter_add, scatter_nd,
// cumsum, topk and resize (Direct stages) compiled against the reference evaluator: random
// data, indices that include negative ones and repeats, every reduction and attribute variant,
// size-1 and empty dims, scatters large enough to run parallel rows. Movement and selection ops
// must match bit for bit.
#include <gtest/gtest.h>

#include <random>

#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Evaluator.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;
using ir::OpKind;

constexpr double kExact = 0;

/// Indices uniform in [-dim, dim): every one valid, about half of them negative.
Tensor randomIndices(DType dtype, const Shape &shape, int64_t dim, uint64_t seed) {
  Tensor t(dtype, shape);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(-dim, dim - 1);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.setInt(i, pick(rng));
  return t;
}

/// Many small cases in one graph (one compile): each case adds its inputs (with the tensors to
/// bind) and outputs; run() compares every output with the reference evaluator.
class Batch {
public:
  explicit Batch(const std::string &name) : gb_(name) {}
  Var input(const Tensor &value) {
    inputs_.push_back(value);
    return gb_.input("x" + std::to_string(inputs_.size()), value.type());
  }
  Var op(OpKind op, const std::vector<Var> &in, ir::AttrMap attrs) { return gb_.op(op, in, std::move(attrs)); }
  std::vector<Var> opMulti(OpKind op, const std::vector<Var> &in, ir::AttrMap attrs) {
    return gb_.opMulti(op, in, std::move(attrs));
  }
  void output(const Var &value) { outputs_.push_back(value); }
  /// Checks the compiled graph against the reference; returns its generated source.
  std::string run(double rtol = kExact, double atol = kExact) {
    auto graph = gb_.finish(outputs_);
    expectMatchesReference(*graph, inputs_, testOptions(), rtol, atol);
    return lowerGraph(*graph, testOptions()).model.source;
  }

private:
  GraphBuilder gb_;
  std::vector<Tensor> inputs_;
  std::vector<Var> outputs_;
};

int64_t axisSize(const Shape &shape, int64_t axis) {
  return shape[static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis)];
}

// ---- gather_elements / gather_nd ---------------------------------------------------------------

void addGatherElements(Batch &b, DType dtype, DType indexType, const Shape &dataShape, const Shape &indexShape,
                       int64_t axis, uint64_t seed) {
  Var data = b.input(randomTensor({dtype, dataShape}, seed));
  Var indices = b.input(randomIndices(indexType, indexShape, axisSize(dataShape, axis), seed + 1));
  b.output(b.op(OpKind::GatherElements, {data, indices}, {{"axis", axis}}));
}

TEST(CodegenIndexing, GatherElementsAlongEveryAxis) {
  Batch b("gather_elements");
  addGatherElements(b, DType::F32, DType::I64, {3, 4, 5}, {3, 6, 5}, 1, 1);
  addGatherElements(b, DType::F32, DType::I64, {3, 4, 5}, {2, 4, 7}, -1, 2);
  addGatherElements(b, DType::F32, DType::I32, {3, 4, 5}, {5, 2, 3}, 0, 3);
  addGatherElements(b, DType::F64, DType::I64, {1, 7}, {1, 9}, 1, 4);
  addGatherElements(b, DType::I32, DType::I64, {6}, {11}, 0, 5);
  addGatherElements(b, DType::Bool, DType::I32, {4, 3}, {4, 1}, 0, 6);
  addGatherElements(b, DType::F32, DType::I64, {4, 3}, {0, 3}, 1, 7); // empty indices
  addGatherElements(b, DType::F16, DType::I64, {5, 6}, {5, 8}, 1, 8); // 16-bit floats load like gather's
  addGatherElements(b, DType::BF16, DType::I32, {5, 6}, {7, 6}, 0, 9);
  b.run();
}

TEST(CodegenIndexing, GatherElementsFusesWithElementwiseChain) {
  GraphBuilder gb("gather_elements_fused");
  Var data = gb.input("data", DType::F32, {8, 16});
  Var indices = gb.input("indices", DType::I64, {8, 4});
  Var picked = gb.op(OpKind::GatherElements, {data, indices}, {{"axis", int64_t(1)}});
  auto graph = gb.finish({frontend::tanh(frontend::exp(picked) * 2.0 + 1.0)});
  expectMatchesReference(*graph, {randomTensor({DType::F32, {8, 16}}, 8), randomIndices(DType::I64, {8, 4}, 16, 9)});
  EXPECT_EQ(launchStrategies(*graph), std::vector<std::string>{"elementwise"});
}

void addGatherNd(Batch &b, DType dtype, const Shape &dataShape, const Shape &indexShape, int64_t batch, uint64_t seed) {
  // Each tuple entry j addresses data axis batch + j; draw it within that axis.
  Tensor index(DType::I64, indexShape);
  int64_t length = indexShape.back();
  std::mt19937_64 rng(seed + 1);
  for (int64_t i = 0; i < index.numElements(); ++i) {
    int64_t dim = dataShape[static_cast<size_t>(batch + i % length)];
    index.setInt(i, std::uniform_int_distribution<int64_t>(-dim, dim - 1)(rng));
  }
  Var data = b.input(randomTensor({dtype, dataShape}, seed));
  b.output(b.op(OpKind::GatherNd, {data, b.input(index)}, {{"batch_dims", batch}}));
}

TEST(CodegenIndexing, GatherNdTuplesSlicesAndBatches) {
  Batch b("gather_nd");
  addGatherNd(b, DType::F32, {4, 3, 5}, {6, 2}, 0, 11);    // slices of 5
  addGatherNd(b, DType::F32, {4, 3, 5}, {2, 3, 3}, 0, 12); // single elements
  addGatherNd(b, DType::I32, {4, 3, 5}, {7, 1}, 0, 13);    // whole [3, 5] blocks
  addGatherNd(b, DType::F64, {2, 3, 4}, {2, 5, 1}, 1, 14); // batch_dims 1
  addGatherNd(b, DType::F32, {2, 3, 1, 4}, {2, 3, 2}, 1, 15);
  addGatherNd(b, DType::F32, {4, 3}, {0, 1}, 0, 16); // no tuples
  addGatherNd(b, DType::F16, {4, 3, 5}, {6, 2}, 0, 17);
  addGatherNd(b, DType::BF16, {2, 3, 4}, {2, 5, 1}, 1, 18);
  b.run();
}

// The reference evaluator rejects an index outside [-dim, dim); generated code cannot report
// it, so it wraps negative indices and then clamps into the axis, never reading or writing
// outside the buffers.
TEST(CodegenIndexing, OutOfRangeIndicesAreClampedNotReadOutOfBounds) {
  GraphBuilder gb("clamped");
  Var data = gb.input("data", DType::F32, {4});
  Var indices = gb.input("indices", DType::I64, {4});
  Var updates = gb.input("updates", DType::F32, {4});
  auto graph = gb.finish({gb.op(OpKind::GatherElements, {data, indices}, {{"axis", int64_t(0)}}),
                          gb.op(OpKind::ScatterElements, {data, indices, updates},
                                {{"axis", int64_t(0)}, {"reduction", std::string("add")}})});
  Tensor x(DType::F32, {4}), index(DType::I64, {4}), update(DType::F32, {4});
  const float xs[4] = {1, 2, 3, 4}, us[4] = {10, 20, 30, 40};
  const int64_t is[4] = {100, -100, -1, 3}; // -> 3 (clamped), 0 (wrapped to -96, clamped), 3, 3
  for (int64_t i = 0; i < 4; ++i) {
    x.setDouble(i, xs[i]);
    update.setDouble(i, us[i]);
    index.setInt(i, is[i]);
  }
  EXPECT_THROW(ir::evaluate(*graph, {x, index, update}), Error);
  std::vector<Tensor> got = compile(*graph, testOptions()).run({x, index, update});
  const double gathered[4] = {4, 1, 4, 4}, scattered[4] = {1 + 20, 2, 3, 4 + 10 + 30 + 40};
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got[0].getDouble(i), gathered[i]) << i;
    EXPECT_EQ(got[1].getDouble(i), scattered[i]) << i;
  }
}

// ---- scatters ---------------------------------------------------------------------------------

void addScatterElements(Batch &b, DType dtype, DType indexType, const Shape &dataShape, const Shape &indexShape,
                        int64_t axis, const std::string &reduction, uint64_t seed) {
  // More updates than positions: repeated indices, so the combining order matters.
  Var data = b.input(randomTensor({dtype, dataShape}, seed));
  Var indices = b.input(randomIndices(indexType, indexShape, axisSize(dataShape, axis), seed + 1));
  Var updates = b.input(randomTensor({dtype, indexShape}, seed + 2));
  b.output(b.op(OpKind::ScatterElements, {data, indices, updates}, {{"axis", axis}, {"reduction", reduction}}));
}

TEST(CodegenIndexing, ScatterElementsEveryReductionAndDtype) {
  Batch b("scatter_elements");
  uint64_t seed = 20;
  for (const char *reduction : {"none", "add", "mul", "max", "min"}) {
    addScatterElements(b, DType::F32, DType::I64, {4, 5}, {4, 9}, 1, reduction, seed += 3);
    addScatterElements(b, DType::F32, DType::I32, {3, 4, 2}, {8, 2, 2}, 0, reduction, seed += 3);
    addScatterElements(b, DType::F64, DType::I64, {6}, {15}, -1, reduction, seed += 3);
    addScatterElements(b, DType::I32, DType::I64, {3, 3}, {3, 7}, -1, reduction, seed += 3);
    addScatterElements(b, DType::I64, DType::I32, {5, 1}, {9, 1}, 0, reduction, seed += 3);
  }
  addScatterElements(b, DType::Bool, DType::I64, {4, 4}, {4, 6}, 1, "none", 90);
  addScatterElements(b, DType::F32, DType::I64, {4, 5}, {0, 5}, 0, "add", 91); // no updates: a copy
  b.run();
}

// Large enough for the scatter to run one parallel row per value of the dims before the axis:
// repeated indices within a row must still combine in the reference's order (bit for bit), a
// row past indices' extent in those dims is only copied, and dims after the axis stay in the row.
TEST(CodegenIndexing, ScatterElementsParallelRowsMatchBitForBit) {
  Batch b("scatter_rows");
  uint64_t seed = 200;
  for (const char *reduction : {"none", "add", "mul", "max"}) {
    addScatterElements(b, DType::F32, DType::I64, {256, 130}, {256, 300}, 1, reduction, seed += 3);
    addScatterElements(b, DType::F32, DType::I32, {40, 30, 40}, {25, 20, 60}, -1, reduction, seed += 3);
    addScatterElements(b, DType::F32, DType::I64, {64, 20, 32}, {50, 45, 30}, 1, reduction, seed += 3);
  }
  addScatterElements(b, DType::F64, DType::I64, {64, 20, 32}, {64, 40, 32}, -2, "add", 240);
  addScatterElements(b, DType::I32, DType::I64, {300, 120}, {300, 200}, 1, "add", 243);
  addScatterElements(b, DType::F32, DType::I64, {300, 120}, {0, 200}, 1, "add", 246); // a parallel copy
  // max_pool's backward: every row scatters the same window table into its plane.
  Var zeros = b.input(Tensor(DType::F32, {128, 401}));
  Tensor table = randomIndices(DType::I64, {1, 900}, 401, 249);
  Tensor targets(DType::I64, {128, 900});
  for (int64_t i = 0; i < targets.numElements(); ++i)
    targets.setInt(i, table.getInt(i % 900));
  Var contributions = b.input(randomTensor({DType::F32, {128, 900}}, 250));
  b.output(b.op(OpKind::ScatterAdd, {zeros, b.input(targets), contributions}, {{"axis", int64_t(1)}}));
  b.run();
}

TEST(CodegenIndexing, ScatterAddAsAutodiffUsesIt) {
  Batch b("scatter_add");
  for (DType dtype : {DType::F32, DType::I64}) {
    Var data = b.input(randomTensor({dtype, {6, 5}}, 95));
    Var indices = b.input(randomIndices(DType::I64, {12, 5}, 6, 96));
    Var updates = b.input(randomTensor({dtype, {12, 5}}, 97));
    b.output(b.op(OpKind::ScatterAdd, {data, indices, updates}, {{"axis", int64_t(0)}}));
  }
  b.run();
}

void addScatterNd(Batch &b, DType dtype, const Shape &dataShape, const Shape &indexShape, const std::string &reduction,
                  uint64_t seed) {
  size_t length = static_cast<size_t>(indexShape.back());
  Shape updateShape(indexShape.begin(), indexShape.end() - 1);
  updateShape.insert(updateShape.end(), dataShape.begin() + static_cast<std::ptrdiff_t>(length), dataShape.end());
  Tensor index(DType::I64, indexShape);
  std::mt19937_64 rng(seed + 1);
  for (int64_t i = 0; i < index.numElements(); ++i) {
    int64_t dim = dataShape[static_cast<size_t>(i) % length];
    index.setInt(i, std::uniform_int_distribution<int64_t>(-dim, dim - 1)(rng));
  }
  Var data = b.input(randomTensor({dtype, dataShape}, seed));
  Var updates = b.input(randomTensor({dtype, updateShape}, seed + 2));
  b.output(b.op(OpKind::ScatterNd, {data, b.input(index), updates}, {{"reduction", reduction}}));
}

TEST(CodegenIndexing, ScatterNdSlicesElementsAndReductions) {
  Batch b("scatter_nd");
  uint64_t seed = 100;
  for (const char *reduction : {"none", "add", "mul", "max", "min"}) {
    addScatterNd(b, DType::F32, {4, 5, 6}, {7, 1}, reduction, seed += 3);
    addScatterNd(b, DType::F32, {4, 5, 6}, {3, 4, 3}, reduction, seed += 3);
    addScatterNd(b, DType::I32, {4, 5}, {6, 2}, reduction, seed += 3);
    addScatterNd(b, DType::F64, {3, 2}, {5, 1}, reduction, seed += 3);
  }
  // Empty tuples address the whole of data: every update row lands on it.
  Var data = b.input(randomTensor({DType::F32, {2, 3}}, 130));
  Var updates = b.input(randomTensor({DType::F32, {3, 2, 3}}, 131));
  b.output(b.op(OpKind::ScatterNd, {data, b.input(Tensor(DType::I64, {3, 0})), updates},
                {{"reduction", std::string("add")}}));
  b.run();
}

// ---- cumsum / topk ------------------------------------------------------------------------------

TEST(CodegenIndexing, CumSumEveryAxisDirectionAndDtype) {
  uint64_t seed = 200;
  for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8}) {
    Batch b("cumsum");
    Var x = b.input(randomTensor({dtype, {3, 1, 37}}, seed++));
    for (int64_t axis : {0, 1, -1})
      for (int64_t exclusive : {0, 1})
        for (int64_t reverse : {0, 1})
          b.output(b.op(OpKind::CumSum, {x}, {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}}));
    if (dtype == DType::F32)
      b.output(b.op(OpKind::CumSum, {b.input(Tensor(DType::F32, {0, 4}))}, {{"axis", int64_t(1)}}));
    b.run(1e-5, 0);
  }
}

TEST(CodegenIndexing, TopKLargestSmallestWithTies) {
  uint64_t seed = 300;
  for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64}) {
    Batch b("topk");
    // Few distinct values (integers in [0, 10), or floats rounded to quarters): many ties.
    Tensor input = randomTensor({dtype, {5, 3, 9}}, seed++);
    if (isFloat(dtype))
      for (int64_t i = 0; i < input.numElements(); ++i)
        input.setDouble(i, std::round(input.getDouble(i) * 4) / 4);
    Var x = b.input(input);
    for (int64_t largest : {0, 1})
      for (auto [axis, k] : {std::pair<int64_t, int64_t>{-1, 4}, {0, 2}, {1, 1}, {-1, 9}, {0, 0}})
        for (const Var &out : b.opMulti(OpKind::TopK, {x}, {{"k", k}, {"axis", axis}, {"largest", largest}}))
          b.output(out);
    b.run();
  }
}

// ---- resize -------------------------------------------------------------------------------------

void addResize(Batch &b, DType dtype, const Shape &in, const Shape &sizes, ir::AttrMap attrs, uint64_t seed) {
  attrs["sizes"] = sizes;
  b.output(b.op(OpKind::Resize, {b.input(randomTensor({dtype, in}, seed))}, attrs));
}

TEST(CodegenIndexing, ResizeNearestEveryRoundingAndCoordinateMode) {
  Batch b("resize_nearest");
  uint64_t seed = 400;
  for (const char *coordinates : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"})
    for (const char *rounding : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      ir::AttrMap attrs = {{"mode", std::string("nearest")},
                           {"coordinate_transformation_mode", std::string(coordinates)},
                           {"nearest_mode", std::string(rounding)}};
      addResize(b, DType::F32, {1, 2, 4, 5}, {1, 2, 7, 3}, attrs, seed++);
      addResize(b, DType::I64, {3, 4}, {1, 8}, attrs, seed++);
    }
  addResize(b, DType::F32, {2, 3}, {4, 9},
            {{"mode", std::string("nearest")}, {"scales", std::vector<double>{2.0, 3.0}}}, seed++);
  addResize(b, DType::F32, {2, 3}, {0, 6}, {{"mode", std::string("nearest")}}, seed++); // empty output
  b.run();
}

TEST(CodegenIndexing, ResizeLinearAndCubic) {
  Batch b("resize_interpolating");
  uint64_t seed = 500;
  for (const char *mode : {"linear", "cubic"})
    for (const char *coordinates : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"})
      for (int64_t exclude : {0, 1}) {
        ir::AttrMap attrs = {{"mode", std::string(mode)},
                             {"coordinate_transformation_mode", std::string(coordinates)},
                             {"exclude_outside", exclude}};
        addResize(b, DType::F32, {4, 2, 5}, {7, 3, 4}, attrs, seed++); // a leading axis resized
        addResize(b, DType::F64, {5, 1}, {3, 1}, attrs, seed++);
        addResize(b, DType::F64, {1, 2, 4, 5}, {1, 2, 8, 3}, attrs, seed++);
      }
  addResize(b, DType::F32, {2, 4, 4}, {2, 8, 8},
            {{"mode", std::string("cubic")}, {"cubic_coeff_a", -0.5}, {"scales", std::vector<double>{1.0, 2.0, 2.0}}},
            seed++);
  addResize(b, DType::I32, {3, 4}, {6, 7}, {{"mode", std::string("linear")}}, seed++);
  // Same arithmetic in the same order as the reference (no FMA): agreement to the last bit.
  b.run(1e-12, 0);
}

// f32 linear resizes of the last two axes run as planes in single precision (EmitResize.cpp):
// every coordinate mode, up and down, either axis alone, an 8x upsampling of 21 planes, rank
// 2. They agree with the reference's double arithmetic to f32 rounding, not to the bit.
TEST(CodegenIndexing, ResizeBilinearPlanesInSinglePrecision) {
  Batch b("resize_bilinear");
  uint64_t seed = 700;
  for (const char *coordinates : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"})
    for (int64_t exclude : {0, 1}) {
      ir::AttrMap attrs = {{"mode", std::string("linear")},
                           {"coordinate_transformation_mode", std::string(coordinates)},
                           {"exclude_outside", exclude}};
      addResize(b, DType::F32, {1, 2, 4, 5}, {1, 2, 8, 3}, attrs, seed++);
      addResize(b, DType::F32, {2, 3, 7, 9}, {2, 3, 7, 20}, attrs, seed++);  // rows kept
      addResize(b, DType::F32, {1, 1, 9, 6}, {1, 1, 4, 6}, attrs, seed++);   // columns kept
      addResize(b, DType::F32, {3, 4}, {6, 7}, attrs, seed++);
    }
  addResize(b, DType::F32, {1, 21, 4, 4}, {1, 21, 32, 32}, {{"mode", std::string("linear")}}, seed++);
  const std::string source = b.run(1e-5, 1e-6);
  EXPECT_NE(source.find("_wx0["), std::string::npos) << "the plane path ran";
  EXPECT_EQ(source.find("double *cur"), std::string::npos) << "no resize took the double path";
}

// Enough work that the row functions run on the thread pool: each call has its own scratch.
TEST(CodegenIndexing, LargeInputsRunInParallelRows) {
  Batch b("parallel_rows");
  Var x = b.input(randomTensor({DType::F32, {64, 1100}}, 600));
  b.output(b.op(OpKind::CumSum, {x}, {{"axis", int64_t(1)}}));
  for (const Var &out :
       b.opMulti(OpKind::TopK, {x}, {{"k", int64_t(5)}, {"axis", int64_t(1)}, {"largest", int64_t(1)}}))
    b.output(out);
  addResize(b, DType::F32, {2, 6, 30, 40}, {2, 6, 61, 80}, {{"mode", std::string("linear")}}, 601);
  addResize(b, DType::F32, {2, 6, 30, 40}, {2, 6, 90, 120}, {{"mode", std::string("nearest")}}, 602);
  b.run(1e-6, 1e-7);
}

} // namespace
} // namespace kiln::codegen::test
