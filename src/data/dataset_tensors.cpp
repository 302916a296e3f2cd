// Tensor surgery for the pipeline: slicing rows (from_tensor_slices, unbatch), stacking
// (batch) and padding (padded_batch). Row-major bytes throughout.
#include <algorithm>
#include <cstring>

#include "dataset_internal.h"
#include "tensorhub/core/error.h"

namespace tensorhub::detail {
namespace {

std::int64_t product(const std::vector<std::int64_t>& dims, std::size_t from = 0) {
  std::int64_t n = 1;
  for (std::size_t i = from; i < dims.size(); ++i) n *= dims[i];
  return n;
}

std::string describe(const Tensor& t) { return dtype_name(t.dtype) + " " + shape_string(t.shape); }

// Checks that `e` has the same names as `first` (batch and padded_batch need one structure).
void check_same_names(const NamedTensors& first, const NamedTensors& e, std::size_t index,
                      const char* stage) {
  bool same = first.size() == e.size();
  for (auto a = first.begin(), b = e.begin(); same && a != first.end(); ++a, ++b)
    same = a->first == b->first;
  if (same) return;
  auto names = [](const NamedTensors& x) {
    std::string s;
    for (const auto& [n, t] : x) s += (s.empty() ? "" : ", ") + n;
    return "{" + s + "}";
  };
  throw InvalidArgument(std::string(stage) + ": element " + std::to_string(index) +
                        " of the batch has tensors " + names(e) + " but element 0 has " +
                        names(first) + "; elements of one batch need the same names");
}

// The padding value `v` as one element of `dtype`, little-endian.
std::vector<std::byte> encode_scalar(DType dtype, double v) {
  std::vector<std::byte> out(dtype_size(dtype));
  auto put = [&](auto x) { std::memcpy(out.data(), &x, sizeof(x)); };
  switch (dtype) {
    case DType::kF32: put(static_cast<float>(v)); break;
    case DType::kF64: put(v); break;
    case DType::kI64: put(static_cast<std::int64_t>(v)); break;
    case DType::kI32: put(static_cast<std::int32_t>(v)); break;
    case DType::kU8: put(static_cast<std::uint8_t>(v)); break;
    case DType::kI8: put(static_cast<std::int8_t>(v)); break;
    case DType::kBool: put(static_cast<std::uint8_t>(v != 0.0)); break;
  }
  return out;
}

// Copies a row-major block of shape `src` into the top-left corner of a block of shape `dst`
// (same rank, dst[i] >= src[i]), element size `size`.
void copy_into(const std::byte* from, const std::vector<std::int64_t>& src, std::byte* to,
               const std::vector<std::int64_t>& dst, std::size_t dim, std::size_t size) {
  if (dim == src.size()) {
    std::memcpy(to, from, size);
    return;
  }
  if (dim + 1 == src.size()) {
    std::memcpy(to, from, static_cast<std::size_t>(src[dim]) * size);
    return;
  }
  const auto src_stride = static_cast<std::size_t>(product(src, dim + 1)) * size;
  const auto dst_stride = static_cast<std::size_t>(product(dst, dim + 1)) * size;
  for (std::int64_t i = 0; i < src[dim]; ++i)
    copy_into(from + i * src_stride, src, to + i * dst_stride, dst, dim + 1, size);
}

// The padded shape of tensor `name` for this batch (padded_batch's rules).
std::vector<std::int64_t> padded_shape(const std::vector<NamedTensors>& elements,
                                       const std::string& name,
                                       const std::map<std::string, std::vector<std::int64_t>>& shapes) {
  const Tensor& first = elements.front().at(name);
  std::vector<std::int64_t> target(first.shape.size(), -1);
  if (auto it = shapes.find(name); it != shapes.end()) {
    if (it->second.size() != first.shape.size()) {
      throw InvalidArgument("padded_batch: padded_shapes['" + name + "'] " +
                            shape_string(it->second) + " has rank " +
                            std::to_string(it->second.size()) + " but the tensor is " +
                            describe(first));
    }
    target = it->second;
  }
  for (std::size_t d = 0; d < target.size(); ++d) {
    std::int64_t largest = 0;
    for (const auto& e : elements) largest = std::max(largest, e.at(name).shape[d]);
    if (target[d] == -1) target[d] = largest;
    if (largest > target[d]) {
      throw InvalidArgument("padded_batch: tensor '" + name + "' has size " +
                            std::to_string(largest) + " in dimension " + std::to_string(d) +
                            ", larger than its padded shape " + shape_string(target) +
                            "; raise padded_shapes or use -1 for the batch's largest size");
    }
  }
  return target;
}

Tensor pad_one(const std::vector<NamedTensors>& elements, const std::string& name,
               const std::map<std::string, std::vector<std::int64_t>>& shapes,
               const std::map<std::string, double>& values) {
  const Tensor& first = elements.front().at(name);
  for (std::size_t i = 1; i < elements.size(); ++i) {
    const Tensor& t = elements[i].at(name);
    if (t.dtype != first.dtype || t.shape.size() != first.shape.size()) {
      throw InvalidArgument("padded_batch: tensor '" + name + "' is " + describe(t) +
                            " in element " + std::to_string(i) + " of the batch but " +
                            describe(first) + " in element 0; padding needs one dtype and rank");
    }
  }
  const auto target = padded_shape(elements, name, shapes);
  Tensor out;
  out.dtype = first.dtype;
  out.shape = target;
  out.shape.insert(out.shape.begin(), static_cast<std::int64_t>(elements.size()));
  const std::size_t size = dtype_size(first.dtype);
  auto value = values.find(name);
  if (value == values.end()) value = values.find("");  // one value for every tensor
  const auto fill = encode_scalar(first.dtype, value != values.end() ? value->second : 0.0);
  out.data.resize(static_cast<std::size_t>(out.numel()) * size);
  for (std::size_t i = 0; i < out.data.size(); i += size) std::memcpy(&out.data[i], fill.data(), size);
  const auto row = static_cast<std::size_t>(product(target)) * size;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    const Tensor& t = elements[i].at(name);
    if (t.numel() > 0) copy_into(t.data.data(), t.shape, out.data.data() + i * row, target, 0, size);
  }
  return out;
}

}  // namespace

