// TF Serving's REST predict bodies for tensorhub-serve-lite's one-input, one-output models
// (https://www.tensorflow.org/tfx/serving/api_rest, "Predict API"), with the messages
// serve/json_tensor.h gives for the same mistakes:
//   row format      {"signature_name": "...", "instances": [<instance>, ...]}
//                   -> {"predictions": [<per-instance output>, ...]}
//   columnar format {"signature_name": "...", "inputs": <tensor> | {"<input>": <tensor>}}
//                   -> {"outputs": <tensor>}
// NaN, Infinity and -Infinity are numbers, as in TF Serving (core/json_non_finite.h, serve's
// scanner too); nesting deeper than 64 levels is refused before parsing. Parsed with
// nlohmann::json (header-only, so the static and the arm64 binaries need no library), not
// serve's simdjson.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensorhub/core/json.h"

namespace tensorhub {

/// What a lite model's serving_default signature reads and writes (model.json's
/// "signature": {"inputs", "outputs", "input_dtype", "decode", "decode_scale"}).
struct LiteSignature {
  std::string input = "inputs";              ///< the input's name
  std::string output = "outputs";            ///< the output's name
  std::vector<std::int64_t> input_shape;     ///< per example
  std::vector<std::int64_t> output_shape;    ///< per example
  bool string_input = false;  ///< DT_STRING: one string of prod(input_shape) bytes per example
  double decode_scale = 1.0;  ///< "raw_uint8": byte i becomes byte * decode_scale
  std::vector<std::string> example_signatures;  ///< names of model.json's classify/regress signatures

  /// Reads `config`'s "signature" with parse_serving_signature() (train/serving_signature.h,
  /// serve's reader too) and the names of its "signatures". Throws InvalidArgument, as that
  /// reader does, for a malformed signature: an input_dtype other than DT_FLOAT or DT_STRING,
  /// a decode step other than raw_uint8, a decode_scale that is not a finite number.
  static LiteSignature from_config(const Json& config, std::vector<std::int64_t> input_shape,
                                   std::vector<std::int64_t> output_shape);
};

/// A parsed predict body: `batch` examples of prod(input_shape) floats each.
struct LitePredictRequest {
  std::string signature_name;  ///< as given; empty when absent
  bool row_format = true;      ///< "instances" (true) or "inputs"
  std::int64_t batch = 0;
  std::vector<float> values;   ///< batch * prod(input_shape), row-major
};

/// Parses a predict body against `signature`. Throws InvalidArgument with TF Serving's
/// messages (json_tensor.h's) for malformed JSON, too deep nesting, a body that is no object,
/// both or neither of "instances"/"inputs", ragged or mistyped values, a float out of range,
/// bad base64; with serve's messages for an unknown signature name, a classify/regress
/// signature, and instances whose size is not the model's input size. Any nesting with the
/// right number of values per example is taken (a 28x28 list for a [784] input).
LitePredictRequest parse_lite_predict(std::string_view body, const LiteSignature& signature);

/// The response body: `y` holds `batch` outputs of prod(output_shape) floats. Floats are
/// written in their shortest round-trip form with ".0" kept ("3.0"), NaN and ±Infinity as
/// tokens, as serve writes them.
std::string format_lite_predict(const std::vector<float>& y, std::int64_t batch, const LiteSignature& signature,
                                bool row_format);

/// {"error": "<message>"} with the message JSON-escaped (invalid UTF-8 replaced).
std::string lite_error_body(const std::string& message);

/// Standard base64 (RFC 4648 section 4), with or without '=' padding. Throws
/// InvalidArgument("Unable to base64 decode") for anything else.
std::string lite_base64_decode(std::string_view text);

}  // namespace tensorhub
