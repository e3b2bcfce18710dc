// Datasets of mapped .npy arrays and the order of an epoch (see Dataset.h).
#include "runtime/Dataset.h"

#include <cstring>
#include <numeric>
#include <random>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "runtime/Npy.h"

namespace kiln::runtime {

void Dataset::add(DatasetArray array) {
  if (has(array.name))
    fail("dataset: '{}' is given twice ({} and {})", array.name, this->array(array.name).source, array.source);
  if (array.type.rank() == 0)
    fail("{}: holds a scalar ({}), not samples along a first dimension", array.source, array.type.toString());
  int64_t samples = array.type.shape[0];
  if (!arrays_.empty() && samples != size_)
    fail("{}: holds {} samples (shape {}), but {} holds {}", array.source, samples, shapeToString(array.type.shape),
         arrays_[0].source, size_);
  size_ = samples;
  arrays_.push_back(std::move(array));
}

Dataset Dataset::open(const std::vector<std::pair<std::string, std::string>> &namesAndPaths) {
  if (namesAndPaths.empty())
    fail("dataset: no arrays");
  Dataset dataset;
  for (const auto &[name, path] : namesAndPaths) {
    MappedNpy file = MappedNpy::open(path);
    dataset.add({name, path, file.type(), file.data(), file.owner()});
  }
  return dataset;
}

Dataset Dataset::fromTensors(const std::vector<std::pair<std::string, Tensor>> &namedTensors) {
  if (namedTensors.empty())
    fail("dataset: no arrays");
  Dataset dataset;
  for (const auto &[name, tensor] : namedTensors) {
    if (!tensor.defined())
      fail("dataset: tensor '{}' holds nothing", name);
    auto owner = std::make_shared<const Tensor>(tensor);
    dataset.add({name, fmt::format("tensor '{}'", name), tensor.type(),
                 static_cast<const unsigned char *>(owner->data()), owner});
  }
  return dataset;
}

bool Dataset::has(const std::string &name) const {
  for (const DatasetArray &array : arrays_)
    if (array.name == name)
      return true;
  return false;
}

const DatasetArray &Dataset::array(const std::string &name) const {
  std::vector<std::string> names;
  for (const DatasetArray &array : arrays_) {
    if (array.name == name)
      return array;
    names.push_back(array.name);
  }
  fail("dataset: no array '{}' (arrays: {})", name, fmt::join(names, ", "));
}

TensorType Dataset::sampleType(const DatasetArray &array) {
  const Shape &shape = array.type.shape;
  return TensorType{array.type.dtype, Shape(shape.begin() + 1, shape.end())};
}

void Dataset::gather(const std::string &name, const std::vector<int64_t> &indices, Tensor &batch) const {
  const DatasetArray &source = array(name);
  TensorType sample = sampleType(source);
  if (batch.dtype() != sample.dtype || batch.rank() != sample.rank() + 1 ||
      !std::equal(sample.shape.begin(), sample.shape.end(), batch.shape().begin() + 1))
    fail("dataset: a batch of '{}' must be [rows, {}] {}, got {}", name, shapeToString(sample.shape),
         dtypeName(sample.dtype), batch.type().toString());
  int64_t rows = batch.shape()[0];
  if (indices.empty() || static_cast<int64_t>(indices.size()) > rows)
    fail("dataset: {} samples of '{}' do not fit a batch of {} rows", indices.size(), name, rows);
  size_t rowBytes = sample.byteSize();
  auto *out = static_cast<unsigned char *>(batch.data());
  for (int64_t row = 0; row < rows; ++row) {
    int64_t index = indices[static_cast<size_t>(row) % indices.size()];
    if (index < 0 || index >= size_)
      fail("dataset: sample {} of '{}' is outside [0, {})", index, name, size_);
    if (rowBytes > 0)
      std::memcpy(out + static_cast<size_t>(row) * rowBytes, source.data + static_cast<size_t>(index) * rowBytes,
                  rowBytes);
  }
  if (sample.dtype == DType::Bool)
    normalizeBools(out, batch.numElements());
}

std::vector<int64_t> epochOrder(int64_t samples, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(samples));
  std::iota(order.begin(), order.end(), int64_t(0));
  if (!shuffle)
    return order;
  // One engine per epoch, seeded from both numbers (a seed sequence mixes them), so that no
  // epoch's order depends on how many numbers earlier epochs drew.
  std::seed_seq mix{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(epoch),
                    static_cast<uint32_t>(static_cast<uint64_t>(epoch) >> 32)};
  std::mt19937_64 engine(mix);
  // Fisher-Yates with a plain modulo: std::uniform_int_distribution and std::shuffle differ
  // between standard libraries; the bias of a 64-bit modulo is below 2^-16 for any size kiln takes.
  for (size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[static_cast<size_t>(engine() % i)]);
  return order;
}

} // namespace kiln::runtime