NamedTensors slice_element(const NamedTensors& element, std::int64_t row) {
  NamedTensors out;
  for (const auto& [name, t] : element) {
    Tensor s;
    s.dtype = t.dtype;
    s.shape.assign(t.shape.begin() + 1, t.shape.end());
    const auto bytes = static_cast<std::size_t>(s.numel()) * dtype_size(t.dtype);
    s.data.assign(t.data.begin() + static_cast<std::ptrdiff_t>(row * bytes),
                  t.data.begin() + static_cast<std::ptrdiff_t>((row + 1) * bytes));
    out.emplace(name, std::move(s));
  }
  return out;
}

NamedTensors stack_elements(const std::vector<NamedTensors>& elements) {
  const NamedTensors& first = elements.front();
  for (std::size_t i = 1; i < elements.size(); ++i) check_same_names(first, elements[i], i, "batch");
  NamedTensors out;
  for (const auto& [name, t0] : first) {
    Tensor s;
    s.dtype = t0.dtype;
    s.shape = t0.shape;
    s.shape.insert(s.shape.begin(), static_cast<std::int64_t>(elements.size()));
    s.data.reserve(t0.data.size() * elements.size());
    for (std::size_t i = 0; i < elements.size(); ++i) {
      const Tensor& t = elements[i].at(name);
      if (t.dtype != t0.dtype || t.shape != t0.shape) {
        throw InvalidArgument("batch: tensor '" + name + "' is " + describe(t) + " in element " +
                              std::to_string(i) + " of the batch but " + describe(t0) +
                              " in element 0; batch needs equal shapes (padded_batch pads them)");
      }
      s.data.insert(s.data.end(), t.data.begin(), t.data.end());
    }
    out.emplace(name, std::move(s));
  }
  return out;
}

NamedTensors pad_and_stack(const std::vector<NamedTensors>& elements,
                           const std::map<std::string, std::vector<std::int64_t>>& shapes,
                           const std::map<std::string, double>& values) {
  const NamedTensors& first = elements.front();
  for (std::size_t i = 1; i < elements.size(); ++i)
    check_same_names(first, elements[i], i, "padded_batch");
  NamedTensors out;
  for (const auto& [name, t0] : first) out.emplace(name, pad_one(elements, name, shapes, values));
  return out;
}

}  // namespace tensorhub::detail
