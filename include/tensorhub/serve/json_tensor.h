// TensorFlow Serving's JSON encoding of predict requests and responses (REST API,
// https://www.tensorflow.org/tfx/serving/api_rest, "Predict API"):
//   row format      {"signature_name": "...", "instances": [<instance>, ...]}
//                   -> {"predictions": [<per-instance output>, ...]}
//   columnar format {"signature_name": "...", "inputs": <tensor> | {"name": <tensor>, ...}}
//                   -> {"outputs": <tensor> | {"name": <tensor>, ...}}
// An instance is the value of the single input, or an object with one key per input.
// Binary values are {"b64": "<base64>"}. Error texts follow TF Serving's
// tensorflow_serving/util/json_tensor.cc so that clients see the messages they know.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "tensorhub/serve/servable.h"

namespace tensorhub::serve {

/// A parsed predict request.
struct PredictRequest {
  std::string signature_name;  ///< as given; empty means kDefaultSignature
  bool row_format = true;      ///< "instances" (true) or "inputs" (false)
  NamedTensors inputs;         ///< batch first, dtypes from the signature
};

/// Maximum nesting of JSON arrays and objects accepted (deeper input is refused before it
/// is parsed, so a hostile body cannot exhaust the stack).
inline constexpr int kMaxJsonDepth = 64;

/// Parses a predict request body against the signature `lookup(signature_name)` returns
/// (lookup throws NotFound for an unknown signature). Throws InvalidArgument with TF
/// Serving's message for malformed JSON, missing or both of "instances"/"inputs", ragged
/// rows, a wrong dtype, a value that does not fit float, NaN or Infinity, or too deep nesting.
PredictRequest parse_predict_request(std::string_view body,
                                     const std::function<const Signature&(const std::string&)>& lookup);

/// The response body for `outputs` of `signature` in the request's format. Floats are
/// written in their shortest round-trip form ("2.5", "3.0"), as TF Serving does.
std::string format_predict_response(const NamedTensors& outputs, const Signature& signature, bool row_format);

/// {"error": "<message>"} with the message JSON-escaped.
std::string error_body(const std::string& message);

}  // namespace tensorhub::serve
