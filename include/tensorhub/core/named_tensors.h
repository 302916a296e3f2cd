// Named tensors without libtorch: the in-memory form of datasets and weights, and their
// on-disk form, the safetensors format.
//
// Format source: https://github.com/huggingface/safetensors (README, "Format"): an 8-byte
// little-endian unsigned header length N, N bytes of UTF-8 JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the byte buffer that
// follows the header) plus an optional "__metadata__" string map, then the byte buffer.
// Python's `safetensors.numpy.load_file` reads what write_safetensors produces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorhub/core/error.h"

namespace tensorhub {

/// Element types, with safetensors' names (F32, F64, I64, ...).
enum class DType { kF32, kF64, kI64, kI32, kU8, kI8, kBool };

/// "F32", "I64", ... as written in a safetensors header.
std::string dtype_name(DType dtype);
/// Parses a safetensors dtype name. Throws InvalidArgument naming the allowed values.
DType dtype_from_name(const std::string& name);
/// Bytes per element: 4 for F32, 8 for I64, 1 for U8 and BOOL, ...
std::size_t dtype_size(DType dtype);

/// One dense, row-major (C order), little-endian tensor.
struct Tensor {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;  ///< empty for a scalar
  std::vector<std::byte> data;      ///< numel() * dtype_size(dtype) bytes

  /// Number of elements (product of shape; 1 for a scalar).
  std::int64_t numel() const;

  /// Copies `values` into a new tensor of `shape`. Throws InvalidArgument if the count
  /// differs from the product of `shape`.
  template <typename T>
  static Tensor from(DType dtype, std::vector<std::int64_t> shape, const std::vector<T>& values);

  /// Typed view of the data. REQUIRES: sizeof(T) == dtype_size(dtype).
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data.data()); }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(data.data()); }
};

/// A shape as text for messages: "[28, 28, 1]", "[]" for a scalar. `separator` goes between
/// the dimensions (TF Serving's messages write "[1,2]").
std::string shape_to_string(std::span<const std::int64_t> shape, std::string_view separator = ", ");

/// Tensors by name, in name order (safetensors sorts its header the same way).
using NamedTensors = std::map<std::string, Tensor>;

/// A tensor's dtype and shape over bytes another owner holds (a numpy array's buffer), so
/// that it can be serialised (write_safetensors_to) without a copy. The bytes must outlive it.
struct TensorView {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;   ///< empty for a scalar
  std::span<const std::byte> data;   ///< numel * dtype_size bytes, row-major, little-endian
};
/// Views by name, in name order as NamedTensors.
using NamedTensorViews = std::map<std::string, TensorView>;
/// Views of `tensors`' buffers: no copy, valid while `tensors` is alive and unchanged.
NamedTensorViews views_of(const NamedTensors& tensors);
/// Free-form string metadata stored in a safetensors header's "__metadata__".
using TensorMetadata = std::map<std::string, std::string>;

/// Serialises tensors to the safetensors format. Throws InvalidArgument if a tensor's data
/// size does not match its shape and dtype, or a tensor is named "__metadata__" (the header
/// key the format reserves for `metadata`).
std::vector<std::byte> to_safetensors(const NamedTensors& tensors,
                                      const TensorMetadata& metadata = {});

/// Receives bytes in order (see write_safetensors_to).
using ByteSink = std::function<void(std::span<const std::byte>)>;

/// Writes exactly the bytes to_safetensors returns to `sink`, in order and in pieces (the
/// header, then each tensor's data straight from its buffer), so that a large dataset can be
/// hashed or stored without a serialised copy in memory. Returns the number of bytes written.
/// Throws what to_safetensors throws, before anything reaches `sink`.
std::uint64_t write_safetensors_to(const NamedTensors& tensors, const ByteSink& sink,
                                   const TensorMetadata& metadata = {});
/// The same over views: the bytes of to_safetensors for tensors holding the viewed bytes,
/// each tensor's data passed to `sink` straight from the view. Throws what to_safetensors throws.
std::uint64_t write_safetensors_to(const NamedTensorViews& tensors, const ByteSink& sink,
                                   const TensorMetadata& metadata = {});

/// Parses a safetensors buffer. Every offset, size, dtype and shape is checked before any
/// byte is copied; `source` names the buffer in error messages (a path or a blob id).
/// Throws DataLoss for a truncated or inconsistent buffer, naming `source`, the cause and,
/// where there is one, the tensor. Refused as the reference implementation (safetensors'
/// Rust `validate`) refuses them: a header that is not a JSON object of tensors (plus an
/// optional "__metadata__" map of strings), a key twice in one object (two tensors of one
/// name), an unknown dtype, a shape whose element count and dtype size do not give
/// end - begin bytes, and data_offsets that do not tile the byte buffer: ordered by offset,
/// each tensor must begin where the previous one ended (the first at 0: no overlap, no gap)
/// and the last must end at the end of the buffer (no trailing bytes).
NamedTensors from_safetensors(const std::vector<std::byte>& bytes, const std::string& source,
                              TensorMetadata* metadata = nullptr);

/// Parses a safetensors buffer of a size known beforehand that arrives in pieces (a blob read
/// chunk by chunk), copying each tensor's bytes straight into its own buffer as they arrive:
/// what from_safetensors returns for the whole buffer, without a copy of the whole buffer in
/// memory. A buffer from_safetensors refuses is refused with the same DataLoss, thrown by
/// finish() (not by feed), so that a reader which verifies the bytes as they arrive (a blob's
/// SHA-256) reports a damaged blob as such before the parse error its damage caused.
class SafetensorsDecoder {
 public:
  /// `size`: the buffer's size in bytes; `source` names it in messages; `metadata`, when
  /// given, receives the header's "__metadata__" map by finish().
  SafetensorsDecoder(std::uint64_t size, std::string source, TensorMetadata* metadata = nullptr);
  ~SafetensorsDecoder();
  SafetensorsDecoder(const SafetensorsDecoder&) = delete;
  SafetensorsDecoder& operator=(const SafetensorsDecoder&) = delete;

  /// The next bytes of the buffer, in order. A malformed header, or more bytes than `size`,
  /// is remembered and thrown by finish(); later bytes are then ignored.
  void feed(std::span<const std::byte> bytes);

  /// The tensors, once all `size` bytes arrived. Throws DataLoss (naming `source`) as
  /// from_safetensors does, or for fewer or more bytes than `size`. Call once.
  NamedTensors finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// File helpers around to_safetensors/from_safetensors. Throw Unavailable if the file
/// cannot be written or read, DataLoss if its content is malformed, InvalidArgument (naming
/// the path; nothing is written) for tensors to_safetensors refuses.
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const TensorMetadata& metadata = {});
NamedTensors read_safetensors(const std::filesystem::path& path,
                              TensorMetadata* metadata = nullptr);

/// Reads a whole file into memory. Throws Unavailable naming the path and errno text.
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path);
/// Writes bytes to `path` atomically (temporary file in the same directory, then rename).
void write_file_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes);

template <typename T>
Tensor Tensor::from(DType dtype, std::vector<std::int64_t> shape, const std::vector<T>& values) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  if (sizeof(T) != dtype_size(dtype) ||
      static_cast<std::int64_t>(values.size()) != t.numel()) {
    throw InvalidArgument("Tensor::from: " + std::to_string(values.size()) + " values of " + std::to_string(sizeof(T)) + " bytes do not fit shape/dtype " + dtype_name(dtype));
  }
  t.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

}  // namespace tensorhub
