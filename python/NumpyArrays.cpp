// numpy arrays and kiln tensors (see NumpyArrays.h).
#include "python/NumpyArrays.h"

#include <memory>
#include <string>

#include "core/Error.h"
#include "core/SymbolicDim.h"

namespace kiln::python {

namespace {

/// What the caller can do about an array that is not usable as it is.
constexpr const char *kCopyHint = "; pass copy=True to convert it";

std::string typeNameOf(py::handle object) { return py::str(py::type::handle_of(object).attr("__name__")); }

/// numpy's own spelling of a dtype ("float32", ">f4" for a byte-swapped one).
std::string dtypeText(const py::dtype &dtype) { return py::str(static_cast<const py::handle &>(dtype)); }

Shape shapeOf(const py::array &array) {
  return Shape(array.shape(), array.shape() + array.ndim());
}

/// What is wrong with `array` as a buffer of `spec`'s type, checked in the order a user fixes
/// them: the dtype, the shape, then the layout. `role` is "input" or "output".
void checkArray(const char *role, const runtime::TensorSpec &spec, const py::array &array, const char *hint) {
  py::dtype want = numpyDType(spec.type.dtype);
  if (!py::detail::npy_api::get().PyArray_EquivTypes_(array.dtype().ptr(), want.ptr()))
    throw py::type_error(fmt::format("{} '{}' expects dtype {}, got {}{}", role, spec.name, dtypeText(want),
                                     dtypeText(array.dtype()), hint));
  Shape got = shapeOf(array);
  // A symbolic dim (a batch one compile serves at every size) takes any extent here; the
  // executable checks that the inputs agree on it.
  if (!shapeFits(got, spec.type.shape))
    throw py::value_error(fmt::format("{} '{}' expects shape {}, got {}", role, spec.name,
                                      shapeAsTuple(spec.type.shape), shapeAsTuple(got)));
  int flags = array.flags();
  if (!(flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_))
    throw py::value_error(fmt::format("{} '{}' is not C-contiguous (strides {}){}", role, spec.name,
                                      shapeAsTuple(Shape(array.strides(), array.strides() + array.ndim())), hint));
  if (!(flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_))
    throw py::value_error(fmt::format("{} '{}' is not aligned to its element size{}", role, spec.name, hint));
}

} // namespace

py::dtype numpyDType(DType dtype) {
  // By type number (PyArray_DescrFromType): a run asks once per input and output, and
  // parsing a dtype's name would cost more than the rest of its binding.
  using Api = py::detail::npy_api;
  constexpr int kHalf = 23; // NPY_HALF, which pybind11's table lacks
  switch (dtype) {
  case DType::F32: return py::dtype(Api::NPY_FLOAT_);
  case DType::F64: return py::dtype(Api::NPY_DOUBLE_);
  case DType::F16: return py::dtype(kHalf);
  case DType::BF16: return py::dtype(Api::NPY_UINT16_);
  case DType::I64: return py::dtype(Api::NPY_INT64_);
  case DType::I32: return py::dtype(Api::NPY_INT32_);
  case DType::I8: return py::dtype(Api::NPY_INT8_);
  case DType::U8: return py::dtype(Api::NPY_UINT8_);
  case DType::Bool: return py::dtype(Api::NPY_BOOL_);
  }
  throw Error("numpyDType: a dtype outside the enum");
}

std::string numpyDTypeName(DType dtype) { return dtypeText(numpyDType(dtype)); }

std::string shapeAsTuple(const Shape &shape) {
  std::string text = "(";
  for (size_t d = 0; d < shape.size(); ++d)
    // A symbolic dim as Python shows its name in a tuple: ('batch', 3).
    text += (d ? ", " : "") + (isSymbolicDim(shape[d]) ? "'" + dimToString(shape[d]) + "'" : std::to_string(shape[d]));
  return text + (shape.size() == 1 ? ",)" : ")");
}

Tensor borrowInput(const runtime::TensorSpec &spec, py::handle object, bool copy, std::vector<py::object> &keepAlive) {
  py::object array = py::reinterpret_borrow<py::object>(object);
  if (copy) {
    // Returns the array itself when it already is what the model reads.
    array = py::module_::import("numpy").attr("ascontiguousarray")(array, numpyDType(spec.type.dtype));
  } else if (!py::isinstance<py::array>(array)) {
    throw py::type_error(fmt::format("input '{}' must be a numpy.ndarray of dtype {}, got {}{}", spec.name,
                                     dtypeText(numpyDType(spec.type.dtype)), typeNameOf(object), kCopyHint));
  }
  py::array checked = py::reinterpret_borrow<py::array>(array);
  checkArray("input", spec, checked, kCopyHint);
  // Kernels never write their inputs: a read-only array is fine.
  Tensor tensor = Tensor::borrow({spec.type.dtype, shapeOf(checked)}, const_cast<void *>(checked.data()));
  keepAlive.push_back(std::move(array));
  return tensor;
}

Tensor borrowOutput(const runtime::TensorSpec &spec, py::handle object) {
  if (!py::isinstance<py::array>(object))
    throw py::type_error(fmt::format("output '{}' must be a numpy.ndarray of dtype {}, got {}", spec.name,
                                     dtypeText(numpyDType(spec.type.dtype)), typeNameOf(object)));
  py::array array = py::reinterpret_borrow<py::array>(object);
  checkArray("output", spec, array, "");
  if (!array.writeable())
    throw py::value_error(fmt::format("output '{}' is read-only", spec.name));
  return Tensor::borrow({spec.type.dtype, shapeOf(array)}, array.mutable_data());
}

py::array toNumpy(Tensor tensor) {
  auto held = std::make_unique<Tensor>(std::move(tensor));
  std::vector<py::ssize_t> shape(held->shape().begin(), held->shape().end());
  py::dtype dtype = numpyDType(held->dtype());
  void *data = held->data();
  py::capsule owner(held.get(), [](void *p) { delete static_cast<Tensor *>(p); });
  held.release(); // the capsule owns it now
  return py::array(dtype, shape, data, owner);
}

} // namespace kiln::python
