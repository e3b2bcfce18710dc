#pragma once
// Sums of float tensors in place, for the runtime's own arithmetic on gradients: a Trainer's
// micro-batches and a TrainingStep's batch tiles (runtime/Trainer.h, runtime/TrainingStep.h).
#include "core/Tensor.h"

namespace kiln::runtime {

/// y += a * x, elementwise; both of one float type and shape (f16 and bf16 through double,
/// rounded once per element).
void scaleAndAdd(Tensor &y, double a, const Tensor &x);

/// x *= a, elementwise.
void scaleInPlace(Tensor &x, double a);

} // namespace kiln::runtime
