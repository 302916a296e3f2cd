// model.json's "signature": the names and the input decoding of a model's serving_default
// signature (TF's SignatureDef, https://www.tensorflow.org/tfx/serving/signature_defs), read
// alike by tensorhub serve (serve/servable.cpp) and tensorhub-serve-lite (lite/predict_json.h):
//   "signature": {"inputs": "x", "outputs": "y",                      names; default "inputs", "outputs"
//                 "input_dtype": "DT_STRING", "decode": "raw_uint8",  optional: bytes in, see below
//                 "decode_scale": 0.00392156862745098}
// A DT_STRING input takes one string of prod(input_shape) bytes per example (clients send them
// as {"b64": ...}, TF Serving's REST API), byte i becoming the float byte * decode_scale at
// row-major position i of the model's input. Needs only nlohmann-json, like layer_spec.h, so
// the static (and arm64) tensorhub-serve-lite compiles it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tensorhub {

/// A model's serving_default signature as model.json declares it.
struct ServingSignatureSpec {
  std::string input = "inputs";    ///< the input tensor's name
  std::string output = "outputs";  ///< the output tensor's name
  bool string_input = false;       ///< "input_dtype": "DT_STRING", decoded by "raw_uint8"
  double decode_scale = 1.0;       ///< "raw_uint8": byte i becomes byte * decode_scale (finite)
};

/// Reads `config`'s optional "signature" object (absent: the defaults above); other top-level
/// fields are not looked at. Throws InvalidArgument ("model.json signature: ...") when
/// "signature" is not an object or a name is not a string, for an input_dtype other than
/// DT_FLOAT or DT_STRING, for "decode" without DT_STRING, for a DT_STRING input without
/// "decode": "raw_uint8" (the only decoding step), and for a decode_scale that is not a finite
/// number.
ServingSignatureSpec parse_serving_signature(const nlohmann::json& config);

}  // namespace tensorhub
