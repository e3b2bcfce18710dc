#pragma once
// The finite-difference gradient check shared by the autodiff tests (tests/passes/Grad*Test.cpp,
// AutodiffTest.cpp), defined in GradCheck.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "ir/Builder.h"

namespace kiln::test {

struct GradInput {
  TensorType type;
  bool positive = false;      // draw from [0.5, 1.5) instead of [-1, 1) (log, sqrt, pow bases)
  bool differentiate = true;  // false: an input the gradient is not taken for
};
using GradBuildFn = std::function<ir::Value *(ir::Builder &, const std::vector<ir::Value *> &)>;

/// Builds x -> build(x) over inputs of the given types, takes L = reduce_sum(f(x) * R) with fixed
/// random weights R, appends the gradients with autodiff (decomposing first when `decompose`,
/// as the training graph does: composites, and the recurrences into their unrolled form), and expects each input's gradient, evaluated in f64, to match the central
/// difference (L(x + h e_i) - L(x - h e_i)) / 2h for every element within 1e-8 + 1e-6 |fd|.
void expectGradientsMatch(const std::vector<GradInput> &specs, const GradBuildFn &build, uint64_t seed = 1,
                          bool decompose = false);

} // namespace kiln::test
