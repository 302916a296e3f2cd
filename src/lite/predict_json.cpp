// TF Serving's predict bodies for the edge server (lite/predict_json.h), over nlohmann::json.
#include "tensorhub/lite/predict_json.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include "tensorhub/core/error.h"
#include "tensorhub/core/json_non_finite.h"
#include "tensorhub/train/serving_signature.h"

namespace tensorhub {
namespace {

// A request body keeps its keys in their order, so that messages quote it as sent (as serve's
// simdjson DOM does).
using Doc = nlohmann::ordered_json;

// ---- NaN / Infinity and the depth limit --------------------------------------------------------
// nlohmann::json takes only RFC 8259 JSON: the body is first rewritten by core's
// scan_json_non_finite() (core/json_non_finite.h, shared with serve), which refuses nesting
// past kMaxJsonDepth before any parse, so no input can exhaust the stack, and turns each NaN,
// Infinity or -Infinity token in a value position into a marker string. A body whose own
// strings escape U+0000 and that holds such tokens is refused: its markers would be ambiguous.
JsonNonFiniteScan scan(std::string_view body) {
  JsonNonFiniteScan out = scan_json_non_finite(body, kMaxJsonDepth);
  if (out.escapes_nul && out.markers)
    throw InvalidArgument("JSON Parse error: a string escapes U+0000 and the body holds NaN or Infinity");
  return out;
}

// Reads one parsed body: its leaves as numbers (markers included) and values as messages show them.
class Reader {
 public:
  explicit Reader(bool markers) : markers_(markers) {}

  std::optional<double> non_finite(const Doc& v) const {
    if (!markers_ || !v.is_string()) return std::nullopt;
    return json_non_finite_marker_value(v.get_ref<const std::string&>());
  }
  bool is_number(const Doc& v) const { return v.is_number() || non_finite(v).has_value(); }
  bool is_string(const Doc& v) const { return v.is_string() && !non_finite(v); }

  // A value for a message, cut short (a body can be 64 MiB), markers shown as their tokens.
  std::string show(const Doc& v) const {
    if (const auto d = non_finite(v)) return std::isnan(*d) ? "NaN" : *d > 0 ? "Infinity" : "-Infinity";
    std::string s = v.dump(-1, ' ', false, Doc::error_handler_t::replace);
    if (markers_) restore_json_non_finite_tokens(s);
    if (s.size() > 200) s = s.substr(0, 200) + "...";
    return s;
  }

  std::string type_name(const Doc& v) const {
    if (v.is_null()) return "Null";
    if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
    if (v.is_object()) return "Object";
    if (v.is_array()) return "Array";
    if (v.is_string()) return non_finite(v) ? "Number" : "String";
    return "Number";
  }

  static bool is_b64_object(const Doc& v) {
    return v.is_object() && v.size() == 1 && v.contains("b64") && v.at("b64").is_string();
  }

