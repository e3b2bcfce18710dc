// The comparison the compile fuzzer trusts: integer and bool outputs exact, float outputs within
// their dtype's tolerance of the output's scale, NaN only where the reference has NaN; and a
// reproducer reads back as the case it was written from.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "ir/Printer.h"
#include "tests/fuzz/compile/DifferentialCheck.h"
#include "tests/fuzz/compile/GraphGenerator.h"

namespace kiln::fuzz {
namespace {

Tensor f32(std::vector<double> values) {
  return Tensor::fromDoubles(DType::F32, {static_cast<int64_t>(values.size())}, values);
}

TEST(FuzzCompare, FloatsWithinTheirScaleAndIntegersExactly) {
  EXPECT_EQ(compareOutputs({f32({1.0, 100.0})}, {f32({1.0 + 5e-3, 100.0})}), ""); // 5e-3 < 1e-4 * 100
  EXPECT_NE(compareOutputs({f32({1.0, 1.0})}, {f32({1.0 + 5e-4, 1.0})}), "");     // scale 1
  Tensor a = Tensor::fromDoubles(DType::I64, {2}, {3, 4}), b = Tensor::fromDoubles(DType::I64, {2}, {3, 5});
  EXPECT_EQ(compareOutputs({a}, {a}), "");
  EXPECT_NE(compareOutputs({a}, {b}), "");
  double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(compareOutputs({f32({nan, INFINITY})}, {f32({nan, INFINITY})}), "");
  EXPECT_NE(compareOutputs({f32({nan})}, {f32({0.0})}), "");
  EXPECT_NE(compareOutputs({f32({1.0})}, {f32({1.0}), f32({1.0})}), "") << "a missing output";
  // An f64 output of a graph computing in f32 is held to f32's tolerance.
  Tensor x = Tensor::fromDoubles(DType::F64, {1}, {1.0}), y = Tensor::fromDoubles(DType::F64, {1}, {1.0 + 1e-7});
  EXPECT_NE(compareOutputs({x}, {y}), "");
  EXPECT_EQ(compareOutputs({x}, {y}, relativeTolerance(DType::F32)), "");
}

TEST(FuzzCompare, AReproducerReadsBackAsItsCase) {
  CheckCase written;
  written.label = "seed 42";
  written.seed = 42;
  written.inputSeed = 43;
  written.gradient = true;
  written.fuse = false;
  written.graph = generateCase(42).graph;
  std::string path = (std::filesystem::temp_directory_path() / "kiln-fuzz-reproducer-test.kir").string();
  std::ofstream(path) << reproducerText(written, {Outcome::Mismatch, "output 0 differs\nsomewhere"});
  CheckCase read = readReproducer(path);
  std::remove(path.c_str());
  EXPECT_EQ(read.seed, 42u);
  EXPECT_EQ(read.inputSeed, 43u);
  EXPECT_TRUE(read.gradient);
  EXPECT_FALSE(read.fuse);
  ir::PrintOptions all;
  all.keepLargeTensors = true;
  EXPECT_EQ(ir::printGraph(*read.graph, all), ir::printGraph(*written.graph, all));
}

} // namespace
} // namespace kiln::fuzz
