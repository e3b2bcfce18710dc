// Contractions: matmul (numpy semantics), convolution (ONNX Conv without auto_pad or bias) and
// conv_transpose (ONNX ConvTranspose without auto_pad, output_shape or bias: the importer turns
// those into explicit pads and a separate add). Pooling, the other windowed family, lives in
// Pooling.cpp.
//
// Each op derives every shape fact from one function (matMulShapes, convGeometry,
// convTransposeGeometry) that inference and evaluation share, so the evaluator can never disagree
// with the types it was promised.
// Floats contract in double through Eigen's blocked product (ir/ops/MatrixProduct.h): matmul one
// product per batch matrix, conv one per image and group of the weights with the input unfolded
// (im2col), conv_transpose one of the transposed weights with the input, folded back into the
// output (col2im). ResNet-50 and BERT-base run through them. Integer matmul keeps its own loop in
// uint64 with wrap-around, which is what int64 arithmetic means without the undefined behaviour
// of signed overflow.
#include <algorithm>

#include "ir/ops/Convolve.h"
#include "ir/ops/MatrixProduct.h"
#include "ir/ops/Window.h"

namespace kiln::ir {

using namespace ops;

namespace {

// ---------------------------------------------------------------------------------------------
// matmul

struct MatMulShapes {
  Shape aBatch, bBatch, batch; // operand batch dims and their broadcast
  int64_t rows = 0, inner = 0, cols = 0;
  Shape out;
};

MatMulShapes matMulShapes(const TensorType &a, const TensorType &b) {
  if (a.rank() == 0 || b.rank() == 0)
    fail("operands must have rank >= 1, got {} and {}", shapeToString(a.shape), shapeToString(b.shape));
  // numpy: a 1-D left operand is a row vector, a 1-D right operand a column vector; the added
  // dim is removed from the result again.
  Shape as = a.rank() == 1 ? Shape{1, a.shape[0]} : a.shape;
  Shape bs = b.rank() == 1 ? Shape{b.shape[0], 1} : b.shape;
  MatMulShapes s;
  s.rows = as[as.size() - 2];
  s.inner = as.back();
  s.cols = bs.back();
  if (bs[bs.size() - 2] != s.inner)
    fail("inner dimensions differ: {} has {} columns but {} has {} rows", shapeToString(a.shape),
         dimToString(s.inner), shapeToString(b.shape), dimToString(bs[bs.size() - 2]));
  s.aBatch.assign(as.begin(), as.end() - 2);
  s.bBatch.assign(bs.begin(), bs.end() - 2);
  try {
    s.batch = broadcastShapes(s.aBatch, s.bBatch);
  } catch (const Error &) {
    fail("batch dimensions of {} and {} cannot be broadcast together", shapeToString(a.shape),
         shapeToString(b.shape));
  }
  s.out = s.batch;
  if (a.rank() > 1)
    s.out.push_back(s.rows);
  if (b.rank() > 1)
    s.out.push_back(s.cols);
  return s;
}

std::vector<TensorType> inferMatMul(const std::vector<TensorType> &in, const AttrMap &) {
  DType dtype = commonDType(in);
  if (dtype == DType::Bool)
    fail("needs float or integer operands, got bool");
  return {TensorType{dtype, matMulShapes(in[0], in[1]).out}};
}

// Every matrix of the broadcast batch: body(aMatrix, bMatrix, outMatrix), the operands' and the
// result's offsets in elements.
template <typename Body> void forEachBatchMatrix(const MatMulShapes &s, Body body) {
  int64_t aMatrix = s.rows * s.inner, bMatrix = s.inner * s.cols, outMatrix = s.rows * s.cols;
  forEachIndex(s.batch, [&](const std::vector<int64_t> &index, int64_t flat) {
    body(broadcastSourceIndex(index, s.aBatch) * aMatrix, broadcastSourceIndex(index, s.bBatch) * bMatrix,
         flat * outMatrix);
  });
}

std::vector<double> matMulDoubles(const MatMulShapes &s, const std::vector<double> &a, const std::vector<double> &b) {
  std::vector<double> out(static_cast<size_t>(numElements(s.batch) * s.rows * s.cols), 0.0);
  forEachBatchMatrix(s, [&](int64_t aAt, int64_t bAt, int64_t outAt) {
    multiplyMatrices({a.data() + aAt, s.rows, s.inner, s.inner}, false, {b.data() + bAt, s.inner, s.cols, s.cols},
                     out.data() + outAt, s.cols);
  });
  return out;
}

// Integers wrap (uint64_t). i-k-j order keeps the innermost loop contiguous in b and out.
std::vector<uint64_t> matMulWrapping(const MatMulShapes &s, const std::vector<uint64_t> &a,
                                     const std::vector<uint64_t> &b) {
  std::vector<uint64_t> out(static_cast<size_t>(numElements(s.batch) * s.rows * s.cols), 0);
  forEachBatchMatrix(s, [&](int64_t aAt, int64_t bAt, int64_t outAt) {
    for (int64_t i = 0; i < s.rows; ++i) {
      uint64_t *outRow = out.data() + outAt + i * s.cols;
      for (int64_t k = 0; k < s.inner; ++k) {
        uint64_t aik = a[static_cast<size_t>(aAt + i * s.inner + k)];
        const uint64_t *bRow = b.data() + bAt + k * s.cols;
        for (int64_t j = 0; j < s.cols; ++j)
          outRow[j] += aik * bRow[j];
      }
    }
  });
  return out;
}

std::vector<uint64_t> toWrappingInts(const Tensor &t) {
  std::vector<uint64_t> out(static_cast<size_t>(t.numElements()));
  for (int64_t i = 0; i < t.numElements(); ++i)
    out[static_cast<size_t>(i)] = static_cast<uint64_t>(t.getInt(i));
  return out;
}

std::vector<Tensor> evalMatMul(const std::vector<Tensor> &in, const AttrMap &,
                               const std::vector<TensorType> &outTypes) {
  MatMulShapes s = matMulShapes(in[0].type(), in[1].type());
  Tensor out(outTypes[0]);
  if (isFloat(out.dtype())) {
    std::vector<double> values = matMulDoubles(s, in[0].toDoubles(), in[1].toDoubles());
    for (size_t i = 0; i < values.size(); ++i)
      out.setDouble(static_cast<int64_t>(i), values[i]);
  } else {
    std::vector<uint64_t> values = matMulWrapping(s, toWrappingInts(in[0]), toWrappingInts(in[1]));
    for (size_t i = 0; i < values.size(); ++i)
      out.setInt(static_cast<int64_t>(i), static_cast<int64_t>(values[i]));
  }
  return {out};
}

// ---------------------------------------------------------------------------------------------
// conv and conv_transpose
//
// conv gathers: output position o reads input o*stride + k*dilation - padBegin for kernel tap k.
// conv_transpose scatters: input position i and kernel tap k feed output
//   o = i*stride + k*dilation - padBegin,
// kept when 0 <= o < out, where
//   out = stride*(in - 1) + output_padding + (kernel - 1)*dilation + 1 - padBegin - padEnd.
// Its weight is [C, Cout/groups, kernel...]: the same tensor a conv from Cout to C channels uses,
// and conv_transpose is exactly that conv's gradient with respect to its input (the adjoint:
// <conv(x, w), dy> == <x, conv_transpose(dy, w)> with equal attributes and output_padding making
// up the sizes a strided conv rounds away).

struct ConvGeometry {
  int64_t batch = 0, inChannels = 0, outChannels = 0, groups = 1;
  // Per spatial dim, lifted to kMaxWindowSpatial dims: the added leading dims have size 1,
  // kernel 1, stride 1 and no padding.
  int64_t in[kMaxWindowSpatial] = {1, 1, 1}, kernel[kMaxWindowSpatial] = {1, 1, 1};
  int64_t out[kMaxWindowSpatial] = {1, 1, 1}, stride[kMaxWindowSpatial] = {1, 1, 1};
  int64_t dilation[kMaxWindowSpatial] = {1, 1, 1}, padBegin[kMaxWindowSpatial] = {0, 0, 0};
  Shape outShape;

