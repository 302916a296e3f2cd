#include "tensorhub/store/uri.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

constexpr std::string_view kMask = "***";

// Characters that end a URI's authority (user:password@host:port) inside a message.
bool ends_authority(char c) { return c == '\0' || std::strchr("/?# \t\r\n\"'`<>()[]{},;", c) != nullptr; }

// Characters that end an unquoted "password=" value.
bool ends_value(char c) { return std::isspace(static_cast<unsigned char>(c)) || std::strchr("&\"'`<>(),;", c); }

bool starts_keyword(const std::string& s, std::size_t at) {
  if (at == 0) return true;
  const char c = s[at - 1];
  return std::isspace(static_cast<unsigned char>(c)) || std::strchr("?&(\"'`,;", c) != nullptr;
}

// Replaces the "user:PASSWORD@" part of every "scheme://" authority in `s`.
void mask_userinfo(std::string& s) {
  for (std::size_t pos = s.find("://"); pos != std::string::npos; pos = s.find("://", pos)) {
    const std::size_t start = pos + 3;
    std::size_t end = start;
    while (end < s.size() && !ends_authority(s[end])) ++end;
    pos = start;
    const std::size_t at = s.rfind('@', end == start ? start : end - 1);
    if (at == std::string::npos || at < start || at >= end) continue;
    const std::size_t colon = s.find(':', start);
    if (colon == std::string::npos || colon >= at || colon + 1 == at) continue;
    s.replace(colon + 1, at - colon - 1, kMask);
  }
}

// Replaces the value of every "password=" keyword or query parameter in `s`.
void mask_password_values(std::string& s) {
  static const std::string kKey = "password=";
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t hit = std::string::npos;
    for (std::size_t i = pos; i + kKey.size() <= s.size(); ++i) {
      bool same = true;
      for (std::size_t k = 0; k < kKey.size() && same; ++k)
        same = std::tolower(static_cast<unsigned char>(s[i + k])) == kKey[k];
      if (same && starts_keyword(s, i)) {
        hit = i;
        break;
      }
    }
    if (hit == std::string::npos) return;
    std::size_t begin = hit + kKey.size(), end = begin;
    if (begin < s.size() && s[begin] == '\'') {  // libpq's quoted form: password='a b'
      ++begin;
      end = s.find('\'', begin);
      if (end == std::string::npos) end = s.size();
    } else {
      while (end < s.size() && !ends_value(s[end])) ++end;
    }
    if (end > begin) s.replace(begin, end - begin, kMask);
    pos = begin + kMask.size();
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string mask_passwords(std::string_view text) {
  std::string s(text);
  mask_userinfo(s);
  mask_password_values(s);
  return s;
}

std::string mask_uri_password(std::string_view uri) {
  std::string s(uri);
  const std::size_t scheme_end = s.find("://");
  if (scheme_end != std::string::npos) {
    const std::size_t start = scheme_end + 3;
    const std::size_t end = std::min(s.find_first_of("/?#", start), s.size());
    const std::size_t at = s.rfind('@', end == start ? start : end - 1);
    const std::size_t colon = s.find(':', start);
    if (at != std::string::npos && at >= start && at < end && colon < at && colon + 1 < at)
      s.replace(colon + 1, at - colon - 1, kMask);
  }
  return mask_passwords(s);
}

std::string percent_decode(std::string_view text, std::string_view what) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int hi = i + 1 < text.size() ? hex_value(text[i + 1]) : -1;
    const int lo = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      throw InvalidArgument(std::string(what) + ": '%' at position " + std::to_string(i) +
                            " is not followed by two hex digits; write a literal '%' as %25");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string percent_encode_path(std::string_view path) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string out;
  for (const char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '%' || c == '?' || c == '#' || c == ' ' || u < 0x20 || u == 0x7f) {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

std::string sqlite_path_of_uri(const std::string& uri) {
  static const std::string kScheme = "sqlite://";
  if (!uri.starts_with(kScheme))
    throw InvalidArgument("hub URI \"" + mask_passwords(uri) + "\" is not a sqlite:// URI");
  std::string path = uri.substr(kScheme.size());
  if (const auto q = path.find('?'); q != std::string::npos) path = path.substr(0, q);
  if (path.empty()) throw InvalidArgument("hub URI \"" + uri + "\" has no path; use sqlite:///abs/path/hub.db");
  path = percent_decode(path, "hub URI \"" + uri + "\"");
  // sqlite://relative.db is taken relative to the working directory, and made absolute so
  // that runners hand their tasks a URI that means the same file wherever they run.
  return std::filesystem::absolute(path).lexically_normal().string();
}

}  // namespace tensorhub
