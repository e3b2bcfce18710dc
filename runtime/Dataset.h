#pragma once
// A training dataset: named arrays whose first dimension is the sample dimension (one per model
// input, and one for the labels), memory-mapped from .npy files (runtime/MappedNpy.h) so that
// a dataset larger than memory streams, or tensors already in memory; and the order an epoch
// reads it in.
//
// Batches are gathered row by row into tensors the caller owns and reuses: a batch costs one
// copy of its rows and no allocation. A batch with fewer samples than rows (the last one of an
// epoch) is padded by repeating its own samples: real values, so that no padding row can put
// an infinity or a NaN into a forward pass whose loss then ignores it (runtime/Trainer.h).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/Tensor.h"
#include "runtime/MappedNpy.h"

namespace kiln::runtime {

/// One array of a dataset: the input it feeds (or the labels' input name) and its elements.
struct DatasetArray {
  std::string name;
  std::string source; // the file it is mapped from, or "tensor 'NAME'": what errors name
  TensorType type;    // [samples, sample dims...]
  const unsigned char *data = nullptr; // C order, as stored (a bool may be any non-zero byte)
  std::shared_ptr<const void> owner;   // keeps `data` alive: the mapping, or the tensor
};

class Dataset {
public:
  /// Maps each (name, path). kiln::Error naming the file when one cannot be read (as
  /// MappedNpy::open) or is a scalar, when two arrays share a name, when there is none, or when
  /// the arrays' sample counts differ (naming both files and both counts).
  static Dataset open(const std::vector<std::pair<std::string, std::string>> &namesAndPaths);
  /// The same over tensors in memory (shared, not copied: they must not change while the
  /// dataset is read).
  static Dataset fromTensors(const std::vector<std::pair<std::string, Tensor>> &namedTensors);

  /// The number of samples (every array's dim 0).
  int64_t size() const { return size_; }
  const std::vector<DatasetArray> &arrays() const { return arrays_; }
  /// The array called `name`; kiln::Error naming the arrays there are otherwise.
  const DatasetArray &array(const std::string &name) const;
  bool has(const std::string &name) const;
  /// The type of one sample of `array`: its type without dim 0.
  static TensorType sampleType(const DatasetArray &array);

  /// Copies samples `indices` (each in [0, size())) of array `name` into the first rows of
  /// `batch`, and fills the rows after them by repeating those samples from the first. `batch`
  /// must be [R, sample shape...] of the array's dtype with 1 <= indices.size() <= R (the
  /// caller checked the types once: a mismatch here is a kiln::Error, not a guess).
  void gather(const std::string &name, const std::vector<int64_t> &indices, Tensor &batch) const;

private:
  void add(DatasetArray array);

  std::vector<DatasetArray> arrays_;
  int64_t size_ = 0;
};

/// The sample order of epoch `epoch` (counting from 0) of a dataset of `samples`: 0, 1, ... in
/// order, or with `shuffle` a permutation that depends on (seed, epoch) alone (Fisher-Yates on
/// std::mt19937_64, which the C++ standard fixes bit for bit), so that a run stopped and
/// resumed reads every epoch in the order an uninterrupted run reads it.
std::vector<int64_t> epochOrder(int64_t samples, bool shuffle, uint64_t seed, int64_t epoch);

} // namespace kiln::runtime