 private:
  bool markers_;
};

// Shape of a dense nested list, following first elements (TF's GetDenseTensorShape).
std::vector<std::int64_t> dense_shape(const Doc* v) {
  std::vector<std::int64_t> shape;
  while (v->is_array()) {
    shape.push_back(static_cast<std::int64_t>(v->size()));
    if (v->empty()) break;
    v = &(*v)[0];
  }
  return shape;
}

std::int64_t product(const std::vector<std::int64_t>& shape, std::size_t from = 0) {
  std::int64_t n = 1;
  for (std::size_t i = from; i < shape.size(); ++i) n *= shape[i];
  return n;
}

// Walks a dense nested list of `shape` in C order, calling leaf(value) for each element, with
// TF Serving's errors for a list of the wrong size or level (its FillTensorProto).
template <typename Leaf>
void walk(const Reader& r, const Doc& v, std::size_t level, const std::vector<std::int64_t>& shape, const Leaf& leaf) {
  if (!v.is_array()) {
    if (level != shape.size())
      throw InvalidArgument("JSON Value: " + r.show(v) + " found at incorrect level: " + std::to_string(level + 1) +
                            " in the JSON DOM. Expected at level: " + std::to_string(shape.size()));
    leaf(v);
    return;
  }
  if (level >= shape.size())
    throw InvalidArgument("Encountered list at unexpected level: " + std::to_string(level) + " expected < " +
                          std::to_string(shape.size()));
  if (static_cast<std::int64_t>(v.size()) != shape[level])
    throw InvalidArgument("Encountered list at unexpected size: " + std::to_string(v.size()) + " at level: " +
                          std::to_string(level) + " expected size: " + std::to_string(shape[level]));
  for (const Doc& e : v) walk(r, e, level + 1, shape, leaf);
}

// One tensor of the request: floats, or strings for a DT_STRING input.
struct Part {
  std::vector<std::int64_t> shape;
  std::vector<float> floats;
  std::vector<std::string> strings;
};

Part read_part(const Reader& r, const Doc& v, bool strings) {
  Part p;
  p.shape = dense_shape(&v);
  if (strings) {
    walk(r, v, 0, p.shape, [&](const Doc& leaf) {
      if (r.is_string(leaf)) {
        p.strings.push_back(leaf.get<std::string>());
      } else if (leaf.is_object()) {
        if (!Reader::is_b64_object(leaf))
          throw InvalidArgument("JSON Value: " + r.show(leaf) + " not formatted correctly for base64 data");
        p.strings.push_back(lite_base64_decode(leaf.at("b64").get_ref<const std::string&>()));
      } else {
        throw InvalidArgument("JSON Value: " + r.show(leaf) + " Type: " + r.type_name(leaf) +
                              " is not of expected type: string");
      }
    });
    return p;
  }
  p.floats.reserve(static_cast<std::size_t>(std::max<std::int64_t>(product(p.shape), 1)));
  walk(r, v, 0, p.shape, [&](const Doc& leaf) {
    if (!r.is_number(leaf))
      throw InvalidArgument("JSON Value: " + r.show(leaf) + " Type: " + r.type_name(leaf) +
                            " is not of expected type: float" +
                            (Reader::is_b64_object(leaf) ? " (b64 values are for string inputs)" : ""));
    const auto nf = r.non_finite(leaf);
    const double d = nf ? *nf : leaf.get<double>();
    if (std::isfinite(d) && (d > std::numeric_limits<float>::max() || d < std::numeric_limits<float>::lowest()))
      throw InvalidArgument("Cannot convert JSON value: " + r.show(leaf) + " to float without loss of precision.");
    p.floats.push_back(static_cast<float>(d));
  });
  return p;
}

std::string shape_text(const std::vector<std::int64_t>& shape, const char* sep = ", ") {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? sep : "") + std::to_string(shape[i]);
  return s + "]";
}

// Every instance has one shape (TF's AddInstanceItem).
void check_same_shape(const Part& first, const Part& p) {
  if (first.shape == p.shape) return;
  if (product(first.shape) != product(p.shape))
    throw InvalidArgument("Expecting tensor size: " + std::to_string(product(first.shape)) +
                          " but got: " + std::to_string(product(p.shape)));
  throw InvalidArgument("Expecting shape " + shape_text(first.shape, ",") + " but got: " + shape_text(p.shape, ","));
}

// The "instances" list as one batch-first part.
Part from_instances(const Reader& r, const Doc& list, const LiteSignature& sig) {
  const bool objects = list[0].is_object() && !Reader::is_b64_object(list[0]);
  Part all;
  std::vector<std::int64_t> shape;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Doc& elem = list[i];
    const bool is_object = elem.is_object() && !Reader::is_b64_object(elem);
    try {
      const Doc* value = &elem;
      if (objects) {
        if (!is_object) throw InvalidArgument("Expecting object but got list at item " + std::to_string(i) + " of input list");
        if (elem.size() != 1) throw InvalidArgument("JSON object: " + r.show(elem) + " keys must be equal to the inputs of the signature");
        if (!elem.contains(sig.input))
          throw InvalidArgument("JSON object: does not have named input: " + elem.begin().key());
        value = &elem.at(sig.input);
      } else if (is_object) {
        throw InvalidArgument("Expecting value/list but got object at item " + std::to_string(i) + " of input list");
      }
      Part p = read_part(r, *value, sig.string_input);
      if (i == 0) shape = p.shape;
      else check_same_shape(Part{shape, {}, {}}, p);
      all.floats.insert(all.floats.end(), p.floats.begin(), p.floats.end());
      for (auto& s : p.strings) all.strings.push_back(std::move(s));
    } catch (const Error& e) {
      throw InvalidArgument("Failed to process element: " + std::to_string(i) + " of 'instances' list. Error: " +
                            e.message());
    }
  }
  all.shape = shape;
  all.shape.insert(all.shape.begin(), static_cast<std::int64_t>(list.size()));
  return all;
}

