// model.json's "signature" (tensorhub/train/serving_signature.h), the reader serve and
// tensorhub-serve-lite share: defaults, the DT_STRING decoding step, and its refusals.
#include "tensorhub/train/serving_signature.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

using Json = nlohmann::json;

std::string message_of(const Json& signature) {
  return testing::error_message_of(ErrorKind::kInvalidArgument,
                                   [&] { parse_serving_signature(Json{{"signature", signature}}); }, signature.dump());
}

TEST(ServingSignatureTest, ReadsNamesAndDecodingWithDefaults) {
  ServingSignatureSpec s = parse_serving_signature(Json::object());
  EXPECT_EQ(s.input, "inputs");
  EXPECT_EQ(s.output, "outputs");
  EXPECT_FALSE(s.string_input);
  EXPECT_EQ(s.decode_scale, 1.0);
  s = parse_serving_signature({{"signature", {{"inputs", "x"}, {"input_dtype", "DT_FLOAT"}}}});
  EXPECT_EQ(s.input, "x");
  EXPECT_EQ(s.output, "outputs");
  EXPECT_FALSE(s.string_input);
  s = parse_serving_signature({{"signature", {{"inputs", "image_bytes"}, {"outputs", "p"}, {"input_dtype", "DT_STRING"},
                                              {"decode", "raw_uint8"}, {"decode_scale", 0.5}}}});
  EXPECT_EQ(s.input, "image_bytes");
  EXPECT_EQ(s.output, "p");
  EXPECT_TRUE(s.string_input);
  EXPECT_EQ(s.decode_scale, 0.5);
  EXPECT_EQ(parse_serving_signature({{"signature", {{"input_dtype", "DT_STRING"}, {"decode", "raw_uint8"}}}}).decode_scale,
            1.0);
}

TEST(ServingSignatureTest, RefusesWhatServeAndLiteRefuse) {
  EXPECT_EQ(message_of({{"input_dtype", "DT_INT64"}}),
            "model.json signature: input_dtype \"DT_INT64\" is not one of DT_FLOAT, DT_STRING");
  EXPECT_EQ(message_of({{"decode", "raw_uint8"}}), "model.json signature: \"decode\" needs \"input_dtype\": \"DT_STRING\"");
  EXPECT_EQ(message_of({{"input_dtype", "DT_STRING"}}),
            "model.json signature: a DT_STRING input needs \"decode\": \"raw_uint8\" (the only decoding step), got null");
  EXPECT_EQ(message_of({{"input_dtype", "DT_STRING"}, {"decode", "png"}}),
            "model.json signature: a DT_STRING input needs \"decode\": \"raw_uint8\" (the only decoding step), got \"png\"");
  EXPECT_EQ(message_of({{"input_dtype", "DT_STRING"}, {"decode", "raw_uint8"}, {"decode_scale", "1/255"}}),
            "model.json signature: decode_scale must be a finite number, got \"1/255\"");
  EXPECT_EQ(message_of({{"inputs", 3}}), "model.json signature: \"inputs\" must be a string, got 3");
  EXPECT_EQ(message_of("x"),
            "model.json signature: \"signature\" must be an object such as {\"inputs\": \"x\", \"outputs\": \"y\"}, got \"x\"");
}

}  // namespace
}  // namespace tensorhub
