#pragma once
// How a run's tensors meet a model's specs, and how a batch-tiled model (kiln_model_desc::
// batch_tile, ir/BatchTiling.h) meets its callers:
// its kernels compute one tile of `tile` rows, the caller hands it a whole batch. This checks a
// run's tensors against the model's declared specs and says how many rows they hold; the
// Executable then runs one tile per run of `tile` rows (runtime/Executable.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "core/Tensor.h"

namespace kiln::runtime {

struct TensorSpec;

/// How run and load errors name a model's tensors: "1 input", "2 inputs"; "'x', 'z'" (or
/// "none").
std::string countOf(size_t count, const std::string &noun);
std::string namesOf(const std::vector<TensorSpec> &specs);
/// A kiln::Error naming `role` and `spec` unless `tensor` is defined and of type `expected`.
void checkType(const char *role, const TensorSpec &spec, const TensorType &expected, const Tensor &tensor);

struct BatchTiles {
  /// Rows one run of the kernels computes; 0 for a model that runs whole.
  int64_t tile = 0;
  /// The batch served: a constant, or 0 for any multiple of tile (the symbolic dim `symbol`).
  int64_t extent = 0;
  std::string symbol;
  /// Any count of rows, not only multiples of tile: the caller pads the last tile (training
  /// steps weigh the padding 0: runtime/TrainingStep.h).
  bool padsLastTile = false;
  /// Per input: whether it carries the batch (on axis 0). Every output does.
  std::vector<bool> batched;

  bool tiled() const { return tile > 0; }

  /// The spec a caller sees for a tile's `spec`: axis 0 holds the served batch (the constant
  /// extent, or the symbol) where `carriesBatch`.
  TensorSpec declared(const TensorSpec &tileSpec, bool carriesBatch) const;

  /// The rows that `inputs` hold (kiln::Error, naming the input, for a count, dtype or shape
  /// that the declared specs do not allow, or two batched inputs of different rows), given
  /// the specs of one tile. For an untiled model, the inputs must match the specs exactly and
  /// the result is 0.
  int64_t rowsOf(const std::vector<TensorSpec> &tileInputs, const std::vector<Tensor> &inputs) const;

  /// The type of a tile's output `tileSpec` at `rows` rows (untiled: the spec's own type).
  TensorType outputType(const TensorSpec &tileSpec, int64_t rows) const;

  /// Copies rows [begin, begin + R) of `batch` into `tile` (R rows, of the batch's row type);
  /// where the batch ends first, the rest of the tile repeats row `begin`. Returns how many
  /// rows came from the batch.
  static int64_t copyTileRows(const Tensor &batch, int64_t begin, Tensor &tile);
  /// A tensor over rows [begin, begin + rows) of `batch`, sharing its storage.
  static Tensor rowsView(const Tensor &batch, int64_t begin, int64_t rows);

  /// Checks caller-provided outputs against outputType at `rows`.
  void checkOutputs(const std::vector<TensorSpec> &tileOutputs, const std::vector<Tensor> &outputs,
                    int64_t rows) const;
};

} // namespace kiln::runtime
