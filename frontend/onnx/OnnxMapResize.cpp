// Resampling ONNX ops: Resize (opsets 10, 11, 13 and 18) and Upsample (opsets 7-9), both onto
// kiln's resize, which takes the output shape (`sizes`) and, when the model gave scales, those
// scales for the coordinate mapping. The forms:
//   - Upsample 7 (scales attribute), Upsample 9 and Resize 10 (scales input): nearest or linear
//     with asymmetric coordinates; nearest takes floor, the rule of Upsample's definition;
//   - Resize 11 and 13: inputs (X, roi, scales, sizes), exactly one of scales and sizes given
//     (13 lets the unused ones be omitted, 11 passes an empty tensor), and the
//     coordinate_transformation_mode, nearest_mode, cubic_coeff_a and exclude_outside
//     attributes; roi matters only to tf_crop_and_resize, which kiln does not support;
//   - Resize 18 adds `axes` (scales or sizes for those axes only, the rest keep their size),
//     keep_aspect_ratio_policy for sizes, and antialias (not supported).
// Every operand must be known at import time. From scales, output dims are floor(in * scale),
// as ONNX computes them.
#include <cmath>

#include "core/ShapeMath.h"
#include "frontend/onnx/OnnxOpTable.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

std::vector<double> staticFloats(ImportContext &ctx, const onnx::NodeProto &node, int i, const std::string &what) {
  Tensor t = ctx.staticInput(node, i, what);
  if (t.rank() > 1)
    fail("the {} (input {}) must be 1-D, got {}", what, i, t.type().toString());
  return t.toDoubles();
}

/// floor(in * scale) per dim, refusing non-finite or non-positive scales and absurd sizes.
std::vector<int64_t> sizesFromScales(const Shape &in, const std::vector<double> &scales) {
  std::vector<int64_t> sizes;
  for (size_t d = 0; d < in.size(); ++d) {
    double size = std::floor(static_cast<double>(in[d]) * scales[d]);
    if (!(std::isfinite(scales[d]) && scales[d] > 0) || size > static_cast<double>(kMaxElements))
      fail("scales [{}] do not give a valid output size for input {}", fmt::join(scales, ","), shapeToString(in));
    sizes.push_back(static_cast<int64_t>(size));
  }
  return sizes;
}

ir::Value *resize(ImportContext &ctx, ir::Value *x, std::vector<int64_t> sizes, std::vector<double> scales,
                  ir::AttrMap attrs) {
  attrs["sizes"] = std::move(sizes);
  attrs["scales"] = std::move(scales);
  return ctx.op(OpKind::Resize, {x}, std::move(attrs));
}

/// The legacy forms (Upsample, Resize 10): asymmetric coordinates, nearest by floor.
ir::Value *legacyResize(ImportContext &ctx, const onnx::NodeProto &node, ir::Value *x,
                        const std::vector<double> &scales) {
  if (static_cast<int64_t>(scales.size()) != x->rank())
    fail("scales [{}] need one entry per dim of input {}", fmt::join(scales, ","), shapeToString(x->shape()));
  std::string mode = OnnxAttrs(node).getString("mode", "nearest");
  if (mode == "bilinear") // Upsample 7's name for it
    mode = "linear";
  return resize(ctx, x, sizesFromScales(x->shape(), scales), scales,
                {{"mode", mode},
                 {"coordinate_transformation_mode", std::string("asymmetric")},
                 {"nearest_mode", std::string("floor")}});
}

/// Resize 18's sizes under keep_aspect_ratio_policy not_larger / not_smaller: one scale for
/// every listed axis (the smallest or largest of sizes / in), each size round(scale * in).
void keepAspectRatio(const std::string &policy, const Shape &in, const std::vector<int64_t> &axes,
                     std::vector<int64_t> &sizes, std::vector<double> &scales) {
  double scale = policy == "not_larger" ? INFINITY : 0;
  for (int64_t axis : axes) {
    double ratio = static_cast<double>(sizes[axis]) / static_cast<double>(in[axis]);
    scale = policy == "not_larger" ? std::min(scale, ratio) : std::max(scale, ratio);
  }
  scales.assign(in.size(), 1.0);
  for (int64_t axis : axes) {
    double size = std::round(scale * static_cast<double>(in[axis]));
    // An empty input dim makes the ratio infinite or NaN; converting that would be undefined.
    if (!(size >= 0 && size <= static_cast<double>(kMaxElements)))
      fail("keep_aspect_ratio_policy {} gives no valid size for axis {} of input {} (sizes {})", policy, axis,
           shapeToString(in), shapeToString(sizes));
    sizes[axis] = static_cast<int64_t>(size);
    scales[axis] = scale;
  }
}

} // namespace

