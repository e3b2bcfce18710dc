// Contractions: matmul (numpy semantics), convolution (ONNX Conv without auto_pad or bias) and
// conv_transpose (ONNX ConvTranspose without auto_pad, output_shape or bias: the importer turns
// those into explicit pads and a separate add). Pooling, the other windowed family, lives in
// Pooling.cpp.
//
// Each op derives every shape fact from one function (matMulShapes, convGeometry,
// convTransposeGeometry) that inference and evaluation share, so the evaluator can never disagree
// with the types it was promised.
// The reference loops accumulate in double (uint64 with wrap-around for integers, which is what
// int64 arithmetic means without the undefined behaviour of signed overflow) and keep the
// innermost loop contiguous: ResNet-50 and BERT-base run through them.
#include <algorithm>

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
    fail("inner dimensions differ: {} has {} columns but {} has {} rows", shapeToString(a.shape), s.inner,
         shapeToString(b.shape), bs[bs.size() - 2]);
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

// One loop nest for both element kinds: T is double for floats and uint64_t (wrapping) for
// integers. i-k-j order keeps the innermost loop contiguous in b and out.
template <typename T>
std::vector<T> matMulLoops(const MatMulShapes &s, const std::vector<T> &a, const std::vector<T> &b) {
  int64_t aMatrix = s.rows * s.inner, bMatrix = s.inner * s.cols, outMatrix = s.rows * s.cols;
  std::vector<T> out(static_cast<size_t>(numElements(s.batch) * outMatrix), T(0));
  forEachIndex(s.batch, [&](const std::vector<int64_t> &index, int64_t flat) {
    const T *aBase = a.data() + broadcastSourceIndex(index, s.aBatch) * aMatrix;
    const T *bBase = b.data() + broadcastSourceIndex(index, s.bBatch) * bMatrix;
    T *outBase = out.data() + flat * outMatrix;
    for (int64_t i = 0; i < s.rows; ++i) {
      T *outRow = outBase + i * s.cols;
      for (int64_t k = 0; k < s.inner; ++k) {
        T aik = aBase[i * s.inner + k];
        const T *bRow = bBase + k * s.cols;
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
    std::vector<double> values = matMulLoops(s, in[0].toDoubles(), in[1].toDoubles());
    for (size_t i = 0; i < values.size(); ++i)
      out.setDouble(static_cast<int64_t>(i), values[i]);
  } else {
    std::vector<uint64_t> values = matMulLoops(s, toWrappingInts(in[0]), toWrappingInts(in[1]));
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
  numElements(g.outShape); // rejects an output too large to count
  return g;
}

template <ConvGeometry (*geometry)(const TensorType &, const TensorType &, const AttrMap &)>
std::vector<TensorType> inferConvFamily(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = commonDType(in);
  if (!isFloat(dtype))
    fail("needs floating-point operands, got {}", dtypeName(dtype));
  return {TensorType{dtype, geometry(in[0], in[1], attrs).outShape}};
}

// Adds one weight kernel's contribution between an input plane and an output plane, tap by tap.
// conv gathers (output o reads input o*stride + offset); conv_transpose scatters (input i feeds
// output i*stride + offset), the same loop nest with the roles of input and output swapped, so it
// costs the same. Either way the loops run over the positions p of the side that is not strided,
// whose valid range stridedRange computes once per tap, and the innermost loop is contiguous in
// that side.
template <bool scatter>
void accumulateKernel(const ConvGeometry &g, const double *xPlane, const double *wKernel, double *yPlane) {
  const int64_t *dense = scatter ? g.in : g.out, *strided = scatter ? g.out : g.in;
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        double weight = wKernel[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
        int64_t offD = kd * g.dilation[0] - g.padBegin[0];
        int64_t offH = kh * g.dilation[1] - g.padBegin[1];
        int64_t offW = kw * g.dilation[2] - g.padBegin[2];
        auto [d0, d1] = stridedRange(offD, g.stride[0], strided[0], dense[0]);
        auto [h0, h1] = stridedRange(offH, g.stride[1], strided[1], dense[1]);
        auto [w0, w1] = stridedRange(offW, g.stride[2], strided[2], dense[2]);
        for (int64_t pd = d0; pd < d1; ++pd) {
          int64_t sd = pd * g.stride[0] + offD; // the strided side's position
          for (int64_t ph = h0; ph < h1; ++ph) {
            int64_t sh = ph * g.stride[1] + offH;
            if constexpr (scatter) {
              const double *xRow = xPlane + (pd * g.in[1] + ph) * g.in[2];
              double *yRow = yPlane + (sd * g.out[1] + sh) * g.out[2];
              for (int64_t pw = w0; pw < w1; ++pw)
                yRow[pw * g.stride[2] + offW] += weight * xRow[pw];
            } else {
              const double *xRow = xPlane + (sd * g.in[1] + sh) * g.in[2];
              double *yRow = yPlane + (pd * g.out[1] + ph) * g.out[2];
              for (int64_t pw = w0; pw < w1; ++pw)
                yRow[pw] += weight * xRow[pw * g.stride[2] + offW];
            }
          }
        }
      }
    }
  }
}

std::vector<Tensor> evalConv(const std::vector<Tensor> &in, const AttrMap &attrs,
                             const std::vector<TensorType> &outTypes) {
  ConvGeometry g = convGeometry(in[0].type(), in[1].type(), attrs);
  std::vector<double> x = in[0].toDoubles(), w = in[1].toDoubles();
  int64_t inPerGroup = g.inPerGroup(), outPerGroup = g.outPerGroup();
  std::vector<double> y(static_cast<size_t>(g.batch * g.outChannels * g.outPlane()), 0.0);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t co = 0; co < g.outChannels; ++co) {
      int64_t group = co / outPerGroup;
      double *yPlane = y.data() + (n * g.outChannels + co) * g.outPlane();
      for (int64_t ci = 0; ci < inPerGroup; ++ci) {
        const double *xPlane = x.data() + (n * g.inChannels + group * inPerGroup + ci) * g.inPlane();
        accumulateKernel<false>(g, xPlane, w.data() + (co * inPerGroup + ci) * g.kernelSize(), yPlane);
      }
    }
  }
  return {Tensor::fromDoubles(outTypes[0].dtype, outTypes[0].shape, y)};
}

std::vector<Tensor> evalConvTranspose(const std::vector<Tensor> &in, const AttrMap &attrs,
                                      const std::vector<TensorType> &outTypes) {
  ConvGeometry g = convTransposeGeometry(in[0].type(), in[1].type(), attrs);
  std::vector<double> x = in[0].toDoubles(), w = in[1].toDoubles();
  int64_t inPerGroup = g.inPerGroup(), outPerGroup = g.outPerGroup();
  std::vector<double> y(static_cast<size_t>(numElements(outTypes[0].shape)), 0.0);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t ci = 0; ci < g.inChannels; ++ci) {
      int64_t group = ci / inPerGroup;
      const double *xPlane = x.data() + (n * g.inChannels + ci) * g.inPlane();
      for (int64_t m = 0; m < outPerGroup; ++m) {
        double *yPlane = y.data() + (n * g.outChannels + group * outPerGroup + m) * g.outPlane();
        accumulateKernel<true>(g, xPlane, w.data() + (ci * outPerGroup + m) * g.kernelSize(), yPlane);
      }
    }
  }
  return {Tensor::fromDoubles(outTypes[0].dtype, outTypes[0].shape, y)};
}

} // namespace

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
