// resize: ONNX Resize (opsets 11-18) without roi, axes, antialias or keep_aspect_ratio_policy:
// the importer resolves those into `sizes` (the output shape) and, when the model gave scales,
// `scales` (used in the coordinate mapping exactly as ONNX uses them; empty means sizes / in).
//
// Resize is separable: along each axis, output position x maps to a source coordinate
// (coordinate_transformation_mode), and the result is a weighted sum of input positions around
// it (mode). The weights and positions follow the ONNX reference implementation:
//   - x_ori = half_pixel (x + 0.5) / scale - 0.5, asymmetric x / scale, align_corners
//     x * (in - 1) / (scale * in - 1) (0 when scale * in == 1), pytorch_half_pixel like half_pixel
//     but -0.5 when scale * in == 1;
//   - base = floor(x_ori) and ratio = x_ori - base, except that an integral x_ori has base
//     x_ori - 1 and ratio 1 (the reference prefers the left neighbour);
//   - nearest takes base or base + 1 (nearest_mode decides at ratio 0.5; an integral x_ori takes
//     itself), linear weighs base and base + 1 by 1 - ratio and ratio, cubic weighs base - 1 ..
//     base + 2 with Keys' kernel (cubic_coeff_a);
//   - positions outside the input repeat the edge element, or with exclude_outside (linear and
//     cubic) get weight 0 and the remaining weights are renormalised to sum to 1.
// Taps of weight 0 are dropped, so a non-finite neighbour cannot leak into a point it does not
// influence. Source coordinates are clamped to [-1, in], which changes nothing when sizes and
// scales agree (then x_ori lies in [-0.5, in)). Nearest copies elements exactly; linear and
// cubic compute in double, axis by axis, and round once to the output dtype (integers truncate
// toward zero and saturate).
#include <algorithm>
#include <cmath>

