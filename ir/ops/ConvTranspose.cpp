// conv_transpose: ONNX ConvTranspose without auto_pad, output_shape or bias (the importer turns
// those into explicit pads and a separate add). Its table entry sits with the contractions.
//
// Geometry, per spatial dim: input position i and kernel tap k feed output position
//   o = i*stride + k*dilation - padBegin,
// kept when 0 <= o < out, where
//   out = stride*(in - 1) + output_padding + (kernel - 1)*dilation + 1 - padBegin - padEnd.
// The weight is [C, Cout/groups, kernel...]: the same tensor a conv from Cout to C channels
// uses, and conv_transpose is exactly that conv's gradient with respect to its input (the
// adjoint: <conv(x, w), dy> == <x, conv_transpose(dy, w)> with equal attributes and
// output_padding making up the sizes a strided conv rounds away).
#include "ir/ops/Window.h"

namespace kiln::ir {

using namespace ops;

namespace {

struct ConvTransposeGeometry {
  int64_t batch = 0, inChannels = 0, outChannels = 0, groups = 1;
  // Per spatial dim, lifted to kMaxWindowSpatial dims (leading dims are the added size-1 ones).
  int64_t in[kMaxWindowSpatial], kernel[kMaxWindowSpatial], out[kMaxWindowSpatial];
  int64_t stride[kMaxWindowSpatial], padBegin[kMaxWindowSpatial], dilation[kMaxWindowSpatial];
  Shape outShape;
};

ConvTransposeGeometry convTransposeGeometry(const TensorType &x, const TensorType &w, const AttrMap &attrs) {
  if (x.rank() < 3 || x.rank() > 2 + kMaxWindowSpatial)
    fail("input must be [N, C, spatial...] with 1 to 3 spatial dims, got {}", shapeToString(x.shape));
  if (w.rank() != x.rank())
    fail("weight {} must have the input's rank {} ([C, Cout/groups, kernel...])", shapeToString(w.shape),
         x.rank());
  int64_t spatialRank = x.rank() - 2;
  ConvTransposeGeometry g;
  g.batch = x.shape[0];
  g.inChannels = x.shape[1];
  g.groups = attrInt(attrs, "groups");
  if (g.groups < 1)
    fail("'groups' must be >= 1, got {}", g.groups);
  if (w.shape[0] != g.inChannels)
    fail("weight {} must have {} rows, one per input channel of {} ([C, Cout/groups, kernel...])",
         shapeToString(w.shape), g.inChannels, shapeToString(x.shape));
  if (g.inChannels % g.groups != 0)
    fail("groups {} must divide the input channels {}", g.groups, g.inChannels);
  g.outChannels = checkedMul(w.shape[1], g.groups);
  std::vector<int64_t> strides = perSpatialDim(attrs, "strides", spatialRank, 1, 1);
  std::vector<int64_t> dilations = perSpatialDim(attrs, "dilations", spatialRank, 1, 1);
  std::vector<int64_t> outputPadding = perSpatialDim(attrs, "output_padding", spatialRank, 0, 0);
  std::vector<int64_t> pads = spatialPads(attrs, spatialRank);

  g.outShape = {g.batch, g.outChannels};
  for (int d = 0; d < kMaxWindowSpatial; ++d) {
    g.in[d] = g.kernel[d] = g.out[d] = g.stride[d] = g.dilation[d] = 1;
    g.padBegin[d] = 0;
  }
  int64_t lifted = kMaxWindowSpatial - spatialRank;
  for (int64_t d = 0; d < spatialRank; ++d) {
    int64_t in = x.shape[2 + d], k = w.shape[2 + d];
    if (k < 1)
      fail("weight {} has an empty kernel dim", shapeToString(w.shape));
    int64_t span = checkedAdd(checkedMul(dilations[d], k - 1), 1);
    int64_t full = checkedAdd(checkedAdd(checkedMul(strides[d], in - 1), outputPadding[d]), span);
    int64_t out = checkedAdd(checkedAdd(full, -pads[d]), -pads[spatialRank + d]);
    if (out < 1)
      fail("spatial dim {}: output size would be {} (input {}, stride {}, output_padding {}, dilated "
           "kernel {}, pads {}+{})",
           d, out, in, strides[d], outputPadding[d], span, pads[d], pads[spatialRank + d]);
    int64_t l = lifted + d;
    g.in[l] = in;
    g.kernel[l] = k;
    g.out[l] = out;
    g.stride[l] = strides[d];
    g.padBegin[l] = pads[d];
    g.dilation[l] = dilations[d];
    g.outShape.push_back(out);
  }
  numElements(g.outShape); // rejects an output too large to count
  return g;
}

std::vector<TensorType> inferConvTranspose(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = commonDType(in);
  if (!isFloat(dtype))
    fail("needs floating-point operands, got {}", dtypeName(dtype));
  return {TensorType{dtype, convTransposeGeometry(in[0], in[1], attrs).outShape}};
}

// Scatter form: every input element adds weight * x to the outputs its kernel taps reach. The
// loop nest mirrors conv's gather form with the roles of input and output swapped, so it costs
// the same and keeps the innermost loop contiguous in x.
std::vector<Tensor> evalConvTranspose(const std::vector<Tensor> &in, const AttrMap &attrs,
                                      const std::vector<TensorType> &outTypes) {
  ConvTransposeGeometry g = convTransposeGeometry(in[0].type(), in[1].type(), attrs);
  std::vector<double> x = in[0].toDoubles(), w = in[1].toDoubles();
  int64_t inPlane = g.in[0] * g.in[1] * g.in[2];
  int64_t outPlane = g.out[0] * g.out[1] * g.out[2];
  int64_t kernelSize = g.kernel[0] * g.kernel[1] * g.kernel[2];
  int64_t inPerGroup = g.inChannels / g.groups, outPerGroup = g.outChannels / g.groups;
  std::vector<double> y(static_cast<size_t>(numElements(outTypes[0].shape)), 0.0);

  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t ci = 0; ci < g.inChannels; ++ci) {
      int64_t group = ci / inPerGroup;
      const double *xPlane = x.data() + (n * g.inChannels + ci) * inPlane;
      for (int64_t m = 0; m < outPerGroup; ++m) {
        int64_t co = group * outPerGroup + m;
        double *yPlane = y.data() + (n * g.outChannels + co) * outPlane;
        const double *wKernel = w.data() + (ci * outPerGroup + m) * kernelSize;
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
            for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
              double weight = wKernel[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
              int64_t offD = kd * g.dilation[0] - g.padBegin[0];
              int64_t offH = kh * g.dilation[1] - g.padBegin[1];
              int64_t offW = kw * g.dilation[2] - g.padBegin[2];
              auto [d0, d1] = stridedRange(offD, g.stride[0], g.out[0], g.in[0]);
              auto [h0, h1] = stridedRange(offH, g.stride[1], g.out[1], g.in[1]);
              auto [w0, w1] = stridedRange(offW, g.stride[2], g.out[2], g.in[2]);
              for (int64_t id = d0; id < d1; ++id) {
                int64_t od = id * g.stride[0] + offD;
                for (int64_t ih = h0; ih < h1; ++ih) {
                  int64_t oh = ih * g.stride[1] + offH;
                  const double *xRow = xPlane + (id * g.in[1] + ih) * g.in[2];
                  double *yRow = yPlane + (od * g.out[1] + oh) * g.out[2];
                  for (int64_t iw = w0; iw < w1; ++iw)
                    yRow[iw * g.stride[2] + offW] += weight * xRow[iw];
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

OpDef defineConvTranspose() {
  OpDef def;
  def.attrs = {intsAttr("strides", std::vector<int64_t>{}), intsAttr("pads", std::vector<int64_t>{}),
               intsAttr("dilations", std::vector<int64_t>{}),
               intsAttr("output_padding", std::vector<int64_t>{}), intAttr("groups", 1)};
  def.infer = inferConvTranspose;
  def.eval = evalConvTranspose;
  return def;
}

} // namespace kiln::ir
