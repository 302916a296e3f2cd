#include "tensorhub/serve/tensor_proto.h"

#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <type_traits>

#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

using tensorflow::DataType;
using tensorflow::TensorProto;

std::string dtype_text(int dtype) {
  return tensorflow::DataType_IsValid(dtype) ? tensorflow::DataType_Name(static_cast<DataType>(dtype))
                                             : "DataType " + std::to_string(dtype);
}

// Our dtype of a TF dtype, or nothing for the ones we do not hold (DT_STRING is handled apart).
std::optional<DType> core_dtype(int dtype) {
  switch (dtype) {
    case tensorflow::DT_FLOAT: return DType::kF32;
    case tensorflow::DT_DOUBLE: return DType::kF64;
    case tensorflow::DT_INT32: return DType::kI32;
    case tensorflow::DT_INT64: return DType::kI64;
    case tensorflow::DT_BOOL: return DType::kBool;
    case tensorflow::DT_UINT8: return DType::kU8;
    case tensorflow::DT_INT8: return DType::kI8;
    default: return std::nullopt;
  }
}

DataType tf_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return tensorflow::DT_FLOAT;
    case DType::kF64: return tensorflow::DT_DOUBLE;
    case DType::kI32: return tensorflow::DT_INT32;
    case DType::kI64: return tensorflow::DT_INT64;
    case DType::kBool: return tensorflow::DT_BOOL;
    case DType::kU8: return tensorflow::DT_UINT8;
    case DType::kI8: return tensorflow::DT_INT8;
  }
  return tensorflow::DT_INVALID;
}

// The shape's dimensions and element count; refuses unknown rank, negative dims, overflow.
std::vector<std::int64_t> read_shape(const TensorProto& proto, const std::string& field, std::int64_t& numel) {
  const auto& shape = proto.tensor_shape();
  if (shape.unknown_rank())
    throw InvalidArgument(field + ".tensor_shape: unknown_rank is set; a tensor's shape must be fully known");
  std::vector<std::int64_t> dims;
  numel = 1;
  for (int i = 0; i < shape.dim_size(); ++i) {
    const std::int64_t d = shape.dim(i).size();
    if (d < 0)
      throw InvalidArgument(field + ".tensor_shape.dim[" + std::to_string(i) + "].size is " + std::to_string(d) +
                            "; dimensions must be >= 0");
    if (d > 0 && numel > std::numeric_limits<std::int64_t>::max() / d)
      throw InvalidArgument(field + ".tensor_shape: " + shape_to_string(dims) + " x " + std::to_string(d) +
                            " elements overflow int64");
    numel *= d;
    dims.push_back(d);
  }
  return dims;
}

void check_size(std::int64_t numel, std::size_t element_bytes, std::size_t max_bytes, const std::string& field) {
  if (static_cast<std::uint64_t>(numel) > max_bytes / element_bytes)
    throw InvalidArgument(field + ": " + std::to_string(numel) + " elements of " + std::to_string(element_bytes) +
                          " bytes exceed the server's limit of " + std::to_string(max_bytes) + " bytes per tensor");
}

// How many values each typed field holds, to refuse values in a field other than the dtype's.
int typed_fields_set(const TensorProto& p, int& which) {
  const int counts[] = {p.half_val_size(),   p.float_val_size(),    p.double_val_size(),
                        p.int_val_size(),    p.string_val_size(),   p.scomplex_val_size(),
                        p.int64_val_size(),  p.bool_val_size(),     p.dcomplex_val_size(),
                        p.resource_handle_val_size(), p.variant_val_size(), p.uint32_val_size(),
                        p.uint64_val_size()};
  int set = 0;
  for (int i = 0; i < static_cast<int>(std::size(counts)); ++i)
    if (counts[i] > 0) ++set, which = i;
  return set;
}

