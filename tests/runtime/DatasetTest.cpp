// Datasets of memory-mapped .npy arrays: a mapped file holds what readNpy reads and is refused
// as readNpy refuses it; arrays must agree on their sample count; batches gather rows and pad
// with repeats; an epoch's order is a permutation fixed by (seed, epoch) alone.
#include <gtest/gtest.h>

#include "tests/ErrorMatchers.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "runtime/Dataset.h"
#include "runtime/MappedNpy.h"
#include "runtime/Npy.h"
#include "tests/TempDir.h"

namespace kiln::runtime {

namespace {

using kiln::test::expectErrorContaining;

class DatasetTest : public ::testing::Test {
protected:
  std::string path(const std::string &name) const { return dir_.file(name); }
  std::string write(const std::string &name, const Tensor &tensor) {
    writeNpy(path(name), tensor);
    return path(name);
  }
  std::string writeBytes(const std::string &name, const std::string &bytes) {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }

  kiln::test::TempDir dir_{"kiln-dataset"};
};

} // namespace

TEST_F(DatasetTest, AMappedFileHoldsWhatReadNpyReads) {
  Tensor values = randomTensor({DType::F32, {3, 4}}, 1);
  MappedNpy mapped = MappedNpy::open(write("a.npy", values));
  EXPECT_EQ(mapped.type(), values.type());
  EXPECT_EQ(std::memcmp(mapped.data(), values.data(), values.byteSize()), 0);
  MappedNpy empty = MappedNpy::open(write("empty.npy", Tensor(DType::I64, {0, 2})));
  EXPECT_EQ(empty.type(), (TensorType{DType::I64, {0, 2}}));
  EXPECT_EQ(empty.data(), nullptr);
}

TEST_F(DatasetTest, AMalformedFileIsRefusedNamingIt) {
  std::string whole = serializeNpy(randomTensor({DType::F32, {3, 4}}, 1));
  std::string cut = writeBytes("cut.npy", whole.substr(0, whole.size() - 4));
  expectErrorContaining([&] { MappedNpy::open(cut); }, cut + ": .npy data has 44 bytes, shape [3,4] of f32 needs 48");
  std::string empty = writeBytes("empty.npy", "");
  expectErrorContaining([&] { MappedNpy::open(empty); }, empty + ": not a .npy file (bad magic)");
  expectErrorContaining([&] { MappedNpy::open(path("none.npy")); }, path("none.npy") + ": cannot open file");
  expectErrorContaining([&] { MappedNpy::open(dir_.path().string()); }, dir_.path().string() + ": not a regular file");
  std::string fortran = whole;
  fortran.replace(fortran.find("False"), 5, "True ");
  std::string fortranPath = writeBytes("fortran.npy", fortran);
  expectErrorContaining([&] { MappedNpy::open(fortranPath); }, fortranPath + ": Fortran-ordered .npy files");
}

TEST_F(DatasetTest, ArraysMustAgreeOnTheirSampleCount) {
  std::string x = write("x.npy", Tensor(DType::F32, {5, 2})), y = write("y.npy", Tensor(DType::I64, {4}));
  expectErrorContaining([&] { Dataset::open({{"x", x}, {"y", y}}); },
                        y + ": holds 4 samples (shape [4]), but " + x + " holds 5");
  std::string scalar = write("s.npy", Tensor::scalar(DType::F32, 1));
  expectErrorContaining([&] { Dataset::open({{"s", scalar}}); }, scalar + ": holds a scalar");
  expectErrorContaining([&] { Dataset::open({{"x", x}, {"x", x}}); }, "'x' is given twice");
  expectErrorContaining([&] { Dataset::open({}); }, "no arrays");
}

TEST_F(DatasetTest, BatchesGatherRowsAndPadWithRepeats) {
  Tensor x(DType::F32, {5, 2});
  for (int64_t i = 0; i < 10; ++i)
    x.setDouble(i, static_cast<double>(i));
  Tensor flags = Tensor::fromDoubles(DType::U8, {5}, {0, 1, 0, 1, 0});
  std::string flagBytes = serializeNpy(flags);
  flagBytes.replace(flagBytes.find("|u1"), 3, "|b1");
  flagBytes[flagBytes.size() - 2] = 7; // numpy may store true as any non-zero byte
  Dataset data = Dataset::open({{"x", write("x.npy", x)}, {"flag", writeBytes("flag.npy", flagBytes)}});
  EXPECT_EQ(data.size(), 5);
  Tensor batch(DType::F32, {4, 2});
  data.gather("x", {3, 0}, batch);
  EXPECT_EQ(batch.toDoubles(), (std::vector<double>{6, 7, 0, 1, 6, 7, 0, 1}));
  Tensor flagBatch(DType::Bool, {3});
  data.gather("flag", {3, 1, 2}, flagBatch);
  EXPECT_EQ(flagBatch.toDoubles(), (std::vector<double>{1, 1, 0}));
  Tensor wrong(DType::F32, {4, 3});
  expectErrorContaining([&] { data.gather("x", {0}, wrong); }, "a batch of 'x' must be [rows, [2]] f32");
  expectErrorContaining([&] { data.gather("x", {5}, batch); }, "sample 5 of 'x' is outside [0, 5)");
  expectErrorContaining([&] { data.gather("x", {0, 1, 2, 3, 4}, batch); }, "5 samples of 'x' do not fit");
  expectErrorContaining([&] { data.array("z"); }, "no array 'z' (arrays: x, flag)");
}

TEST_F(DatasetTest, TensorsInMemoryMakeADatasetToo) {
  Tensor x = Tensor::fromDoubles(DType::F32, {3, 2}, {0, 1, 2, 3, 4, 5});
  Dataset data = Dataset::fromTensors({{"x", x}, {"y", Tensor::fromDoubles(DType::I64, {3}, {7, 8, 9})}});
  EXPECT_EQ(data.size(), 3);
  EXPECT_EQ(data.array("x").source, "tensor 'x'");
  Tensor batch(DType::F32, {2, 2});
  data.gather("x", {2, 0}, batch);
  EXPECT_EQ(batch.toDoubles(), (std::vector<double>{4, 5, 0, 1}));
  expectErrorContaining([&] { Dataset::fromTensors({{"x", x}, {"y", Tensor(DType::I64, {4})}}); },
                        "tensor 'y': holds 4 samples (shape [4]), but tensor 'x' holds 3");
  expectErrorContaining([&] { Dataset::fromTensors({{"x", Tensor()}}); }, "tensor 'x' holds nothing");
}

TEST(EpochOrder, IsAPermutationFixedBySeedAndEpoch) {
  std::vector<int64_t> plain = epochOrder(6, false, 1, 3);
  EXPECT_EQ(plain, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  std::vector<int64_t> a = epochOrder(1000, true, 7, 2);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, epochOrder(1000, false, 0, 0));
  EXPECT_NE(a, sorted);
  EXPECT_EQ(a, epochOrder(1000, true, 7, 2)); // the same whatever ran before
  EXPECT_NE(a, epochOrder(1000, true, 7, 3));
  EXPECT_NE(a, epochOrder(1000, true, 8, 2));
  // Pinned: std::seed_seq and std::mt19937_64 are specified bit for bit, so this order is the
  // same on every standard library, and a checkpoint resumes the same order on any of them.
  EXPECT_EQ(epochOrder(8, true, 0, 0), (std::vector<int64_t>{0, 7, 5, 6, 1, 3, 2, 4}));
}

} // namespace kiln::runtime