// The "inputs" value (columnar format): the tensor, or an object naming the one input.
Part from_inputs(const Reader& r, const Doc& inputs, const LiteSignature& sig) {
  if (!inputs.is_object() || Reader::is_b64_object(inputs)) return read_part(r, inputs, sig.string_input);
  if (!inputs.contains(sig.input)) throw InvalidArgument("Missing named input: " + sig.input + " in 'inputs' object.");
  return read_part(r, inputs.at(sig.input), sig.string_input);
}

// "raw_uint8": each string holds prod(input_shape) bytes; byte i -> byte * decode_scale.
void decode_strings(const Part& p, const LiteSignature& sig, LitePredictRequest& req) {
  if (p.shape.size() != 1)
    throw InvalidArgument("input " + sig.input + " takes one string per example (shape [batch]), got shape " +
                          shape_text(p.shape));
  const std::int64_t per_example = product(sig.input_shape);
  req.batch = p.shape[0];
  req.values.reserve(static_cast<std::size_t>(req.batch * per_example));
  for (std::size_t i = 0; i < p.strings.size(); ++i) {
    const std::string& s = p.strings[i];
    if (static_cast<std::int64_t>(s.size()) != per_example)
      throw InvalidArgument("input " + sig.input + ": example " + std::to_string(i) + " has " + std::to_string(s.size()) +
                            " bytes but \"decode\": \"raw_uint8\" of shape " + shape_text(sig.input_shape) + " needs " +
                            std::to_string(per_example));
    for (unsigned char byte : s)
      req.values.push_back(static_cast<float>(static_cast<double>(byte) * sig.decode_scale));
  }
}

// Checks the examples' size against the model's input (serve's ModelServable::predict).
void take_floats(Part p, const LiteSignature& sig, LitePredictRequest& req) {
  if (p.shape.empty()) throw InvalidArgument("input " + sig.input + " needs a batch dimension");
  const std::int64_t per_example = product(p.shape, 1), want = product(sig.input_shape);
  if (per_example != want)
    throw InvalidArgument("input " + sig.input + ": each instance has shape " +
                          shape_text(std::vector<std::int64_t>(p.shape.begin() + 1, p.shape.end())) + " (" +
                          std::to_string(per_example) + " values) but the model takes " + shape_text(sig.input_shape) +
                          " (" + std::to_string(want) + " values)");
  req.batch = p.shape[0];
  req.values = std::move(p.floats);
}

// Writes dims [dim, rank) of `shape` from flat element `offset` of `y` as nested lists.
void write_nested(const std::vector<float>& y, const std::vector<std::int64_t>& shape, std::size_t dim,
                  std::int64_t offset, std::string& out) {
  if (dim == shape.size()) {
    append_json_float(y[static_cast<std::size_t>(offset)], out);
    return;
  }
  const std::int64_t stride = product(shape, dim + 1);
  out += '[';
  for (std::int64_t i = 0; i < shape[dim]; ++i) {
    if (i) out += ',';
    write_nested(y, shape, dim + 1, offset + i * stride, out);
  }
  out += ']';
}


// ---- the fast path -----------------------------------------------------------------------------
// Most bodies are {"instances": <nested lists of numbers>} or {"inputs": ...}, perhaps with a
// "signature_name". Those are read here in one pass with std::from_chars into the floats the
// model takes, without a DOM (nlohmann::json's DOM of 784 numbers costs ~0.4 ms, more than an
// MLP's matrix products). Anything else, and anything wrong, returns nullopt: the DOM path then
// reads the body again and gives TF Serving's message.
class FastReader {
 public:
  explicit FastReader(std::string_view text) : s_(text) {}

  std::optional<LitePredictRequest> read() {
    LitePredictRequest req;
    bool have_values = false, have_name = false;
    if (!eat('{')) return std::nullopt;
    do {
      std::string_view key;
      if (!string(key) || !eat(':')) return std::nullopt;
      if (key == "signature_name" && !have_name) {
        std::string_view name;
        if (!string(name)) return std::nullopt;
        req.signature_name = std::string(name);
        have_name = true;
      } else if ((key == "instances" || key == "inputs") && !have_values) {
        req.row_format = key == "instances";
        if (!tensor(req.values)) return std::nullopt;
        have_values = true;
      } else {
        return std::nullopt;
      }
    } while (eat(','));
    if (!eat('}') || !have_values) return std::nullopt;
    skip_blanks();
    if (at_ != s_.size()) return std::nullopt;
    req.batch = shape_.empty() ? 0 : shape_[0];
    return req;
  }
  /// The shape of the tensor read, batch first.
  const std::vector<std::int64_t>& shape() const { return shape_; }

