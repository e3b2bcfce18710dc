// GraphBuilder and Var: inputs, parameters, constants, naming, finishing, and the misuse
// errors (undefined Vars, Vars of another builder, use after finish).
#include <gtest/gtest.h>

#include <limits>

#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Evaluator.h"

using namespace kiln;
using namespace kiln::frontend;

namespace {

/// Expects `fn` to throw a kiln::Error whose message contains every fragment.
template <typename Fn> void expectError(Fn &&fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
    FAIL() << "expected a kiln::Error";
  } catch (const Error &e) {
    std::string message = e.what();
    for (const std::string &fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << message;
  }
}

} // namespace

TEST(FrontendGraphBuilder, InputsHaveTypesNamesAndOrder) {
  GraphBuilder gb("g");
  Var x = gb.input("x", DType::F32, {2, 3});
  Var n = gb.input("n", TensorType{DType::I64, {}});
  EXPECT_EQ(x.shape(), (Shape{2, 3}));
  EXPECT_EQ(x.dtype(), DType::F32);
  EXPECT_EQ(x.rank(), 2);
  EXPECT_EQ(x.numElements(), 6);
  EXPECT_EQ(x.dim(-1), 3);
  EXPECT_EQ(x.dim(0), 2);
  EXPECT_EQ(n.rank(), 0);
  EXPECT_EQ(x.name(), "x");
  ASSERT_EQ(gb.graph().inputs().size(), 2u);
  EXPECT_EQ(gb.graph().inputs()[1], n.value());
  EXPECT_THROW(x.dim(2), Error);
  EXPECT_THROW(x.dim(-3), Error);
}

TEST(FrontendGraphBuilder, FinishVerifiesAndReturnsTheGraph) {
  GraphBuilder gb("twice");
  Var x = gb.input("x", DType::F32, {3});
  Var y = relu(x);
  auto graph = gb.finish({y});
  ASSERT_TRUE(graph);
  EXPECT_EQ(graph->name(), "twice");
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0], y.value());
  auto out = ir::evaluate(*graph, {Tensor::fromDoubles(DType::F32, {3}, {-1, 0, 2})});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{0, 0, 2}));
  EXPECT_TRUE(gb.finished());
}

TEST(FrontendGraphBuilder, NamedOutputsNameTheirValues) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2});
  auto graph = gb.finish({{"doubled", x * 2.0}, {"negated", -x}});
  ASSERT_EQ(graph->outputs().size(), 2u);
  EXPECT_EQ(graph->outputs()[0]->name(), "doubled");
  EXPECT_EQ(graph->outputs()[1]->name(), "negated");
}

TEST(FrontendGraphBuilder, NoCallsAfterFinish) {
  GraphBuilder gb("done");
  Var x = gb.input("x", DType::F32, {2});
  gb.finish({x});
  expectError([&] { gb.input("y", DType::F32, {2}); }, {"already finished", "@done"});
  expectError([&] { relu(x); }, {"already finished"});
  expectError([&] { gb.finish({x}); }, {"already finished"});
}

TEST(FrontendGraphBuilder, ParamsCarryInitialValuesAndAreShared) {
  GraphBuilder gb;
  Tensor init = Tensor::fromDoubles(DType::F32, {2}, {1.5, -2});
  Var w = gb.param("w", init);
  EXPECT_EQ(w.value()->producer()->op(), ir::OpKind::Param);
  EXPECT_EQ(w.value()->producer()->attrString("name"), "w");
  EXPECT_TRUE(w.value()->producer()->attrTensor("value").identical(init));
  // The same name with the same tensor is the same parameter (a module traced twice).
  Var again = gb.param("w", init);
  EXPECT_EQ(again.value(), w.value());
  // The same name with another tensor is a conflict.
  expectError([&] { gb.param("w", init.clone()); }, {"'w'", "another tensor"});
  Var free = gb.param("free", TensorType{DType::F32, {2}});
  EXPECT_FALSE(free.value()->producer()->attrTensor("value").defined());
  auto graph = gb.finish({w + free});
  auto out = ir::evaluate(*graph, {}, {{"free", Tensor::fromDoubles(DType::F32, {2}, {10, 20})}});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{11.5, 18}));
}

TEST(FrontendGraphBuilder, ConstantsScalarsAndIota) {
  GraphBuilder gb;
  Var c = gb.constant(Tensor::fromDoubles(DType::I32, {3}, {4, 5, 6}));
  Var s = gb.scalar(2.5);
  EXPECT_EQ(s.type(), (TensorType{DType::F32, {}}));
  Var i = gb.iota({2, 3}, 1, DType::I32);
  EXPECT_EQ(i.type(), (TensorType{DType::I32, {2, 3}}));
  auto graph = gb.finish({c, s, i});
  auto out = ir::evaluate(*graph, {});
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(out[1].getDouble(0), 2.5);
  EXPECT_EQ(out[2].toDoubles(), (std::vector<double>{0, 1, 2, 0, 1, 2}));
}

