// TensorFlow Serving's JSON encoding of predict requests and responses (REST API,
// https://www.tensorflow.org/tfx/serving/api_rest, "Predict API"):
//   row format      {"signature_name": "...", "instances": [<instance>, ...]}
//                   -> {"predictions": [<per-instance output>, ...]}
//   columnar format {"signature_name": "...", "inputs": <tensor> | {"name": <tensor>, ...}}
//                   -> {"outputs": <tensor> | {"name": <tensor>, ...}}
// An instance is the value of the single input, or an object with one key per input.
// Binary values are {"b64": "<base64>"} (RFC 4648 base64): in a request, for DT_STRING inputs
// (decoded to bytes; a plain JSON string is taken as is); in a response, for DT_STRING outputs
// whose name ends in "_bytes" (others are written as JSON strings). Error texts follow TF Serving's
// tensorflow_serving/util/json_tensor.cc so that clients see the messages they know.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "tensorhub/core/json_non_finite.h"  // kMaxJsonDepth, the nesting accepted
#include "tensorhub/serve/servable.h"

namespace tensorhub {

/// A parsed predict request.
struct PredictRequest {
  std::string signature_name;  ///< as given; empty means kDefaultSignature
  bool row_format = true;      ///< "instances" (true) or "inputs" (false)
  NamedTensors inputs;         ///< batch first, dtypes from the signature
  NamedStringTensors string_inputs;  ///< the signature's DT_STRING inputs, batch first, decoded bytes
};

/// Parses a predict request body against the signature `lookup(signature_name)` returns
/// (lookup throws NotFound for an unknown signature). Throws InvalidArgument with TF
/// Serving's message for malformed JSON, missing or both of "instances"/"inputs", ragged
/// rows, a wrong dtype, a value that does not fit float, NaN or Infinity, too deep nesting,
/// and for a DT_STRING input a value that is neither a string nor {"b64": ...} ("... not
/// formatted correctly for base64 data") or invalid base64 ("Unable to base64 decode").
PredictRequest parse_predict_request(std::string_view body,
                                     const std::function<const Signature&(const std::string&)>& lookup);

/// The response body for `outputs` and `string_outputs` (DT_STRING) of `signature` in the
/// request's format, all in name order. Floats are written in their shortest round-trip form
/// ("2.5", "3.0"), as TF Serving does; a DT_STRING output named "*_bytes" as {"b64": ...},
/// any other as JSON strings (invalid UTF-8 replaced by U+FFFD). Throws Internal if row
/// format outputs disagree on the batch size.
std::string format_predict_response(const NamedTensors& outputs, const Signature& signature, bool row_format,
                                    const NamedStringTensors& string_outputs = {});

/// A parsed classify or regress request (TF Serving's REST "Classify and Regress API").
struct ExamplesRequest {
  std::string signature_name;  ///< as given; empty when the body names none
  Tensor rows;                 ///< [examples, sum of the signature's feature sizes] floats
  std::vector<std::string> bytes;  ///< instead, for a signature of one bytes feature: one per example
};

/// Parses a classify or regress body {"signature_name": "...", "context": {...}, "examples":
/// [{"feature": value or [values], ...}, ...]} as TF Serving reads tf.Examples from JSON
/// (numbers with a fraction or exponent, NaN and Infinity are float features; integers,
/// true and false int64 features; strings and {"b64": ...} bytes features), the context's
/// features merged into each example (its own win); then reads each example's row of
/// lookup(signature_name).examples as tf.io.parse_example reads float features. Throws
/// InvalidArgument with TF Serving's messages: a body without an "examples" list, a feature
/// mixing kinds or holding null, lists or other objects, invalid base64, a required feature
/// missing, a feature of another kind or size than the signature reads.
ExamplesRequest parse_examples_request(std::string_view body,
                                       const std::function<const Signature&(const std::string&)>& lookup);

/// {"results": [[[label, score], ...], ...]}: one list of [label, score] pairs per example,
/// from `scores` [examples, classes] (or [examples]: one class) of floats; labels from
/// `classes` (one per column), else "". Throws InvalidArgument for another shape or dtype, or
/// a `classes` of the wrong length.
std::string format_classify_response(const Tensor& scores, const std::vector<std::string>& classes);

/// {"results": [value, ...]}: one float per example from `values` [examples] or [examples, 1].
/// Throws InvalidArgument (TF Serving's message) for another shape, or a dtype other than float.
std::string format_regress_response(const Tensor& values);

/// Decodes standard base64 (RFC 4648 section 4, alphabet A-Z a-z 0-9 + /), with or without
/// '=' padding, via OpenSSL's EVP_DecodeBlock. Throws InvalidArgument("Unable to base64
/// decode") for any other character, misplaced padding or a length of 4k+1.
std::string base64_decode(std::string_view text);

/// Encodes bytes as padded standard base64 (RFC 4648 section 4) via EVP_EncodeBlock.
std::string base64_encode(std::string_view bytes);

/// {"error": "<message>"} with the message JSON-escaped.
std::string error_body(const std::string& message);

/// The top-level member `field` of a REST request body, as a weighted split's routing key
/// (ServerOptions::routing_key_field): a string's text, any other value's minified JSON
/// ({"user": 17} gives "17"); "" when the body is not a JSON object or has no such member.
/// Never throws: a malformed body is reported by the request's own parse.
std::string request_field_text(std::string_view body, const std::string& field);

}  // namespace tensorhub
