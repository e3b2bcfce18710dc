// Generic contraction stages (codegen/GenericContraction.h) against the reference evaluator:
// matmul, conv, pooling and einsum on the dtypes and attributes the f32 library kernels do not
// take. Integers must match exactly (wrapping included), f64 within 1e-12.
#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

void expectExact(const ir::Graph &graph, uint64_t seed) {
  expectMatchesReference(graph, randomInputs(graph, seed), testOptions(), 0.0, 0.0);
}

void expectDouble(const ir::Graph &graph, uint64_t seed) {
  expectMatchesReference(graph, randomInputs(graph, seed), testOptions(), 1e-12, 1e-12);
}

TEST(CodegenGenericContraction, MatmulOnDoubleBatchedBroadcastAndVectors) {
  GraphBuilder gb("matmul_f64");
  Var a = gb.input("a", DType::F64, {3, 4, 9, 6});
  Var b = gb.input("b", DType::F64, {4, 6, 5});
  Var c = gb.input("c", DType::F64, {3, 1, 6, 5});
  Var v = gb.input("v", DType::F64, {6});
  auto graph = gb.finish({frontend::matmul(a, b), frontend::matmul(a, c), frontend::matmul(a, v),
                          frontend::matmul(v, b), frontend::matmul(v, v),
                          frontend::matmul(frontend::transpose(a, 2, 3), a)});
  expectDouble(*graph, 1);
}

TEST(CodegenGenericContraction, MatmulOnIntegersWraps) {
  for (DType dtype : {DType::I32, DType::I64, DType::I8, DType::U8}) {
    SCOPED_TRACE(dtypeName(dtype));
    GraphBuilder gb("matmul_int");
    // Inputs are 0..9: 40 products of up to 81 overflow i8 and u8, which must wrap.
    Var a = gb.input("a", dtype, {2, 7, 40});
    Var b = gb.input("b", dtype, {40, 11});
    auto graph = gb.finish({frontend::matmul(a, b)});
    expectExact(*graph, 2);
  }
}

TEST(CodegenGenericContraction, MatmulWithEmptyInnerDimIsZero) {
  GraphBuilder gb("matmul_empty");
  Var a = gb.input("a", DType::I64, {3, 0});
  Var b = gb.input("b", DType::I64, {0, 4});
  auto graph = gb.finish({frontend::matmul(a, b)});
  expectExact(*graph, 3);
}

TEST(CodegenGenericContraction, ConvOnDouble) {
  GraphBuilder gb("conv_f64");
  Var x = gb.input("x", DType::F64, {2, 6, 9, 8});
  Var w1 = gb.input("w1", DType::F64, {4, 6, 3, 2});
  Var w2 = gb.input("w2", DType::F64, {6, 2, 3, 3});
  Var x1 = gb.input("x1", DType::F64, {2, 3, 13});
  Var w3 = gb.input("w3", DType::F64, {5, 3, 4});
  auto graph = gb.finish({frontend::conv(x, w1, Var(), {2, 3}, {1, 0, 2, 1}, {}),
                          frontend::conv(x, w2, Var(), {1, 1}, {2, 2, 2, 2}, {2, 2}, 3),
                          frontend::conv(x1, w3, Var(), {2}, {1, 1}, {})});
  expectDouble(*graph, 4);
}

TEST(CodegenGenericContraction, ThreeDConvOnFloat) {
  GraphBuilder gb("conv3d");
  Var x = gb.input("x", DType::F32, {2, 3, 5, 6, 4});
  Var w = gb.input("w", DType::F32, {4, 3, 3, 2, 3});
  Var b = gb.input("b", DType::F32, {4});
  auto graph = gb.finish({frontend::relu(frontend::conv(x, w, b, {1, 2, 1}, {1, 0, 1, 1, 1, 1}, {}))});
  expectMatchesReference(*graph, randomInputs(*graph, 5));
}

Var pool(GraphBuilder &gb, ir::OpKind op, const Var &x, ir::AttrMap attrs) { return gb.op(op, {x}, std::move(attrs)); }

TEST(CodegenGenericContraction, MaxPoolOnIntegers) {
  for (DType dtype : {DType::U8, DType::I32, DType::I64}) {
    SCOPED_TRACE(dtypeName(dtype));
    GraphBuilder gb("max_pool_int");
    Var x = gb.input("x", dtype, {2, 3, 9, 7});
    auto graph = gb.finish({frontend::maxPool2d(x, {3}, {2}, {1}), frontend::maxPool2d(x, {2, 3}, {1, 2}, {0}, {2}, true)});
    expectExact(*graph, 6);
  }
}

