// NaN, Infinity and -Infinity in JSON request bodies, read as TensorFlow Serving reads them.
//
// TF Serving parses REST bodies with RapidJSON's kParseNanAndInfFlag, so the tokens NaN,
// Infinity and -Infinity are numbers wherever a value goes (and TF Serving writes them so;
// https://www.tensorflow.org/tfx/serving/api_rest, "JSON Mapping"). The RFC 8259 parsers of
// tensorhub serve (simdjson) and tensorhub-serve-lite (nlohmann::json) refuse them: one pass
// over the body, scan_json_non_finite(), rewrites each such token in a value position as a
// marker string (a U+0000 character followed by the token), which the parsers read as a
// string and the readers take as that number. No user string can be mistaken for a marker:
// the scan reports a body whose strings escape U+0000, and neither reader then trusts markers.
// Nothing here allocates beyond the rewritten text or needs more than the standard library,
// so the static (and arm64) tensorhub-serve-lite compiles it as it is.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tensorhub {

/// Maximum nesting of JSON arrays and objects that serve and lite read (deeper bodies are
/// refused, so a hostile body cannot exhaust the stack).
inline constexpr int kMaxJsonDepth = 64;

/// The tokens TF Serving reads and writes for non-finite numbers, spelled exactly so.
inline constexpr std::string_view kJsonNonFiniteTokens[] = {"NaN", "Infinity", "-Infinity"};

/// The message for a body nested deeper than `max_depth` levels of arrays and objects:
/// "JSON Parse error: nesting deeper than 64 levels of arrays and objects (the most this
/// server reads)".
std::string json_depth_error_message(std::size_t max_depth);

/// The value of one of kJsonNonFiniteTokens (quiet NaN, +inf or -inf as a double); nullopt
/// for any other text ("nan", "inf", "+Infinity" are not TF Serving's).
std::optional<double> json_non_finite_token_value(std::string_view token);

/// A body after scan_json_non_finite().
struct JsonNonFiniteScan {
  std::string text;          ///< the body, each non-finite token replaced by its marker string
  bool markers = false;      ///< at least one token was replaced
  bool escapes_nul = false;  ///< a string of the body escapes U+0000 ("\u0000"): markers are ambiguous
};

/// Scans a JSON body once and rewrites each NaN, Infinity or -Infinity token that stands where
/// a value goes (after '[', ',' or ':', or at the start; not as an object key; followed by a
/// blank, ',', ']', '}' or the end) as the JSON string "\u0000<token>". Strings are copied as
/// they are; any other syntax error is left for the JSON parser to report. With max_depth > 0,
/// throws InvalidArgument(json_depth_error_message(max_depth)) as soon as arrays and objects
/// nest deeper than max_depth (0: no limit). Callers must not take markers as numbers when
/// `escapes_nul` is set.
JsonNonFiniteScan scan_json_non_finite(std::string_view body, std::size_t max_depth = 0);

/// The number a parsed marker string stands for: `parsed` is a string value as the JSON parser
/// decoded it, U+0000 then a token ("\0NaN" is NaN); nullopt for any other string. Only
/// meaningful for a document parsed from a scan whose `markers` is set.
std::optional<double> json_non_finite_marker_value(std::string_view parsed);

/// Appends `v` to `out` as TF Serving writes a float tensor's element: NaN, Infinity or
/// -Infinity for the non-finite values, otherwise the shortest text that reads back as the
/// same float, with ".0" added to an integral value ("3.0", not "3": a list of floats stays
/// recognisably floats).
void append_json_float(float v, std::string& out);
/// The same for a double element (the shortest text that reads back as the same double).
void append_json_double(double v, std::string& out);

/// Replaces every marker in serialized JSON `json` (the parser's output, in which a marker reads
/// "\u0000NaN" with its quotes) by its bare token, so that messages quote a value as it was sent.
void restore_json_non_finite_tokens(std::string& json);

}  // namespace tensorhub
