// numpy arrays <-> tensorhub::NamedTensors for the Python module.
//
// Going in, arrays are checked and viewed while the GIL is held (ArrayViews), then copied into
// NamedTensors with the GIL released, or (datasets) stored straight from their buffers. Coming out, each tensor's byte buffer is moved into the
// numpy array it becomes (a capsule owns it): no copy.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tensorhub/core/named_tensors.h"

namespace tensorhub::python {

namespace py = pybind11;

/// One checked numpy array, still owned by Python (the handle keeps it alive).
struct ArrayView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  py::array array;  ///< holds a reference; destroy only with the GIL held
  const void* data = nullptr;
  std::size_t nbytes = 0;
};

/// Checks `tensors` (a dict of str -> numpy array, C-contiguous, native byte order, of a dtype
/// safetensors stores here: float32/64, int8/32/64, uint8, bool). REQUIRES the GIL. Throws
/// InvalidArgument naming `what`, the key and the problem (non-str key, not an array, object
/// dtype, unsupported dtype, non-contiguous).
std::vector<ArrayView> view_arrays(const py::dict& tensors, const std::string& what);

/// Copies the viewed arrays into NamedTensors. Call it with the GIL released.
NamedTensors copy_views(const std::vector<ArrayView>& views);

/// The viewed arrays' buffers as NamedTensorViews, for storing them without a copy; valid
/// while `views` holds the arrays (with the GIL released too).
NamedTensorViews tensor_views(const std::vector<ArrayView>& views);

/// Moves `tensor`'s buffer into a numpy array of its dtype and shape, which owns it (a
/// capsule frees it with the array): no copy. REQUIRES the GIL.
py::array to_numpy(Tensor&& tensor);

/// Moves `tensors` into a dict of name -> numpy array (to_numpy each). REQUIRES the GIL.
py::dict to_numpy_dict(NamedTensors&& tensors);

}  // namespace tensorhub::python