 private:
  void skip_blanks() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r')) ++at_;
  }
  bool eat(char c) {
    skip_blanks();
    if (at_ < s_.size() && s_[at_] == c) return ++at_, true;
    return false;
  }
  // A string without escapes (keys, signature names).
  bool string(std::string_view& out) {
    if (!eat('"')) return false;
    const std::size_t end = s_.find_first_of("\"\\", at_);
    if (end == std::string_view::npos || s_[end] != '"') return false;
    out = s_.substr(at_, end - at_);
    at_ = end + 1;
    return true;
  }
  // One JSON number (RFC 8259's grammar) or NaN / Infinity / -Infinity, that fits a float.
  bool number(std::vector<float>& out) {
    skip_blanks();
    for (std::string_view token : kJsonNonFiniteTokens)
      if (s_.substr(at_, token.size()) == token) {
        at_ += token.size();
        out.push_back(static_cast<float>(*json_non_finite_token_value(token)));
        return true;
      }
    const std::size_t begin = at_;
    const auto digits = [&] {
      const std::size_t from = at_;
      while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
      return at_ > from;
    };
    if (at_ < s_.size() && s_[at_] == '-') ++at_;
    if (at_ < s_.size() && s_[at_] == '0') ++at_;
    else if (!digits()) return false;
    if (at_ < s_.size() && s_[at_] == '.' && (++at_, !digits())) return false;
    if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
      ++at_;
      if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
      if (!digits()) return false;
    }
    double d = 0;
    const auto r = std::from_chars(s_.data() + begin, s_.data() + at_, d);
    if (r.ec != std::errc() || d > std::numeric_limits<float>::max() || d < std::numeric_limits<float>::lowest())
      return false;
    out.push_back(static_cast<float>(d));
    return true;
  }
  // A dense tensor of nested lists, its shape in shape_: the first path down fixes the rank
  // (where the first number is) and each level's size; every other list must match them.
  bool tensor(std::vector<float>& out) { return value(0, out); }
  bool value(std::size_t level, std::vector<float>& out) {
    if (!eat('[')) {
      if (rank_ < 0) rank_ = static_cast<int>(level);  // == shape_.size(): one entry per list above
      return static_cast<int>(level) == rank_ && number(out);
    }
    if ((rank_ >= 0 && static_cast<int>(level) >= rank_) || level >= static_cast<std::size_t>(kMaxJsonDepth)) return false;
    if (level == shape_.size()) shape_.push_back(-1);
    std::int64_t n = 0;
    do {
      if (!value(level + 1, out)) return false;  // an empty list also ends here: the DOM path judges it
      ++n;
    } while (eat(','));
    if (!eat(']')) return false;
    if (shape_[level] == -1) shape_[level] = n;
    return shape_[level] == n;
  }

  std::string_view s_;
  std::size_t at_ = 0;
  std::vector<std::int64_t> shape_;
  int rank_ = -1;  // unknown until the first number
};

// The fast path's request when it read the body and it needs no message; else nullopt.
std::optional<LitePredictRequest> fast_parse(std::string_view body, const LiteSignature& sig) {
  if (sig.string_input) return std::nullopt;
  FastReader reader(body);
  auto req = reader.read();
  if (!req || (!req->signature_name.empty() && req->signature_name != "serving_default")) return std::nullopt;
  const auto& shape = reader.shape();
  if (shape.empty()) return std::nullopt;  // no batch dimension: the DOM path says so
  if (product(shape, 1) != product(sig.input_shape) || product(shape) != static_cast<std::int64_t>(req->values.size()))
    return std::nullopt;
  return req;
}

}  // namespace

LiteSignature LiteSignature::from_config(const Json& config, std::vector<std::int64_t> input_shape,
                                         std::vector<std::int64_t> output_shape) {
  LiteSignature sig;
  sig.input_shape = std::move(input_shape);
  sig.output_shape = std::move(output_shape);
  const ServingSignatureSpec spec = parse_serving_signature(config);
  sig.input = spec.input;
  sig.output = spec.output;
  sig.string_input = spec.string_input;
  sig.decode_scale = spec.decode_scale;
  const Json all = config.value("signatures", Json::object());
  if (all.is_object())
    for (const auto& [name, def] : all.items()) sig.example_signatures.push_back(name);
  return sig;
}

