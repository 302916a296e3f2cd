#include "tensors.h"

#include <cstring>
#include <utility>

#include "tensorhub/core/error.h"

namespace tensorhub::python {
namespace {

// The numpy dtype name of each safetensors dtype tensorhub stores.
const char* numpy_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kF64: return "float64";
    case DType::kI64: return "int64";
    case DType::kI32: return "int32";
    case DType::kU8: return "uint8";
    case DType::kI8: return "int8";
    case DType::kBool: return "bool";
  }
  throw Internal("unknown DType");
}

// The DType of a numpy dtype, or throws InvalidArgument naming the array.
DType dtype_of(const py::dtype& dt, const std::string& where) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return DType::kF32;
  if (kind == 'f' && size == 8) return DType::kF64;
  if (kind == 'i' && size == 8) return DType::kI64;
  if (kind == 'i' && size == 4) return DType::kI32;
  if (kind == 'i' && size == 1) return DType::kI8;
  if (kind == 'u' && size == 1) return DType::kU8;
  if (kind == 'b' && size == 1) return DType::kBool;
  const std::string name = py::str(py::handle(dt)).cast<std::string>();
  if (kind == 'O')
    throw InvalidArgument(where + " has dtype object (Python objects, or a ragged nested list): "
                          "only numeric arrays can be stored");
  throw InvalidArgument(where + " has dtype " + name +
                        ", which tensorhub does not store; convert it to one of float32, float64, "
                        "int64, int32, int8, uint8, bool");
}

}  // namespace

std::vector<ArrayView> view_arrays(const py::dict& tensors, const std::string& what) {
  std::vector<ArrayView> views;
  views.reserve(tensors.size());
  for (const auto& [key, value] : tensors) {
    if (!py::isinstance<py::str>(key))
      throw InvalidArgument(what + ": key " + py::repr(key).cast<std::string>() + " is not a str");
    ArrayView v;
    v.name = key.cast<std::string>();
    const std::string where = what + " \"" + v.name + "\"";
    if (!py::isinstance<py::array>(value))
      throw InvalidArgument(where + " is a " + py::str(value.get_type().attr("__name__")).cast<std::string>() +
                            ", not a numpy array");
    v.array = py::reinterpret_borrow<py::array>(value);
    v.dtype = dtype_of(v.array.dtype(), where);
    const std::string order = py::str(v.array.dtype().attr("byteorder")).cast<std::string>();
    if (order == ">") throw InvalidArgument(where + " is big-endian; convert it with .astype(its dtype.newbyteorder('='))");
    if (!(v.array.flags() & py::array::c_style))
      throw InvalidArgument(where + " is not C-contiguous; pass numpy.ascontiguousarray(it)");
    for (py::ssize_t i = 0; i < v.array.ndim(); ++i) v.shape.push_back(v.array.shape(i));
    v.data = v.array.data();
    v.nbytes = static_cast<std::size_t>(v.array.nbytes());
    views.push_back(std::move(v));
  }
  return views;
}

NamedTensors copy_views(const std::vector<ArrayView>& views) {
  NamedTensors out;
  for (const ArrayView& v : views) {
    Tensor t;
    t.dtype = v.dtype;
    t.shape = v.shape;
    t.data.resize(v.nbytes);
    if (v.nbytes) std::memcpy(t.data.data(), v.data, v.nbytes);
    out.emplace(v.name, std::move(t));
  }
  return out;
}

NamedTensorViews tensor_views(const std::vector<ArrayView>& views) {
  NamedTensorViews out;
  for (const ArrayView& v : views)
    out.emplace(v.name, TensorView{v.dtype, v.shape, {static_cast<const std::byte*>(v.data), v.nbytes}});
  return out;
}

py::array to_numpy(Tensor&& tensor) {
  auto* buffer = new std::vector<std::byte>(std::move(tensor.data));
  py::capsule owner(buffer, [](void* p) { delete static_cast<std::vector<std::byte>*>(p); });
  std::vector<py::ssize_t> shape(tensor.shape.begin(), tensor.shape.end());
  const auto item = static_cast<py::ssize_t>(dtype_size(tensor.dtype));
  std::vector<py::ssize_t> strides(shape.size(), item);
  for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<py::ssize_t>(shape[i], 1);
  static const std::byte kEmpty{};
  const void* data = buffer->empty() ? &kEmpty : buffer->data();
  return py::array(py::dtype(numpy_name(tensor.dtype)), shape, strides, data, owner);
}

py::dict to_numpy_dict(NamedTensors&& tensors) {
  py::dict out;
  for (auto& [name, tensor] : tensors) out[py::str(name)] = to_numpy(std::move(tensor));
  return out;
}

}  // namespace tensorhub::python
