// model.json's "signature" (train/serving_signature.h): one reader for serve and lite.
#include "tensorhub/train/serving_signature.h"

#include <cmath>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

using Json = nlohmann::json;

// names[key] as a string, `fallback` when absent.
std::string text_field(const Json& names, const char* key, const char* fallback) {
  const auto it = names.find(key);
  if (it == names.end()) return fallback;
  if (!it->is_string())
    throw InvalidArgument(std::string("model.json signature: \"") + key + "\" must be a string, got " + it->dump());
  return it->get<std::string>();
}

}  // namespace

ServingSignatureSpec parse_serving_signature(const Json& config) {
  ServingSignatureSpec spec;
  const auto found = config.find("signature");
  if (found == config.end()) return spec;
  const Json& names = *found;
  if (!names.is_object())
    throw InvalidArgument("model.json signature: \"signature\" must be an object such as {\"inputs\": \"x\", "
                          "\"outputs\": \"y\"}, got " + names.dump());
  spec.input = text_field(names, "inputs", "inputs");
  spec.output = text_field(names, "outputs", "outputs");
  const std::string dtype = text_field(names, "input_dtype", "DT_FLOAT");
  if (dtype == "DT_FLOAT") {
    if (names.contains("decode"))
      throw InvalidArgument("model.json signature: \"decode\" needs \"input_dtype\": \"DT_STRING\"");
    return spec;
  }
  if (dtype != "DT_STRING")
    throw InvalidArgument("model.json signature: input_dtype \"" + dtype + "\" is not one of DT_FLOAT, DT_STRING");
  const Json decode = names.value("decode", Json());
  if (!decode.is_string() || decode.get<std::string>() != "raw_uint8")
    throw InvalidArgument("model.json signature: a DT_STRING input needs \"decode\": \"raw_uint8\" (the only "
                          "decoding step), got " + decode.dump());
  const Json scale = names.value("decode_scale", Json(1.0));
  if (!scale.is_number() || !std::isfinite(scale.get<double>()))
    throw InvalidArgument("model.json signature: decode_scale must be a finite number, got " + scale.dump());
  spec.string_input = true;
  spec.decode_scale = scale.get<double>();
  return spec;
}

}  // namespace tensorhub
