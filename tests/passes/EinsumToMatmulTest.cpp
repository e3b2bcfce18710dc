// einsum-to-matmul keeps every result the reference evaluator computes (the same random inputs
// through the graph before and after), for the equations it rewrites and the ones it leaves;
// tests/golden/passes/einsum-to-matmul.kir shows the rewritten IR.
#include <gtest/gtest.h>

#include "passes/simplify/EinsumToMatmul.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln {
namespace {

TEST(EinsumToMatmul, RewrittenEquationsComputeTheSame) {
  auto pass = passes::createEinsumToMatmulPass();
  test::PassRun run = test::runPass(R"(
graph @einsums(%q: f32[2,3,5,4], %k: f32[2,3,6,4], %a: f32[4,5], %b: f32[5,6], %v: f32[5], %m: f32[3,5,6], %t: f32[6,2,5,3], %u: f32[3,7,5,2]) -> (f32[2,3,5,6], f32[3,4,6], f32[4], f32[6,4], f32[2,6,7], f32[5,2,3,4,6], f32[4,6]) {
  %scores = einsum(%q, %k) {equation = "bhid,bhjd->bhij"} : f32[2,3,5,6]
  %batched = einsum(%a, %m) {equation = "ij,bjk->bik"} : f32[3,4,6]
  %mv = einsum(%a, %v) {equation = "ij,j->i"} : f32[4]
  %transposed = einsum(%a, %b) {equation = "ij,jk->ki"} : f32[6,4]
  %twoSummed = einsum(%t, %u) {equation = "xbjc,cyjb->bxy"} : f32[2,6,7]
  %outer = einsum(%v, %k) {equation = "i,bhjd->ibhdj"} : f32[5,2,3,4,6]
  %scaled = einsum(%a, %b) {equation = "IJ,JK->IK"} : f32[4,6]
  return %scores, %batched, %mv, %transposed, %twoSummed, %outer, %scaled
}
)", *pass);
  EXPECT_TRUE(run.changed);
  EXPECT_EQ(run.stat("einsums to matmul"), 7);
  EXPECT_EQ(run.count(ir::OpKind::Einsum), 0);
  EXPECT_EQ(run.count(ir::OpKind::MatMul), 7);
  test::expectSameNumerics(*run.before, *run.after, 5);
  test::expectSameNumerics(*run.before, *run.after, 6);
}

TEST(EinsumToMatmul, OtherEquationsStay) {
  auto pass = passes::createEinsumToMatmulPass();
  test::PassRun run = test::runPass(R"(
graph @kept(%a: f32[4,5], %b: f32[5,6], %s: f32[5,5], %i: i64[4,5], %j: i64[5,6], %e: f32[2,4,5], %c: f32[4,5], %d: f32[5,6]) -> (f32[4], i64[4,6], f32[5,5], f32[5,5], f32[2,4,6], f32[4,6]) {
  %rowsum = einsum(%a, %b) {equation = "ij,jk->i"} : f32[4]
  %ints = einsum(%i, %j) {equation = "ij,jk->ik"} : i64[4,6]
  %diag = einsum(%s, %s) {equation = "ii,ij->ij"} : f32[5,5]
  %one = einsum(%s) {equation = "ij->ji"} : f32[5,5]
  %ellipsis = einsum(%e, %b) {equation = "...ij,jk->...ik"} : f32[2,4,6]
  %three = einsum(%a, %d, %b) {equation = "ij,jk,jk->ik"} : f32[4,6]
  return %rowsum, %ints, %diag, %one, %ellipsis, %three
}
)", *pass);
  EXPECT_FALSE(run.changed);
  EXPECT_EQ(run.count(ir::OpKind::Einsum), 6);
}

} // namespace
} // namespace kiln
