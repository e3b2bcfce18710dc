// ONNX import of ConvTranspose (pads from attributes, auto_pad and output_shape, as the ONNX
// specification computes them) and of MaxPool's Indices output, checked against plain loops
// written here from the ONNX definitions.
#include <cmath>
#include <limits>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;
using ir::OpKind;

namespace {

struct Transpose2d {
  std::vector<int64_t> strides{1, 1}, dilations{1, 1};
  std::vector<int64_t> begin{0, 0}, end{0, 0}; // negative: zeros added on that side
  std::vector<int64_t> outputPadding{0, 0};
};

/// ConvTranspose by its definition, for x [N, C, H, W] and w [C, M, kH, kW] (one group): every
/// input element adds x * w to the full output at i * stride + k * dilation, which is then
/// cropped by the pads (or extended, for negative ones) and grown by output_padding at the end.
Tensor referenceConvTranspose(const Tensor &x, const Tensor &w, const Transpose2d &p) {
  int64_t n = x.shape()[0], c = x.shape()[1], in[2] = {x.shape()[2], x.shape()[3]};
  int64_t m = w.shape()[1], k[2] = {w.shape()[2], w.shape()[3]};
  int64_t full[2], out[2];
  for (int d = 0; d < 2; ++d) {
    full[d] = p.strides[d] * (in[d] - 1) + (k[d] - 1) * p.dilations[d] + 1 + p.outputPadding[d];
    out[d] = full[d] - p.begin[d] - p.end[d];
  }
  Tensor y(DType::F32, {n, m, out[0], out[1]});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t mo = 0; mo < m; ++mo)
        for (int64_t i0 = 0; i0 < in[0]; ++i0)
          for (int64_t i1 = 0; i1 < in[1]; ++i1)
            for (int64_t k0 = 0; k0 < k[0]; ++k0)
              for (int64_t k1 = 0; k1 < k[1]; ++k1) {
                int64_t o0 = i0 * p.strides[0] + k0 * p.dilations[0] - p.begin[0];
                int64_t o1 = i1 * p.strides[1] + k1 * p.dilations[1] - p.begin[1];
                if (o0 < 0 || o0 >= out[0] || o1 < 0 || o1 >= out[1])
                  continue;
                int64_t at = ((b * m + mo) * out[0] + o0) * out[1] + o1;
                double xv = x.getDouble(((b * c + ci) * in[0] + i0) * in[1] + i1);
                double wv = w.getDouble(((ci * m + mo) * k[0] + k0) * k[1] + k1);
                y.setDouble(at, y.getDouble(at) + xv * wv);
              }
  return y;
}

/// x [1, 2, 3, 3] and w [2, 2, 3, 3] with distinct values, and a ConvTranspose node on them.
onnx::NodeProto &transposeModel(ModelBuilder &m, const Shape &outShape) {
  m.input("x", DType::F32, {1, 2, 3, 3});
  m.initializer("w", iota(DType::F32, {2, 2, 3, 3}, 0.25, -4));
  m.output("y", DType::F32, outShape);
  return m.node("ConvTranspose", {"x", "w"}, {"y"}, "deconv");
}

void expectMatches(const ModelBuilder &m, const Transpose2d &p) {
  Tensor x = iota(DType::F32, {1, 2, 3, 3}, 0.5, -2);
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::ConvTranspose), 1);
  Tensor y = ir::evaluate(*graph, {x})[0];
  Tensor want = referenceConvTranspose(x, iota(DType::F32, {2, 2, 3, 3}, 0.25, -4), p);
  ASSERT_EQ(y.shape(), want.shape());
  expectClose(y, want.toDoubles(), 1e-4);
}

TEST(OnnxImportConv, ConvTransposeExplicitPadsStridesDilations) {
  ModelBuilder m(11);
  auto &node = transposeModel(m, {1, 2, 6, 9});
  setInts(node, "strides", {2, 3});
  setInts(node, "dilations", {1, 2});
  setInts(node, "pads", {1, 0, 0, 2});
  Transpose2d p;
  p.strides = {2, 3};
  p.dilations = {1, 2};
  p.begin = {1, 0};
  p.end = {0, 2};
  expectMatches(m, p);
}

// output_shape [10, 8] against the natural 7 x 9 (strides [2, 3], 3x3 kernel). ONNX splits
// total = natural - target as begin = total - floor(total / 2), end = floor(total / 2):
// H: total -3 gives begin -1 and end -2, one zero row before and two after; W: total 1 gives
// begin 1, end 0, one column cropped at the start.
TEST(OnnxImportConv, ConvTransposeOutputShapeBeyondTheNaturalSize) {
  ModelBuilder m(11);
  auto &node = transposeModel(m, {1, 2, 10, 8});
  setInts(node, "strides", {2, 3});
  setInts(node, "output_shape", {10, 8});
  Transpose2d p;
  p.strides = {2, 3};
  p.begin = {-1, 1};
  p.end = {-2, 0};
  expectMatches(m, p);
}

TEST(OnnxImportConv, ConvTransposeAutoPadSameUpperAndLower) {
  for (std::string mode : {"SAME_UPPER", "SAME_LOWER"}) {
    SCOPED_TRACE(mode);
    ModelBuilder m(11);
    auto &node = transposeModel(m, {1, 2, 6, 6});
    setInts(node, "strides", {2, 2});
    setString(node, "auto_pad", mode);
    // Target in * stride = 6 against natural 2 * 2 + 3 = 7: total 1, SAME_UPPER puts
    // floor(1/2) = 0 at the start, everything else puts it at the end.
    Transpose2d p;
    p.strides = {2, 2};
    p.begin = mode == "SAME_UPPER" ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{1, 1};
    p.end = mode == "SAME_UPPER" ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{0, 0};
    expectMatches(m, p);
  }
}

