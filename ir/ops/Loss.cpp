// Losses: mse_loss and cross_entropy, composites over elementwise ops, log_softmax and
// reductions. `reduction` is "mean" (a scalar), "sum" (a scalar) or "none" (per element for
// mse_loss, per sample for cross_entropy), as in PyTorch.
#include "ir/Builder.h"
#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

enum class Reduction { Mean, Sum, None };

Reduction readReduction(const AttrMap &attrs) {
  const std::string &reduction = attrString(attrs, "reduction");
  if (reduction == "mean")
    return Reduction::Mean;
  if (reduction == "sum")
    return Reduction::Sum;
  if (reduction == "none")
    return Reduction::None;
  fail("attribute 'reduction' must be \"mean\", \"sum\" or \"none\", got \"{}\"", reduction);
}

TensorType reducedType(const TensorType &perElement, Reduction reduction) {
  return reduction == Reduction::None ? perElement : TensorType{perElement.dtype, {}};
}

// Applies the reduction over every dim of the unreduced losses.
Value *applyReduction(Builder &b, Value *losses, Reduction reduction) {
  switch (reduction) {
  case Reduction::Mean: return b.create(OpKind::ReduceMean, {losses}, {{"axes", std::vector<int64_t>{}}});
  case Reduction::Sum: return b.create(OpKind::ReduceSum, {losses}, {{"axes", std::vector<int64_t>{}}});
  case Reduction::None: return losses;
  }
  return losses;
}

// ---- mse_loss ---------------------------------------------------------------------------------

std::vector<TensorType> inferMseLoss(const std::vector<TensorType> &in, const AttrMap &attrs) {
  Reduction reduction = readReduction(attrs);
  DType dtype = commonDType(in);
  if (!isFloat(dtype))
    fail("needs floating-point operands, got {}", dtypeName(dtype));
  if (in[0].shape != in[1].shape)
    fail("prediction {} and target {} must have the same shape", shapeToString(in[0].shape),
         shapeToString(in[1].shape));
  return {reducedType(in[0], reduction)};
}

std::vector<Value *> decomposeMseLoss(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *diff = b.create(OpKind::Sub, {in[0], in[1]});
  Value *squared = b.create(OpKind::Mul, {diff, diff});
  return {applyReduction(b, squared, readReduction(attrs))};
}

// ---- cross_entropy ----------------------------------------------------------------------------

std::vector<TensorType> inferCrossEntropy(const std::vector<TensorType> &in, const AttrMap &attrs) {
  Reduction reduction = readReduction(attrs);
  const TensorType &logits = in[0], &labels = in[1];
  if (!isFloat(logits.dtype))
    fail("logits must be floating-point, got {}", dtypeName(logits.dtype));
  if (logits.rank() != 2)
    fail("logits must be [N, C], got {}", shapeToString(logits.shape));
  if (logits.shape[1] == 0)
    fail("logits {} have no classes", shapeToString(logits.shape));
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32)
    fail("labels must be i64 or i32 class indices, got {}", dtypeName(labels.dtype));
  if (labels.shape != Shape{logits.shape[0]})
    fail("labels must be [{}] (one class index per row of logits {}), got {}", logits.shape[0],
         shapeToString(logits.shape), shapeToString(labels.shape));
  return {reducedType(TensorType{logits.dtype, {logits.shape[0]}}, reduction)};
}

// loss[n] = -log_softmax(logits)[n, labels[n]]. The pick is a one-hot mask (iota along the
// class axis == label) selecting through `where` and summed over classes: a select rather than
// a multiply by the mask, so a -inf log-probability of another class cannot turn into NaN.
std::vector<Value *> decomposeCrossEntropy(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *logits = in[0], *labels = in[1];
  int64_t rows = logits->shape()[0], classes = logits->shape()[1];
  Value *logProbs = b.create(OpKind::LogSoftmax, {logits}, {{"axis", int64_t(1)}});
  Value *classIds = b.create(
      OpKind::Iota, {}, {{"shape", Shape{rows, classes}}, {"axis", int64_t(1)}, {"dtype", labels->dtype()}});
  Value *column = b.create(OpKind::Reshape, {labels}, {{"shape", Shape{rows, 1}}});
  Value *oneHot = b.create(OpKind::Eq, {classIds, column});
  Value *picked = b.create(OpKind::Where, {oneHot, logProbs, b.scalar(logits->dtype(), 0.0)});
  Value *logProb = b.create(OpKind::ReduceSum, {picked}, {{"axes", std::vector<int64_t>{1}}});
  Value *losses = b.create(OpKind::Neg, {logProb});
  return {applyReduction(b, losses, readReduction(attrs))};
}

} // namespace

OpDef defineMseLoss() {
  OpDef def;
  def.attrs = {stringAttr("reduction", "mean")};
  def.infer = inferMseLoss;
  def.decompose = decomposeMseLoss;
  return def;
}

OpDef defineCrossEntropy() {
  OpDef def;
  def.attrs = {stringAttr("reduction", "mean")};
  def.infer = inferCrossEntropy;
  def.decompose = decomposeCrossEntropy;
  return def;
}

} // namespace kiln::ir
