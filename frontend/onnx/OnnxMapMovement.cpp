// Movement ONNX ops that re-index a whole tensor: Reshape, Transpose, Expand, Squeeze,
// Unsqueeze, Flatten, Identity, Tile, DepthToSpace and SpaceToDepth. (Slice, Pad, Concat,
// Split and Gather are in OnnxMapRegion.cpp.) Every shape-like operand must be known at import
// time and becomes an attribute; ONNX-only conventions (Reshape's 0 = "copy this dim",
// Expand's two-way broadcast, Flatten's 2-D result) are resolved here, so kiln's ops keep
// their one plain meaning.
#include "core/ShapeMath.h"
#include "frontend/onnx/OnnxOpTable.h"
#include "ir/ops/Common.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// Axes given by an attribute before opset 13 and by an optional input from 13 on.
std::vector<int64_t> axesOperand(ImportContext &ctx, const onnx::NodeProto &node) {
  if (ctx.opset() < 13)
    return OnnxAttrs(node).getInts("axes");
  return ctx.hasInput(node, 1) ? ctx.staticInts(node, 1, "axes") : std::vector<int64_t>{};
}

/// The blocksize attribute; bounded so that blocksize^2 times a dim cannot overflow.
int64_t blockSize(const onnx::NodeProto &node) {
  int64_t block = OnnxAttrs(node).getInt("blocksize", 0);
  if (block < 1 || block > (int64_t{1} << 16))
    fail("blocksize must be in [1, 65536], got {}", block);
  return block;
}

/// x must be [N, C, H, W]; returns its shape.
const Shape &requireNCHW(const ir::Value *x) {
  if (x->rank() != 4)
    fail("input must be 4-D [N, C, H, W], got {}", shapeToString(x->shape()));
  return x->shape();
}

} // namespace

std::vector<ir::Value *> mapIdentity(ImportContext &ctx, const onnx::NodeProto &node) { return {ctx.input(node, 0)}; }

std::vector<ir::Value *> mapReshape(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  // Before opset 5 the shape is an attribute.
  std::vector<int64_t> shape =
      ctx.opset() < 5 ? OnnxAttrs(node).getInts("shape") : ctx.staticInts(node, 1, "target shape");
  bool allowZero = ctx.opset() >= 14 && OnnxAttrs(node).getInt("allowzero", 0) != 0;
  // ONNX: a 0 copies the input's dim at that position (unless allowzero); kiln's 0 is a
  // zero-size dim, so resolve it here.
  for (size_t i = 0; i < shape.size() && !allowZero; ++i) {
    if (shape[i] != 0)
      continue;
    if (static_cast<int64_t>(i) >= x->rank())
      fail("target shape {} copies dim {} (a 0), but the input {} has rank {}", shapeToString(shape), i,
           shapeToString(x->shape()), x->rank());
    shape[i] = x->shape()[i];
  }
  return {reshapeTo(ctx, x, shape)};
}

std::vector<ir::Value *> mapTranspose(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  std::vector<int64_t> reversed;
  for (int64_t d = x->rank() - 1; d >= 0; --d)
    reversed.push_back(d);
  return {permute(ctx, x, OnnxAttrs(node).getInts("perm", reversed))};
}

std::vector<ir::Value *> mapExpand(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  std::vector<int64_t> shape = ctx.staticInts(node, 1, "target shape");
  for (int64_t dim : shape)
    if (dim < 0 && !isSymbolicDim(dim))
      fail("target shape {} has a negative dim", shapeToString(shape));
  // Expand broadcasts both ways: a 1 in `shape` keeps the input's dim.
  return {broadcastTo(ctx, x, ir::ops::broadcastShapes(x->shape(), shape))};
}

std::vector<ir::Value *> mapSqueeze(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  return {ctx.op(OpKind::Squeeze, {x}, {{"axes", axesOperand(ctx, node)}})};
}

std::vector<ir::Value *> mapUnsqueeze(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  std::vector<int64_t> axes = axesOperand(ctx, node);
  if (axes.empty())
    fail("axes are required");
  return {ctx.op(OpKind::Unsqueeze, {x}, {{"axes", axes}})};
}

std::vector<ir::Value *> mapFlatten(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  int64_t rank = x->rank(), axisAttr = OnnxAttrs(node).getInt("axis", 1);
  // ONNX's axis ranges over [-rank, rank]: the split point between the two result dims.
  int64_t axis = axisAttr < 0 ? axisAttr + rank : axisAttr;
  if (axis < 0 || axis > rank)
    fail("axis {} is out of range [-{}, {}] for input {}", axisAttr, rank, rank, shapeToString(x->shape()));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? outer : inner) = dimMul(d < axis ? outer : inner, x->shape()[d], "flattened dim");
  return {reshapeTo(ctx, x, {outer, inner})};
}

std::vector<ir::Value *> mapTile(ImportContext &ctx, const onnx::NodeProto &node) {
  // Opset 1's Tile took (tiles, axis) operands; from opset 6 on one `repeats` per dim.
  if (ctx.opset() < 6)
    fail("the opset-1 form of Tile (tiles and axis inputs) is not supported; use opset 6 or later");
  return {ctx.op(OpKind::Tile, {ctx.input(node, 0)}, {{"repeats", ctx.staticInts(node, 1, "repeats")}})};
}

void checkDepthToSpace(const onnx::NodeProto &node, int64_t, std::vector<std::string> &problems) {
  std::string mode = OnnxAttrs(node).getString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    problems.push_back(fmt::format("mode '{}' is not supported (DCR or CRD)", mode));
}

std::vector<ir::Value *> mapDepthToSpace(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  const Shape &s = requireNCHW(x);
  int64_t b = blockSize(node);
  if (s[1] % (b * b) != 0)
    fail("channels {} are not a multiple of blocksize^2 = {}", s[1], b * b);
  int64_t c = s[1] / (b * b);
  // DCR reads the channel as (block row, block col, channel), CRD as (channel, row, col).
  bool dcr = OnnxAttrs(node).getString("mode", "DCR") == "DCR";
  ir::Value *split = reshapeTo(ctx, x, dcr ? Shape{s[0], b, b, c, s[2], s[3]} : Shape{s[0], c, b, b, s[2], s[3]});
  ir::Value *moved =
      permute(ctx, split, dcr ? std::vector<int64_t>{0, 3, 4, 1, 5, 2} : std::vector<int64_t>{0, 1, 4, 2, 5, 3});
  // Checked: with C = 0 the spatial dims can be up to 2^48 each, and b up to 2^16.
  return {reshapeTo(ctx, moved, {s[0], c, checkedMul(s[2], b, "output height"), checkedMul(s[3], b, "output width")})};
}

std::vector<ir::Value *> mapSpaceToDepth(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  const Shape &s = requireNCHW(x);
  int64_t b = blockSize(node);
  if (s[2] % b != 0 || s[3] % b != 0)
    fail("spatial dims {}x{} are not multiples of blocksize {}", s[2], s[3], b);
  ir::Value *split = reshapeTo(ctx, x, {s[0], s[1], s[2] / b, b, s[3] / b, b});
  ir::Value *moved = permute(ctx, split, {0, 3, 5, 1, 2, 4});
  return {reshapeTo(ctx, moved, {s[0], checkedMul(s[1], b * b, "output channels"), s[2] / b, s[3] / b})};
}

} // namespace kiln::frontend
