// Gradient ops of the contractions: conv_weight_grad, the gradient of conv with respect to its
// weight, as a primitive of its own so that codegen can lower it to im2col + GEMM like the
// forward conv (the composite form, a conv of permuted x and g, runs at a fraction of the
// speed; issue 7).
//
// conv_weight_grad(x [N, C, spatial...], g [N, Cout, out spatial...]) with conv's attributes
// (strides, pads, dilations, groups) and the weight's shape `weight_shape` [Cout, C/groups,
// kernel...] gives
//   gw[co][ci][t] = sum_n sum_o g[n][co][o] * x[n][grp*C/groups + ci][o*stride + t*dilation - padBegin]
// (grp = co / (Cout/groups); reads outside x are zero padding), i.e. <conv(x, w), g> ==
// <w, conv_weight_grad(x, g)>. g must have exactly the shape conv(x, w) has.
// The reference loop accumulates in double, tap by tap with each tap's valid output range
// computed once (ir/ops/Window.h), as conv's does: O(N * Cout * C/groups * kernel * out).
#include "ir/ops/Window.h"

namespace kiln::ir {

using namespace ops;

namespace {

struct WeightGradGeometry {
  int64_t batch = 0, inChannels = 0, outChannels = 0, groups = 1;
  // Lifted to kMaxWindowSpatial dims: added leading dims have size 1, kernel 1, stride 1, no pads.
  int64_t in[kMaxWindowSpatial] = {1, 1, 1}, out[kMaxWindowSpatial] = {1, 1, 1};
  int64_t kernel[kMaxWindowSpatial] = {1, 1, 1}, stride[kMaxWindowSpatial] = {1, 1, 1};
  int64_t dilation[kMaxWindowSpatial] = {1, 1, 1}, padBegin[kMaxWindowSpatial] = {0, 0, 0};
  Shape weightShape;