LitePredictRequest parse_lite_predict(std::string_view body, const LiteSignature& sig) {
  if (body.empty()) throw InvalidArgument("JSON Parse error: The document is empty");
  if (auto fast = fast_parse(body, sig)) return std::move(*fast);
  const JsonNonFiniteScan scanned = scan(body);
  Doc doc;
  try {
    doc = Doc::parse(scanned.text);
  } catch (const Doc::exception& e) {
    throw InvalidArgument(std::string("JSON Parse error: ") + e.what());
  }
  const Reader r(scanned.markers);
  if (!doc.is_object()) throw InvalidArgument("JSON Value: " + r.show(doc) + " Is not object");
  LitePredictRequest req;
  if (doc.contains("signature_name")) {
    if (!r.is_string(doc.at("signature_name")))
      throw InvalidArgument("JSON Value: " + r.show(doc) +
                            " not formatted correctly. 'signature_name' key must be a string value.");
    req.signature_name = doc.at("signature_name").get<std::string>();
  }
  const std::string& name = req.signature_name;
  if (!name.empty() && name != "serving_default") {
    for (const auto& s : sig.example_signatures)
      if (s == name)
        throw InvalidArgument("signature " + name + " reads tf.Examples (classify or regress): tensorhub-serve-lite "
                              "answers predict only; tensorhub serve answers :classify and :regress");
    throw InvalidArgument("Serving signature name: \"" + name + "\" not found in signature def");
  }
  const bool has_instances = doc.contains("instances"), has_inputs = doc.contains("inputs");
  if (has_instances && has_inputs)
    throw InvalidArgument("JSON Value: " + r.show(doc) +
                          " Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist ");
  Part part;
  if (has_instances) {
    const Doc& list = doc.at("instances");
    if (!list.is_array()) throw InvalidArgument("JSON Value: " + r.show(doc) + " Excepting 'instances' to be an list/array");
    if (list.empty()) throw InvalidArgument("JSON Value: " + r.show(doc) + " No values in 'instances' array");
    part = from_instances(r, list, sig);
  } else if (has_inputs) {
    req.row_format = false;
    part = from_inputs(r, doc.at("inputs"), sig);
  } else {
    throw InvalidArgument("Missing 'inputs' or 'instances' key");
  }
  if (sig.string_input) decode_strings(part, sig, req);
  else take_floats(std::move(part), sig, req);
  return req;
}

std::string format_lite_predict(const std::vector<float>& y, std::int64_t batch, const LiteSignature& sig,
                                bool row_format) {
  std::string out;
  out.reserve(32 + 16 * y.size());
  std::vector<std::int64_t> shape = sig.output_shape;
  if (!row_format) {
    shape.insert(shape.begin(), batch);
    out += "{\"outputs\":";
    write_nested(y, shape, 0, 0, out);
    return out + "}";
  }
  const std::int64_t per = product(shape);
  out += "{\"predictions\":[";
  for (std::int64_t i = 0; i < batch; ++i) {
    if (i) out += ',';
    write_nested(y, shape, 0, i * per, out);
  }
  return out + "]}";
}

std::string lite_error_body(const std::string& message) {
  return Json{{"error", message}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string lite_base64_decode(std::string_view text) {
  const auto fail = [] { return InvalidArgument("Unable to base64 decode"); };
  std::size_t n = text.size(), pad = 0;
  while (pad < 2 && n > 0 && text[n - 1] == '=') --n, ++pad;
  if (n % 4 == 1 || (pad > 0 && (n + pad) % 4 != 0)) throw fail();
  const auto value = [&](char c) -> unsigned {
    if (c >= 'A' && c <= 'Z') return static_cast<unsigned>(c - 'A');
    if (c >= 'a' && c <= 'z') return static_cast<unsigned>(c - 'a' + 26);
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0' + 52);
    if (c == '+') return 62;
    if (c == '/') return 63;
    throw fail();
  };
  std::string out;
  out.reserve(n / 4 * 3 + 2);
  unsigned bits = 0;
  int count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    bits = (bits << 6) | value(text[i]);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  return out;
}

}  // namespace tensorhub
