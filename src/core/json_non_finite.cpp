// NaN / Infinity tokens in JSON bodies (core/json_non_finite.h): one scanner for serve and lite.
#include "tensorhub/core/json_non_finite.h"

#include <cmath>
#include <charconv>
#include <limits>
#include <vector>

#include "tensorhub/core/error.h"

namespace tensorhub {

std::string json_depth_error_message(std::size_t max_depth) {
  return "JSON Parse error: nesting deeper than " + std::to_string(max_depth) +
         " levels of arrays and objects (the most this server reads)";
}

std::optional<double> json_non_finite_token_value(std::string_view token) {
  if (token == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (token == "Infinity") return std::numeric_limits<double>::infinity();
  if (token == "-Infinity") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

namespace {

// The token of kJsonNonFiniteTokens that starts at body[i] and ends where a value may end, if any.
std::optional<std::string_view> token_at(std::string_view body, std::size_t i) {
  for (std::string_view token : kJsonNonFiniteTokens) {
    const std::size_t end = i + token.size();
    if (body.substr(i, token.size()) != token) continue;
    if (end < body.size() && std::string_view(" \t\r\n,]}").find(body[end]) == std::string_view::npos) continue;
    return token;
  }
  return std::nullopt;
}

// The index just past the string that starts (with its '"') at body[i], or body.size() for an
// unterminated one; sets escapes_nul when the string escapes U+0000.
std::size_t string_end(std::string_view body, std::size_t i, bool& escapes_nul) {
  std::size_t j = i + 1;
  while (j < body.size() && body[j] != '"') {
    if (body[j] == '\\') {
      if (body.substr(j + 1, 5) == "u0000") escapes_nul = true;
      ++j;
    }
    ++j;
  }
  return std::min(j + 1, body.size());
}

}  // namespace

JsonNonFiniteScan scan_json_non_finite(std::string_view body, std::size_t max_depth) {
  JsonNonFiniteScan out;
  out.text.reserve(body.size() + 32);
  std::vector<char> open;   // '{' and '[' not yet closed
  bool expect_key = false;  // inside an object, before a key
  char last = 0;            // the last character outside strings that is not blank
  for (std::size_t i = 0; i < body.size();) {
    const char c = body[i];
    if (c == '"') {
      const std::size_t end = string_end(body, i, out.escapes_nul);
      out.text.append(body.substr(i, end - i));
      i = end;
      last = '"';
      continue;
    }
    if (!expect_key && (last == 0 || last == '[' || last == ',' || last == ':')) {
      if (const auto token = token_at(body, i)) {
        out.text += "\"\\u0000";
        out.text += *token;
        out.text += '"';
        i += token->size();
        last = 'N';
        out.markers = true;
        continue;
      }
    }
    if (c == '{' || c == '[') {
      open.push_back(c);
      if (max_depth > 0 && open.size() > max_depth) throw InvalidArgument(json_depth_error_message(max_depth));
    }
    if ((c == '}' || c == ']') && !open.empty()) open.pop_back();
    if (c == '{') expect_key = true;
    else if (c == ',') expect_key = !open.empty() && open.back() == '{';
    else if (c == ':' || c == '[' || c == ']' || c == '}') expect_key = false;
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') last = c;
    out.text += c;
    ++i;
  }
  return out;
}

std::optional<double> json_non_finite_marker_value(std::string_view parsed) {
  if (parsed.size() < 2 || parsed[0] != '\0') return std::nullopt;
  return json_non_finite_token_value(parsed.substr(1));
}

void restore_json_non_finite_tokens(std::string& json) {
  if (json.find("\\u0000") == std::string::npos) return;
  for (std::string_view token : kJsonNonFiniteTokens) {
    const std::string marker = "\"\\u0000" + std::string(token) + "\"";
    for (std::size_t at; (at = json.find(marker)) != std::string::npos;) json.replace(at, marker.size(), token);
  }
}

namespace {

template <typename T>
void append_json_number(T v, std::string& out) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-Infinity" : "Infinity";
    return;
  }
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  const std::string_view text(buf, static_cast<std::size_t>(end - buf));
  out += text;
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

}  // namespace

void append_json_float(float v, std::string& out) { append_json_number(v, out); }
void append_json_double(double v, std::string& out) { append_json_number(v, out); }

}  // namespace tensorhub