#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coordinates { HalfPixel, Asymmetric, AlignCorners, PytorchHalfPixel };
enum class Rounding { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct ResizeOptions {
  Mode mode = Mode::Nearest;
  Coordinates coordinates = Coordinates::HalfPixel;
  Rounding rounding = Rounding::RoundPreferFloor;
  double cubicA = -0.75;
  bool excludeOutside = false;
  std::vector<int64_t> sizes;
  std::vector<double> scales; // one per dim, never empty after readOptions
};

ResizeOptions readOptions(const TensorType &x, const AttrMap &attrs) {
  ResizeOptions o;
  const std::string &mode = attrString(attrs, "mode");
  if (mode == "nearest")
    o.mode = Mode::Nearest;
  else if (mode == "linear")
    o.mode = Mode::Linear;
  else if (mode == "cubic")
    o.mode = Mode::Cubic;
  else
    fail("attribute 'mode' must be \"nearest\", \"linear\" or \"cubic\", got \"{}\"", mode);

  const std::string &coordinates = attrString(attrs, "coordinate_transformation_mode");
  if (coordinates == "half_pixel")
    o.coordinates = Coordinates::HalfPixel;
  else if (coordinates == "asymmetric")
    o.coordinates = Coordinates::Asymmetric;
  else if (coordinates == "align_corners")
    o.coordinates = Coordinates::AlignCorners;
  else if (coordinates == "pytorch_half_pixel")
    o.coordinates = Coordinates::PytorchHalfPixel;
  else if (coordinates == "tf_crop_and_resize" || coordinates == "half_pixel_symmetric")
    fail("coordinate_transformation_mode \"{}\" is not supported (supported: half_pixel, asymmetric, "
         "align_corners, pytorch_half_pixel)",
         coordinates);
  else
    fail("attribute 'coordinate_transformation_mode' has the unknown value \"{}\" (expected half_pixel, "
         "asymmetric, align_corners or pytorch_half_pixel)",
         coordinates);

  const std::string &rounding = attrString(attrs, "nearest_mode");
  if (rounding == "round_prefer_floor")
    o.rounding = Rounding::RoundPreferFloor;
  else if (rounding == "round_prefer_ceil")
    o.rounding = Rounding::RoundPreferCeil;
  else if (rounding == "floor")
    o.rounding = Rounding::Floor;
  else if (rounding == "ceil")
    o.rounding = Rounding::Ceil;
  else
    fail("attribute 'nearest_mode' must be \"round_prefer_floor\", \"round_prefer_ceil\", \"floor\" or "
         "\"ceil\", got \"{}\"",
         rounding);

  o.cubicA = attrFloat(attrs, "cubic_coeff_a");
  if (!std::isfinite(o.cubicA))
    fail("attribute 'cubic_coeff_a' must be finite, got {}", o.cubicA);
  int64_t exclude = attrInt(attrs, "exclude_outside");
  if (exclude != 0 && exclude != 1)
    fail("attribute 'exclude_outside' must be 0 or 1, got {}", exclude);
  o.excludeOutside = exclude == 1;

  o.sizes = attrInts(attrs, "sizes");
  if (static_cast<int64_t>(o.sizes.size()) != x.rank())
    fail("'sizes' needs {} values (the output shape, one per dim of input {}), got {}", x.rank(),
         shapeToString(x.shape), o.sizes.size());
  for (size_t d = 0; d < o.sizes.size(); ++d) {
    if (o.sizes[d] < 0)
      fail("'sizes' {} has a negative dim", shapeToString(o.sizes));
    if (x.shape[d] == 0 && o.sizes[d] != 0)
      fail("axis {} of input {} is empty: there is nothing to resize to size {}", d, shapeToString(x.shape),
           o.sizes[d]);
  }
  numElements(o.sizes); // rejects an output too large to count

  o.scales = attrFloats(attrs, "scales");
  if (o.scales.empty()) {
    for (size_t d = 0; d < o.sizes.size(); ++d) { // an empty axis is never sampled: any scale will do
      bool empty = x.shape[d] == 0 || o.sizes[d] == 0;
      o.scales.push_back(empty ? 1.0 : double(o.sizes[d]) / double(x.shape[d]));
    }
  } else if (o.scales.size() != o.sizes.size()) {
    fail("'scales' needs {} values (one per dim of input {}) or none, got {}", x.rank(),
         shapeToString(x.shape), o.scales.size());
  }
  for (double s : o.scales)
    if (!(std::isfinite(s) && s > 0))
      fail("'scales' values must be finite and > 0, got [{}]", fmt::join(o.scales, ","));
  return o;
}

std::vector<TensorType> inferResize(const std::vector<TensorType> &in, const AttrMap &attrs) {
  ResizeOptions o = readOptions(in[0], attrs);
  if (o.mode != Mode::Nearest && in[0].dtype == DType::Bool)
    fail("{} interpolation needs a numeric input, got bool", attrString(attrs, "mode"));
  return {TensorType{in[0].dtype, o.sizes}};
}

// ---- per-axis sampling tables -------------------------------------------------------------------

struct Tap {
  int64_t index;
  double weight;
};
using AxisTaps = std::vector<std::vector<Tap>>; // per output position along the axis

double sourceCoordinate(const ResizeOptions &o, double x, int64_t in, double scale) {
  // Written as the reference writes it (the output width is scale * in, a float), so that the
  // coordinates, and with them nearest's ties, agree with it.
  double outputWidth = scale * double(in);
  switch (o.coordinates) {
  case Coordinates::HalfPixel: return (x + 0.5) / scale - 0.5;
  case Coordinates::Asymmetric: return x / scale;
  case Coordinates::AlignCorners: return outputWidth == 1 ? 0.0 : x * double(in - 1) / (outputWidth - 1);
  case Coordinates::PytorchHalfPixel: return outputWidth == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  }
  return 0;
}

bool pickUpper(Rounding rounding, double ratio) {
  switch (rounding) {
  case Rounding::RoundPreferFloor: return ratio > 0.5;
  case Rounding::RoundPreferCeil: return ratio >= 0.5;
  case Rounding::Floor: return false;
  case Rounding::Ceil: return true;
  }
  return false;
}

std::vector<Tap> sampleTaps(const ResizeOptions &o, double x, int64_t in, double scale) {
  double source = std::clamp(sourceCoordinate(o, x, in, scale), -1.0, double(in));
  double floorValue = std::floor(source);
  auto base = static_cast<int64_t>(floorValue);
  double ratio = source - floorValue;
  if (ratio == 0) { // integral: the left neighbour is base, the point itself base + 1
    base -= 1;
    ratio = 1;
  }
  Tap taps[4];
  int count = 0;
  auto add = [&](int64_t index, double weight) { taps[count++] = {index, weight}; };
  switch (o.mode) {
  case Mode::Nearest: add(ratio == 1 || pickUpper(o.rounding, ratio) ? base + 1 : base, 1.0); break;
  case Mode::Linear:
    add(base, 1 - ratio);
    add(base + 1, ratio);
    break;
  case Mode::Cubic: {
    // Keys' cubic convolution kernel at distances 1 + ratio, ratio, 1 - ratio, 2 - ratio.
    double a = o.cubicA, r = ratio, s = 1 - ratio;
    add(base - 1, ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a);
    add(base, ((a + 2) * r - (a + 3)) * r * r + 1);
    add(base + 1, ((a + 2) * s - (a + 3)) * s * s + 1);
    add(base + 2, ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a);
    break;
  }
  }
  if (o.excludeOutside && o.mode != Mode::Nearest) {
    double sum = 0;
    for (int i = 0; i < count; ++i) {
      if (taps[i].index < 0 || taps[i].index >= in)
        taps[i].weight = 0;
      sum += taps[i].weight;
    }
    for (int i = 0; i < count; ++i)
      taps[i].weight /= sum;
  }
  std::vector<Tap> kept;
  for (int i = 0; i < count; ++i) {
    Tap t = taps[i];
    if (t.weight == 0)
      continue;
    t.index = std::clamp<int64_t>(t.index, 0, in - 1); // edge padding
    kept.push_back(t);
  }
  return kept;
}

AxisTaps axisTaps(const ResizeOptions &o, int64_t in, int64_t out, double scale) {
  AxisTaps taps(static_cast<size_t>(out));
  for (int64_t x = 0; x < out; ++x)
    taps[static_cast<size_t>(x)] = sampleTaps(o, double(x), in, scale);
  return taps;
}

bool isIdentity(const AxisTaps &taps, int64_t in) {
  if (static_cast<int64_t>(taps.size()) != in)
    return false;
  for (size_t x = 0; x < taps.size(); ++x)
    if (taps[x].size() != 1 || taps[x][0].index != static_cast<int64_t>(x) || taps[x][0].weight != 1)
      return false;
  return true;
}

// ---- evaluation ---------------------------------------------------------------------------------

// Nearest: every output element is a copy of one input element, found axis by axis.
Tensor resizeNearest(const Tensor &x, const ResizeOptions &o, const TensorType &outType) {
  Tensor y(outType);
  std::vector<int64_t> inStrides = contiguousStrides(x.shape());
  std::vector<std::vector<int64_t>> sourceOffset(x.shape().size());
  for (size_t d = 0; d < x.shape().size(); ++d)
    for (const std::vector<Tap> &taps : axisTaps(o, x.shape()[d], o.sizes[d], o.scales[d]))
      sourceOffset[d].push_back(taps.front().index * inStrides[d]);
  forEachIndex(outType.shape, [&](const std::vector<int64_t> &index, int64_t flat) {
    int64_t from = 0;
    for (size_t d = 0; d < index.size(); ++d)
      from += sourceOffset[d][static_cast<size_t>(index[d])];
    copyElements(x, from, y, flat, 1);
  });
  return y;
}

// One separable pass: resamples `values` (of `shape`) along `axis` with `taps`.
std::vector<double> resampleAxis(const std::vector<double> &values, Shape &shape, size_t axis,
                                 const AxisTaps &taps) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t in = shape[axis], out = static_cast<int64_t>(taps.size());
  std::vector<double> next(static_cast<size_t>(outer * out * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t x = 0; x < out; ++x) {
      double *dst = next.data() + (o * out + x) * inner;
      for (const Tap &tap : taps[static_cast<size_t>(x)]) {
        const double *src = values.data() + (o * in + tap.index) * inner;
        for (int64_t i = 0; i < inner; ++i)
          dst[i] += tap.weight * src[i];
      }
    }
  shape[axis] = out;
  return next;
}

std::vector<Tensor> evalResize(const std::vector<Tensor> &in, const AttrMap &attrs,
                               const std::vector<TensorType> &outTypes) {
  const Tensor &x = in[0];
  ResizeOptions o = readOptions(x.type(), attrs);
  if (o.mode == Mode::Nearest)
    return {resizeNearest(x, o, outTypes[0])};
  Shape shape = x.shape();
  std::vector<double> values = x.toDoubles();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 || o.sizes[d] == 0) { // nothing to sample: just take the new size
      shape[d] = o.sizes[d];
      values.assign(static_cast<size_t>(numElements(shape)), 0.0);
      continue;
    }
    AxisTaps taps = axisTaps(o, shape[d], o.sizes[d], o.scales[d]);
    if (!isIdentity(taps, shape[d]))
      values = resampleAxis(values, shape, d, taps);
  }
  Tensor y(outTypes[0]);
  for (size_t i = 0; i < values.size(); ++i)
    y.setDouble(static_cast<int64_t>(i), values[i]);
  return {y};
}

} // namespace

OpDef defineResize() {
  OpDef def;
  def.attrs = {intsAttr("sizes"),
               floatsAttr("scales", std::vector<double>{}),
               stringAttr("mode", "nearest"),
               stringAttr("coordinate_transformation_mode", "half_pixel"),
               stringAttr("nearest_mode", "round_prefer_floor"),
               floatAttr("cubic_coeff_a", -0.75),
               intAttr("exclude_outside", 0)};
  def.infer = inferResize;
  def.eval = evalResize;
  return def;
}

} // namespace kiln::ir