  int64_t inPlane() const { return in[0] * in[1] * in[2]; }
  int64_t outPlane() const { return out[0] * out[1] * out[2]; }
  int64_t kernelSize() const { return kernel[0] * kernel[1] * kernel[2]; }
};
static_assert(kMaxWindowSpatial == 3, "WeightGradGeometry's initialisers list one value per lifted dim");

// Every shape fact of the op, shared by inference and evaluation.
WeightGradGeometry weightGradGeometry(const TensorType &x, const TensorType &g, const AttrMap &attrs) {
  if (x.rank() < 3 || x.rank() > 2 + kMaxWindowSpatial)
    fail("input x must be [N, C, spatial...] with 1 to 3 spatial dims, got {}", shapeToString(x.shape));
  if (g.rank() != x.rank())
    fail("output gradient g {} must have the input's rank {} ([N, Cout, out spatial...])", shapeToString(g.shape),
         x.rank());
  int64_t spatialRank = x.rank() - 2;
  WeightGradGeometry geo;
  geo.weightShape = attrInts(attrs, "weight_shape");
  const Shape &ws = geo.weightShape;
  if (static_cast<int64_t>(ws.size()) != x.rank())
    fail("'weight_shape' {} must have the input's rank {} ([Cout, C/groups, kernel...])", shapeToString(ws),
         x.rank());
  for (int64_t dim : ws)
    if (dim < 1)
      fail("'weight_shape' {} must have every dim >= 1", shapeToString(ws));
  geo.batch = x.shape[0];
  geo.inChannels = x.shape[1];
  geo.outChannels = ws[0];
  geo.groups = attrInt(attrs, "groups");
  if (geo.groups < 1)
    fail("'groups' must be >= 1, got {}", geo.groups);
  if (geo.inChannels % geo.groups != 0 || geo.outChannels % geo.groups != 0)
    fail("groups {} must divide both the input channels {} and the output channels {}", geo.groups, geo.inChannels,
         geo.outChannels);
  if (ws[1] != geo.inChannels / geo.groups)
    fail("'weight_shape' {} must have C/groups = {} input channels (input {}, groups {})", shapeToString(ws),
         geo.inChannels / geo.groups, shapeToString(x.shape), geo.groups);
  std::vector<int64_t> strides = perSpatialDim(attrs, "strides", spatialRank, 1, 1);
  std::vector<int64_t> dilations = perSpatialDim(attrs, "dilations", spatialRank, 1, 1);
  std::vector<int64_t> pads = spatialPads(attrs, spatialRank);
  Shape expected{geo.batch, geo.outChannels};
  int64_t lifted = kMaxWindowSpatial - spatialRank;
  for (int64_t d = 0; d < spatialRank; ++d) {
    int64_t in = x.shape[2 + d], k = ws[2 + d];
    int64_t padded = checkedAdd(in, pads[d], "padded input size");
    padded = checkedAdd(padded, pads[spatialRank + d], "padded input size");
    int64_t excess = padded - dilatedSpan(k, dilations[d]);
    int64_t out = excess < 0 ? 0 : excess / strides[d] + 1; // floor division of a non-negative excess
    if (out < 1)
      fail("spatial dim {}: the conv's output would be empty (input {} padded to {}, dilated kernel {})", d, in,
           padded, dilatedSpan(k, dilations[d]));
    int64_t l = lifted + d;
    geo.in[l] = in;
    geo.kernel[l] = k;
    geo.out[l] = out;
    geo.stride[l] = strides[d];
    geo.dilation[l] = dilations[d];
    geo.padBegin[l] = pads[d];
    expected.push_back(out);
  }
  if (g.shape != expected)
    fail("output gradient g {} must have the conv's output shape {} (input {}, weight {})", shapeToString(g.shape),
         shapeToString(expected), shapeToString(x.shape), shapeToString(ws));
  numElements(ws); // rejects a weight too large to count
  return geo;
}

std::vector<TensorType> inferConvWeightGrad(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = commonDType(in);
  if (!isFloat(dtype))
    fail("needs floating-point operands, got {}", dtypeName(dtype));
  return {TensorType{dtype, weightGradGeometry(in[0], in[1], attrs).weightShape}};
}

// Adds to wKernel[t] (one kernel, input channel plane xPlane against output plane gPlane) the sum
// over output positions o of g[o] * x[o*stride + t*dilation - padBegin].
void accumulateWeightKernel(const WeightGradGeometry &geo, const double *xPlane, const double *gPlane,
                            double *wKernel) {
  for (int64_t kd = 0; kd < geo.kernel[0]; ++kd) {
    for (int64_t kh = 0; kh < geo.kernel[1]; ++kh) {
      for (int64_t kw = 0; kw < geo.kernel[2]; ++kw) {
        int64_t offD = kd * geo.dilation[0] - geo.padBegin[0];
        int64_t offH = kh * geo.dilation[1] - geo.padBegin[1];
        int64_t offW = kw * geo.dilation[2] - geo.padBegin[2];
        auto [d0, d1] = stridedRange(offD, geo.stride[0], geo.in[0], geo.out[0]);
        auto [h0, h1] = stridedRange(offH, geo.stride[1], geo.in[1], geo.out[1]);
        auto [w0, w1] = stridedRange(offW, geo.stride[2], geo.in[2], geo.out[2]);
        double sum = 0.0;
        for (int64_t pd = d0; pd < d1; ++pd) {
          int64_t sd = pd * geo.stride[0] + offD;
          for (int64_t ph = h0; ph < h1; ++ph) {
            int64_t sh = ph * geo.stride[1] + offH;
            const double *xRow = xPlane + (sd * geo.in[1] + sh) * geo.in[2];
            const double *gRow = gPlane + (pd * geo.out[1] + ph) * geo.out[2];
            for (int64_t pw = w0; pw < w1; ++pw)
              sum += gRow[pw] * xRow[pw * geo.stride[2] + offW];
          }
        }
        wKernel[(kd * geo.kernel[1] + kh) * geo.kernel[2] + kw] += sum;
      }
    }
  }
}

std::vector<Tensor> evalConvWeightGrad(const std::vector<Tensor> &in, const AttrMap &attrs,
                                       const std::vector<TensorType> &outTypes) {
  WeightGradGeometry geo = weightGradGeometry(in[0].type(), in[1].type(), attrs);
  std::vector<double> x = in[0].toDoubles(), g = in[1].toDoubles();
  int64_t inPerGroup = geo.inChannels / geo.groups, outPerGroup = geo.outChannels / geo.groups;
  int64_t taps = geo.kernelSize();
  std::vector<double> w(static_cast<size_t>(numElements(outTypes[0].shape)), 0.0);
  for (int64_t n = 0; n < geo.batch; ++n) {
    for (int64_t co = 0; co < geo.outChannels; ++co) {
      int64_t group = co / outPerGroup;
      const double *gPlane = g.data() + (n * geo.outChannels + co) * geo.outPlane();
      for (int64_t ci = 0; ci < inPerGroup; ++ci) {
        const double *xPlane = x.data() + (n * geo.inChannels + group * inPerGroup + ci) * geo.inPlane();
        accumulateWeightKernel(geo, xPlane, gPlane, w.data() + (co * inPerGroup + ci) * taps);
      }
    }
  }
  return {Tensor::fromDoubles(outTypes[0].dtype, outTypes[0].shape, w)};
}

} // namespace

OpDef defineConvWeightGrad() {
  OpDef def;
  def.attrs = {intsAttr("strides", std::vector<int64_t>{}), intsAttr("pads", std::vector<int64_t>{}),
               intsAttr("dilations", std::vector<int64_t>{}), intAttr("groups", 1), intsAttr("weight_shape")};
  def.infer = inferConvWeightGrad;
  def.eval = evalConvWeightGrad;
  return def;
}

} // namespace kiln::ir
