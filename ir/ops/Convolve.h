#pragma once
// conv's geometry and reference arithmetic (ir/ops/Contraction.cpp), for the ops that share
// them: conv itself and the int8 qconv (ir/ops/Quantize.cpp), which convolves its centred
// integers exactly in double.
#include <vector>

#include "ir/ops/Common.h"

namespace kiln::ir {

/// conv's output shape for input x and weight w (checked as conv checks them).
Shape convOutputShape(const TensorType &x, const TensorType &w, const AttrMap &attrs);

/// conv of x by w (values in row-major order, typed as given) in double, zero padding, as the
/// evaluator computes conv: the output's values in row-major order.
std::vector<double> convolve(const TensorType &xType, const std::vector<double> &x, const TensorType &wType,
                             const std::vector<double> &w, const AttrMap &attrs);

} // namespace kiln::ir
