// rnn_sequence, gru_sequence and lstm_sequence compiled (one call of the runtime's recurrent
// kernel each, codegen/EmitRecurrence.cpp) against the reference evaluator on random inputs:
// every cell and direction, batch 1 and larger, odd hidden sizes, lengths and clipping, on one
// and two threads; recurrent weights that are parameters packed once at load, others read
// plain. An ONNX LSTM and GRU as torch exports them compile to one recurrence kernel per
// layer, not a graph unrolled over the steps. And a training step through an LSTM (autodiff
// differentiates its unrolled form) matches the reference backend and learns.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/CompileTraining.h"
#include "frontend/Frontend.h"
#include "tests/codegen/CodegenTestUtil.h"
#include "tests/onnx/OnnxTestModel.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;
using ir::OpKind;
using runtime::TrainingStep;

struct Layer {
  OpKind op = OpKind::LstmSequence;
  std::string direction = "forward";
  int64_t steps = 6, batch = 2, hidden = 16;
  bool weightsAreParams = true; // else graph inputs, read plain
  ir::AttrMap attrs;
};

/// Adds one recurrence over fresh operands (weights scaled by 1/sqrt(hidden), as models
/// initialise them) and makes all its results outputs.
void addLayer(GraphBuilder &gb, std::vector<Tensor> &inputs, std::vector<Var> &outputs, const Layer &layer,
              uint64_t seed) {
  const int64_t G = layer.op == OpKind::RnnSequence ? 1 : layer.op == OpKind::GruSequence ? 3 : 4;
  const int64_t D = layer.direction == "bidirectional" ? 2 : 1, H = layer.hidden;
  auto input = [&](const Shape &shape, double scale) {
    Tensor value = randomTensor({DType::F32, shape}, seed++);
    for (int64_t i = 0; i < value.numElements(); ++i)
      value.setDouble(i, value.getDouble(i) * scale);
    inputs.push_back(value);
    return gb.input("x" + std::to_string(inputs.size()), value.type());
  };
  auto weight = [&](const Shape &shape, double scale) {
    if (!layer.weightsAreParams)
      return input(shape, scale);
    Tensor value = randomTensor({DType::F32, shape}, seed++);
    for (int64_t i = 0; i < value.numElements(); ++i)
      value.setDouble(i, value.getDouble(i) * scale);
    return gb.param("w" + std::to_string(seed), value);
  };
  std::vector<Var> operands{input({layer.steps, layer.batch, D * G * H}, 1.0),
                            weight({D, G * H, H}, 1.0 / std::sqrt(static_cast<double>(H))), weight({D, G * H}, 0.2),
                            input({D, layer.batch, H}, 0.5)};
  if (layer.op == OpKind::LstmSequence)
    operands.push_back(input({D, layer.batch, H}, 0.5));
  ir::AttrMap attrs = layer.attrs;
  attrs["direction"] = layer.direction;
  for (const Var &out : gb.opMulti(layer.op, operands, attrs))
    outputs.push_back(out);
}

void checkLayers(const std::vector<Layer> &layers, int threads, uint64_t seed) {
  GraphBuilder gb("recurrences");
  std::vector<Tensor> inputs;
  std::vector<Var> outputs;
  for (const Layer &layer : layers)
    addLayer(gb, inputs, outputs, layer, seed += 100);
  auto graph = gb.finish(outputs);
  expectMatchesReference(*graph, inputs, withThreads(threads), 1e-4, 1e-5);
}

TEST(CodegenRecurrence, EveryCellAndDirection) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    checkLayers({{OpKind::LstmSequence, "bidirectional", 7, 3, 37},
                 {OpKind::LstmSequence, "reverse", 5, 1, 16},
                 {OpKind::GruSequence, "forward", 6, 4, 21, true, {{"linear_before_reset", int64_t{1}}}},
                 {OpKind::GruSequence, "bidirectional", 4, 1, 9},
                 {OpKind::RnnSequence, "reverse", 8, 5, 33}},
                threads, 1);
  }
}

