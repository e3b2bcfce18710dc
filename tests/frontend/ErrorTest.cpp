// Shape and type errors surface as kiln::Error at the frontend call that caused them, and the
// message names the op and the operand shapes. Nothing in the frontend swallows or rewords
// them into something vaguer.
#include <gtest/gtest.h>

#include "core/Error.h"
#include "frontend/Frontend.h"

using namespace kiln;
using namespace kiln::frontend;

namespace {

/// Runs `fn`, which must throw kiln::Error; returns the message (empty on failure).
template <typename Fn> std::string errorOf(Fn &&fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  } catch (const std::exception &e) {
    ADD_FAILURE() << "a non-kiln exception escaped: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

void expectMentions(const std::string &message, std::initializer_list<std::string> fragments) {
  for (const std::string &fragment : fragments)
    EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << message;
}

struct FrontendErrors : ::testing::Test {
  GraphBuilder gb{"errors"};
};

} // namespace

TEST_F(FrontendErrors, BroadcastMismatchNamesOpAndBothShapes) {
  Var a = gb.input("a", DType::F32, {2, 3});
  Var b = gb.input("b", DType::F32, {4});
  expectMentions(errorOf([&] { a + b; }), {"add", "f32[2,3]", "f32[4]"});
  expectMentions(errorOf([&] { a * 2.0 - b; }), {"sub", "[2,3]", "[4]"});
  expectMentions(errorOf([&] { a < b; }), {"lt", "[2,3]", "[4]"});
  expectMentions(errorOf([&] { where(a > 0.0, a, b); }), {"where", "[4]"});
}

TEST_F(FrontendErrors, MatMulMismatchNamesShapes) {
  Var a = gb.input("a", DType::F32, {2, 3});
  Var b = gb.input("b", DType::F32, {4, 5});
  expectMentions(errorOf([&] { matmul(a, b); }), {"matmul", "f32[2,3]", "f32[4,5]"});
  Var w = gb.input("w", DType::F32, {7, 4});
  expectMentions(errorOf([&] { linear(a, w); }), {"linear", "f32[2,3]", "f32[7,4]"});
}

TEST_F(FrontendErrors, MovementErrorsNameTheOp) {
  Var x = gb.input("x", DType::F32, {2, 3});
  expectMentions(errorOf([&] { reshape(x, {4, -1}); }), {"reshape", "f32[2,3]", "[4,-1]"});
  expectMentions(errorOf([&] { reshape(x, {-1, -1}); }), {"reshape", "-1"});
  expectMentions(errorOf([&] { permute(x, {0, 0}); }), {"permute", "f32[2,3]"});
  expectMentions(errorOf([&] { transpose(x, 0, 2); }), {"transpose", "f32[2,3]", "axis 2"});
  expectMentions(errorOf([&] { squeeze(x, {0}); }), {"squeeze", "f32[2,3]"});
  expectMentions(errorOf([&] { split(x, {1, 1}, 1); }), {"split", "f32[2,3]"});
  expectMentions(errorOf([&] { concat({x, gb.input("y", DType::F32, {3, 3})}, 1); }), {"concat", "f32[3,3]"});
  expectMentions(errorOf([&] { flatten(x, 1, 0); }), {"flatten", "f32[2,3]"});
  expectMentions(errorOf([&] { pad(x, {1, 1}); }), {"pad", "f32[2,3]"});
  expectMentions(errorOf([&] { pad(x, {1, 1, 1, 1}, "wrap"); }), {"pad", "wrap"});
  expectMentions(errorOf([&] { gather(x, x, 0); }), {"gather", "f32[2,3]"});
}

TEST_F(FrontendErrors, ReductionAxisOutOfRange) {
  Var x = gb.input("x", DType::F32, {2, 3});
  expectMentions(errorOf([&] { sum(x, {2}); }), {"reduce_sum", "f32[2,3]"});
  expectMentions(errorOf([&] { argmax(x, -3); }), {"argmax", "f32[2,3]"});
  expectMentions(errorOf([&] { softmax(x, 5); }), {"softmax", "f32[2,3]"});
}

TEST_F(FrontendErrors, ConvolutionAndPoolingErrors) {
  Var x = gb.input("x", DType::F32, {1, 3, 8, 8});
  Var w = gb.input("w", DType::F32, {16, 4, 3, 3});
  expectMentions(errorOf([&] { conv2d(x, w); }), {"conv", "f32[1,3,8,8]", "f32[16,4,3,3]"});
  expectMentions(errorOf([&] { maxPool2d(x, {9}); }), {"max_pool", "f32[1,3,8,8]"});
  expectMentions(errorOf([&] { conv2d(gb.input("flat", DType::F32, {3, 8, 8}), w); }), {"conv2d", "f32[3,8,8]"});
}

TEST_F(FrontendErrors, DTypeErrorsNameTheOp) {
  Var flags = gb.input("flags", DType::Bool, {3});
  Var x = gb.input("x", DType::F32, {3});
  expectMentions(errorOf([&] { flags + flags; }), {"add", "bool[3]"});
  expectMentions(errorOf([&] { where(x, x, x); }), {"where", "bool"});
  expectMentions(errorOf([&] { gather(x, x, 0); }), {"gather", "indices"});
  Var labels = gb.input("labels", DType::F32, {3});
  expectMentions(errorOf([&] { crossEntropy(gb.input("logits", DType::F32, {3, 5}), labels); }),
                 {"cross_entropy", "f32[3]"});
}

TEST_F(FrontendErrors, GraphStaysUsableAfterAnError) {
  Var a = gb.input("a", DType::F32, {2, 3});
  Var b = gb.input("b", DType::F32, {4});
  size_t before = gb.graph().numNodes();
  EXPECT_THROW(matmul(a, b), Error);
  EXPECT_EQ(gb.graph().numNodes(), before); // the failed call added nothing
  Var y = relu(a);
  auto graph = gb.finish({y});
  EXPECT_EQ(graph->numNodes(), before + 1);
}
