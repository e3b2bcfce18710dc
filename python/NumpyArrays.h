#pragma once
// numpy arrays and kiln tensors, for the bindings: the one table of which numpy dtype holds
// which kiln dtype, input arrays borrowed without a copy, caller-owned output arrays, and
// outputs handed to numpy without a copy.
//
// An array is taken as it is only when it is a numpy.ndarray of exactly the declared dtype
// (native byte order), the declared shape, C-contiguous and aligned: then the tensor is a view
// of its buffer (Tensor::borrow). Anything else is a TypeError (not an array, another dtype) or
// a ValueError (another shape, not contiguous or not aligned) naming the tensor, what it
// expects and what it got, unless the caller asked for a copy, which numpy then makes
// (np.ascontiguousarray with the declared dtype). A shape is never broadcast.
#include <string>
#include <vector>

#include <pybind11/numpy.h>

#include "core/Tensor.h"
#include "runtime/Executable.h"

namespace kiln::python {

namespace py = pybind11;

/// The numpy dtype that holds `dtype`: bf16, which numpy lacks, is held as uint16 (its bits).
py::dtype numpyDType(DType dtype);
/// numpy's name of numpyDType(dtype): "float32", "uint16" for bf16.
std::string numpyDTypeName(DType dtype);

/// `shape` as Python writes a tuple: "(2, 3)", "(5,)", "()".
std::string shapeAsTuple(const Shape &shape);

/// The input `object` as a tensor of `spec`'s type over the array's own buffer (or, with
/// `copy`, over a converted copy when it needs one). The array the tensor reads is appended to
/// `keepAlive`, which the caller holds until the tensor is no longer used.
Tensor borrowInput(const runtime::TensorSpec &spec, py::handle object, bool copy,
                   std::vector<py::object> &keepAlive);

/// The output array `object` as a tensor of `spec`'s type over its buffer, which a run writes.
/// Never converted (the results would land in a copy): it must also be writeable, else a
/// ValueError.
Tensor borrowOutput(const runtime::TensorSpec &spec, py::handle object);

/// A numpy array over `tensor`'s storage, which the array keeps alive: no copy.
py::array toNumpy(Tensor tensor);

} // namespace kiln::python