TEST(OnnxImportConv, ConvTransposeBiasAndOutputPadding) {
  ModelBuilder m(11);
  m.initializer("b", Tensor::fromDoubles(DType::F32, {2}, {100, -100}));
  auto &node = transposeModel(m, {1, 2, 10, 5});
  node.add_input("b");
  setInts(node, "strides", {3, 1});
  setInts(node, "output_padding", {1, 0});
  Tensor x = iota(DType::F32, {1, 2, 3, 3}, 0.5, -2);
  Transpose2d p;
  p.strides = {3, 1};
  p.outputPadding = {1, 0};
  Tensor want = referenceConvTranspose(x, iota(DType::F32, {2, 2, 3, 3}, 0.25, -4), p);
  std::vector<double> values = want.toDoubles();
  for (size_t i = 0; i < values.size(); ++i)
    values[i] += i < values.size() / 2 ? 100 : -100;
  expectClose(run(m, {x})[0], values, 1e-4);
}

/// MaxPool's indices by their definition: the first maximum of each window in row-major tap
/// order, as a flat index into x with the spatial dims row- or column-major.
std::vector<double> referenceIndices(const Tensor &x, int64_t k, int64_t stride, int64_t pad, bool columnMajor) {
  int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  int64_t outH = (h + 2 * pad - k) / stride + 1, outW = (w + 2 * pad - k) / stride + 1;
  std::vector<double> indices;
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t oh = 0; oh < outH; ++oh)
      for (int64_t ow = 0; ow < outW; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t where = -1;
        for (int64_t kh = 0; kh < k; ++kh)
          for (int64_t kw = 0; kw < k; ++kw) {
            int64_t ih = oh * stride - pad + kh, iw = ow * stride - pad + kw;
            if (ih < 0 || ih >= h || iw < 0 || iw >= w)
              continue;
            double v = x.getDouble(plane * h * w + ih * w + iw);
            if (v > best) {
              best = v;
              where = columnMajor ? iw * h + ih : ih * w + iw;
            }
          }
        indices.push_back(static_cast<double>(plane * h * w + where));
      }
  return indices;
}

TEST(OnnxImportConv, MaxPoolIndicesRowAndColumnMajorWithPadding) {
  // Values that repeat, so ties are decided by window order, across two batches and channels.
  std::vector<double> values;
  for (int i = 0; i < 2 * 2 * 4 * 5; ++i)
    values.push_back((i * 7) % 11);
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 2, 4, 5}, values);
  for (int64_t order : {0, 1}) {
    SCOPED_TRACE(order);
    ModelBuilder m(12);
    m.input("x", DType::F32, {2, 2, 4, 5});
    auto &pool = m.node("MaxPool", {"x"}, {"y", "i"});
    setInts(pool, "kernel_shape", {3, 3});
    setInts(pool, "strides", {2, 2});
    setInts(pool, "pads", {1, 1, 1, 1});
    setInt(pool, "storage_order", order);
    m.output("y", DType::F32, {2, 2, 2, 3});
    m.output("i", DType::I64, {2, 2, 2, 3});
    auto out = run(m, {x});
    EXPECT_EQ(out[1].dtype(), DType::I64);
    expectClose(out[1], referenceIndices(x, 3, 2, 1, order == 1));
    // The values are the input's elements at the row-major indices.
    std::vector<double> rowMajor = referenceIndices(x, 3, 2, 1, false), picked;
    for (double index : rowMajor)
      picked.push_back(x.getDouble(static_cast<int64_t>(index)));
    expectClose(out[0], picked);
  }
}

TEST(OnnxImportConv, LpPoolGlobalLpPoolAndLpNormalization) {
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 1, 2, 3}, {1, -2, 3, -4, 5, 0.5});
  ModelBuilder m(11);
  m.input("x", DType::F32, {1, 1, 2, 3});
  auto &pool = m.node("LpPool", {"x"}, {"pooled"});
  setInts(pool, "kernel_shape", {2, 2});
  setInts(pool, "pads", {0, 1, 0, 0}); // a zero column on the left
  setInt(pool, "p", 3);
  setInt(m.node("GlobalLpPool", {"x"}, {"global"}), "p", 1);
  setInt(m.node("LpNormalization", {"x"}, {"unit"}), "axis", -1);
  m.output("pooled", DType::F32, {1, 1, 1, 3});
  m.output("global", DType::F32, {1, 1, 1, 1});
  m.output("unit", DType::F32, {1, 1, 2, 3});
  auto out = run(m, {x});
  // Windows over columns (pad, 0), (0, 1), (1, 2) of both rows.
  auto cubes = [&](std::initializer_list<int> cols) {
    double sum = 0;
    for (int c : cols)
      for (int r = 0; r < 2; ++r)
        sum += std::pow(std::fabs(x.getDouble(r * 3 + c)), 3);
    return std::cbrt(sum);
  };
  expectClose(out[0], {cubes({0}), cubes({0, 1}), cubes({1, 2})}, 1e-5);
  expectClose(out[1], {15.5});
  std::vector<double> unit;
  for (int r = 0; r < 2; ++r) {
    double norm = 0;
    for (int c = 0; c < 3; ++c)
      norm += std::pow(x.getDouble(r * 3 + c), 2);
    for (int c = 0; c < 3; ++c)
      unit.push_back(x.getDouble(r * 3 + c) / std::sqrt(norm));
  }
  expectClose(out[2], unit);
}

} // namespace
