// Gradient ops of the windows: max_pool_grad, the gradient of max_pool with respect to its input,
// as a primitive of its own so that codegen can lower it to one pass over each (n, c) plane. The
// composite form it replaces (a host window table, a gather of the K-fold window tensor, eq,
// reduce_sum, div, mul and scatter_add) took about 40% of a LeNet-5 training step.
//
// max_pool_grad(x [N, C, spatial...], y, g) with max_pool's attributes (kernel, strides, pads,
// dilations, ceil_mode), where y = max_pool(x) with those attributes and g has y's shape, gives
// dx of x's shape and dtype:
//   for every window w (taps o*stride - padBegin + j*dilation that lie inside x; padding taps
//   never take part), the taps whose x equals y[w] are its ties; if there are t > 0 of them,
//   each tie's position receives g[w] / t (ties share the gradient evenly; a window with no real
//   element, or whose y is NaN, contributes nothing);
//   dx[p] = the sum of what position p receives over all windows.
// x == y is compared as given: y is an operand, not recomputed. For finite values this is the
// gradient rule's former composite (passes/autodiff/GradContraction.cpp) for y = max_pool(x); it
// differs only where that one was accidental: a non-finite g no longer spreads NaN (0 * inf) to a
// window's other taps, and padding taps are never ties, also when the window's max is -inf.
// Float dtypes only (a gradient). y's shape is checked against max_pool's own inference, so the
// attribute rules and their messages are max_pool's.
//
// Reference evaluation: in double, plane by plane, windows in row-major order and taps in
// row-major order within a window, g[w] / t computed in double; every element of dx is rounded to
// the dtype once, at the end. O(N * C * out * kernel).
#include "ir/ops/Window.h"

namespace kiln::ir {

using namespace ops;

namespace {

// One spatial plane's window geometry, lifted to kMaxWindowSpatial dims like max_pool's (added
// leading dims have size 1, kernel 1, stride 1 and no pads).
struct PoolGradGeometry {
  int64_t planes = 0; // N * C
  int64_t in[kMaxWindowSpatial] = {1, 1, 1}, out[kMaxWindowSpatial] = {1, 1, 1};
  int64_t kernel[kMaxWindowSpatial] = {1, 1, 1}, stride[kMaxWindowSpatial] = {1, 1, 1};
  int64_t dilation[kMaxWindowSpatial] = {1, 1, 1}, padBegin[kMaxWindowSpatial] = {0, 0, 0};

