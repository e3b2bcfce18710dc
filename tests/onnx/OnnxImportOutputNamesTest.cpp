// Graph outputs keep the names the model declares. kiln maps ONNX Identity to its operand, so
// an output made by an Identity returns a value that carries another name (or a graph input,
// or the value another output returns); the name goes with the output and survives the text
// form, and each output evaluates to a tensor of its own. (tests/golden/onnx/identity-outputs.kir
// runs such a model through kiln-run and the compiled path.)
#include "OnnxTestModel.h"

#include "ir/GraphEquality.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

std::vector<std::string> outputNames(const ir::Graph &graph) {
  std::vector<std::string> names;
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    names.push_back(graph.outputName(i));
  return names;
}

/// x: f32[2,3] with negative and positive elements, so Relu changes some.
Tensor xValues() { return iota(DType::F32, {2, 3}, 1, -2.5); }
const std::vector<double> kReluOfX = {0, 0, 0, 0.5, 1.5, 2.5};
const std::vector<double> kX = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5};

/// Expects the names on the imported graph and after a print -> parse round trip.
void expectOutputNames(const ir::Graph &graph, const std::vector<std::string> &names) {
  EXPECT_EQ(outputNames(graph), names);
  std::unique_ptr<ir::Graph> parsed = ir::parseGraph(ir::printGraph(graph), "printed.kir");
  EXPECT_EQ(ir::graphDifference(graph, *parsed), "");
  EXPECT_EQ(outputNames(*parsed), names);
}

/// Whether two tensors share storage (writing into one would change the other).
bool sameStorage(const Tensor &a, const Tensor &b) { return a.data() == b.data(); }

} // namespace

// The reported model: Relu -> y2, Identity(y2) -> y, graph output y.
TEST(OnnxImportOutputNames, IdentityOfAComputedValue) {
  ModelBuilder m;
  m.input("x", DType::F32, {2, 3});
  m.node("Relu", {"x"}, {"y2"});
  m.node("Identity", {"y2"}, {"y"});
  m.output("y", DType::F32, {2, 3});
  auto graph = import(m);
  expectOutputNames(*graph, {"y"});
  EXPECT_NE(ir::printGraph(*graph).find("return %y2 as \"y\"\n"), std::string::npos) << ir::printGraph(*graph);
  std::vector<Tensor> out = ir::evaluate(*graph, {xValues()});
  ASSERT_EQ(out.size(), 1u);
  expectClose(out[0], kReluOfX);
}

// y2 and its Identity y both returned: one value, two outputs, two tensors.
TEST(OnnxImportOutputNames, AValueAndItsIdentityAreBothOutputs) {
  ModelBuilder m;
  m.input("x", DType::F32, {2, 3});
  m.node("Relu", {"x"}, {"y2"});
  m.node("Identity", {"y2"}, {"y"});
  m.output("y2", DType::F32, {2, 3});
  m.output("y", DType::F32, {2, 3});
  auto graph = import(m);
  expectOutputNames(*graph, {"y2", "y"});
  std::vector<Tensor> out = ir::evaluate(*graph, {xValues()});
  ASSERT_EQ(out.size(), 2u);
  expectClose(out[0], kReluOfX);
  expectClose(out[1], kReluOfX);
  EXPECT_FALSE(sameStorage(out[0], out[1]));
}

// Identity(x) -> y: the output returns the graph input itself, as a copy.
TEST(OnnxImportOutputNames, IdentityOfAGraphInput) {
  ModelBuilder m;
  m.input("x", DType::F32, {2, 3});
  m.node("Identity", {"x"}, {"y"});
  m.output("y", DType::F32, {2, 3});
  auto graph = import(m);
  expectOutputNames(*graph, {"y"});
  EXPECT_EQ(graph->inputs()[0]->name(), "x");
  Tensor x = xValues();
  std::vector<Tensor> out = ir::evaluate(*graph, {x});
  ASSERT_EQ(out.size(), 1u);
  expectClose(out[0], kX);
  EXPECT_FALSE(sameStorage(out[0], x));
}

// Two Identities of one value, and a chain of them, each returned under its own name.
TEST(OnnxImportOutputNames, TwoIdentitiesOfOneValueAndAChain) {
  ModelBuilder m;
  m.input("x", DType::F32, {2, 3});
  m.node("Relu", {"x"}, {"r"});
  m.node("Identity", {"r"}, {"a"});
  m.node("Identity", {"r"}, {"b"});
  m.node("Identity", {"b"}, {"c1"});
  m.node("Identity", {"c1"}, {"c2"});
  m.output("a", DType::F32, {2, 3});
  m.output("b", DType::F32, {2, 3});
  m.output("c2", DType::F32, {2, 3});
  auto graph = import(m);
  ASSERT_EQ(graph->numNodes(), 1u);
  expectOutputNames(*graph, {"a", "b", "c2"});
  std::vector<Tensor> out = ir::evaluate(*graph, {xValues()});
  ASSERT_EQ(out.size(), 3u);
  for (const Tensor &t : out)
    expectClose(t, kReluOfX);
  EXPECT_FALSE(sameStorage(out[0], out[1]));
  EXPECT_FALSE(sameStorage(out[1], out[2]));
}

// Identity of an initializer: the parameter keeps its name, the output gets the declared one,
// and the evaluated output does not share the parameter's storage.
TEST(OnnxImportOutputNames, IdentityOfAnInitializer) {
  ModelBuilder m;
  m.input("x", DType::F32, {2, 3});
  m.initializer("w", iota(DType::F32, {2, 3}));
  m.node("Add", {"x", "w"}, {"sum"});
  m.node("Identity", {"w"}, {"w_out"});
  m.output("sum", DType::F32, {2, 3});
  m.output("w_out", DType::F32, {2, 3});
  auto graph = import(m);
  expectOutputNames(*graph, {"sum", "w_out"});
  ASSERT_EQ(graph->params().size(), 1u);
  EXPECT_EQ(graph->params()[0]->attrString("name"), "w");
  std::vector<Tensor> out = ir::evaluate(*graph, {xValues()});
  ASSERT_EQ(out.size(), 2u);
  expectClose(out[1], {0, 1, 2, 3, 4, 5});
  EXPECT_FALSE(sameStorage(out[1], graph->params()[0]->attrTensor("value")));
}
