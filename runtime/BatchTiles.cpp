#include "runtime/BatchTiles.h"

#include <algorithm>
#include <cstring>

#include "core/Error.h"
#include "core/SymbolicDim.h"
#include "runtime/Executable.h"

namespace kiln::runtime {

std::string countOf(size_t count, const std::string &noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

std::string namesOf(const std::vector<TensorSpec> &specs) {
  std::string names;
  for (const TensorSpec &spec : specs)
    names += (names.empty() ? "'" : ", '") + spec.name + "'";
  return names.empty() ? "none" : names;
}

void checkType(const char *role, const TensorSpec &spec, const TensorType &expected, const Tensor &tensor) {
  if (!tensor.defined())
    fail("{} '{}': expected {}, got an undefined tensor", role, spec.name, expected.toString());
  if (tensor.type() != expected)
    fail("{} '{}': expected {}, got {}", role, spec.name, expected.toString(), tensor.type().toString());
}

namespace {

void checkCount(const char *role, const std::vector<TensorSpec> &specs, const std::vector<Tensor> &tensors) {
  if (tensors.size() != specs.size())
    fail("the model has {} ({}), got {}", countOf(specs.size(), role), namesOf(specs), tensors.size());
}

/// Same dtype and rank, and the same dims but for axis 0 (the batch).
bool sameRowShape(const TensorType &got, const TensorType &tile) {
  if (got.dtype != tile.dtype || got.rank() != tile.rank() || got.rank() == 0)
    return false;
  for (size_t d = 1; d < tile.shape.size(); ++d)
    if (got.shape[d] != tile.shape[d])
      return false;
  return true;
}

} // namespace

TensorSpec BatchTiles::declared(const TensorSpec &tileSpec, bool carriesBatch) const {
  TensorSpec spec = tileSpec;
  if (tiled() && carriesBatch)
    spec.type.shape[0] = extent > 0 ? extent : symbolDim(symbol);
  return spec;
}

int64_t BatchTiles::rowsOf(const std::vector<TensorSpec> &tileInputs, const std::vector<Tensor> &inputs) const {
  checkCount("input", tileInputs, inputs);
  int64_t rows = -1;
  std::string rowsFrom;
  for (size_t i = 0; i < tileInputs.size(); ++i) {
    const TensorSpec &spec = tileInputs[i];
    if (!tiled() || !batched[i]) {
      checkType("input", spec, spec.type, inputs[i]);
      continue;
    }
    const Tensor &tensor = inputs[i];
    auto expected = [&] { return declared(spec, true).type.toString(); }; // only for messages
    if (!tensor.defined())
      fail("input '{}': expected {}, got an undefined tensor", spec.name, expected());
    // Compared in place: a warm run allocates nothing (ExecutableTest).
    if (!sameRowShape(tensor.type(), spec.type) || (extent > 0 && tensor.shape()[0] != extent))
      fail("input '{}': expected {}, got {}", spec.name, expected(), tensor.type().toString());
    int64_t n = tensor.shape()[0];
    if (n % tile != 0 && !padsLastTile)
      fail("input '{}': {} rows, but the model runs tiles of {}: give a multiple of {}", spec.name, n, tile, tile);
    if (rows >= 0 && n != rows)
      fail("the batch {} has two extents: {} from input '{}' but {} from input '{}'",
           extent > 0 ? std::to_string(extent) : symbol, rows, rowsFrom, n, spec.name);
    rows = n;
    rowsFrom = spec.name;
  }
  if (!tiled())
    return 0;
  // A model whose inputs all ignore the batch serves the extent it was declared for.
  return rows >= 0 ? rows : (extent > 0 ? extent : tile);
}

int64_t BatchTiles::copyTileRows(const Tensor &batch, int64_t begin, Tensor &tile) {
  const int64_t tileRows = tile.shape()[0], batchRows = batch.shape()[0];
  const int64_t count = std::min(tileRows, batchRows - begin);
  const auto rowBytes = static_cast<size_t>(batchRows > 0 ? batch.byteSize() / batchRows : 0);
  const auto *source = static_cast<const std::byte *>(batch.data()) + begin * rowBytes;
  auto *target = static_cast<std::byte *>(tile.data());
  std::memcpy(target, source, static_cast<size_t>(count) * rowBytes);
  for (int64_t r = count; r < tileRows; ++r)
    std::memcpy(target + r * rowBytes, source, rowBytes);
  return count;
}

Tensor BatchTiles::rowsView(const Tensor &batch, int64_t begin, int64_t rows) {
  TensorType type = batch.type();
  const auto rowBytes = static_cast<size_t>(type.shape[0] > 0 ? batch.byteSize() / type.shape[0] : 0);
  type.shape[0] = rows;
  // The callers' kernels only read their inputs; Tensor has no read-only borrow.
  return Tensor::borrow(type, static_cast<std::byte *>(const_cast<void *>(batch.data())) + begin * rowBytes);
}

TensorType BatchTiles::outputType(const TensorSpec &tileSpec, int64_t rows) const {
  TensorType type = tileSpec.type;
  if (tiled())
    type.shape[0] = rows;
  return type;
}

void BatchTiles::checkOutputs(const std::vector<TensorSpec> &tileOutputs, const std::vector<Tensor> &outputs,
                              int64_t rows) const {
  checkCount("output", tileOutputs, outputs);
  for (size_t i = 0; i < tileOutputs.size(); ++i) {
    const Tensor &output = outputs[i];
    bool fits = output.defined() && (tiled() ? sameRowShape(output.type(), tileOutputs[i].type) && output.shape()[0] == rows
                                             : output.type() == tileOutputs[i].type);
    if (!fits)
      checkType("output", tileOutputs[i], outputType(tileOutputs[i], rows), output); // says how it differs
  }
}

} // namespace kiln::runtime