  int64_t inPlane() const { return in[0] * in[1] * in[2]; }
  int64_t outPlane() const { return out[0] * out[1] * out[2]; }
};
static_assert(kMaxWindowSpatial == 3, "PoolGradGeometry's initialisers list one value per lifted dim");

// Every shape fact of the op, shared by inference and evaluation.
PoolGradGeometry poolGradGeometry(const TensorType &x, const TensorType &y, const TensorType &g,
                                  const AttrMap &attrs) {
  if (x.rank() < 3 || x.rank() > 2 + kMaxWindowSpatial)
    fail("input x must be [N, C, spatial...] with 1 to 3 spatial dims, got {}", shapeToString(x.shape));
  // max_pool's inference checks the attributes and gives the pooled shape y must have.
  Shape pooled = opDef(OpKind::MaxPool).infer({x}, attrs).at(0).shape;
  if (y.shape != pooled)
    fail("pooled y {} must have max_pool's output shape {} for input x {}", shapeToString(y.shape),
         shapeToString(pooled), shapeToString(x.shape));
  if (g.shape != y.shape)
    fail("output gradient g {} must have the pooled y's shape {}", shapeToString(g.shape), shapeToString(y.shape));
  int64_t spatialRank = x.rank() - 2;
  std::vector<int64_t> kernel = perSpatialDim(attrs, "kernel", spatialRank, 1, 1);
  std::vector<int64_t> strides = perSpatialDim(attrs, "strides", spatialRank, 1, 1);
  std::vector<int64_t> dilations = perSpatialDim(attrs, "dilations", spatialRank, 1, 1);
  std::vector<int64_t> pads = spatialPads(attrs, spatialRank);
  PoolGradGeometry geo;
  geo.planes = productOf(x.shape, 0, 2);
  int64_t lifted = kMaxWindowSpatial - spatialRank;
  for (int64_t d = 0; d < spatialRank; ++d) {
    int64_t l = lifted + d;
    geo.in[l] = x.shape[2 + d];
    geo.out[l] = y.shape[2 + d];
    geo.kernel[l] = kernel[d];
    geo.stride[l] = strides[d];
    geo.dilation[l] = dilations[d];
    geo.padBegin[l] = pads[d];
  }
  return geo;
}

std::vector<TensorType> inferMaxPoolGrad(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = commonDType(in);
  if (!isFloat(dtype))
    fail("needs floating-point operands (a gradient), got {}", dtypeName(dtype));
  poolGradGeometry(in[0], in[1], in[2], attrs);
  return {in[0]};
}

// Per output position along lifted dim d, the input positions its window reads (padding taps
// left out), in tap order.
std::vector<std::vector<int64_t>> windowTaps(const PoolGradGeometry &geo, int d) {
  std::vector<std::vector<int64_t>> taps(static_cast<size_t>(geo.out[d]));
  for (int64_t o = 0; o < geo.out[d]; ++o) {
    // No overflow: max_pool's inference keeps every window inside a checked padded extent.
    int64_t base = o * geo.stride[d] - geo.padBegin[d];
    for (int64_t j = 0; j < geo.kernel[d]; ++j) {
      int64_t p = base + j * geo.dilation[d];
      if (p >= 0 && p < geo.in[d])
        taps[static_cast<size_t>(o)].push_back(p);
    }
  }
  return taps;
}

std::vector<Tensor> evalMaxPoolGrad(const std::vector<Tensor> &in, const AttrMap &attrs,
                                    const std::vector<TensorType> &outTypes) {
  PoolGradGeometry geo = poolGradGeometry(in[0].type(), in[1].type(), in[2].type(), attrs);
  std::vector<double> x = in[0].toDoubles(), y = in[1].toDoubles(), g = in[2].toDoubles();
  std::vector<double> dx(x.size(), 0.0);
  std::vector<std::vector<int64_t>> tapsD = windowTaps(geo, 0), tapsH = windowTaps(geo, 1), tapsW = windowTaps(geo, 2);
  std::vector<int64_t> ties; // the tie positions of the current window
  int64_t inPlane = geo.inPlane(), outPlane = geo.outPlane();
  for (int64_t plane = 0; plane < geo.planes; ++plane) {
    const double *xPlane = x.data() + plane * inPlane;
    double *dxPlane = dx.data() + plane * inPlane;
    int64_t window = plane * outPlane;
    for (const std::vector<int64_t> &ds : tapsD)
      for (const std::vector<int64_t> &hs : tapsH)
        for (const std::vector<int64_t> &ws : tapsW) {
          double max = y[static_cast<size_t>(window)], grad = g[static_cast<size_t>(window)];
          ++window;
          ties.clear();
          for (int64_t pd : ds)
            for (int64_t ph : hs)
              for (int64_t pw : ws) {
                int64_t p = (pd * geo.in[1] + ph) * geo.in[2] + pw;
                if (xPlane[p] == max) // never true for a NaN max
                  ties.push_back(p);
              }
          if (ties.empty())
            continue;
          double share = grad / static_cast<double>(ties.size());
          for (int64_t p : ties)
            dxPlane[p] += share;
        }
  }
  return {Tensor::fromDoubles(outTypes[0].dtype, outTypes[0].shape, dx)};
}

} // namespace

OpDef defineMaxPoolGrad() {
  OpDef def;
  // max_pool's attributes, so the gradient rule copies them from the forward node.
  def.attrs = {intsAttr("kernel"), intsAttr("strides", std::vector<int64_t>{}),
               intsAttr("pads", std::vector<int64_t>{}), intAttr("ceil_mode", 0),
               intsAttr("dilations", std::vector<int64_t>{})};
  def.infer = inferMaxPoolGrad;
  def.eval = evalMaxPoolGrad;
  return def;
}

} // namespace kiln::ir