TEST(CodegenRecurrence, LargeEnoughToSplitOverThreads) {
  // Batch 16 splits rows; batch 1 of one direction splits each step's blocks (hidden 128).
  checkLayers({{OpKind::LstmSequence, "forward", 12, 16, 128},
               {OpKind::LstmSequence, "forward", 12, 1, 128},
               {OpKind::GruSequence, "forward", 10, 1, 120},
               {OpKind::GruSequence, "bidirectional", 10, 1, 128, true, {{"linear_before_reset", int64_t{1}}}}},
              2, 2);
}

TEST(CodegenRecurrence, LengthsClipAndPlainWeights) {
  ir::AttrMap lengths{{"lengths", std::vector<int64_t>{5, 0, 2}}, {"clip", 0.75}};
  checkLayers({{OpKind::LstmSequence, "bidirectional", 5, 3, 19, false, lengths},
               {OpKind::GruSequence, "reverse", 5, 3, 19, false, lengths},
               {OpKind::RnnSequence, "forward", 5, 3, 19, true, lengths}},
              2, 3);
}

TEST(CodegenRecurrence, OtherDTypesRunUnrolled) {
  // The runtime's recurrent kernel is f32; an f64 recurrence is expanded by the pipeline's
  // decompose into its unrolled form, which codegen lowers in f64.
  GraphBuilder gb("f64");
  const int64_t T = 3, B = 2, H = 5;
  std::vector<Tensor> inputs;
  auto input = [&](const Shape &shape) {
    inputs.push_back(randomTensor({DType::F64, shape}, inputs.size() + 1));
    return gb.input("x" + std::to_string(inputs.size()), inputs.back().type());
  };
  std::vector<Var> out = gb.opMulti(OpKind::GruSequence,
                                    {input({T, B, 2 * 3 * H}), input({2, 3 * H, H}), input({2, 3 * H}), input({2, B, H})},
                                    {{"direction", std::string("bidirectional")}});
  auto graph = gb.finish(out);
  EXPECT_EQ(countInSource(*graph, "rt->recurrence(rt, &g);"), 0);
  expectMatchesReference(*graph, inputs, testOptions(), 1e-9, 1e-12);
}

TEST(CodegenRecurrence, WeightsThatAreParametersArePackedAtLoad) {
  GraphBuilder gb("packing");
  std::vector<Tensor> inputs;
  std::vector<Var> outputs;
  addLayer(gb, inputs, outputs, {OpKind::LstmSequence, "bidirectional", 3, 2, 16, true}, 1);
  addLayer(gb, inputs, outputs, {OpKind::GruSequence, "forward", 3, 2, 16, false}, 2);
  auto graph = gb.finish(outputs);
  EXPECT_EQ(countInSource(*graph, "rt->recurrence(rt, &g);"), 2);
  EXPECT_EQ(countInSource(*graph, "g.r_layout = KILN_RECURRENCE_R_GATE_BLOCKS;"), 1);
  EXPECT_EQ(countInSource(*graph, "g.r_layout = KILN_RECURRENCE_R_PLAIN;"), 1);
  // The packing table's entry: {weight, kind, directions, hidden, gates, 0}.
  EXPECT_EQ(countInSource(*graph, fmt::format(", {}, 2, 16, 4, 0}},", int{KILN_PACK_RECURRENT_GATES})), 1);
  expectMatchesReference(*graph, inputs);
}

/// An ONNX LSTM or GRU over a batch-first input as torch exports them (Transpose in, then
/// Squeeze and Transpose of Y), with initial states.
onnxtest::ModelBuilder torchLikeModel(const std::string &op, const std::string &direction) {
  const int64_t T = 9, B = 2, I = 5, H = 16, D = direction == "bidirectional" ? 2 : 1, G = op == "GRU" ? 3 : 4;
  onnxtest::ModelBuilder m(17);
  m.input("x", DType::F32, {B, T, I});
  m.initializer("w", randomTensor({DType::F32, {D, G * H, I}}, 1));
  m.initializer("r", randomTensor({DType::F32, {D, G * H, H}}, 2));
  m.initializer("b", randomTensor({DType::F32, {D, 2 * G * H}}, 3));
  m.initializer("h0", randomTensor({DType::F32, {D, B, H}}, 4));
  m.initializer("c0", randomTensor({DType::F32, {D, B, H}}, 5));
  onnxtest::setInts(m.node("Transpose", {"x"}, {"xt"}, "in"), "perm", {1, 0, 2});
  std::vector<std::string> inputs{"xt", "w", "r", "b", "", "h0"};
  if (op == "LSTM")
    inputs.push_back("c0");
  auto &node = m.node(op, inputs, {"y", "yh"}, "rnn");
  onnxtest::setInt(node, "hidden_size", H);
  onnxtest::setString(node, "direction", direction);
  if (op == "GRU")
    onnxtest::setInt(node, "linear_before_reset", 1);
  m.initializer("axes", Tensor::fromDoubles(DType::I64, {1}, {1}));
  m.node("Squeeze", {"y", "axes"}, {"ys"}, "squeeze");
  onnxtest::setInts(m.node("Transpose", {"ys"}, {"out"}, "out"), "perm", {1, 0, 2});
  m.output("out", DType::F32, {B, T, D * H});
  return m;
}