void checkResize(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems) {
  OnnxAttrs attrs(node);
  std::string coordinates = attrs.getString("coordinate_transformation_mode", "half_pixel");
  if (opset >= 11 && coordinates == "tf_crop_and_resize")
    problems.push_back("coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  if (opset >= 18 && attrs.getInt("antialias", 0) != 0)
    problems.push_back("antialias=1 is not supported");
  std::string policy = attrs.getString("keep_aspect_ratio_policy", "stretch");
  if (opset >= 18 && policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    problems.push_back(fmt::format("keep_aspect_ratio_policy '{}' is not supported", policy));
}

std::vector<ir::Value *> mapResize(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  if (ctx.opset() < 11)
    return {legacyResize(ctx, node, x, staticFloats(ctx, node, 1, "scales"))};
  OnnxAttrs attrs(node);
  int64_t rank = x->rank();
  std::vector<int64_t> axes;
  if (ctx.opset() >= 18 && attrs.has("axes")) {
    for (int64_t axis : attrs.getInts("axes"))
      axes.push_back(normalizeAxis(axis, rank, "axes"));
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  std::vector<double> givenScales;
  std::vector<int64_t> givenSizes;
  if (ctx.hasInput(node, 2))
    givenScales = staticFloats(ctx, node, 2, "scales");
  if (ctx.hasInput(node, 3))
    givenSizes = ctx.staticInts(node, 3, "sizes");
  if (givenScales.empty() == givenSizes.empty())
    fail("exactly one of scales and sizes must be given (non-empty), got {} scales and {} sizes", givenScales.size(),
         givenSizes.size());
  size_t expected = axes.size();
  if (!givenScales.empty() && givenScales.size() != expected)
    fail("scales [{}] need {} entries", fmt::join(givenScales, ","), expected);
  if (!givenSizes.empty() && givenSizes.size() != expected)
    fail("sizes {} need {} entries", shapeToString(givenSizes), expected);

  std::vector<int64_t> sizes = x->shape();
  std::vector<double> scales;
  if (!givenScales.empty()) {
    scales.assign(static_cast<size_t>(rank), 1.0);
    for (size_t k = 0; k < axes.size(); ++k)
      scales[axes[k]] = givenScales[k];
    sizes = sizesFromScales(x->shape(), scales);
  } else {
    for (size_t k = 0; k < axes.size(); ++k)
      sizes[axes[k]] = givenSizes[k];
    std::string policy = ctx.opset() >= 18 ? attrs.getString("keep_aspect_ratio_policy", "stretch") : "stretch";
    if (policy != "stretch")
      keepAspectRatio(policy, x->shape(), axes, sizes, scales);
  }
  return {resize(ctx, x, sizes, scales,
                 {{"mode", attrs.getString("mode", "nearest")},
                  {"coordinate_transformation_mode", attrs.getString("coordinate_transformation_mode", "half_pixel")},
                  {"nearest_mode", attrs.getString("nearest_mode", "round_prefer_floor")},
                  {"cubic_coeff_a", attrs.getFloat("cubic_coeff_a", -0.75)},
                  {"exclude_outside", attrs.getInt("exclude_outside", 0)}})};
}

std::vector<ir::Value *> mapUpsample(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  std::vector<double> scales =
      ctx.opset() < 9 ? OnnxAttrs(node).getFloats("scales") : staticFloats(ctx, node, 1, "scales");
  return {legacyResize(ctx, node, x, scales)};
}

} // namespace kiln::frontend
