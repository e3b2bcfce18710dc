// Contractions: matmul (numpy semantics) and convolution (ONNX Conv without auto_pad or bias).
// Pooling, the other windowed family, lives in Pooling.cpp.
//
// Both ops derive every shape fact from one function (matMulShapes, convGeometry) that inference
// and evaluation share, so the evaluator can never disagree with the types it was promised.
// The reference loops accumulate in double (uint64 with wrap-around for integers, which is what
// int64 arithmetic means without the undefined behaviour of signed overflow) and keep the
// innermost loop contiguous: ResNet-50 and BERT-base run through them.
#include <algorithm>

#include "ir/ops/Common.h"

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
// conv

// The evaluator lifts 1-D and 2-D convolutions to 3-D by prepending spatial dims of size 1
// (kernel 1, stride 1, no padding), so one loop nest serves every rank.
constexpr int kMaxSpatial = 3;

struct ConvGeometry {
  int64_t batch = 0, inChannels = 0, outChannels = 0, groups = 1;
  // Per spatial dim, lifted to kMaxSpatial dims (leading dims are the added size-1 ones).
  int64_t in[kMaxSpatial], kernel[kMaxSpatial], out[kMaxSpatial];
  int64_t stride[kMaxSpatial], padBegin[kMaxSpatial], dilation[kMaxSpatial];
  Shape outShape;
};

// Window sizes come from user attributes: overflow is a user error, not undefined behaviour.
int64_t checkedAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum))
    fail("window arithmetic overflows int64 ({} + {})", a, b);
  return sum;
}

int64_t checkedMul(int64_t a, int64_t b) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product))
    fail("window arithmetic overflows int64 ({} * {})", a, b);
  return product;
}

// Reads an ints attribute with one entry per spatial dim; empty means `fallback` everywhere.
std::vector<int64_t> perSpatialDim(const AttrMap &attrs, const std::string &name, int64_t spatialRank,
                                   int64_t fallback, int64_t minValue) {
  std::vector<int64_t> values = attrInts(attrs, name);
  if (values.empty())
    values.assign(static_cast<size_t>(spatialRank), fallback);
  if (static_cast<int64_t>(values.size()) != spatialRank)
    fail("'{}' needs {} values (one per spatial dim), got {}", name, spatialRank, values.size());
  for (int64_t v : values)
    if (v < minValue)
      fail("'{}' values must be >= {}, got {}", name, minValue, shapeToString(values));
  return values;
}

ConvGeometry convGeometry(const TensorType &x, const TensorType &w, const AttrMap &attrs) {
  if (x.rank() < 3 || x.rank() > 2 + kMaxSpatial)
    fail("input must be [N, C, spatial...] with 1 to 3 spatial dims, got {}", shapeToString(x.shape));
  if (w.rank() != x.rank())
    fail("weight {} must have the input's rank {} ([Cout, C/groups, kernel...])", shapeToString(w.shape),
         x.rank());
  int64_t spatialRank = x.rank() - 2;
  ConvGeometry g;
  g.batch = x.shape[0];
  g.inChannels = x.shape[1];
  g.outChannels = w.shape[0];
  g.groups = attrInt(attrs, "groups");
  if (g.groups < 1)
    fail("'groups' must be >= 1, got {}", g.groups);
  if (g.inChannels % g.groups != 0 || g.outChannels % g.groups != 0)
    fail("groups {} must divide both the input channels {} and the output channels {}", g.groups,
         g.inChannels, g.outChannels);
  if (w.shape[1] != g.inChannels / g.groups)
    fail("weight {} must have C/groups = {} input channels (input {}, groups {})", shapeToString(w.shape),
         g.inChannels / g.groups, shapeToString(x.shape), g.groups);
  std::vector<int64_t> strides = perSpatialDim(attrs, "strides", spatialRank, 1, 1);
  std::vector<int64_t> dilations = perSpatialDim(attrs, "dilations", spatialRank, 1, 1);
  std::vector<int64_t> pads = attrInts(attrs, "pads");
  if (pads.empty())
    pads.assign(static_cast<size_t>(2 * spatialRank), 0);
  if (static_cast<int64_t>(pads.size()) != 2 * spatialRank)
    fail("'pads' needs {} values ([begin..., end...]), got {}", 2 * spatialRank, pads.size());
  for (int64_t p : pads)
    if (p < 0)
      fail("'pads' values must be >= 0, got {}", shapeToString(pads));

  g.outShape = {g.batch, g.outChannels};
  int64_t lifted = kMaxSpatial - spatialRank;
  for (int d = 0; d < kMaxSpatial; ++d) {
    g.in[d] = g.kernel[d] = g.out[d] = g.stride[d] = g.dilation[d] = 1;
    g.padBegin[d] = 0;
  }
  for (int64_t d = 0; d < spatialRank; ++d) {
    int64_t in = x.shape[2 + d], k = w.shape[2 + d];
    if (k < 1)
      fail("weight {} has an empty kernel dim", shapeToString(w.shape));
    int64_t padded = checkedAdd(checkedAdd(in, pads[d]), pads[spatialRank + d]);
    int64_t span = checkedAdd(checkedMul(dilations[d], k - 1), 1);
    // Floor division; padded - span may be negative, which C++ would round toward zero.
    int64_t excess = padded - span;
    int64_t out = excess < 0 ? 0 : excess / strides[d] + 1;
    if (out < 1)
      fail("spatial dim {}: output size would be < 1 (input {} padded to {}, dilated kernel {})", d, in,
           padded, span);
    int64_t l = lifted + d;
    g.in[l] = in;
    g.kernel[l] = k;
    g.out[l] = out;
    g.stride[l] = strides[d];
    g.padBegin[l] = pads[d];
    g.dilation[l] = dilations[d];
    g.outShape.push_back(out);
  }
  return g;
}

