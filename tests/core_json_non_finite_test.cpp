// NaN / Infinity tokens in JSON bodies (tensorhub/core/json_non_finite.h), the scanner serve and
// tensorhub-serve-lite share: which tokens become markers, and what the markers read back as.
#include "tensorhub/core/json_non_finite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "test_util.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

TEST(JsonNonFiniteTest, RewritesTokensWhereValuesGoAndNowhereElse) {
  const auto scan = scan_json_non_finite(R"({"a": [NaN, Infinity,-Infinity ], "NaN": "NaN", "b": NaN})");
  EXPECT_TRUE(scan.markers);
  EXPECT_FALSE(scan.escapes_nul);
  EXPECT_EQ(scan.text,
            R"({"a": ["\u0000NaN", "\u0000Infinity","\u0000-Infinity" ], "NaN": "NaN", "b": "\u0000NaN"})");
  // A bare token is a document too; other spellings and tokens run into other text are left alone.
  EXPECT_EQ(scan_json_non_finite("NaN").text, R"("\u0000NaN")");
  for (const std::string other : {"[nan]", "[inf]", "[+Infinity]", "[NaN1]", "[Infinityx]", "{NaN: 1}", "[- Infinity]"}) {
    const auto s = scan_json_non_finite(other);
    EXPECT_FALSE(s.markers) << other;
    EXPECT_EQ(s.text, other);
  }
}

TEST(JsonNonFiniteTest, ReportsStringsEscapingNulAndRefusesDeepNesting) {
  const auto scan = scan_json_non_finite(R"({"s": "\u0000NaN", "x": [NaN]})");
  EXPECT_TRUE(scan.markers);
  EXPECT_TRUE(scan.escapes_nul);
  EXPECT_FALSE(scan_json_non_finite(R"(["a\"[NaN]"])").markers);  // an escaped quote stays in its string
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_EQ(testing::error_message_of(ErrorKind::kInvalidArgument, [&] { scan_json_non_finite(deep, 64); }, "deep"),
            "JSON Parse error: nesting deeper than 64 levels of arrays and objects (the most this server reads)");
  EXPECT_EQ(scan_json_non_finite(deep.substr(1, 128), 64).text, deep.substr(1, 128));
  EXPECT_EQ(scan_json_non_finite(deep).text, deep);  // no limit
}

TEST(JsonNonFiniteTest, MarkersAndTokensReadBackAsNumbers) {
  EXPECT_TRUE(std::isnan(*json_non_finite_marker_value(std::string("\0NaN", 4))));
  EXPECT_EQ(*json_non_finite_marker_value(std::string("\0Infinity", 9)), INFINITY);
  EXPECT_EQ(*json_non_finite_marker_value(std::string("\0-Infinity", 10)), -INFINITY);
  EXPECT_FALSE(json_non_finite_marker_value("NaN"));
  EXPECT_FALSE(json_non_finite_marker_value(std::string("\0nan", 4)));
  EXPECT_FALSE(json_non_finite_marker_value(std::string("\0", 1)));
  EXPECT_EQ(*json_non_finite_token_value("-Infinity"), -INFINITY);
  EXPECT_FALSE(json_non_finite_token_value("Inf"));
  std::string shown = R"({"x":["\u0000NaN","\u0000-Infinity",1.0,"\u0000Infinity"],"s":"\u0000nan"})";
  restore_json_non_finite_tokens(shown);
  EXPECT_EQ(shown, R"({"x":[NaN,-Infinity,1.0,Infinity],"s":"\u0000nan"})");
}

}  // namespace
}  // namespace tensorhub