// Copies the typed field's values into `out` (numel elements), filling up as TensorFlow does.
template <typename Values>
void fill_from_values(const Values& values, std::int64_t numel, const std::string& field, const char* name,
                      auto* out) {
  const std::int64_t n = values.size();
  if (n > numel)
    throw InvalidArgument(field + "." + name + " holds " + std::to_string(n) + " values but tensor_shape holds " +
                          std::to_string(numel));
  using T = std::remove_pointer_t<decltype(out)>;
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(values[static_cast<int>(i)]);
  // TensorFlow's rule: fewer values are filled up with the last one, none with zeros.
  const T fill = n > 0 ? out[n - 1] : T{};
  for (std::int64_t i = n; i < numel; ++i) out[i] = fill;
}

const char* typed_field_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float_val";
    case DType::kF64: return "double_val";
    case DType::kI64: return "int64_val";
    case DType::kBool: return "bool_val";
    default: return "int_val";
  }
}

Tensor numeric_from_proto(const TensorProto& proto, DType dtype, std::vector<std::int64_t> shape,
                          std::int64_t numel, const std::string& field, std::size_t max_bytes) {
  const std::size_t size = dtype_size(dtype);
  check_size(numel, size, max_bytes, field);
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.resize(static_cast<std::size_t>(numel) * size);
  int which = -1;
  const int typed = typed_fields_set(proto, which);
  if (!proto.tensor_content().empty()) {
    if (typed > 0)
      throw InvalidArgument(field + ": both tensor_content and a typed value field are set; send only one");
    if (proto.tensor_content().size() != t.data.size())
      throw InvalidArgument(field + ".tensor_content holds " + std::to_string(proto.tensor_content().size()) +
                            " bytes but tensor_shape " + shape_to_string(t.shape) + " of " +
                            dtype_text(proto.dtype()) + " needs " + std::to_string(t.data.size()));
    std::memcpy(t.data.data(), proto.tensor_content().data(), t.data.size());
    if (dtype == DType::kBool)  // any non-zero byte is true; our bools are 0 or 1
      for (auto& b : t.data) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
    return t;
  }
  const char* name = typed_field_name(dtype);
  const bool other_field = typed > 1 || (typed == 1 && [&] {
    switch (dtype) {
      case DType::kF32: return which != 1;
      case DType::kF64: return which != 2;
      case DType::kI64: return which != 6;
      case DType::kBool: return which != 7;
      default: return which != 3;
    }
  }());
  if (other_field)
    throw InvalidArgument(field + ": values are in a field other than " + name + ", the field of dtype " +
                          dtype_text(proto.dtype()));
  switch (dtype) {
    case DType::kF32: fill_from_values(proto.float_val(), numel, field, name, t.as<float>()); break;
    case DType::kF64: fill_from_values(proto.double_val(), numel, field, name, t.as<double>()); break;
    case DType::kI64: fill_from_values(proto.int64_val(), numel, field, name, t.as<std::int64_t>()); break;
    case DType::kI32: fill_from_values(proto.int_val(), numel, field, name, t.as<std::int32_t>()); break;
    case DType::kU8: fill_from_values(proto.int_val(), numel, field, name, t.as<std::uint8_t>()); break;
    case DType::kI8: fill_from_values(proto.int_val(), numel, field, name, t.as<std::int8_t>()); break;
    case DType::kBool: fill_from_values(proto.bool_val(), numel, field, name, t.as<std::uint8_t>()); break;
  }
  return t;
}

