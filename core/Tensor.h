#pragma once
// kiln::Tensor: a dense, row-major host tensor of any DType. It is what the reference
// evaluator computes on, what constants and parameters hold, and what users bind to a run.
// Copies share storage (like a PyTorch tensor); clone() makes a deep copy. Storage is
// 64-byte aligned, and tensors of 2 MiB and more ask the kernel for transparent huge pages,
// except for a tensor borrowed over someone else's bytes (borrow(): a numpy array's buffer).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/DType.h"

namespace kiln {

class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor of the given type.
  explicit Tensor(TensorType type);
  Tensor(DType dtype, Shape shape) : Tensor(TensorType{dtype, std::move(shape)}) {}

  /// Builds a tensor from doubles, converting each to `dtype`.
  static Tensor fromDoubles(DType dtype, Shape shape, const std::vector<double> &values);
  /// A scalar (rank-0) tensor.
  static Tensor scalar(DType dtype, double value);
  /// A tensor over `data`, bytes of `type` that the caller owns, without a copy (how the
  /// Python package binds a numpy array to a run). The caller keeps them alive and in place
  /// for as long as the tensor or a copy of it is used. They need only be aligned to the
  /// element size (what compiled models assume of inputs and outputs), not to 64 bytes.
  /// ownsStorageAlone() is false for such a tensor: it never holds its bytes. kiln::Error for
  /// null data of a type that has bytes.
  static Tensor borrow(TensorType type, void *data);

  const TensorType &type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape &shape() const { return type_.shape; }
  int64_t rank() const { return type_.rank(); }
  int64_t numElements() const { return type_.numElements(); }
  size_t byteSize() const { return type_.byteSize(); }
  bool defined() const { return storage_ != nullptr; }
  /// Whether this tensor is the only one holding its storage (no copy or view of it is alive
  /// elsewhere): then rewriting its bytes in place changes no one else's values.
  bool ownsStorageAlone() const { return storage_ != nullptr && storage_.use_count() == 1; }

  /// The elements, 64-byte aligned (a cache line, one AVX-512 vector).
  void *data() { return storage_.get(); }
  const void *data() const { return storage_.get(); }
  template <typename T> T *dataAs() { return static_cast<T *>(data()); }
  template <typename T> const T *dataAs() const { return static_cast<const T *>(data()); }

  /// Element access by flat index with conversion; the reference evaluator computes floats
  /// in double and integers in int64 through these, so one code path serves every dtype.
  double getDouble(int64_t index) const;
  void setDouble(int64_t index, double value);
  int64_t getInt(int64_t index) const;
  void setInt(int64_t index, int64_t value);

  std::vector<double> toDoubles() const;
  Tensor clone() const;
  /// Same data viewed with another shape of equal element count.
  Tensor reshaped(Shape shape) const;
  /// Same storage viewed as `type`, of any dtype, which must need exactly this tensor's bytes:
  /// bytes read before their type was known (a u8 tensor filled from a file) become the
  /// tensor they hold without a copy.
  Tensor viewAs(TensorType type) const;
  /// Bitwise equality of type and contents.
  bool identical(const Tensor &other) const;

private:
  TensorType type_;
  std::shared_ptr<unsigned char> storage_;
};

/// Conversions for the 16-bit float formats (round to nearest even).
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBFloat16(float value);
float bfloat16ToFloat(uint16_t bits);

/// Fills a tensor with reproducible random values: floats uniform in [-1, 1), integers in
/// [0, 10), bools fair coins.
Tensor randomTensor(const TensorType &type, uint64_t seed);

/// Result of comparing a tensor with an expected one: the worst element by
/// |got - want| - atol - rtol * |want| (positive means outside tolerance).
struct Comparison {
  bool ok = true;
  std::string message; // names the worst element when !ok, or the type mismatch
  int64_t worstIndex = -1;
  double worstGot = 0, worstWant = 0;
  double maxAbsError = 0, maxRelError = 0;
};
Comparison compareTensors(const Tensor &got, const Tensor &want, double rtol, double atol);

/// A short human-readable rendering, eliding the middle of large tensors.
std::string tensorSummary(const Tensor &tensor, int maxElements = 8);

} // namespace kiln
