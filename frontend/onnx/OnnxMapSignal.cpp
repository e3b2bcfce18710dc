// Signal-processing ONNX ops (opset 17): DFT and STFT as matmuls with constant cosine and sine
// matrices (a reference, O(n^2) per transform, computed in f64 and rounded once), and
// MelWeightMatrix, whose operands must be known, as a constant. Complex values are a last dim
// of 2 (real, imaginary); a real input has a last dim of 1.
#include <cmath>
#include <vector>

#include "frontend/onnx/OnnxOpTable.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// The most elements of one table built at import time (the DFT matrices, STFT's frame
/// positions, the mel filters): the lengths come from operands or dims that need no data
/// behind them, and a table grows with their product. A 4096-point DFT fits.
constexpr int64_t kMaxTableElements = int64_t{1} << 24;

/// Fails unless a rows x cols table stays within kMaxTableElements (both are >= 0).
void checkTableSize(int64_t rows, int64_t cols, const char *what) {
  if (cols != 0 && rows > kMaxTableElements / cols)
    fail("the {} would have {} x {} elements, more than the {} kiln builds at import time", what, rows, cols,
         kMaxTableElements);
}

ir::Value *sliceLast(ImportContext &ctx, ir::Value *x, int64_t begin, int64_t end) {
  return ctx.op(OpKind::Slice, {x},
                {{"starts", std::vector<int64_t>{begin}},
                 {"ends", std::vector<int64_t>{end}},
                 {"axes", std::vector<int64_t>{-1}},
                 {"steps", std::vector<int64_t>{1}}});
}

ir::Value *castTo(ImportContext &ctx, ir::Value *v, DType dtype) {
  return v->dtype() == dtype ? v : ctx.op(OpKind::Cast, {v}, {{"to", dtype}});
}

/// The [length, bins] matrix of cos (or sin) of 2 pi n k / length.
ir::Value *twiddles(ImportContext &ctx, int64_t length, int64_t bins, bool sine) {
  const double pi = std::acos(-1.0);
  checkTableSize(length, bins, "DFT matrix");
  // Entry (n, k) is the function at 2 pi ((n * k) mod length) / length: the reduced angle keeps
  // the matrix as exact as f64 allows, and there are only `length` of them to evaluate (a
  // 4096-point matrix is 16.7 M entries but 4096 sines).
  std::vector<double> unit(static_cast<size_t>(length));
  for (int64_t m = 0; m < length; ++m) {
    double angle = 2 * pi * static_cast<double>(m) / static_cast<double>(length);
    unit[static_cast<size_t>(m)] = sine ? std::sin(angle) : std::cos(angle);
  }
  Tensor t(DType::F64, {length, bins});
  double *out = t.dataAs<double>();
  for (int64_t n = 0; n < length; ++n) {
    int64_t m = 0; // n * k mod length, stepped by n
    for (int64_t k = 0; k < bins; ++k) {
      out[n * bins + k] = unit[static_cast<size_t>(m)];
      m += n;
      if (m >= length)
        m -= length;
    }
  }
  return ctx.constant(t);
}