  int64_t inPlane() const { return in[0] * in[1] * in[2]; }
  int64_t outPlane() const { return out[0] * out[1] * out[2]; }
  int64_t kernelSize() const { return kernel[0] * kernel[1] * kernel[2]; }
  int64_t inPerGroup() const { return inChannels / groups; }
  int64_t outPerGroup() const { return outChannels / groups; }
};
static_assert(kMaxWindowSpatial == 3, "ConvGeometry's initialisers list one value per lifted dim");

// The checks both ops start with: an [N, C, spatial...] input, a weight of the same rank laid out
// as `weightLayout`, and groups >= 1.
ConvGeometry startConvGeometry(const TensorType &x, const TensorType &w, const AttrMap &attrs,
                               const char *weightLayout) {
  if (x.rank() < 3 || x.rank() > 2 + kMaxWindowSpatial)
    fail("input must be [N, C, spatial...] with 1 to 3 spatial dims, got {}", shapeToString(x.shape));
  if (w.rank() != x.rank())
    fail("weight {} must have the input's rank {} ({})", shapeToString(w.shape), x.rank(), weightLayout);
  // Only the batch may be symbolic: channels, spatial dims and the weight fix the geometry.
  requireStaticShape(w.shape, "the convolution's weight");
  for (size_t d = 1; d < x.shape.size(); ++d)
    requireStaticDim(x.shape, d, "the convolution's input");
  ConvGeometry g;
  g.batch = x.shape[0];
  g.inChannels = x.shape[1];
  g.groups = attrInt(attrs, "groups");
  if (g.groups < 1)
    fail("'groups' must be >= 1, got {}", g.groups);
  return g;
}

// Fills the lifted per-dim geometry from the input and kernel sizes and the attributes both ops
// read; outputSize(d, in, kernel) is the op's own rule for the output size of spatial dim d.
template <typename OutputSize>
void setSpatialDims(ConvGeometry &g, const TensorType &x, const TensorType &w,
                    const std::vector<int64_t> &strides, const std::vector<int64_t> &dilations,
                    const std::vector<int64_t> &pads, OutputSize outputSize) {
  int64_t spatialRank = x.rank() - 2, lifted = kMaxWindowSpatial - spatialRank;
  g.outShape = {g.batch, g.outChannels};
  for (int64_t d = 0; d < spatialRank; ++d) {
    int64_t in = x.shape[2 + d], k = w.shape[2 + d];
    if (k < 1)
      fail("weight {} has an empty kernel dim", shapeToString(w.shape));
    int64_t out = outputSize(d, in, k);
    int64_t l = lifted + d;
    g.in[l] = in;
    g.kernel[l] = k;
    g.out[l] = out;
    g.stride[l] = strides[d];
    g.padBegin[l] = pads[d];
    g.dilation[l] = dilations[d];
    g.outShape.push_back(out);
  }
}

ConvGeometry convGeometry(const TensorType &x, const TensorType &w, const AttrMap &attrs) {
  ConvGeometry g = startConvGeometry(x, w, attrs, "[Cout, C/groups, kernel...]");
  int64_t spatialRank = x.rank() - 2;
  g.outChannels = w.shape[0];
  if (g.inChannels % g.groups != 0 || g.outChannels % g.groups != 0)
    fail("groups {} must divide both the input channels {} and the output channels {}", g.groups,
         g.inChannels, g.outChannels);
  if (w.shape[1] != g.inChannels / g.groups)
    fail("weight {} must have C/groups = {} input channels (input {}, groups {})", shapeToString(w.shape),
         g.inChannels / g.groups, shapeToString(x.shape), g.groups);
  std::vector<int64_t> strides = perSpatialDim(attrs, "strides", spatialRank, 1, 1);
  std::vector<int64_t> dilations = perSpatialDim(attrs, "dilations", spatialRank, 1, 1);
  std::vector<int64_t> pads = spatialPads(attrs, spatialRank);
  setSpatialDims(g, x, w, strides, dilations, pads, [&](int64_t d, int64_t in, int64_t k) {
    int64_t padded = checkedAdd(in, pads[d], "padded input size");
    padded = checkedAdd(padded, pads[spatialRank + d], "padded input size");
    int64_t span = dilatedSpan(k, dilations[d]);
    // Floor division; padded - span may be negative, which C++ would round toward zero.
    int64_t excess = padded - span;
    int64_t out = excess < 0 ? 0 : excess / strides[d] + 1;
    if (out < 1)
      fail("spatial dim {}: output size would be < 1 (input {} padded to {}, dilated kernel {})", d, in,
           padded, span);
    return out;
  });
  return g;
}

ConvGeometry convTransposeGeometry(const TensorType &x, const TensorType &w, const AttrMap &attrs) {
  ConvGeometry g = startConvGeometry(x, w, attrs, "[C, Cout/groups, kernel...]");
  int64_t spatialRank = x.rank() - 2;
  if (w.shape[0] != g.inChannels)
    fail("weight {} must have {} rows, one per input channel of {} ([C, Cout/groups, kernel...])",
         shapeToString(w.shape), g.inChannels, shapeToString(x.shape));
  if (g.inChannels % g.groups != 0)
    fail("groups {} must divide the input channels {}", g.groups, g.inChannels);
  g.outChannels = checkedMul(w.shape[1], g.groups, "output channels");
  std::vector<int64_t> strides = perSpatialDim(attrs, "strides", spatialRank, 1, 1);
  std::vector<int64_t> dilations = perSpatialDim(attrs, "dilations", spatialRank, 1, 1);
  std::vector<int64_t> outputPadding = perSpatialDim(attrs, "output_padding", spatialRank, 0, 0);
  std::vector<int64_t> pads = spatialPads(attrs, spatialRank);
  setSpatialDims(g, x, w, strides, dilations, pads, [&](int64_t d, int64_t in, int64_t k) {
    int64_t span = dilatedSpan(k, dilations[d]);
    int64_t full = checkedMul(strides[d], in - 1, "output size");
    full = checkedAdd(checkedAdd(full, outputPadding[d], "output size"), span, "output size");
    int64_t out = checkedSub(checkedSub(full, pads[d], "output size"), pads[spatialRank + d], "output size");
    if (out < 1)
      fail("spatial dim {}: output size would be {} (input {}, stride {}, output_padding {}, dilated "
           "kernel {}, pads {}+{})",
           d, out, in, strides[d], outputPadding[d], span, pads[d], pads[spatialRank + d]);
    return out;
  });
  checkShapeWithinLimit(g.outShape, "shape"); // rejects an output too large to count
  return g;
}

template <ConvGeometry (*geometry)(const TensorType &, const TensorType &, const AttrMap &)>
std::vector<TensorType> inferConvFamily(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = commonDType(in);
  if (!isFloat(dtype))
    fail("needs floating-point operands, got {}", dtypeName(dtype));
  return {TensorType{dtype, geometry(in[0], in[1], attrs).outShape}};
}

// Both ops as matrix products over the taps: with K = the kernel's taps and rows of the lifted
// spatial dims (d, h) cut into bands,
//   conv:           Y_g (Cout/groups x positions) = W_g (Cout/groups x C/groups*K) * unfold(X_g)
//   conv_transpose: columns (Cout/groups*K x positions) = W_g^T * X_g, folded into Y_g
// where unfold (im2col) writes, for every (input channel, tap) row and output position, the
// input value that position reads through that tap (zero where it reads padding), and fold
// (col2im) adds every (output channel, tap) row into the output positions the input positions
// reach through that tap. The unfolded matrix is built a band of rows at a time, within
// kUnfoldedDoubles.
constexpr int64_t kUnfoldedDoubles = int64_t{1} << 22; // 32 MiB

/// Rows of the lifted spatial dims (d, h), of which a band of at most kUnfoldedDoubles /
/// (taps rows x row length) is unfolded at a time, at least one.
int64_t bandRows(int64_t matrixRows, int64_t rowLength) {
  return std::max<int64_t>(1, kUnfoldedDoubles / std::max<int64_t>(1, matrixRows * rowLength));
}

/// Calls tap(row, offD, offH, offW) for each tap of the kernel, row = its index in the kernel
/// (d, h, w order), off* the position it adds to the strided side's coordinate.
template <typename Tap> void forEachTap(const ConvGeometry &g, Tap tap) {
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw)
        tap((kd * g.kernel[1] + kh) * g.kernel[2] + kw, kd * g.dilation[0] - g.padBegin[0],
            kh * g.dilation[1] - g.padBegin[1], kw * g.dilation[2] - g.padBegin[2]);
}

/// conv's unfolded input for output rows [row0, row1) (row = d * out[1] + h) of one image and
/// group: row (c * K + tap) holds, at column (row - row0) * out[2] + w, the input value output
/// (d, h, w) reads through that tap of input channel c, or zero.
void unfoldInput(const ConvGeometry &g, const double *xGroup, int64_t row0, int64_t row1, double *unfolded) {
  const int64_t width = (row1 - row0) * g.out[2];
  for (int64_t c = 0; c < g.inPerGroup(); ++c) {
    const double *xPlane = xGroup + c * g.inPlane();
    forEachTap(g, [&](int64_t tap, int64_t offD, int64_t offH, int64_t offW) {
      double *dst = unfolded + (c * g.kernelSize() + tap) * width;
      auto [w0, w1] = stridedRange(offW, g.stride[2], g.in[2], g.out[2]);
      for (int64_t row = row0; row < row1; ++row, dst += g.out[2]) {
        int64_t sd = row / g.out[1] * g.stride[0] + offD, sh = row % g.out[1] * g.stride[1] + offH;
        if (sd < 0 || sd >= g.in[0] || sh < 0 || sh >= g.in[1]) {
          std::fill(dst, dst + g.out[2], 0.0);
          continue;
        }
        const double *xRow = xPlane + (sd * g.in[1] + sh) * g.in[2];
        std::fill(dst, dst + w0, 0.0);
        for (int64_t ow = w0; ow < w1; ++ow)
          dst[ow] = xRow[ow * g.stride[2] + offW];
        std::fill(dst + w1, dst + g.out[2], 0.0);
      }
    });
  }
}

/// conv_transpose's fold for input rows [row0, row1) (row = d * in[1] + h) of one image and
/// group: adds row (m * K + tap) of `columns`, column (row - row0) * in[2] + w, to output channel
/// m at the position input (d, h, w) reaches through that tap, where it lies inside the output.
void foldColumns(const ConvGeometry &g, const double *columns, int64_t row0, int64_t row1, double *yGroup) {
  const int64_t width = (row1 - row0) * g.in[2];
  for (int64_t m = 0; m < g.outPerGroup(); ++m) {
    double *yPlane = yGroup + m * g.outPlane();
    forEachTap(g, [&](int64_t tap, int64_t offD, int64_t offH, int64_t offW) {
      const double *src = columns + (m * g.kernelSize() + tap) * width;
      auto [w0, w1] = stridedRange(offW, g.stride[2], g.out[2], g.in[2]);
      for (int64_t row = row0; row < row1; ++row, src += g.in[2]) {
        int64_t sd = row / g.in[1] * g.stride[0] + offD, sh = row % g.in[1] * g.stride[1] + offH;
        if (sd < 0 || sd >= g.out[0] || sh < 0 || sh >= g.out[1])
          continue;
        double *yRow = yPlane + (sd * g.out[1] + sh) * g.out[2];
        for (int64_t iw = w0; iw < w1; ++iw)
          yRow[iw * g.stride[2] + offW] += src[iw];
      }
    });
  }
}

std::vector<Tensor> evalConv(const std::vector<Tensor> &in, const AttrMap &attrs,
                             const std::vector<TensorType> &outTypes) {
  return {Tensor::fromDoubles(outTypes[0].dtype, outTypes[0].shape,
                              convolve(in[0].type(), in[0].toDoubles(), in[1].type(), in[1].toDoubles(), attrs))};
}

std::vector<Tensor> evalConvTranspose(const std::vector<Tensor> &in, const AttrMap &attrs,
                                      const std::vector<TensorType> &outTypes) {
  ConvGeometry g = convTransposeGeometry(in[0].type(), in[1].type(), attrs);
  std::vector<double> x = in[0].toDoubles(), w = in[1].toDoubles();
  const int64_t depth = g.outPerGroup() * g.kernelSize(), inRows = g.in[0] * g.in[1];
  const int64_t band = std::min(inRows, bandRows(depth, g.in[2]));
  std::vector<double> y(static_cast<size_t>(numElements(outTypes[0].shape)), 0.0);
  std::vector<double> columns(static_cast<size_t>(depth * band * g.in[2]));
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t group = 0; group < g.groups; ++group) {
      const double *xGroup = x.data() + (n * g.inChannels + group * g.inPerGroup()) * g.inPlane();
      // [C/groups rows of this group, Cout/groups * K], read transposed.
      const DoubleMatrix weights{w.data() + group * g.inPerGroup() * depth, g.inPerGroup(), depth, depth};
      double *yGroup = y.data() + (n * g.outChannels + group * g.outPerGroup()) * g.outPlane();
      for (int64_t row0 = 0; row0 < inRows; row0 += band) {
        const int64_t row1 = std::min(inRows, row0 + band), width = (row1 - row0) * g.in[2];
        multiplyMatrices(weights, true, {xGroup + row0 * g.in[2], g.inPerGroup(), width, g.inPlane()},
                         columns.data(), width);
        foldColumns(g, columns.data(), row0, row1, yGroup);
      }
    }
  return {Tensor::fromDoubles(outTypes[0].dtype, outTypes[0].shape, y)};
}

} // namespace

