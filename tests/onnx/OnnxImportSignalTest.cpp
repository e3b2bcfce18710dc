// ONNX import of DFT, STFT and MelWeightMatrix, against transforms written here as plain sums.
#include <cmath>
#include <complex>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

using Complex = std::complex<double>;

/// sum_n x[n] e^(-+2 pi i n k / N) for k < bins (scaled by 1/N when inverse).
std::vector<Complex> naiveDft(const std::vector<Complex> &x, int64_t n, int64_t bins, bool inverse) {
  const double pi = std::acos(-1.0);
  std::vector<Complex> y;
  for (int64_t k = 0; k < bins; ++k) {
    Complex sum = 0;
    for (int64_t j = 0; j < n && j < static_cast<int64_t>(x.size()); ++j)
      sum += x[j] * std::polar(1.0, (inverse ? 2 : -2) * pi * double(j * k) / double(n));
    y.push_back(inverse ? sum / double(n) : sum);
  }
  return y;
}

TEST(OnnxImportSignal, DftRealComplexInverseOnesidedAndLength) {
  // x [1, 2, 5, 2]: two complex signals of 5 along axis 2.
  std::vector<double> values;
  for (int i = 0; i < 20; ++i)
    values.push_back(std::sin(i * 1.3) * 4 + (i % 3));
  Tensor x = Tensor::fromDoubles(DType::F64, {1, 2, 5, 2}, values);
  struct Case {
    bool inverse, onesided;
    int64_t length; // 0: none given
  };
  for (Case c : {Case{false, false, 0}, Case{true, false, 0}, Case{false, true, 0}, Case{false, false, 7},
                 Case{false, true, 4}}) {
    SCOPED_TRACE(testing::Message() << "inverse " << c.inverse << " onesided " << c.onesided << " length " << c.length);
    int64_t n = c.length ? c.length : 5, bins = c.onesided ? n / 2 + 1 : n;
    ModelBuilder m(17);
    m.input("x", DType::F64, {1, 2, 5, 2});
    std::vector<std::string> inputs{"x"};
    if (c.length) {
      m.initializer("n", Tensor::fromDoubles(DType::I64, {}, {double(c.length)}));
      inputs.push_back("n");
    }
    auto &node = m.node("DFT", inputs, {"y"});
    setInt(node, "axis", 2);
    setInt(node, "inverse", c.inverse);
    setInt(node, "onesided", c.onesided);
    m.output("y", DType::F64, {1, 2, bins, 2});
    Tensor y = run(m, {x})[0];
    std::vector<double> want;
    for (int s = 0; s < 2; ++s) {
      std::vector<Complex> signal;
      for (int j = 0; j < 5; ++j)
        signal.emplace_back(values[(s * 5 + j) * 2], values[(s * 5 + j) * 2 + 1]);
      for (Complex v : naiveDft(signal, n, bins, c.inverse)) {
        want.push_back(v.real());
        want.push_back(v.imag());
      }
    }
    expectClose(y, want, 1e-9);
  }
}

TEST(OnnxImportSignal, StftWithWindowOnesided) {
  ModelBuilder m(17);
  m.input("signal", DType::F32, {1, 10, 1});
  m.initializer("step", Tensor::fromDoubles(DType::I64, {}, {3}));
  m.input("window", DType::F32, {4});
  // onesided=1 is the default, written out because ONNX 1.12's shape inference reads the
  // default as 0 and would report 4 bins.
  setInt(m.node("STFT", {"signal", "step", "window"}, {"y"}), "onesided", 1);
  m.output("y", DType::F32, {1, 3, 3, 2});
  std::vector<double> signal;
  for (int i = 0; i < 10; ++i)
    signal.push_back(i * i % 7);
  Tensor y = run(m, {Tensor::fromDoubles(DType::F32, {1, 10, 1}, signal),
                     Tensor::fromDoubles(DType::F32, {4}, {0.5, 1, 1, 0.5})})[0];
  double window[] = {0.5, 1, 1, 0.5};
  std::vector<double> want;
  for (int f = 0; f < 3; ++f) { // frames start at 0, 3, 6
    std::vector<Complex> frame;
    for (int j = 0; j < 4; ++j)
      frame.emplace_back(signal[f * 3 + j] * window[j], 0);
    for (Complex v : naiveDft(frame, 4, 3, false)) {
      want.push_back(v.real());
      want.push_back(v.imag());
    }
  }
  expectClose(y, want, 1e-5);
}

TEST(OnnxImportSignal, MelWeightMatrixFiltersPeakAtOne) {
  ModelBuilder m(17);
  m.initializer("mels", Tensor::fromDoubles(DType::I32, {}, {4}));
  m.initializer("dft", Tensor::fromDoubles(DType::I32, {}, {32}));
  m.initializer("rate", Tensor::fromDoubles(DType::I32, {}, {16000}));
  m.initializer("low", Tensor::fromDoubles(DType::F32, {}, {0}));
  m.initializer("high", Tensor::fromDoubles(DType::F32, {}, {8000}));
  m.node("MelWeightMatrix", {"mels", "dft", "rate", "low", "high"}, {"w"});
  m.output("w", DType::F32, {17, 4});
  Tensor w = run(m, {})[0];
  // The definition's points: mel edges split in 6, back to hertz, to bins of (32 + 1) / 16000.
  std::vector<int64_t> points;
  double highMel = 2595 * std::log10(1 + 8000.0 / 700);
  for (int i = 0; i < 6; ++i)
    points.push_back(static_cast<int64_t>(std::floor(33 * 700 * (std::pow(10, i * highMel / 6 / 2595) - 1) / 16000)));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t bin = 0; bin < 17; ++bin) {
      double want = 0;
      if (bin >= points[i] && bin <= points[i + 1])
        want = points[i + 1] == points[i] ? 1.0 : double(bin - points[i]) / double(points[i + 1] - points[i]);
      if (bin >= points[i + 1] && bin < points[i + 2])
        want = double(points[i + 2] - bin) / double(points[i + 2] - points[i + 1]);
      EXPECT_NEAR(w.getDouble(bin * 4 + i), want, 1e-6) << "bin " << bin << ", filter " << i;
    }
}

} // namespace
