#include "tensorhub/serve/json_tensor.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <simdjson.h>

#include "tensorhub/core/error.h"
#include "tensorhub/core/json_non_finite.h"

namespace tensorhub {
namespace {

// simdjson's max_depth counts one level more than the arrays and objects of the document:
// with kMaxJsonDepth it refused a body nested exactly kMaxJsonDepth deep.
constexpr std::size_t kParserDepth = kMaxJsonDepth + 1;

using json = nlohmann::json;
namespace dom = simdjson::dom;

// ---- NaN, Infinity and -Infinity --------------------------------------------------------------
// TF Serving parses with RapidJSON's kParseNanAndInfFlag, so the tokens NaN, Infinity and
// -Infinity are numbers where a value goes. simdjson takes only RFC 8259 JSON: a body it refuses
// is scanned once more by core's scan_json_non_finite() (core/json_non_finite.h, shared with
// tensorhub-serve-lite), which rewrites each such token in a value position as a marker string
// (a U+0000 character followed by the token); the readers below take a marker as that number.
// No user string can be mistaken for a marker: a body whose strings escape a U+0000 character
// is not rewritten.

// Set while the DOM being read came from a rewritten body (markers are only markers then).
thread_local bool t_markers = false;

// The number a marker stands for, if `v` is one.
std::optional<double> non_finite(dom::element v) {
  if (!t_markers || v.type() != dom::element_type::STRING) return std::nullopt;
  return json_non_finite_marker_value(std::string_view(v));
}

bool is_json_string(dom::element v) { return v.type() == dom::element_type::STRING && !non_finite(v); }

// `body` with each NaN / Infinity / -Infinity token in a value position replaced by its
// marker string, or nullopt when it holds none (or a string escaping U+0000, which would make
// a marker ambiguous). The result is parsed again by simdjson, which reports any other syntax
// error.
std::optional<std::string> with_non_finite_markers(std::string_view body) {
  JsonNonFiniteScan scan = scan_json_non_finite(body);
  if (!scan.markers || scan.escapes_nul) return std::nullopt;
  return std::move(scan.text);
}

// A JSON value for an error message, cut short: a request body can be 100 MB. Markers are
// shown as the tokens they stand for.
std::string show(dom::element v) {
  if (const auto d = non_finite(v)) return std::isnan(*d) ? "NaN" : *d > 0 ? "Infinity" : "-Infinity";
  std::string s = simdjson::minify(v);
  if (t_markers) restore_json_non_finite_tokens(s);
  if (s.size() > 200) s = s.substr(0, 200) + "...";
  return s;
}

std::string json_type(dom::element v) {
  switch (v.type()) {
    case dom::element_type::NULL_VALUE: return "Null";
    case dom::element_type::BOOL: return bool(v) ? "True" : "False";
    case dom::element_type::OBJECT: return "Object";
    case dom::element_type::ARRAY: return "Array";
    case dom::element_type::STRING: return non_finite(v) ? "Number" : "String";
    default: return "Number";
  }
}

bool is_number(dom::element v) {
  const auto t = v.type();
  return t == dom::element_type::DOUBLE || t == dom::element_type::INT64 || t == dom::element_type::UINT64 ||
         non_finite(v).has_value();
}

double number(dom::element v) {
  if (const auto d = non_finite(v)) return *d;
  switch (v.type()) {
    case dom::element_type::INT64: return static_cast<double>(std::int64_t(v));
    case dom::element_type::UINT64: return static_cast<double>(std::uint64_t(v));
    default: return double(v);
  }
}

// TensorFlow's DataTypeString: "float", "int64", ...
std::string tf_type_text(DType d) {
  switch (d) {
    case DType::kF32: return "float";
    case DType::kF64: return "double";
    case DType::kI64: return "int64";
    case DType::kI32: return "int32";
    case DType::kU8: return "uint8";
    case DType::kI8: return "int8";
    case DType::kBool: return "bool";
  }
  return "unknown";
}

// TensorFlow's DataType enum name: "DT_FLOAT", "DT_INT64", ... (as servable.h's tf_dtype_name,
// which this file does not link: the fuzzers build it alone).
std::string tf_enum_name(DType d) {
  std::string name = tf_type_text(d);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
  return "DT_" + name;
}

bool is_b64_object(dom::element v) {
  if (v.type() != dom::element_type::OBJECT) return false;
  dom::object o = v;
  if (o.size() != 1) return false;
  auto b64 = o["b64"];
  return !b64.error() && is_json_string(b64.value());
}

// Shape of a dense nested list, following first elements (TF's GetDenseTensorShape).
std::vector<std::int64_t> dense_shape(dom::element v) {
  std::vector<std::int64_t> shape;
  while (v.type() == dom::element_type::ARRAY) {
    dom::array a = v;
    shape.push_back(static_cast<std::int64_t>(a.size()));
    if (a.size() == 0) break;
    v = a.at(0).value();
  }
  return shape;
}

void append_value(dom::element v, DType dtype, std::vector<std::byte>& out) {
  auto type_error = [&] {
    return InvalidArgument("JSON Value: " + show(v) + " Type: " + json_type(v) +
                           " is not of expected type: " + tf_type_text(dtype));
  };
  auto put = [&](auto x) {
    const auto* p = reinterpret_cast<const std::byte*>(&x);
    out.insert(out.end(), p, p + sizeof x);
  };
  switch (dtype) {
    case DType::kF32:
    case DType::kF64: {
      if (!is_number(v)) throw type_error();
      const double d = number(v);
      if (dtype == DType::kF32 && std::isfinite(d) &&
          (d > std::numeric_limits<float>::max() || d < std::numeric_limits<float>::lowest()))
        throw InvalidArgument("Cannot convert JSON value: " + show(v) + " to float without loss of precision.");
      if (dtype == DType::kF32) put(static_cast<float>(d));
      else put(d);
      return;
    }
    case DType::kI64:
      if (v.type() != dom::element_type::INT64) throw type_error();
      put(std::int64_t(v));
      return;
    case DType::kI32: {
      if (v.type() != dom::element_type::INT64) throw type_error();
      const std::int64_t n = v;
      if (n > std::numeric_limits<std::int32_t>::max() || n < std::numeric_limits<std::int32_t>::min())
        throw type_error();
      put(static_cast<std::int32_t>(n));
      return;
    }
    case DType::kBool:
      if (v.type() != dom::element_type::BOOL) throw type_error();
      put(static_cast<std::uint8_t>(bool(v)));
      return;
    default:
      throw InvalidArgument("Conversion of JSON Value: " + show(v) + " to type: " + tf_type_text(dtype) +
                            " is not supported");
  }
}

// The list `v` at nesting `level` of a tensor of `shape`, checked against it with TF Serving's
// error texts (one check for the numeric, float fast-path and string fills).
dom::array list_at_level(dom::element v, std::size_t level, const std::vector<std::int64_t>& shape) {
  if (level >= shape.size())
    throw InvalidArgument("Encountered list at unexpected level: " + std::to_string(level) + " expected < " +
                          std::to_string(shape.size()));
  dom::array a = v;
  if (static_cast<std::int64_t>(a.size()) != shape[level])
    throw InvalidArgument("Encountered list at unexpected size: " + std::to_string(a.size()) + " at level: " +
                          std::to_string(level) + " expected size: " + std::to_string(shape[level]));
  return a;
}

// Appends the values of `v` (shape `shape`) in C order, checking it is dense
// (TF's FillTensorProto).
void fill(dom::element v, std::size_t level, const std::vector<std::int64_t>& shape, DType dtype,
          std::vector<std::byte>& out) {
  if (v.type() != dom::element_type::ARRAY) {
    if (level != shape.size())
      throw InvalidArgument("JSON Value: " + show(v) + " found at incorrect level: " + std::to_string(level + 1) +
                            " in the JSON DOM. Expected at level: " + std::to_string(shape.size()));
    if (v.type() == dom::element_type::OBJECT) {
      throw InvalidArgument("JSON Value: " + show(v) + " Type: Object is not of expected type: " + tf_type_text(dtype) +
                            (is_b64_object(v) ? " (b64 values are for string inputs)" : ""));
    }
    append_value(v, dtype, out);
    return;
  }
  dom::array a = list_at_level(v, level, shape);
  for (dom::element e : a) fill(e, level + 1, shape, dtype, out);
}

// fill() for DT_FLOAT, the common case, writing floats straight into the tensor's buffer
// instead of appending bytes one value at a time.
// A leaf that is not a float is handed to fill(), which throws its error.
void fill_f32(dom::element v, std::size_t level, const std::vector<std::int64_t>& shape, float*& cursor) {
  if (v.type() != dom::element_type::ARRAY) {
    double d;
    if (level == shape.size() && v.get_double().get(d) == simdjson::SUCCESS &&
        d <= std::numeric_limits<float>::max() && d >= std::numeric_limits<float>::lowest()) {
      *cursor++ = static_cast<float>(d);
      return;
    }
    if (const auto nf = non_finite(v); nf && level == shape.size()) {
      *cursor++ = static_cast<float>(*nf);
      return;
    }
    std::vector<std::byte> scratch;
    fill(v, level, shape, DType::kF32, scratch);  // throws TF Serving's error for this leaf
    throw Internal("JSON tensor: a float leaf was refused without an error");
  }
  dom::array a = list_at_level(v, level, shape);
  for (dom::element e : a) fill_f32(e, level + 1, shape, cursor);
}

Tensor to_tensor(dom::element v, DType dtype) {
  Tensor t;
  t.dtype = dtype;
  t.shape = dense_shape(v);
  if (dtype == DType::kF32) {
    // fill_f32 checks that the values are dense (every list of a level has that level's
    // size), so exactly numel() floats are written.
    t.data.resize(static_cast<std::size_t>(t.numel()) * sizeof(float));
    float* cursor = t.as<float>();
    fill_f32(v, 0, t.shape, cursor);
    if (cursor != t.as<float>() + t.numel()) throw Internal("JSON tensor: value count does not match its shape");
    return t;
  }
  std::int64_t n = 1;
  for (auto d : t.shape) n *= std::max<std::int64_t>(d, 1);
  t.data.reserve(static_cast<std::size_t>(n) * dtype_size(dtype));
  fill(v, 0, t.shape, dtype, t.data);
  return t;
}

// One DT_STRING element: a JSON string as is, or {"b64": ...} decoded (TF's
// JsonDecodeBase64Object); anything else is TF's type or base64 format error.
std::string string_value(dom::element v) {
  if (is_json_string(v)) return std::string(std::string_view(v));
  if (v.type() == dom::element_type::OBJECT) {
    if (!is_b64_object(v)) throw InvalidArgument("JSON Value: " + show(v) + " not formatted correctly for base64 data");
    return base64_decode(std::string_view(v["b64"].value()));
  }
  throw InvalidArgument("JSON Value: " + show(v) + " Type: " + json_type(v) + " is not of expected type: string");
}

// fill() for DT_STRING: the same density checks, one string per leaf.
void fill_strings(dom::element v, std::size_t level, const std::vector<std::int64_t>& shape,
                  std::vector<std::string>& out) {
  if (v.type() != dom::element_type::ARRAY) {
    if (level != shape.size())
      throw InvalidArgument("JSON Value: " + show(v) + " found at incorrect level: " + std::to_string(level + 1) +
                            " in the JSON DOM. Expected at level: " + std::to_string(shape.size()));
    out.push_back(string_value(v));
    return;
  }
  dom::array a = list_at_level(v, level, shape);
  for (dom::element e : a) fill_strings(e, level + 1, shape, out);
}

BytesTensor to_string_tensor(dom::element v) {
  BytesTensor t;
  t.shape = dense_shape(v);
  fill_strings(v, 0, t.shape, t.values);
  return t;
}

// Instances parsed so far, per input: numeric and DT_STRING, stacked at the end.
struct InstanceParts {
  std::map<std::string, std::vector<Tensor>> tensors;
  std::map<std::string, std::vector<BytesTensor>> strings;
};

// Every instance of an input has one shape (TF's AddInstanceItem).
template <typename T>
void add_part(T t, std::vector<T>& list) {
  if (!list.empty() && list.front().shape != t.shape) {
    if (list.front().numel() != t.numel())
      throw InvalidArgument("Expecting tensor size: " + std::to_string(list.front().numel()) +
                            " but got: " + std::to_string(t.numel()));
    throw InvalidArgument("Expecting shape " + shape_to_string(list.front().shape, ",") +
                          " but got: " + shape_to_string(t.shape, ","));
  }
  list.push_back(std::move(t));
}

void add_instance_item(dom::element item, const std::string& name, const Signature& sig, InstanceParts& parts) {
  const auto it = sig.inputs.find(name);
  if (it == sig.inputs.end()) throw InvalidArgument("JSON object: does not have named input: " + name);
  if (it->second.is_string) add_part(to_string_tensor(item), parts.strings[name]);
  else add_part(to_tensor(item, it->second.dtype), parts.tensors[name]);
}

// Fills req's inputs from the "instances" list (row format).
void from_instances(dom::array instances, const Signature& sig, PredictRequest& req) {
  const dom::element first = instances.at(0).value();
  const bool objects = first.type() == dom::element_type::OBJECT && !is_b64_object(first);
  if (!objects && sig.inputs.size() > 1)
    throw InvalidArgument("instances is a plain list, but expecting list of objects as multiple input tensors "
                          "required as per tensorinfo_map");
  InstanceParts parts;
  std::size_t i = 0;
  for (dom::element elem : instances) {
    const bool is_object = elem.type() == dom::element_type::OBJECT && !is_b64_object(elem);
    try {
      if (objects) {
        if (!is_object)
          throw InvalidArgument("Expecting object but got list at item " + std::to_string(i) + " of input list");
        dom::object o = elem;
        if (o.size() != sig.inputs.size())
          throw InvalidArgument("JSON object: " + show(elem) + " keys must be equal to the inputs of the signature");
        for (auto field : o) add_instance_item(field.value, std::string(field.key), sig, parts);
      } else {
        if (is_object)
          throw InvalidArgument("Expecting value/list but got object at item " + std::to_string(i) + " of input list");
        add_instance_item(elem, sig.inputs.begin()->first, sig, parts);
      }
    } catch (const Error& e) {
      throw InvalidArgument("Failed to process element: " + std::to_string(i) + " of 'instances' list. Error: " +
                            e.message());
    }
    ++i;
  }
  if (parts.tensors.size() + parts.strings.size() != sig.inputs.size() && objects)
    throw InvalidArgument("Failed to process 'instances': some inputs of the signature are missing");
  for (auto& [name, list] : parts.tensors) {
    if (list.size() != i)
      throw InvalidArgument("Failed to process 'instances': input " + name + " is missing from some instances");
    Tensor t;
    t.dtype = list.front().dtype;
    t.shape = list.front().shape;
    t.shape.insert(t.shape.begin(), static_cast<std::int64_t>(list.size()));
    if (list.size() == 1) {
      t.data = std::move(list.front().data);  // the common single instance: no copy
    } else {
      t.data.reserve(list.front().data.size() * list.size());
      for (auto& item : list) t.data.insert(t.data.end(), item.data.begin(), item.data.end());
    }
    req.inputs.emplace(name, std::move(t));
  }
  for (auto& [name, list] : parts.strings) {
    if (list.size() != i)
      throw InvalidArgument("Failed to process 'instances': input " + name + " is missing from some instances");
    BytesTensor t;
    t.shape = list.front().shape;
    t.shape.insert(t.shape.begin(), static_cast<std::int64_t>(list.size()));
    for (auto& item : list)
      for (auto& v : item.values) t.values.push_back(std::move(v));
    req.string_inputs.emplace(name, std::move(t));
  }
}

// One input's value of the "inputs" object (columnar format), as its signature dtype says.
void add_input(dom::element v, const std::string& name, const TensorInfo& info, PredictRequest& req) {
  if (info.is_string) req.string_inputs.emplace(name, to_string_tensor(v));
  else req.inputs.emplace(name, to_tensor(v, info.dtype));
}

// Fills req's inputs from "inputs" (columnar format).
void from_inputs(dom::element inputs, const Signature& sig, PredictRequest& req) {
  if (inputs.type() != dom::element_type::OBJECT || is_b64_object(inputs)) {
    if (sig.inputs.size() > 1)
      throw InvalidArgument("inputs is a plain value/list, but expecting an object as multiple input tensors "
                            "required as per tensorinfo_map");
    const auto& [name, info] = *sig.inputs.begin();
    add_input(inputs, name, info, req);
    return;
  }
  dom::object o = inputs;
  for (const auto& [name, info] : sig.inputs) {
    auto item = o[name];
    if (item.error()) throw InvalidArgument("Missing named input: " + name + " in 'inputs' object.");
    add_input(item.value(), name, info, req);
  }
}

// ---- response writing -----------------------------------------------------------------------

void write_element(const Tensor& t, std::int64_t i, std::string& out) {
  switch (t.dtype) {
    case DType::kF32: append_json_float(t.as<float>()[i], out); break;
    case DType::kF64: append_json_double(t.as<double>()[i], out); break;
    case DType::kI64: out += std::to_string(t.as<std::int64_t>()[i]); break;
    case DType::kI32: out += std::to_string(t.as<std::int32_t>()[i]); break;
    case DType::kU8: out += std::to_string(t.as<std::uint8_t>()[i]); break;
    case DType::kI8: out += std::to_string(t.as<std::int8_t>()[i]); break;
    case DType::kBool: out += t.as<std::uint8_t>()[i] ? "true" : "false"; break;
  }
}

// Writes dims [dim, rank) of a row-major `shape` starting at flat element `offset` as nested
// JSON lists; leaf(i) writes element i.
template <typename Leaf>
void write_nested_lists(const std::vector<std::int64_t>& shape, std::size_t dim, std::int64_t offset,
                        const Leaf& leaf, std::string& out) {
  if (dim == shape.size()) {
    leaf(offset);
    return;
  }
  std::int64_t stride = 1;
  for (std::size_t d = dim + 1; d < shape.size(); ++d) stride *= shape[d];
  out += '[';
  for (std::int64_t i = 0; i < shape[dim]; ++i) {
    if (i) out += ',';
    write_nested_lists(shape, dim + 1, offset + i * stride, leaf, out);
  }
  out += ']';
}

// Writes dims [dim, rank) of `t` starting at flat element `offset` as nested lists.
void write_nested(const Tensor& t, std::size_t dim, std::int64_t offset, std::string& out) {
  write_nested_lists(t.shape, dim, offset, [&](std::int64_t i) { write_element(t, i, out); }, out);
}

// A JSON string; bytes that are not UTF-8 become U+FFFD rather than an exception.
void write_string(const std::string& s, std::string& out) {
  out += json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

// One output of either kind, for the response writer.
struct OutputRef {
  const std::string* name;
  const Tensor* tensor;          // numeric, or
  const BytesTensor* strings;   // DT_STRING
  const std::vector<std::int64_t>& shape() const { return tensor ? tensor->shape : strings->shape; }
};

std::int64_t total_elements(const std::vector<OutputRef>& all) {
  std::int64_t n = 0;
  for (const auto& o : all) n += o.tensor ? o.tensor->numel() : o.strings->numel();
  return n;
}

// write_nested for DT_STRING: "*_bytes" outputs as {"b64": ...}, others as JSON strings
// (TF Serving's IsNamedTensorBytes).
void write_nested_strings(const BytesTensor& t, bool as_bytes, std::size_t dim, std::int64_t offset,
                          std::string& out) {
  write_nested_lists(t.shape, dim, offset, [&](std::int64_t i) {
    const std::string& v = t.values.at(static_cast<std::size_t>(i));
    if (as_bytes) {
      out += "{\"b64\":\"";
      out += base64_encode(v);
      out += "\"}";
    } else {
      write_string(v, out);
    }
  }, out);
}

void write_output(const OutputRef& o, std::size_t dim, std::int64_t offset, std::string& out) {
  if (o.tensor) {
    write_nested(*o.tensor, dim, offset, out);
    return;
  }
  const bool as_bytes = o.name->size() >= 6 && o.name->compare(o.name->size() - 6, 6, "_bytes") == 0;
  write_nested_strings(*o.strings, as_bytes, dim, offset, out);
}

// Parses `body` into this thread's parser (TF Serving's ParseJson): the DOM is valid until
// the thread parses again. NaN, Infinity and -Infinity are taken as numbers (markers, above,
// which stay recognised until the next parse on this thread).
dom::element parse_document(std::string_view body) {
  if (body.empty()) throw InvalidArgument("JSON Parse error: The document is empty");
  t_markers = false;
  // simdjson: a body of 784 floats parses in microseconds where a DOM of nlohmann::json
  // objects took most of a millisecond. One parser per thread keeps its buffers; its depth
  // limit also bounds the recursion of fill() below.
  thread_local dom::parser parser;
  if (parser.max_depth() != kParserDepth || parser.capacity() < body.size()) {
    if (parser.allocate(std::max<std::size_t>(body.size(), 1 << 16), kParserDepth) != simdjson::SUCCESS)
      throw Unavailable("cannot allocate " + std::to_string(body.size()) + " bytes to parse the request");
  }
  // simdjson reads up to SIMDJSON_PADDING bytes past the end: copy the body into a padded
  // buffer this thread keeps (bodies up to 1 MiB), instead of allocating one per request.
  constexpr std::size_t kKeptBuffer = std::size_t{1} << 20;
  thread_local std::vector<char> kept;
  std::vector<char> once;
  const auto parse = [&](std::string_view text, dom::element& doc) {
    std::vector<char>& padded = text.size() <= kKeptBuffer ? kept : once;
    if (padded.size() < text.size() + simdjson::SIMDJSON_PADDING) padded.resize(text.size() + simdjson::SIMDJSON_PADDING);
    std::memcpy(padded.data(), text.data(), text.size());
    std::memset(padded.data() + text.size(), 0, simdjson::SIMDJSON_PADDING);
    return parser.parse(padded.data(), text.size(), false).get(doc);
  };
  dom::element doc;
  auto err = parse(body, doc);
  if (err && err != simdjson::DEPTH_ERROR) {
    if (const auto rewritten = with_non_finite_markers(body)) {
      if (parser.capacity() < rewritten->size() &&
          parser.allocate(rewritten->size(), kParserDepth) != simdjson::SUCCESS)
        throw Unavailable("cannot allocate " + std::to_string(rewritten->size()) + " bytes to parse the request");
      err = parse(*rewritten, doc);
      t_markers = !err;
    }
  }
  if (err == simdjson::DEPTH_ERROR) throw InvalidArgument(json_depth_error_message(kMaxJsonDepth));
  if (err) throw InvalidArgument(std::string("JSON Parse error: ") + simdjson::error_message(err));
  return doc;
}

// ---- classify and regress: tf.Examples in JSON -------------------------------------------------

// One feature of a tf.Example as TF Serving's MakeExampleFromJsonObject builds it: floats
// (JSON numbers with a fraction or exponent, NaN, Infinity), int64s (JSON integers, true and
// false) or byte strings (JSON strings, {"b64": ...}); one kind per feature.
struct ExampleFeatureValues {
  enum class Kind { kNone, kBytes, kFloat, kInt64 } kind = Kind::kNone;
  std::vector<float> floats;
  std::vector<std::string> bytes;  // decoded
  std::size_t count = 0;  // values of any kind
};

using ParsedExample = std::map<std::string, ExampleFeatureValues>;

const char* kind_text(ExampleFeatureValues::Kind kind) {
  switch (kind) {
    case ExampleFeatureValues::Kind::kBytes: return "bytes";
    case ExampleFeatureValues::Kind::kFloat: return "float";
    case ExampleFeatureValues::Kind::kInt64: return "int64";
    case ExampleFeatureValues::Kind::kNone: break;
  }
  return "UNKNOWN";
}

// TF Serving's AddValueToFeature, with its error texts.
void add_feature_value(dom::element v, const std::string& name, ExampleFeatureValues& f) {
  using Kind = ExampleFeatureValues::Kind;
  const auto unexpected = [&] {
    return InvalidArgument("Feature: " + name + " has element with unexpected JSON type: " + json_type(v));
  };
  const auto become = [&](Kind kind) {
    if (f.kind != Kind::kNone && f.kind != kind)
      throw InvalidArgument("Unexpected element type in feature: " + name + " expecting type: " + kind_text(f.kind));
    f.kind = kind;
    ++f.count;
  };
  switch (v.type()) {
    case dom::element_type::NULL_VALUE:
    case dom::element_type::ARRAY: throw unexpected();
    case dom::element_type::BOOL: become(Kind::kInt64); return;
    case dom::element_type::OBJECT:
      if (!is_b64_object(v)) throw unexpected();
      become(Kind::kBytes);
      f.bytes.push_back(base64_decode(std::string_view(v["b64"].value())));
      return;
    case dom::element_type::STRING:
      if (!non_finite(v)) {
        become(Kind::kBytes);
        f.bytes.emplace_back(std::string_view(v));
        return;
      }
      [[fallthrough]];  // a NaN / Infinity marker is a float
    case dom::element_type::DOUBLE: {
      become(Kind::kFloat);
      const double d = number(v);
      if (std::isfinite(d) && (d > std::numeric_limits<float>::max() || d < std::numeric_limits<float>::lowest()))
        throw InvalidArgument("Cannot convert JSON value: " + show(v) + " to float without loss of precision.");
      f.floats.push_back(static_cast<float>(d));
      return;
    }
    case dom::element_type::UINT64:
      throw InvalidArgument("Feature: " + name + " has uint64 element. Only int64 is supported.");
    case dom::element_type::INT64: become(Kind::kInt64); return;
  }
}

// TF Serving's MakeExampleFromJsonObject: feature name -> value or list of values.
void add_example_features(dom::element v, ParsedExample& example) {
  if (v.type() != dom::element_type::OBJECT)
    throw InvalidArgument("Example must be JSON object but got JSON " + json_type(v));
  for (auto field : dom::object(v)) {
    const std::string name(field.key);
    ExampleFeatureValues feature;  // a feature given again replaces the first (protobuf merge)
    if (field.value.type() == dom::element_type::ARRAY) {
      for (dom::element e : dom::array(field.value)) add_feature_value(e, name, feature);
    } else {
      add_feature_value(field.value, name, feature);
    }
    example[name] = std::move(feature);
  }
}

// The shape text TF's parse_example uses: "[3]".
std::string dims_text(std::int64_t n) { return "[" + std::to_string(n) + "]"; }

// The byte string of the one bytes `feature` of an example, as tf.io.parse_example reads a
// FixedLenFeature([], tf.string).
std::string example_bytes(const ParsedExample& example, std::size_t index, const ExampleFeature& feature) {
  const auto it = example.find(feature.name);
  if (it == example.end() || it->second.count == 0)
    throw InvalidArgument("Name: <unknown>, Feature: " + feature.name +
                          " (data type: string) is required but could not be found.");
  const ExampleFeatureValues& f = it->second;
  const std::string key = "Name: <unknown>, Key: " + feature.name + ", Index: " + std::to_string(index) + ".  ";
  if (f.kind != ExampleFeatureValues::Kind::kBytes)
    throw InvalidArgument(key + "Data types don't match. Data type: " + kind_text(f.kind) + " but expected type: string");
  if (f.bytes.size() != 1)
    throw InvalidArgument(key + "Number of bytes values != expected.  Values size: " + std::to_string(f.bytes.size()) +
                          " but output shape: []");
  return f.bytes[0];
}

// One example's row of the model input, as tf.io.parse_example with FixedLenFeature float
// features reads it (its error texts, "Name: <unknown>" for an unnamed example).
void append_row(const ParsedExample& example, std::size_t index, const ExampleSignature& spec, std::vector<float>& row) {
  const std::string where = "Name: <unknown>, Key: ";
  for (const auto& feature : spec.features) {
    const auto it = example.find(feature.name);
    if (it == example.end() || it->second.count == 0) {
      if (feature.default_value.empty())
        throw InvalidArgument("Name: <unknown>, Feature: " + feature.name +
                              " (data type: float) is required but could not be found.");
      row.insert(row.end(), feature.default_value.begin(), feature.default_value.end());
      continue;
    }
    const ExampleFeatureValues& f = it->second;
    const std::string key = where + feature.name + ", Index: " + std::to_string(index) + ".  ";
    if (f.kind != ExampleFeatureValues::Kind::kFloat)
      throw InvalidArgument(key + "Data types don't match. Data type: " +
                            (f.kind == ExampleFeatureValues::Kind::kBytes ? "string" : "int64") +
                            " but expected type: float");
    if (static_cast<std::int64_t>(f.floats.size()) != feature.size)
      throw InvalidArgument(key + "Number of float values != expected.  Values size: " +
                            std::to_string(f.floats.size()) + " but output shape: " + dims_text(feature.size));
    row.insert(row.end(), f.floats.begin(), f.floats.end());
  }
}

// A REST request body's top level: the document and it as an object.
struct RequestTop {
  dom::element doc;
  dom::object top;
};

// Parses a REST request body's top level and its optional "signature_name" into
// `signature_name` (left empty when absent). Throws InvalidArgument, in TF Serving's words, when
// the body is not a JSON object or the name is not a string.
RequestTop parse_request_top(std::string_view body, std::string& signature_name) {
  RequestTop out;
  out.doc = parse_document(body);
  if (out.doc.type() != dom::element_type::OBJECT)
    throw InvalidArgument("JSON Value: " + show(out.doc) + " Is not object");
  out.top = out.doc;
  if (auto name = out.top["signature_name"]; !name.error()) {
    if (!is_json_string(name.value()))
      throw InvalidArgument("JSON Value: " + show(out.doc) +
                            " not formatted correctly. 'signature_name' key must be a string value.");
    signature_name = std::string(std::string_view(name.value()));
  }
  return out;
}

}  // namespace

PredictRequest parse_predict_request(std::string_view body,
                                     const std::function<const Signature&(const std::string&)>& lookup) {
  PredictRequest req;
  const auto [doc, top] = parse_request_top(body, req.signature_name);
  const Signature& sig = lookup(req.signature_name.empty() ? kDefaultSignature : req.signature_name);
  if (sig.inputs.empty())
    throw InvalidArgument("Failed to get input map for signature: " +
                          (req.signature_name.empty() ? std::string("DEFAULT") : req.signature_name));
  auto instances = top["instances"];
  auto inputs = top["inputs"];
  if (!instances.error() && !inputs.error())
    throw InvalidArgument("JSON Value: " + show(doc) +
                          " Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist ");
  if (!instances.error()) {
    if (instances.value().type() != dom::element_type::ARRAY)
      throw InvalidArgument("JSON Value: " + show(doc) + " Excepting 'instances' to be an list/array");
    const dom::array list = instances.value();
    if (list.size() == 0) throw InvalidArgument("JSON Value: " + show(doc) + " No values in 'instances' array");
    req.row_format = true;
    from_instances(list, sig, req);
    return req;
  }
  if (!inputs.error()) {
    req.row_format = false;
    from_inputs(inputs.value(), sig, req);
    return req;
  }
  throw InvalidArgument("Missing 'inputs' or 'instances' key");
}

std::string format_predict_response(const NamedTensors& outputs, const Signature& signature, bool row_format,
                                    const NamedStringTensors& string_outputs) {
  (void)signature;
  // Numeric and DT_STRING outputs together, in name order (as TF Serving's map).
  std::vector<OutputRef> all;
  for (const auto& [name, t] : outputs) all.push_back({&name, &t, nullptr});
  for (const auto& [name, t] : string_outputs) all.push_back({&name, nullptr, &t});
  std::sort(all.begin(), all.end(), [](const OutputRef& a, const OutputRef& b) { return *a.name < *b.name; });
  std::string out;
  out.reserve(64 + 16 * static_cast<std::size_t>(std::max<std::int64_t>(1, total_elements(all))));
  if (!row_format) {
    out += "{\"outputs\":";
    if (all.size() != 1) out += '{';
    for (std::size_t k = 0; k < all.size(); ++k) {
      if (all.size() != 1) {
        if (k) out += ',';
        write_string(*all[k].name, out);
        out += ':';
      }
      write_output(all[k], 0, 0, out);
    }
    if (all.size() != 1) out += '}';
    return out + "}";
  }
  // Row format: one entry per instance; the batch is the first dimension of every output.
  std::int64_t batch = -1;
  for (const auto& o : all) {
    const auto& shape = o.shape();
    if (shape.empty()) throw Internal("output " + *o.name + " has no batch dimension");
    if (batch >= 0 && shape[0] != batch)
      throw Internal("outputs disagree on the batch size; use the \"inputs\" (columnar) format");
    batch = shape[0];
  }
  out += "{\"predictions\":[";
  for (std::int64_t i = 0; i < batch; ++i) {
    if (i) out += ',';
    if (all.size() > 1) out += '{';
    for (std::size_t k = 0; k < all.size(); ++k) {
      const auto& shape = all[k].shape();
      std::int64_t per = 1;
      for (std::size_t d = 1; d < shape.size(); ++d) per *= shape[d];
      if (all.size() > 1) {
        if (k) out += ',';
        write_string(*all[k].name, out);
        out += ':';
      }
      write_output(all[k], 1, i * per, out);
    }
    if (all.size() > 1) out += '}';
  }
  return out + "]}";
}

ExamplesRequest parse_examples_request(std::string_view body,
                                       const std::function<const Signature&(const std::string&)>& lookup) {
  ExamplesRequest req;
  const auto [doc, top] = parse_request_top(body, req.signature_name);
  ParsedExample context;
  if (auto c = top["context"]; !c.error()) add_example_features(c.value(), context);
  auto examples = top["examples"];
  // TF Serving says "classify" for regress requests too.
  if (examples.error())
    throw InvalidArgument("JSON Value: " + show(doc) + " When method is classify, key 'examples' is expected and was not found");
  if (examples.value().type() != dom::element_type::ARRAY)
    throw InvalidArgument("JSON Value: " + show(doc) + " Expecting 'examples' value to be an list/array");
  const dom::array list = examples.value();
  if (list.size() == 0) throw InvalidArgument("JSON Value: " + show(doc) + " 'examples' value is an empty array");
  std::vector<ParsedExample> parsed;
  parsed.reserve(list.size());
  for (dom::element e : list) {
    ParsedExample example = context;  // the example's own features replace the context's
    add_example_features(e, example);
    parsed.push_back(std::move(example));
  }
  const ExampleSignature& spec = lookup(req.signature_name).examples;
  if (spec.features.size() == 1 && spec.features[0].bytes) {
    for (std::size_t i = 0; i < parsed.size(); ++i) req.bytes.push_back(example_bytes(parsed[i], i, spec.features[0]));
    return req;
  }
  std::int64_t width = 0;
  for (const auto& f : spec.features) width += f.size;
  std::vector<float> values;
  values.reserve(parsed.size() * static_cast<std::size_t>(width));
  for (std::size_t i = 0; i < parsed.size(); ++i) append_row(parsed[i], i, spec, values);
  req.rows = Tensor::from<float>(DType::kF32, {static_cast<std::int64_t>(parsed.size()), width}, values);
  return req;
}

std::string format_classify_response(const Tensor& scores, const std::vector<std::string>& classes) {
  if (scores.dtype != DType::kF32)
    throw InvalidArgument("Expected scores Tensor of DT_FLOAT. Got: " + tf_enum_name(scores.dtype));
  if (scores.shape.empty() || scores.shape.size() > 2)
    throw InvalidArgument("Expected Tensor shape: [batch_size num_classes] but got " + shape_to_string(scores.shape, ","));
  const std::int64_t n = scores.shape[0];
  const std::int64_t k = scores.shape.size() == 2 ? scores.shape[1] : 1;  // [batch]: one class
  if (!classes.empty() && static_cast<std::int64_t>(classes.size()) != k)
    throw InvalidArgument("the signature names " + std::to_string(classes.size()) + " classes but the model gives " +
                          std::to_string(k) + " scores per example");
  std::string out = "{\"results\":[";
  for (std::int64_t i = 0; i < n; ++i) {
    out += i ? ",[" : "[";
    for (std::int64_t c = 0; c < k; ++c) {
      out += c ? ",[" : "[";
      write_string(classes.empty() ? std::string() : classes[static_cast<std::size_t>(c)], out);
      out += ',';
      append_json_float(scores.as<float>()[i * k + c], out);
      out += ']';
    }
    out += ']';
  }
  return out + "]}";
}

std::string format_regress_response(const Tensor& values) {
  if (values.dtype != DType::kF32)
    throw InvalidArgument("Expected output Tensor of DT_FLOAT. Got: " + tf_enum_name(values.dtype));
  if (values.shape.empty() || values.shape.size() > 2 || (values.shape.size() == 2 && values.shape[1] != 1))
    throw InvalidArgument("Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got " +
                          shape_to_string(values.shape, ","));
  std::string out = "{\"results\":[";
  for (std::int64_t i = 0; i < values.shape[0]; ++i) {
    if (i) out += ',';
    append_json_float(values.as<float>()[i], out);
  }
  return out + "]}";
}

std::string base64_decode(std::string_view text) {
  // EVP_DecodeBlock skips blanks and cannot say how much padding it decoded, so check the
  // alphabet and the padding here and hand it whole quartets only.
  std::size_t n = text.size();
  std::size_t pad = 0;
  while (pad < 2 && n > 0 && text[n - 1] == '=') --n, ++pad;
  const auto in_alphabet = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
  };
  const auto fail = [] { return InvalidArgument("Unable to base64 decode"); };
  for (std::size_t i = 0; i < n; ++i)
    if (!in_alphabet(text[i])) throw fail();
  if (n % 4 == 1 || (pad > 0 && (n + pad) % 4 != 0)) throw fail();
  std::string quartets(text.substr(0, n));
  const std::size_t missing = (4 - n % 4) % 4;  // unpadded input: add the padding
  quartets.append(missing, '=');
  std::string out(quartets.size() / 4 * 3, '\0');
  if (quartets.empty()) return out;
  const int len = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(quartets.data()),
                                  static_cast<int>(quartets.size()));
  if (len < 0) throw fail();
  // EVP_DecodeBlock counts padding as zero bytes: drop one byte per '='.
  out.resize(static_cast<std::size_t>(len) - missing);
  return out;
}

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int len = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(len));
  return out;
}

std::string error_body(const std::string& message) { return json{{"error", message}}.dump(); }

std::string request_field_text(std::string_view body, const std::string& field) {
  try {
    const dom::element doc = parse_document(body);
    dom::object top;
    dom::element value;
    if (doc.get(top) != simdjson::SUCCESS || top[field].get(value) != simdjson::SUCCESS) return "";
    if (is_json_string(value)) return std::string(std::string_view(value));
    return simdjson::minify(value);
  } catch (const Error&) {
    return "";  // the request's own parse says what is wrong with it
  }
}

}  // namespace tensorhub