TEST(FrontendGraphBuilder, NamesAreIdentifiersAndUnique) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2});
  expectError([&] { gb.input("x", DType::F32, {2}); }, {"'x'", "already used"});
  expectError([&] { gb.input("0abc", DType::F32, {2}); }, {"'0abc'", "not a valid name"});
  expectError([&] { gb.input("", DType::F32, {2}); }, {"not a valid name"});
  expectError([&] { gb.input("neg", DType::F32, {-1}); }, {"negative"});
  Var y = relu(x).setName("fc1.out");
  EXPECT_EQ(y.name(), "fc1.out");
  expectError([&] { exp(x).setName("fc1.out"); }, {"'fc1.out'", "already used"});
  expectError([&] { exp(x).setName("a b"); }, {"not a valid name"});
  y.setName("renamed"); // a rename frees the old name
  exp(x).setName("fc1.out");
}

// kiln's size limit (core/ShapeMath.h: 2^48 per dim and per product of the non-zero dims)
// holds for the graph API too, also where a zero dim makes the tensor empty.
TEST(FrontendGraphBuilder, ShapesPastKilnsLimitAreRefusedAlsoBesideAZeroDim) {
  constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max(), kLimit = int64_t{1} << 48;
  GraphBuilder gb;
  expectError([&] { gb.input("a", DType::F32, {64, 0, 2, kI64Max}); },
              {"input 'a'", "[64,0,2,9223372036854775807]", "larger than kiln's limit of 2^48"});
  expectError([&] { gb.input("b", DType::F32, {int64_t{1} << 30, int64_t{1} << 30, 0}); },
              {"input 'b'", "has too many elements"});
  expectError([&] { gb.param("w", TensorType{DType::F32, {0, kLimit + 1}}); },
              {"param", "larger than kiln's limit of 2^48"});
  Var x = gb.input("x", DType::F32, {0, kLimit});
  EXPECT_EQ(x.type().numElements(), 0);
  // Ops whose result would pass the limit name the op.
  expectError([&] { concat({x, x}, 1); }, {"concat", "larger than kiln's limit of 2^48"});
  expectError([&] { reshape(x, {0, kLimit, 2}); }, {"reshape", "has too many elements"});
}

TEST(FrontendGraphBuilder, UndefinedVarsAreErrorsNotCrashes) {
  GraphBuilder gb;
  Var x = gb.input("x", DType::F32, {2});
  Var none;
  EXPECT_FALSE(none.defined());
  EXPECT_THROW(none.shape(), Error);
  EXPECT_THROW(relu(none), Error);
  expectError([&] { add(x, none); }, {"undefined"});
  expectError([&] { gb.op(ir::OpKind::Add, {x, none}); }, {"add", "operand 1", "undefined"});
  expectError([&] { gb.finish({none}); }, {"finish", "undefined"});
}

TEST(FrontendGraphBuilder, VarsOfAnotherBuilderAreRejected) {
  GraphBuilder a("a"), b("b");
  Var x = a.input("x", DType::F32, {2});
  Var y = b.input("y", DType::F32, {2});
  expectError([&] { x + y; }, {"add", "different GraphBuilders"});
  expectError([&] { a.op(ir::OpKind::Relu, {y}); }, {"relu", "another GraphBuilder", "@b"});
  expectError([&] { matmul(x, y); }, {"matmul", "another GraphBuilder"});
  expectError([&] { concat({x, y}, 0); }, {"concat", "another GraphBuilder"});
  expectError([&] { a.finish({y}); }, {"finish", "another GraphBuilder"});
}

// Inputs declared with symbolic dims give one graph for every size: the graph API's ops carry
// the symbols, and the reference evaluator runs it at whatever sizes its inputs have.
TEST(FrontendGraphBuilder, SymbolicInputDimsServeEverySize) {
  GraphBuilder gb("mlp");
  Var x = gb.input("x", DType::F32, {GraphBuilder::dim("N"), 4});
  Tensor w = randomTensor({DType::F32, {3, 4}}, 1), b = randomTensor({DType::F32, {3}}, 2);
  Var y = softmax(relu(linear(x, gb.param("w", w), gb.param("b", b))) * 2.0);
  EXPECT_EQ(y.shape(), (Shape{GraphBuilder::dim("N"), 3}));
  std::unique_ptr<ir::Graph> graph = gb.finish({y});
  for (int64_t n : {1, 5}) {
    GraphBuilder fixed("mlp");
    Var fx = fixed.input("x", DType::F32, {n, 4});
    Var fy = softmax(relu(linear(fx, fixed.param("w", w), fixed.param("b", b))) * 2.0);
    std::unique_ptr<ir::Graph> want = fixed.finish({fy});
    Tensor input = randomTensor({DType::F32, {n, 4}}, 3);
    EXPECT_TRUE(ir::evaluate(*graph, {input})[0].identical(ir::evaluate(*want, {input})[0])) << n;
  }
  expectError([] { GraphBuilder::dim("2N"); }, {"'2N' cannot name a symbolic dim"});
  GraphBuilder other("g");
  Var a = other.input("a", DType::F32, {GraphBuilder::dim("N"), 4});
  Var c = other.input("c", DType::F32, {GraphBuilder::dim("M"), 4});
  expectError([&] { (void)(a + c); }, {"add", "dim 0: N vs M"});
}
