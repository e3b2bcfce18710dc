// Movement ops that only re-index elements: reshape, permute and broadcast (primitives),
// squeeze, unsqueeze and flatten (composites, each defined as one reshape) and tile (a
// composite: reshape, broadcast, reshape). The ops that cut or assemble regions (slice, pad, concat,
// split) live in MovementRegion.cpp.
//
// Reference evaluation copies element bytes rather than converting through double, so every
// dtype moves exactly (an i64 above 2^53 or a NaN payload survives).
#include "ir/Builder.h"
#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

// reshape: `shape` with at most one -1 (inferred). A 0 is a zero-size dim, not ONNX's "copy
// the input dim", so a shape attribute always means the same thing whatever the input. Dims
// may be symbolic (core/SymbolicDim.h): element counts are then polynomials, equal when their
// canonical forms are, and the -1 is their exact quotient.
Shape reshapeTarget(const Shape &input, const std::vector<int64_t> &spec) {
  Shape target = spec;
  int64_t inferredAxis = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] == -1) {
      if (inferredAxis >= 0)
        fail("shape {} has more than one -1", shapeToString(spec));
      inferredAxis = static_cast<int64_t>(i);
      target[i] = 1;
    } else if (spec[i] < 0 && !isSymbolicDim(spec[i])) {
      fail("shape {} has a negative dimension {} (only -1, meaning inferred, is allowed)",
           shapeToString(spec), spec[i]);
    }
  }
  checkShapeWithinLimit(target, "shape");
  int64_t known = dimProduct(target, 0, target.size(), "shape");
  int64_t total = dimProduct(input, 0, input.size(), "shape");
  if (inferredAxis < 0) {
    if (known != total)
      fail("cannot reshape {} ({} elements) into {} ({} elements)", shapeToString(input), dimToString(total),
           shapeToString(spec), dimToString(known));
    return target;
  }
  if (known == 0)
    fail("cannot infer the -1 in shape {}: the other dims hold no elements, so any size would fit",
         shapeToString(spec));
  std::optional<int64_t> inferred = dimDivExact(total, known);
  if (!inferred)
    fail("cannot reshape {} ({} elements) into {}: {} is not a multiple of {}", shapeToString(input),
         dimToString(total), shapeToString(spec), dimToString(total), dimToString(known));
  target[inferredAxis] = *inferred;
  return target;
}

std::vector<int64_t> resolvePerm(const std::vector<int64_t> &perm, int64_t rank) {
  if (static_cast<int64_t>(perm.size()) != rank)
    fail("perm {} has {} entries, but the operand has rank {}", shapeToString(perm), perm.size(), rank);
  // rank entries, each in range and none repeated: exactly a permutation of 0..rank-1.
  return normalizeAxes(perm, rank, "perm");
}

// broadcast: numpy broadcast_to; the operand is right-aligned and its size-1 dims stretch.
void checkBroadcastable(const Shape &input, const Shape &target) {
  checkShapeWithinLimit(target, "shape");
  if (input.size() > target.size())
    fail("cannot broadcast {} to {}: the target has a lower rank", shapeToString(input),
         shapeToString(target));
  size_t offset = target.size() - input.size();
  for (size_t d = 0; d < input.size(); ++d)
    if (input[d] != 1 && input[d] != target[d + offset])
      fail("cannot broadcast {} to {}: operand dim {} has size {}, the target needs {}", shapeToString(input),
           shapeToString(target), d, dimToString(input[d]), dimToString(target[d + offset]));
}

// squeeze: `axes` empty removes every size-1 dim; named axes must have size 1.
Shape squeezedShape(const Shape &input, const std::vector<int64_t> &axesAttr) {
  int64_t rank = static_cast<int64_t>(input.size());
  std::vector<bool> drop(input.size(), false);
  if (axesAttr.empty()) {
    for (size_t d = 0; d < input.size(); ++d)
      drop[d] = input[d] == 1;
  }
  for (int64_t axis : normalizeAxes(axesAttr, rank, "axes")) {
    if (input[axis] != 1)
      fail("cannot squeeze axis {}: it has size {}, not 1", axis, dimToString(input[axis]));
    drop[axis] = true;
  }
  Shape out;
  for (size_t d = 0; d < input.size(); ++d)
    if (!drop[d])
      out.push_back(input[d]);
  return out;
}