BytesTensor strings_from_proto(const TensorProto& proto, std::vector<std::int64_t> shape, std::int64_t numel,
                                const std::string& field, std::size_t max_bytes) {
  if (!proto.tensor_content().empty())
    throw InvalidArgument(field + ": a DT_STRING tensor's values go in string_val, not tensor_content");
  int which = -1;
  if (typed_fields_set(proto, which) > (proto.string_val_size() > 0 ? 1 : 0))
    throw InvalidArgument(field + ": values are in a field other than string_val, the field of dtype DT_STRING");
  const std::int64_t n = proto.string_val_size();
  if (n > numel)
    throw InvalidArgument(field + ".string_val holds " + std::to_string(n) + " values but tensor_shape holds " +
                          std::to_string(numel));
  // Each element costs its bytes plus a std::string; filled-up copies count too.
  std::size_t bytes = 0;
  const std::size_t last = n > 0 ? proto.string_val(static_cast<int>(n - 1)).size() : 0;
  for (const auto& s : proto.string_val()) bytes += s.size() + sizeof(std::string);
  if (bytes > max_bytes ||
      static_cast<std::uint64_t>(numel - n) > (max_bytes - bytes) / (last + sizeof(std::string)))
    throw InvalidArgument(field + ": " + std::to_string(numel) + " strings exceed the server's limit of " +
                          std::to_string(max_bytes) + " bytes per tensor");
  BytesTensor out;
  out.shape = std::move(shape);
  out.values.assign(proto.string_val().begin(), proto.string_val().end());
  out.values.resize(static_cast<std::size_t>(numel), n > 0 ? out.values.back() : std::string());
  return out;
}

}  // namespace

ProtoTensor tensor_from_proto(const TensorProto& proto, const std::string& field, std::size_t max_bytes) {
  std::int64_t numel = 0;
  auto shape = read_shape(proto, field, numel);
  ProtoTensor out;
  if (proto.dtype() == tensorflow::DT_STRING) {
    out.is_string = true;
    out.strings = strings_from_proto(proto, std::move(shape), numel, field, max_bytes);
    return out;
  }
  const auto dtype = core_dtype(proto.dtype());
  if (!dtype)
    throw InvalidArgument(field + ".dtype " + dtype_text(proto.dtype()) +
                          " is not supported; use DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL, DT_STRING, "
                          "DT_UINT8 or DT_INT8");
  out.tensor = numeric_from_proto(proto, *dtype, std::move(shape), numel, field, max_bytes);
  return out;
}

namespace {

void write_shape(const std::vector<std::int64_t>& shape, TensorProto* out) {
  auto* s = out->mutable_tensor_shape();
  for (auto d : shape) s->add_dim()->set_size(d);
}

template <typename T, typename Field>
void append_values(const Tensor& t, Field* field) {
  const T* v = t.as<T>();
  field->Reserve(static_cast<int>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) field->Add(v[i]);
}

}  // namespace

void tensor_to_proto(const Tensor& tensor, TensorProto* out) {
  out->Clear();
  out->set_dtype(tf_dtype(tensor.dtype));
  write_shape(tensor.shape, out);
  switch (tensor.dtype) {
    case DType::kF32: append_values<float>(tensor, out->mutable_float_val()); break;
    case DType::kF64: append_values<double>(tensor, out->mutable_double_val()); break;
    case DType::kI64: append_values<std::int64_t>(tensor, out->mutable_int64_val()); break;
    case DType::kI32: append_values<std::int32_t>(tensor, out->mutable_int_val()); break;
    case DType::kU8: append_values<std::uint8_t>(tensor, out->mutable_int_val()); break;
    case DType::kI8: append_values<std::int8_t>(tensor, out->mutable_int_val()); break;
    case DType::kBool: {
      const auto* v = tensor.as<std::uint8_t>();
      for (std::int64_t i = 0; i < tensor.numel(); ++i) out->add_bool_val(v[i] != 0);
      break;
    }
  }
}

void tensor_to_proto(const BytesTensor& strings, TensorProto* out) {
  out->Clear();
  out->set_dtype(tensorflow::DT_STRING);
  write_shape(strings.shape, out);
  for (const auto& s : strings.values) out->add_string_val(s);
}

int tf_data_type(const TensorInfo& info) {
  return info.is_string ? tensorflow::DT_STRING : tf_dtype(info.dtype);
}

}  // namespace tensorhub