std::vector<TensorType> inferConv(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = commonDType(in);
  if (!isFloat(dtype))
    fail("needs floating-point operands, got {}", dtypeName(dtype));
  return {TensorType{dtype, convGeometry(in[0], in[1], attrs).outShape}};
}

// Output positions o in [first, last) whose input position o*stride + offset lies in [0, inSize):
// computing the range once keeps bounds checks out of the innermost loop.
std::pair<int64_t, int64_t> validOutputRange(int64_t offset, int64_t stride, int64_t inSize,
                                             int64_t outSize) {
  int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t limit = inSize - 1 - offset; // o*stride <= limit
  int64_t last = limit < 0 ? 0 : std::min(outSize, limit / stride + 1);
  return {std::min(first, last), last};
}

std::vector<Tensor> evalConv(const std::vector<Tensor> &in, const AttrMap &attrs,
                             const std::vector<TensorType> &outTypes) {
  ConvGeometry g = convGeometry(in[0].type(), in[1].type(), attrs);
  std::vector<double> x = in[0].toDoubles(), w = in[1].toDoubles();
  int64_t inPlane = g.in[0] * g.in[1] * g.in[2];
  int64_t outPlane = g.out[0] * g.out[1] * g.out[2];
  int64_t kernelSize = g.kernel[0] * g.kernel[1] * g.kernel[2];
  int64_t inPerGroup = g.inChannels / g.groups, outPerGroup = g.outChannels / g.groups;
  std::vector<double> y(static_cast<size_t>(g.batch * g.outChannels * outPlane), 0.0);

  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t co = 0; co < g.outChannels; ++co) {
      int64_t group = co / outPerGroup;
      double *yPlane = y.data() + (n * g.outChannels + co) * outPlane;
      for (int64_t ci = 0; ci < inPerGroup; ++ci) {
        const double *xPlane = x.data() + (n * g.inChannels + group * inPerGroup + ci) * inPlane;
        const double *wKernel = w.data() + (co * inPerGroup + ci) * kernelSize;
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
            for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
              double weight = wKernel[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
              int64_t offD = kd * g.dilation[0] - g.padBegin[0];
              int64_t offH = kh * g.dilation[1] - g.padBegin[1];
              int64_t offW = kw * g.dilation[2] - g.padBegin[2];
              auto [d0, d1] = validOutputRange(offD, g.stride[0], g.in[0], g.out[0]);
              auto [h0, h1] = validOutputRange(offH, g.stride[1], g.in[1], g.out[1]);
              auto [w0, w1] = validOutputRange(offW, g.stride[2], g.in[2], g.out[2]);
              for (int64_t od = d0; od < d1; ++od) {
                int64_t id = od * g.stride[0] + offD;
                for (int64_t oh = h0; oh < h1; ++oh) {
                  int64_t ih = oh * g.stride[1] + offH;
                  const double *xRow = xPlane + (id * g.in[1] + ih) * g.in[2];
                  double *yRow = yPlane + (od * g.out[1] + oh) * g.out[2];
                  for (int64_t ow = w0; ow < w1; ++ow)
                    yRow[ow] += weight * xRow[ow * g.stride[2] + offW];
                }
              }
            }
          }
        }
      }
    }
  }
  Tensor out(outTypes[0]);
  for (size_t i = 0; i < y.size(); ++i)
    out.setDouble(static_cast<int64_t>(i), y[i]);
  return {out};
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
  def.infer = inferConv;
  def.eval = evalConv;
  return def;
}

} // namespace kiln::ir