// unsqueeze: `axes` are positions in the output, so negatives count from the output's rank.
Shape unsqueezedShape(const Shape &input, const std::vector<int64_t> &axesAttr) {
  int64_t outRank = static_cast<int64_t>(input.size() + axesAttr.size());
  std::vector<bool> isNew(static_cast<size_t>(outRank), false);
  for (int64_t axis : normalizeAxes(axesAttr, outRank, "axes"))
    isNew[axis] = true;
  Shape out;
  size_t next = 0;
  for (int64_t d = 0; d < outRank; ++d)
    out.push_back(isNew[d] ? 1 : input[next++]);
  return out;
}

// flatten: torch.flatten(start, end) merges dims start..end (inclusive) into one.
Shape flattenedShape(const Shape &input, int64_t startAttr, int64_t endAttr) {
  // torch treats a scalar as a one-element vector, so flattening it gives [1].
  Shape shape = input.empty() ? Shape{1} : input;
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t start = normalizeAxis(startAttr, rank, "start");
  int64_t end = normalizeAxis(endAttr, rank, "end");
  if (start > end)
    fail("start {} comes after end {} (rank {})", startAttr, endAttr, rank);
  Shape out(shape.begin(), shape.begin() + start);
  out.push_back(dimProduct(shape, static_cast<size_t>(start), static_cast<size_t>(end) + 1, "flattened dim"));
  out.insert(out.end(), shape.begin() + end + 1, shape.end());
  return out;
}

Value *reshapeTo(Builder &builder, Value *input, Shape shape) {
  return builder.create(OpKind::Reshape, {input}, {{"shape", std::move(shape)}});
}

} // namespace

OpDef defineReshape() {
  OpDef def;
  def.attrs = {intsAttr("shape")};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    return std::vector<TensorType>{{in[0].dtype, reshapeTarget(in[0].shape, attrInts(attrs, "shape"))}};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &, const std::vector<TensorType> &out) {
    // A fresh copy, so no later in-place user of the result can write into the operand.
    return std::vector<Tensor>{in[0].clone().reshaped(out[0].shape)};
  };
  return def;
}

OpDef definePermute() {
  OpDef def;
  def.attrs = {intsAttr("perm")};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    std::vector<int64_t> perm = resolvePerm(attrInts(attrs, "perm"), in[0].rank());
    Shape shape;
    for (int64_t axis : perm)
      shape.push_back(in[0].shape[axis]);
    return std::vector<TensorType>{{in[0].dtype, shape}};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    const Tensor &x = in[0];
    std::vector<int64_t> perm = resolvePerm(attrInts(attrs, "perm"), x.rank());
    // Output axis d walks input axis perm[d], so it advances by that axis's stride.
    std::vector<int64_t> inStrides = contiguousStrides(x.shape());
    std::vector<int64_t> strideOfOutAxis;
    for (int64_t axis : perm)
      strideOfOutAxis.push_back(inStrides[axis]);
    Tensor y(out[0]);
    forEachIndex(y.shape(), [&](const std::vector<int64_t> &index, int64_t flat) {
      int64_t source = 0;
      for (size_t d = 0; d < index.size(); ++d)
        source += index[d] * strideOfOutAxis[d];
      copyElements(x, source, y, flat, 1);
    });
    return std::vector<Tensor>{y};
  };
  return def;
}

OpDef defineBroadcast() {
  OpDef def;
  def.attrs = {intsAttr("shape")};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    const Shape &target = attrInts(attrs, "shape");
    checkBroadcastable(in[0].shape, target);
    return std::vector<TensorType>{{in[0].dtype, target}};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &, const std::vector<TensorType> &out) {
    const Tensor &x = in[0];
    Tensor y(out[0]);
    forEachIndex(y.shape(), [&](const std::vector<int64_t> &index, int64_t flat) {
      copyElements(x, broadcastSourceIndex(index, x.shape()), y, flat, 1);
    });
    return std::vector<Tensor>{y};
  };
  return def;
}

