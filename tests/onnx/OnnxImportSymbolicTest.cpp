// ONNX dim_params as kiln symbols (OnnxImportOptions::keepSymbolicDims): a model with a dynamic
// batch imports once, symbolic, and evaluates at any batch exactly like the import fixed to
// that batch; mappings that cannot take symbols, Shape of a symbolic dim and dim_params that
// cannot name a symbol are errors naming the node or input.
#include "core/SymbolicDim.h"
#include "ir/SymbolicShapes.h"
#include "tests/onnx/OnnxTestModel.h"

namespace kiln::onnxtest {
namespace {

frontend::OnnxImportOptions symbolic() {
  frontend::OnnxImportOptions options;
  options.keepSymbolicDims = true;
  return options;
}

/// x [d0,3,4] -> Reshape [0,-1] -> MatMul W [12,5] -> Add b -> Relu -> Flatten -> y [d0,5].
ModelBuilder batchModel() {
  ModelBuilder m(13);
  m.input("x", DType::F32, {-1, 3, 4});
  m.constant("shape", Tensor::fromDoubles(DType::I64, {2}, {0, -1}));
  m.initializer("w", randomTensor({DType::F32, {12, 5}}, 7));
  m.initializer("b", randomTensor({DType::F32, {5}}, 8));
  m.node("Reshape", {"x", "shape"}, {"flat"});
  m.node("MatMul", {"flat", "w"}, {"mm"});
  m.node("Add", {"mm", "b"}, {"sum"});
  m.node("Relu", {"sum"}, {"act"});
  m.node("Flatten", {"act"}, {"y"});
  m.output("y", DType::F32, {-1, 5});
  return m;
}

TEST(OnnxImportSymbolic, ADynamicBatchImportsOnceAndRunsAtEverySize) {
  std::unique_ptr<ir::Graph> graph = import(batchModel(), symbolic());
  EXPECT_EQ(graph->inputs()[0]->type().toString(), "f32[d0,3,4]");
  EXPECT_EQ(graph->outputs()[0]->type().toString(), "f32[d0,5]");
  EXPECT_EQ(ir::graphSymbols(*graph), std::vector<std::string>{"d0"});
  for (int64_t batch : {1, 2, 7}) {
    Tensor x = randomTensor({DType::F32, {batch, 3, 4}}, static_cast<uint64_t>(batch));
    frontend::OnnxImportOptions fixed;
    fixed.dimParams["d0"] = batch;
    std::vector<Tensor> want = run(batchModel(), {x}, fixed);
    std::vector<Tensor> got = ir::evaluate(*graph, {x});
    EXPECT_TRUE(got[0].identical(want[0])) << batch;
    std::unique_ptr<ir::Graph> bound = ir::bindSymbols(*graph, {{"d0", batch}});
    EXPECT_EQ(bound->outputs()[0]->type().toString(), fmt::format("f32[{},5]", batch));
  }
}

TEST(OnnxImportSymbolic, MobileNetActivationsTakeASymbolicBatch) {
  // ReLU6 (Clip with constant bounds), hard sigmoid and swish, Max and Min: each maps to kiln
  // ops whose inference carries symbols, and evaluates at any batch as the fixed import does.
  auto model = [] {
    ModelBuilder m(14);
    m.input("x", DType::F32, {-1, 3});
    m.constant("lo", Tensor::scalar(DType::F32, 0));
    m.constant("hi", Tensor::scalar(DType::F32, 0.5));
    m.node("Clip", {"x", "lo", "hi"}, {"six"});
    m.node("HardSigmoid", {"x"}, {"gate"});
    m.node("HardSwish", {"x"}, {"swish"});
    m.node("Max", {"six", "gate"}, {"top"});
    m.node("Min", {"top", "swish"}, {"y"});
    m.output("y", DType::F32, {-1, 3});
    return m;
  };
  std::unique_ptr<ir::Graph> graph = import(model(), symbolic());
  EXPECT_EQ(graph->outputs()[0]->type().toString(), "f32[d0,3]");
  for (int64_t batch : {1, 5}) {
    Tensor x = randomTensor({DType::F32, {batch, 3}}, static_cast<uint64_t>(batch));
    frontend::OnnxImportOptions fixed;
    fixed.dimParams["d0"] = batch;
    EXPECT_TRUE(ir::evaluate(*graph, {x})[0].identical(run(model(), {x}, fixed)[0])) << batch;
  }
}

TEST(OnnxImportSymbolic, ShapeOfASymbolicDimMovesIntoAReshape) {
  // torch's x.view(x.size(0), -1) with a dynamic batch: Shape -> Gather -> Unsqueeze -> Concat
  // -> Reshape. The symbolic dim travels as a value and comes back as the reshape's dim.
  auto model = [] {
    ModelBuilder m(13);
    m.input("x", DType::F32, {-1, 3, 4});
    m.constant("zero", Tensor::scalar(DType::I64, 0));
    m.constant("axes", Tensor::fromDoubles(DType::I64, {1}, {0}));
    m.constant("rest", Tensor::fromDoubles(DType::I64, {1}, {12}));
    m.node("Shape", {"x"}, {"shape"});
    m.node("Gather", {"shape", "zero"}, {"batch"});
    m.node("Unsqueeze", {"batch", "axes"}, {"batch1"});
    setInt(m.node("Concat", {"batch1", "rest"}, {"target"}), "axis", 0);
    m.node("Reshape", {"x", "target"}, {"y"});
    m.output("y", DType::F32, {-1, 12});
    return m;
  };
  std::unique_ptr<ir::Graph> graph = import(model(), symbolic());
  EXPECT_EQ(graph->outputs()[0]->type().toString(), "f32[d0,12]");
  for (int64_t batch : {1, 5}) {
    Tensor x = randomTensor({DType::F32, {batch, 3, 4}}, static_cast<uint64_t>(batch));
    frontend::OnnxImportOptions fixed;
    fixed.dimParams["d0"] = batch;
    EXPECT_TRUE(ir::evaluate(*graph, {x})[0].identical(run(model(), {x}, fixed)[0])) << batch;
  }
  // A dim divided where no one quotient holds for every size says so.
  ModelBuilder half(13);
  half.input("x", DType::F32, {-1, 3});
  half.constant("two", Tensor::fromDoubles(DType::I64, {1}, {2}));
  half.node("Shape", {"x"}, {"shape"});
  half.node("Div", {"shape", "two"}, {"halved"});
  half.node("Reshape", {"x", "halved"}, {"y"});
  half.output("y", DType::F32, {-1});
  expectError([&] { import(half, symbolic()); }, {"Div of the symbolic dims d0 and 2 has no one value"});
}

TEST(OnnxImportSymbolic, ArithmeticOnSymbolicDimsFoldsToExpressions) {
  // Attention's x.view(S, N * heads, D) and a class token expanded to every image as torch
  // exports it: Expand's shape with -1 replaced through Equal and Where.
  auto model = [] {
    ModelBuilder m(13);
    m.input("x", DType::F32, {-1, 6});
    m.initializer("token", randomTensor({DType::F32, {1, 3}}, 3));
    m.constant("zero", Tensor::scalar(DType::I64, 0));
    m.constant("axes", Tensor::fromDoubles(DType::I64, {1}, {0}));
    m.constant("heads", Tensor::scalar(DType::I64, 2));
    m.constant("width", Tensor::fromDoubles(DType::I64, {1}, {3}));
    m.constant("minus", Tensor::fromDoubles(DType::I64, {1}, {-1}));
    m.constant("ones", Tensor::fromDoubles(DType::I64, {2}, {1, 1}));
    m.node("Shape", {"x"}, {"shape"});
    m.node("Gather", {"shape", "zero"}, {"batch"});
    m.node("Mul", {"batch", "heads"}, {"rows"});
    m.node("Unsqueeze", {"rows", "axes"}, {"rows1"});
    setInt(m.node("Concat", {"rows1", "width"}, {"split"}), "axis", 0);
    m.node("Reshape", {"x", "split"}, {"y"});
    m.node("Unsqueeze", {"batch", "axes"}, {"batch1"});
    setInt(m.node("Concat", {"batch1", "minus"}, {"wanted"}), "axis", 0);
    m.node("Equal", {"wanted", "minus"}, {"keep"});
    m.node("Where", {"keep", "ones", "wanted"}, {"target"});
    m.node("Expand", {"token", "target"}, {"tokens"});
    m.output("y", DType::F32, {-1, 3});
    m.output("tokens", DType::F32, {-1, 3});
    return m;
  };
  std::unique_ptr<ir::Graph> graph = import(model(), symbolic());
  EXPECT_EQ(graph->outputs()[0]->type().toString(), "f32[2*d0,3]");
  EXPECT_EQ(graph->outputs()[1]->type().toString(), "f32[d0,3]");
  for (int64_t batch : {1, 4}) {
    Tensor x = randomTensor({DType::F32, {batch, 6}}, static_cast<uint64_t>(batch));
    frontend::OnnxImportOptions fixed;
    fixed.dimParams["d0"] = batch;
    std::vector<Tensor> got = ir::evaluate(*graph, {x}), want = run(model(), {x}, fixed);
    EXPECT_TRUE(got[0].identical(want[0])) << batch;
    EXPECT_TRUE(got[1].identical(want[1])) << batch;
  }
}

TEST(OnnxImportSymbolic, OptionsStillFixDims) {
  frontend::OnnxImportOptions options = symbolic();
  options.dimParams["d0"] = 4;
  EXPECT_EQ(import(batchModel(), options)->inputs()[0]->type().toString(), "f32[4,3,4]");
  // Without keepSymbolicDims a dim_param still needs a value.
  expectError([&] { import(batchModel()); }, {"graph input 'x'", "symbolic dim 0 ('d0')"});
}

TEST(OnnxImportSymbolic, MappingsThatNeedExtentsAreErrors) {
  ModelBuilder shape(13);
  shape.input("x", DType::F32, {-1, 3});
  shape.node("Shape", {"x"}, {"s"});
  shape.output("s", DType::I64, {2});
  // Shape's result holds the symbol as a value, which may move into a dims operand but not
  // become a tensor of the graph.
  expectError([&] { import(shape, symbolic()); }, {"'s' holds a symbolic dim", "cannot hold yet"});

  ModelBuilder pad(13);
  pad.input("x", DType::F32, {-1, 3});
  pad.constant("pads", Tensor::fromDoubles(DType::I64, {4}, {0, 1, 0, 1}));
  pad.node("Pad", {"x", "pads"}, {"y"});
  pad.output("y", DType::F32, {-1, 5});
  expectError([&] { import(pad, symbolic()); }, {"Pad does not take symbolic dims yet", "input 0 'x' is f32[d0,3]"});
}

TEST(OnnxImportSymbolic, ADimParamMustBeAnIdentifier) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {-1, 3});
  m.node("Relu", {"x"}, {"y"});
  m.output("y", DType::F32, {-1, 3});
  m.model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch size");
  expectError([&] { import(m, symbolic()); }, {"graph input 'x'", "named 'batch size'"});
}

} // namespace
} // namespace kiln::onnxtest