/// The DFT along `axis` of x [..., C] (C = 1 real, 2 complex), the signal cut or zero-padded to
/// `length`: y[k] = sum_n x[n] e^(-+2 pi i n k / length) (divided by length when inverse), for
/// k < length, or k <= length / 2 when onesided. Returns [..., bins, ..., 2] in x's dtype.
ir::Value *dft(ImportContext &ctx, ir::Value *x, int64_t axis, int64_t length, bool inverse, bool onesided) {
  int64_t rank = x->rank();
  int64_t components = x->shape().back();
  if (components != 1 && components != 2)
    fail("the last dim must be 1 (real) or 2 (complex), got {}", shapeToString(x->shape()));
  if (length < 1)
    fail("the DFT length must be >= 1, got {}", length);
  // Move the signal axis just before the component dim.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  perm.push_back(rank - 1);
  ir::Value *v = permute(ctx, castTo(ctx, x, DType::F64), perm);
  int64_t given = x->shape()[axis];
  if (given > length)
    v = ctx.op(OpKind::Slice, {v},
               {{"starts", std::vector<int64_t>{0}},
                {"ends", std::vector<int64_t>{length}},
                {"axes", std::vector<int64_t>{rank - 2}},
                {"steps", std::vector<int64_t>{1}}});
  else if (given < length) {
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    pads[static_cast<size_t>(rank + rank - 2)] = length - given;
    v = ctx.op(OpKind::Pad, {v}, {{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}});
  }
  Shape vector(v->shape().begin(), v->shape().end() - 1);
  ir::Value *re = reshapeTo(ctx, sliceLast(ctx, v, 0, 1), vector);
  ir::Value *im = components == 2 ? reshapeTo(ctx, sliceLast(ctx, v, 1, 2), vector) : nullptr;
  int64_t bins = onesided ? length / 2 + 1 : length;
  ir::Value *cos = twiddles(ctx, length, bins, false), *sin = twiddles(ctx, length, bins, true);
  auto mm = [&](ir::Value *a, ir::Value *b) { return ctx.op(OpKind::MatMul, {a, b}); };
  // (re + i im)(cos -+ i sin): forward takes the minus sign, inverse the plus.
  ir::Value *yr = mm(re, cos), *reSin = mm(re, sin);
  ir::Value *yi = inverse ? reSin : ctx.op(OpKind::Neg, {reSin});
  if (im) {
    yr = ctx.op(inverse ? OpKind::Sub : OpKind::Add, {yr, mm(im, sin)});
    yi = ctx.op(OpKind::Add, {yi, mm(im, cos)});
  }
  if (inverse) {
    yr = ctx.op(OpKind::Div, {yr, ctx.scalarLike(yr, static_cast<double>(length))});
    yi = ctx.op(OpKind::Div, {yi, ctx.scalarLike(yi, static_cast<double>(length))});
  }
  Shape withComponent = yr->shape();
  withComponent.push_back(1);
  ir::Value *y = ctx.op(OpKind::Concat, {reshapeTo(ctx, yr, withComponent), reshapeTo(ctx, yi, withComponent)},
                        {{"axis", rank - 1}});
  std::vector<int64_t> back(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    back[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return castTo(ctx, permute(ctx, y, back), x->dtype());
}

int64_t staticInt(ImportContext &ctx, const onnx::NodeProto &node, int i, const std::string &what) {
  std::vector<int64_t> values = ctx.staticInts(node, i, what);
  if (values.size() != 1)
    fail("the {} (input {}) must hold one integer, got {}", what, i, shapeToString(values));
  return values[0];
}

} // namespace

std::vector<ir::Value *> mapDFT(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  OnnxAttrs attrs(node);
  if (x->rank() < 3)
    fail("input must be [batch, signal..., 1 or 2], got {}", shapeToString(x->shape()));
  int64_t axis = normalizeAxis(attrs.getInt("axis", 1), x->rank() - 1, "axis");
  if (axis == 0)
    fail("axis 0 is the batch dim; the DFT runs along a signal dim");
  bool inverse = attrs.getInt("inverse", 0) != 0, onesided = attrs.getInt("onesided", 0) != 0;
  if (inverse && onesided)
    fail("an inverse onesided DFT (complex to real) is not supported");
  int64_t length = ctx.hasInput(node, 1) ? staticInt(ctx, node, 1, "dft_length") : x->shape()[axis];
  return {dft(ctx, x, axis, length, inverse, onesided)};
}

// STFT: frames of frame_length every frame_step along the signal, times the window, each
// transformed: [batch, frames, bins, 2].
std::vector<ir::Value *> mapSTFT(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *signal = ctx.input(node, 0);
  if (signal->rank() != 3)
    fail("the signal must be [batch, length, 1 or 2], got {}", shapeToString(signal->shape()));
  int64_t step = staticInt(ctx, node, 1, "frame_step");
  ir::Value *window = ctx.hasInput(node, 2) ? ctx.input(node, 2) : nullptr;
  int64_t frameLength = ctx.hasInput(node, 3)           ? staticInt(ctx, node, 3, "frame_length")
                        : window && window->rank() == 1 ? window->shape()[0]
                                                        : -1;
  if (frameLength < 1 || step < 1 || (window && window->shape() != Shape{frameLength}))
    fail("needs frame_step >= 1 and a frame length >= 1 (from frame_length or the window) that the window has, "
         "got step {}, length {}",
         step, frameLength);
  int64_t length = signal->shape()[1];
  if (frameLength > length)
    fail("frame length {} exceeds the signal's {}", frameLength, length);
  int64_t frames = (length - frameLength) / step + 1;
  checkTableSize(frames, frameLength, "table of frame positions");
  Tensor positions(DType::I64, {frames, frameLength});
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < frameLength; ++j)
      positions.setInt(f * frameLength + j, f * step + j);
  ir::Value *framed = ctx.op(OpKind::Gather, {signal, ctx.constant(positions)}, {{"axis", int64_t{1}}});
  if (window)
    framed = ctx.op(OpKind::Mul, {framed, reshapeTo(ctx, castTo(ctx, window, signal->dtype()), {frameLength, 1})});
  return {dft(ctx, framed, 2, frameLength, false, OnnxAttrs(node).getInt("onesided", 1) != 0)};
}