TEST(CodegenRecurrence, OnnxLayersCompileToOneKernelEach) {
  for (std::string op : {"LSTM", "GRU"}) {
    SCOPED_TRACE(op);
    auto graph = onnxtest::import(torchLikeModel(op, "forward"));
    // The input projection (with its bias), the recurrence, the output's transpose: not one
    // kernel per step.
    std::vector<std::string> strategies = launchStrategies(*graph);
    EXPECT_LE(strategies.size(), 5u) << fmt::format("{}", fmt::join(strategies, ", "));
    EXPECT_EQ(countInSource(*graph, "rt->recurrence(rt, &g);"), 1);
    expectMatchesReference(*graph, randomInputs(*graph, 7));
  }
}

TEST(CodegenRecurrence, TrainingThroughAnLstmMatchesTheReferenceBackend) {
  // x [steps 4, batch 3, inputs 5] -> input projection -> LSTM (hidden 4) -> last state ->
  // linear to 3 classes, cross-entropy; every weight trained.
  const int64_t T = 4, B = 3, I = 5, H = 4;
  GraphBuilder gb("lstm_classifier");
  Var x = gb.input("x", DType::F32, {T, B, I});
  auto weight = [&](const std::string &name, const Shape &shape, uint64_t seed) {
    Tensor value = randomTensor({DType::F32, shape}, seed);
    for (int64_t i = 0; i < value.numElements(); ++i)
      value.setDouble(i, value.getDouble(i) * 0.5);
    return gb.param(name, value);
  };
  Var xw = gb.op(OpKind::MatMul, {x, weight("w", {I, 4 * H}, 1)});
  Var zeros = gb.constant(Tensor(DType::F32, {1, B, H}));
  std::vector<Var> lstm =
      gb.opMulti(OpKind::LstmSequence, {xw, weight("r", {1, 4 * H, H}, 2), weight("rb", {1, 4 * H}, 3), zeros, zeros});
  Var last = frontend::reshape(lstm[1], {B, H});
  auto forward = gb.finish({gb.op(OpKind::MatMul, {last, weight("fc", {H, 3}, 4)})});

  LossSpec loss{LossKind::CrossEntropy, 0, "", "labels"};
  OptimizerSpec sgd = OptimizerSpec::sgd(0.5);
  TrainingOptions referenceOptions, compiledOptions;
  referenceOptions.reference = true;
  referenceOptions.compile = compiledOptions.compile = testOptions();
  TrainingStep reference = compileTrainingStep(*forward, loss, sgd, referenceOptions);
  TrainingStep compiled = compileTrainingStep(*forward, loss, sgd, compiledOptions);
  Tensor labels = Tensor::fromDoubles(DType::I64, {B}, {0, 2, 1});
  Tensor input = randomTensor({DType::F32, {T, B, I}}, 9);
  float first = 0, last_ = 0;
  for (int step = 0; step < 4; ++step) {
    float want = reference.run({input, labels});
    float got = compiled.run({{"x", input}, {"labels", labels}});
    EXPECT_NEAR(got, want, 1e-4 * std::abs(want)) << "step " << step;
    if (step == 0)
      first = want;
    last_ = want;
  }
  EXPECT_LT(last_, first); // it learns
}

} // namespace
} // namespace kiln::codegen::test