Shape convOutputShape(const TensorType &x, const TensorType &w, const AttrMap &attrs) {
  return convGeometry(x, w, attrs).outShape;
}

std::vector<double> convolve(const TensorType &xType, const std::vector<double> &x, const TensorType &wType,
                             const std::vector<double> &w, const AttrMap &attrs) {
  ConvGeometry g = convGeometry(xType, wType, attrs);
  const int64_t depth = g.inPerGroup() * g.kernelSize(), outRows = g.out[0] * g.out[1];
  const int64_t band = std::min(outRows, bandRows(depth, g.out[2]));
  std::vector<double> y(static_cast<size_t>(g.batch * g.outChannels * g.outPlane()), 0.0);
  std::vector<double> unfolded(static_cast<size_t>(depth * band * g.out[2]));
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t group = 0; group < g.groups; ++group) {
      const double *xGroup = x.data() + (n * g.inChannels + group * g.inPerGroup()) * g.inPlane();
      const DoubleMatrix weights{w.data() + group * g.outPerGroup() * depth, g.outPerGroup(), depth, depth};
      double *yGroup = y.data() + (n * g.outChannels + group * g.outPerGroup()) * g.outPlane();
      for (int64_t row0 = 0; row0 < outRows; row0 += band) {
        const int64_t row1 = std::min(outRows, row0 + band), width = (row1 - row0) * g.out[2];
        unfoldInput(g, xGroup, row0, row1, unfolded.data());
        multiplyMatrices(weights, false, {unfolded.data(), depth, width, width}, yGroup + row0 * g.out[2],
                         g.outPlane());
      }
    }
  return y;
}


OpDef defineMatMul() {
  OpDef def;
  def.infer = inferMatMul;
  def.eval = evalMatMul;
  return def;
}

OpDef defineConv() {
  OpDef def;
  def.attrs = {intsAttr("strides", std::vector<int64_t>{}), intsAttr("pads", std::vector<int64_t>{}),
               intsAttr("dilations", std::vector<int64_t>{}), intAttr("groups", 1)};
  def.infer = inferConvFamily<convGeometry>;
  def.eval = evalConv;
  return def;
}

OpDef defineConvTranspose() {
  OpDef def;
  def.attrs = {intsAttr("strides", std::vector<int64_t>{}), intsAttr("pads", std::vector<int64_t>{}),
               intsAttr("dilations", std::vector<int64_t>{}),
               intsAttr("output_padding", std::vector<int64_t>{}), intAttr("groups", 1)};
  def.infer = inferConvFamily<convTransposeGeometry>;
  def.eval = evalConvTranspose;
  return def;
}

} // namespace kiln::ir