// The triangular mel filters as ONNX's definition computes them: num_mel_bins + 2 points
// evenly spaced in mel between the edges, mapped to DFT bins by floor((dft_length + 1) * hz /
// sample_rate); filter i rises from point i to point i + 1 and falls to point i + 2.
std::vector<ir::Value *> mapMelWeightMatrix(ImportContext &ctx, const onnx::NodeProto &node) {
  int64_t mels = staticInt(ctx, node, 0, "num_mel_bins");
  int64_t dftLength = staticInt(ctx, node, 1, "dft_length");
  int64_t sampleRate = staticInt(ctx, node, 2, "sample_rate");
  float lowHz = static_cast<float>(ctx.staticScalar(node, 3, "lower_edge_hertz"));
  float highHz = static_cast<float>(ctx.staticScalar(node, 4, "upper_edge_hertz"));
  if (mels < 1 || dftLength < 1 || sampleRate < 1 || mels > (1 << 16) || dftLength > (1 << 24))
    fail("num_mel_bins {}, dft_length {} and sample_rate {} must be positive (and of a sane size)", mels, dftLength,
         sampleRate);
  // The mel edges in float, as the definition's float32 operands compute them.
  float lowMel = 2595.0f * std::log10(1.0f + lowHz / 700.0f);
  float highMel = 2595.0f * std::log10(1.0f + highHz / 700.0f);
  float melStep = (highMel - lowMel) / static_cast<float>(mels + 2);
  int64_t spectrogramBins = dftLength / 2 + 1;
  checkTableSize(spectrogramBins, mels, "mel weight matrix");
  std::vector<int64_t> points;
  for (int64_t i = 0; i < mels + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * melStep + lowMel) / 2595) - 1);
    double bin = std::floor(static_cast<double>(dftLength + 1) * hz / double(sampleRate));
    // Edges below -700 Hz, infinite or NaN give no bin; converting those would be undefined.
    if (!(bin >= -1e15 && bin <= 1e15))
      fail("the mel edges [{}, {}] Hz give no DFT bin for point {}", lowHz, highHz, i);
    points.push_back(static_cast<int64_t>(bin));
  }
  OnnxAttrs attrs(node);
  DType dtype = kilnDType(attrs.getInt("output_datatype", onnx::TensorProto::FLOAT), "the output dtype");
  Tensor weights(dtype, {spectrogramBins, mels});
  auto set = [&](int64_t bin, int64_t mel, double value) {
    if (bin < 0 || bin >= spectrogramBins)
      fail("mel filter {} reaches DFT bin {}, outside [0, {})", mel, bin, spectrogramBins);
    weights.setDouble(bin * mels + mel, value);
  };
  for (int64_t i = 0; i < mels; ++i) {
    int64_t low = points[i], center = points[i + 1], high = points[i + 2];
    if (center == low)
      set(center, i, 1);
    else
      for (int64_t j = low; j <= center; ++j)
        set(j, i, double(j - low) / double(center - low));
    for (int64_t j = center; j < high; ++j)
      set(j, i, double(high - j) / double(high - center));
  }
  return {ctx.constant(weights)};
}

} // namespace kiln::frontend