TEST(CodegenGenericContraction, ThreeDAndOneDPoolingOnFloat) {
  GraphBuilder gb("pool3d");
  Var x = gb.input("x", DType::F32, {2, 3, 6, 5, 7});
  Var x1 = gb.input("x1", DType::F32, {2, 3, 10});
  std::vector<int64_t> k3{3, 2, 3}, s3{2, 1, 2}, p3{1, 0, 1, 1, 1, 0}, d3{1, 2, 1};
  auto graph = gb.finish(
      {pool(gb, ir::OpKind::MaxPool, x, {{"kernel", k3}, {"strides", s3}, {"pads", p3}, {"dilations", d3}}),
       pool(gb, ir::OpKind::AvgPool, x, {{"kernel", k3}, {"strides", s3}, {"pads", p3}, {"count_include_pad", int64_t{1}}}),
       pool(gb, ir::OpKind::AvgPool, x, {{"kernel", k3}, {"pads", p3}, {"ceil_mode", int64_t{1}}}),
       pool(gb, ir::OpKind::MaxPool, x1, {{"kernel", std::vector<int64_t>{3}}, {"strides", std::vector<int64_t>{2}}})});
  expectMatchesReference(*graph, randomInputs(*graph, 7));
}

TEST(CodegenGenericContraction, AvgPoolCountingTrailingPadsPastTheEnd) {
  // Asymmetric pads with ceil_mode: the last window reaches past the trailing padding, which
  // rt->pool2d cannot express; the generic loop counts only the padded extent.
  GraphBuilder gb("avg_trailing");
  Var x = gb.input("x", DType::F32, {1, 2, 8, 7});
  auto graph = gb.finish({pool(gb, ir::OpKind::AvgPool, x,
                               {{"kernel", std::vector<int64_t>{3, 3}},
                                {"strides", std::vector<int64_t>{2, 2}},
                                {"pads", std::vector<int64_t>{2, 0, 0, 1}},
                                {"ceil_mode", int64_t{1}},
                                {"count_include_pad", int64_t{1}}})});
  expectMatchesReference(*graph, randomInputs(*graph, 8));
}

TEST(CodegenGenericContraction, PoolingOnDouble) {
  GraphBuilder gb("pool_f64");
  Var x = gb.input("x", DType::F64, {2, 3, 7, 6});
  auto graph = gb.finish({frontend::maxPool2d(x, {3}, {2}, {1}), frontend::avgPool2d(x, {2, 3}, {2, 2}, {1}, true, false)});
  expectDouble(*graph, 9);
}

Var einsum(GraphBuilder &gb, const std::string &equation, const std::vector<Var> &operands) {
  return gb.op(ir::OpKind::Einsum, operands, {{"equation", equation}});
}

TEST(CodegenGenericContraction, EinsumOnDouble) {
  GraphBuilder gb("einsum_f64");
  Var a = gb.input("a", DType::F64, {3, 4, 5});
  Var b = gb.input("b", DType::F64, {3, 5, 2});
  Var square = gb.input("s", DType::F64, {2, 4, 4});
  Var v = gb.input("v", DType::F64, {5});
  Var m = gb.input("m", DType::F64, {1, 4, 5});
  auto graph = gb.finish({einsum(gb, "bij,bjk->bik", {a, b}),   // batch matmul
                          einsum(gb, "...ii->...i", {square}),  // batch diagonal
                          einsum(gb, "ijk->i", {a}),            // sum
                          einsum(gb, "ijk->kji", {a}),          // transpose
                          einsum(gb, "i,i", {v, v}),            // inner product (rank 0)
                          einsum(gb, "bij,bjk", {a, b}),        // implicit output
                          einsum(gb, "...j,...j->...", {a, m}), // "..." broadcasting
                          einsum(gb, "bii->b", {square})});     // trace
  expectDouble(*graph, 10);
}

TEST(CodegenGenericContraction, EinsumOnIntegersAndFloat) {
  GraphBuilder gb("einsum_mixed");
  Var a = gb.input("a", DType::I32, {4, 6});
  Var b = gb.input("b", DType::I32, {6, 3});
  Var f = gb.input("f", DType::F32, {2, 3, 4});
  Var g = gb.input("g", DType::F32, {4, 5});
  auto graph = gb.finish({einsum(gb, "ij,jk->ik", {a, b}), einsum(gb, "bij,jk->bki", {f, g}),
                          einsum(gb, "bij,jk,kl->bil", {f, g, frontend::transpose(g, 0, 1)})});
  expectMatchesReference(*graph, randomInputs(*graph, 11), testOptions(), 1e-5, 1e-5);
}

TEST(CodegenGenericContraction, EinsumOverAnEmptyDim) {
  GraphBuilder gb("einsum_empty");
  Var a = gb.input("a", DType::F64, {3, 0});
  Var b = gb.input("b", DType::F64, {0, 2});
  auto graph = gb.finish({einsum(gb, "ij,jk->ik", {a, b})});
  expectDouble(*graph, 12);
}

} // namespace
} // namespace kiln::codegen::test