OpDef defineSqueeze() {
  OpDef def;
  def.attrs = {intsAttr("axes", std::vector<int64_t>{})};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    return std::vector<TensorType>{{in[0].dtype, squeezedShape(in[0].shape, attrInts(attrs, "axes"))}};
  };
  def.decompose = [](Builder &builder, const std::vector<Value *> &in, const AttrMap &attrs) {
    Shape shape = squeezedShape(in[0]->shape(), attrInts(attrs, "axes"));
    return std::vector<Value *>{reshapeTo(builder, in[0], std::move(shape))};
  };
  return def;
}

OpDef defineUnsqueeze() {
  OpDef def;
  def.attrs = {intsAttr("axes")};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    return std::vector<TensorType>{{in[0].dtype, unsqueezedShape(in[0].shape, attrInts(attrs, "axes"))}};
  };
  def.decompose = [](Builder &builder, const std::vector<Value *> &in, const AttrMap &attrs) {
    Shape shape = unsqueezedShape(in[0]->shape(), attrInts(attrs, "axes"));
    return std::vector<Value *>{reshapeTo(builder, in[0], std::move(shape))};
  };
  return def;
}

OpDef defineFlatten() {
  OpDef def;
  def.attrs = {intAttr("start", 0), intAttr("end", -1)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    Shape shape = flattenedShape(in[0].shape, attrInt(attrs, "start"), attrInt(attrs, "end"));
    return std::vector<TensorType>{{in[0].dtype, shape}};
  };
  def.decompose = [](Builder &builder, const std::vector<Value *> &in, const AttrMap &attrs) {
    Shape shape = flattenedShape(in[0]->shape(), attrInt(attrs, "start"), attrInt(attrs, "end"));
    return std::vector<Value *>{reshapeTo(builder, in[0], std::move(shape))};
  };
  return def;
}

namespace {

/// tile's output shape, dim d repeated repeats[d] times.
Shape tiledShape(const TensorType &x, const std::vector<int64_t> &repeats) {
  if (static_cast<int64_t>(repeats.size()) != x.rank())
    fail("repeats {} has {} entries, but the input has rank {}", shapeToString(repeats), repeats.size(),
         x.rank());
  Shape shape(x.shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (repeats[d] < 0)
      fail("repeats {} has a negative entry {}", shapeToString(repeats), repeats[d]);
    shape[d] = dimMul(x.shape[d], repeats[d], "tiled dim");
  }
  checkShapeWithinLimit(shape, "shape"); // rejects counts that do not fit
  return shape;
}

} // namespace

// tile (numpy tile): x [d0, d1, ...] -> reshape [1, d0, 1, d1, ...] -> broadcast
// [r0, d0, r1, d1, ...] -> reshape [r0*d0, r1*d1, ...]; row-major order makes each output
// dim run through x's dim r times, which is exactly out[i] = x[i mod d].
OpDef defineTile() {
  OpDef def;
  def.attrs = {intsAttr("repeats")};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    return std::vector<TensorType>{{in[0].dtype, tiledShape(in[0], attrInts(attrs, "repeats"))}};
  };
  def.decompose = [](Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
    Value *x = in[0];
    const std::vector<int64_t> &repeats = attrInts(attrs, "repeats");
    Shape outShape = tiledShape(x->type(), repeats);
    Shape interleaved, expanded;
    for (size_t d = 0; d < repeats.size(); ++d) {
      interleaved.insert(interleaved.end(), {1, x->shape()[d]});
      expanded.insert(expanded.end(), {repeats[d], x->shape()[d]});
    }
    Value *y = b.create(OpKind::Reshape, {x}, {{"shape", interleaved}});
    y = b.create(OpKind::Broadcast, {y}, {{"shape", expanded}});
    return std::vector<Value *>{b.create(OpKind::Reshape, {y}, {{"shape", outShape}})};
  };
  return def;
}

} // namespace kiln::ir
