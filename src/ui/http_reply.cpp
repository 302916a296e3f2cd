// JSON, error and gzip answers of the dashboard (http_reply.h).
#include "http_reply.h"

#include <zlib.h>

#include <cctype>

#include "tensorhub/core/error.h"
#include "tensorhub/serve/status_codes.h"

namespace tensorhub {

HttpResponse json_response(const Json& body, int status) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  r.content_type = "application/json";
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

HttpResponse current_error_response() {
  try {
    throw;
  } catch (const Error& e) {
    return json_response({{"error", e.message()}}, http_status(e.kind()));
  } catch (const std::exception& e) {
    return json_response({{"error", e.what()}}, 500);
  }
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// True when a coding's parameters (";q=0", ";q=0.000") refuse it.
bool refused(std::string_view params) {
  const auto q = params.find("q=");
  if (q == std::string_view::npos) return false;
  const std::string_view value = trim(params.substr(q + 2));
  for (char c : value) {
    if (c == ';' || c == ' ') break;
    if (c != '0' && c != '.') return false;
  }
  return true;
}

}  // namespace

bool accepts_gzip(const HttpRequest& request) {
  const auto header = request.header("Accept-Encoding");
  if (!header) return false;
  const std::string value = lower(*header);
  std::string_view rest = value;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const auto semi = item.find(';');
    const std::string_view coding = trim(item.substr(0, semi));
    const std::string_view params = semi == std::string_view::npos ? std::string_view() : item.substr(semi + 1);
    if ((coding == "gzip" || coding == "*") && !refused(params)) return true;
  }
  return false;
}

std::string gzip_bytes(std::string_view bytes) {
  z_stream z{};
  // 15 + 16: a gzip header and trailer around the deflate stream (zlib's manual, deflateInit2).
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Internal("zlib's deflateInit2 failed");
  std::string out(deflateBound(&z, bytes.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw Internal("zlib's deflate failed");
  return out;
}

bool worth_gzip(const HttpResponse& response) {
  if (response.body.size() < 1024) return false;
  const std::string& t = response.content_type;
  return t.rfind("text/", 0) == 0 || t.rfind("application/json", 0) == 0 ||
         t.rfind("application/javascript", 0) == 0 || t.rfind("image/svg+xml", 0) == 0;
}

void gzip_response(HttpResponse& response, bool client_accepts) {
  if (!client_accepts || !worth_gzip(response)) return;
  response.body = gzip_bytes(response.body);
  response.headers.emplace_back("Content-Encoding", "gzip");
  response.headers.emplace_back("Vary", "Accept-Encoding");
}

}  // namespace tensorhub
