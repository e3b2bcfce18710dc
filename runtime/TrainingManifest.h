#pragma once
// What a training step compiled ahead of time (kiln-compile --train, codegen/TrainingAot.h)
// says about itself, beyond the model description every compiled model carries: which inputs
// are the learning rate, the step count and the target, which output overwrites which weight,
// the step count reached so far, and the loss and optimizer (for display). The shared object
// exports it as text from `const char *kiln_training(void)`: a model without that symbol is
// not a training step. The text is one entry per line, fields separated by tabs (names hold
// neither tabs nor newlines):
//
//   kiln-training<TAB>1                          format version, first line
//   loss<TAB>cross-entropy                        mean | sum | mse | cross-entropy | nll | value
//   optimizer<TAB>sgd                             sgd | adam | adamw
//   hyper<TAB>momentum<TAB>0.9                    hyper-parameters, for display (lr aside)
//   lr<TAB>0.01                                   the initial learning rate
//   steps<TAB>0                                   steps already taken
//   classes<TAB>10                                class count (cross-entropy, nll); 0 otherwise
//   ignore-index<TAB>-100                         only when the loss ignores labels of this value
//   input<TAB>lr<TAB>3                            the model input taking lr, step, target
//                                                 (and sample-weight, with batch tiles)
//   batch-tile<TAB>32<TAB>N                       only for a step over a symbolic batch N,
//   batch-input<TAB>0                             compiled for tiles of 32 rows; the inputs
//                                                 holding the batch on axis 0
//   param<TAB>fc.weight                           a weight that is a parameter or state
//   update<TAB>1<TAB>param<TAB>fc.weight<TAB>fc.weight           output, kind, tensor, owner
//   update<TAB>5<TAB>state<TAB>fc.weight.momentum_buffer<TAB>fc.weight
//
// The runtime reads it (TrainingStep.h) and codegen writes it: neither needs the other. A step
// compiled just in time carries one too, made by codegen::compileTrainingStep.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::runtime {

/// The symbol a training step compiled ahead of time exports.
#define KILN_TRAINING_SYMBOL "kiln_training"
/// A split step compiled ahead of time (one over a symbolic batch, in tiles) exports its gradient
/// part as KILN_MODEL_SYMBOL and its update part as this.
#define KILN_TRAINING_UPDATE_SYMBOL "kiln_training_update"
typedef const char *(*kiln_training_fn)(void);

/// One tensor the step overwrites: output `output` holds its new value.
struct TrainingManifestUpdate {
  int64_t output = 0;
  bool isState = false; // an optimizer state or a buffer, not a trained parameter
  std::string name;     // the weight it overwrites
  std::string param;    // the trained parameter it belongs to (its own name when trained)
};

struct TrainingManifest {
  std::string loss;      // "mean", "sum", "mse", "cross-entropy", "nll", "value"
  std::string optimizer; // "sgd", "adam", "adamw"
  std::vector<std::pair<std::string, double>> hyperParameters; // in display order
  double lr = 0.0;
  int64_t steps = 0;
  int64_t classes = 0;
  /// Set when the loss (cross-entropy, nll) ignores samples labelled so: they add nothing to the
  /// loss or the gradients, and the mean is over the others. A Trainer pads a short batch
  /// with such samples (runtime/Trainer.h).
  std::optional<int64_t> ignoreIndex;
  /// Model input positions; targetInput is -1 when the loss takes no target.
  int64_t lrInput = -1, stepInput = -1, targetInput = -1;
  /// A step over a symbolic batch (codegen compiles it for tiles of `batchTile` rows; 0: a
  /// step of one static batch): its gradient part weighs each sample's loss by the f32[tile]
  /// input `weightInput` (passes/autodiff's LossSpec::sampleWeights), and the model inputs
  /// `batchInputs` (forward inputs and target) hold the batch, named `batchSymbol`, on axis 0.
  /// TrainingStep runs a batch of any size as tiles and sums their gradients.
  int64_t batchTile = 0;
  std::string batchSymbol;
  int64_t weightInput = -1;
  std::vector<int64_t> batchInputs;
  /// The weights (by name) that are parameters or optimizer states: saved and loaded.
  std::vector<std::string> params;
  std::vector<TrainingManifestUpdate> updates;

  /// The text above. kiln::Error for a name holding a tab or a newline.
  std::string toText() const;
  /// Parses toText()'s format; `what` names the source in errors. kiln::Error for another
  /// format version, an unknown entry or a malformed one.
  static TrainingManifest parse(const std::string &text, const std::string &what);
  /// "cross-entropy loss, sgd (lr 0.01, momentum 0.9)".
  std::string describe() const;
};

} // namespace kiln::runtime
