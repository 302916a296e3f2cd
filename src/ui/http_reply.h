// The dashboard's answers as HttpResponse values (core/http_server.h): JSON bodies, errors as
// {"error": ...} with the HTTP status of their kind, and gzip compression for clients that
// accept it. Shared by ui_server.cpp and the long polls (long_polls.cpp).
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "tensorhub/core/http_server.h"
#include "tensorhub/core/json.h"

namespace tensorhub {

/// `body` dumped as application/json with Cache-Control: no-store (the API's answers change).
HttpResponse json_response(const Json& body, int status = 200);

/// {"error": what} with the HTTP status of the error's kind (serve/status_codes.h) for a
/// tensorhub Error, 500 for any other exception. Call inside a catch block only.
HttpResponse current_error_response();

/// True when the request's Accept-Encoding lists gzip (or "*") without q=0 (RFC 9110 section
/// 12.5.3). Brotli is never used: cpp-httplib's took 13 s for a 5 MB series where gzip took
/// 0.7 s, and a browser always offers gzip beside it.
bool accepts_gzip(const HttpRequest& request);

/// The gzip stream (RFC 1952, zlib's deflate at its default level) of `bytes`. Throws Internal
/// if zlib fails (it does not for in-memory input).
std::string gzip_bytes(std::string_view bytes);

/// True for bodies worth compressing: text-like content types (text/*, JSON, JavaScript, SVG)
/// of at least 1 KiB (smaller ones gain nothing).
bool worth_gzip(const HttpResponse& response);

/// Compresses `response`'s body in place when worth_gzip; sets Content-Encoding: gzip and
/// Vary: Accept-Encoding. Does nothing when `client_accepts` is false.
void gzip_response(HttpResponse& response, bool client_accepts);

}  // namespace tensorhub
