// The HTTP engine's command-line flags, the same for `tensorhub serve`, `tensorhub ui` and
// `tensorhub-serve-lite` (header-only: CLI11, which each of them links). TF Serving has no
// flags for these (its evhttp server keeps libevent's defaults), so the names are ours, in
// its style; the defaults are documented here and in --help:
//   --shutdown_grace_s 10       SIGTERM: requests under way may finish for this long
//   --http_head_timeout_s 10    a request's line and headers must arrive within this
//   --http_body_timeout_s 10    its body within this, plus one second per MiB it declares
//   --http_idle_timeout_s 60    a keep-alive connection idle this long is closed
//   --http_max_connections 10000  open at once; beyond, 503 and close
//   --http_max_header_kb 32     request line + headers; beyond, 400
// The number of header fields is limited to 100 (HttpServer::Options::max_header_count),
// not a flag.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>

#include "tensorhub/core/http_server.h"

namespace tensorhub {

/// The values of the flags above.
struct HttpFlags {
  double shutdown_grace_s = 10;
  double head_timeout_s = 10;
  double body_timeout_s = 10;
  double idle_timeout_s = 60;
  int max_connections = 10000;
  int max_header_kb = 32;

  /// --shutdown_grace_s in milliseconds, for HttpServer::stop().
  int grace_ms() const { return static_cast<int>(std::lround(shutdown_grace_s * 1000)); }
};

/// Adds the flags above to `app`, storing into `flags` (whose values are the defaults shown).
inline void add_http_flags(CLI::App& app, HttpFlags& flags) {
  const auto seconds = CLI::Range(0.001, 86400.0);
  app.add_option("--shutdown_grace_s", flags.shutdown_grace_s,
                 "on SIGTERM, seconds that requests under way may take to finish (idle and slow connections close at once)")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  app.add_option("--http_head_timeout_s", flags.head_timeout_s,
                 "seconds a request's line and headers may take to arrive; a slower client is disconnected")
      ->capture_default_str()->check(seconds);
  app.add_option("--http_body_timeout_s", flags.body_timeout_s,
                 "seconds a request body may take to arrive, plus one second per MiB it declares")
      ->capture_default_str()->check(seconds);
  app.add_option("--http_idle_timeout_s", flags.idle_timeout_s, "seconds a keep-alive connection may stay idle")
      ->capture_default_str()->check(seconds);
  app.add_option("--http_max_connections", flags.max_connections,
                 "connections open at once; a connection beyond gets 503 and is closed")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--http_max_header_kb", flags.max_header_kb,
                 "KiB a request's line and headers may take (at most 100 header fields); more gets 400")
      ->capture_default_str()->check(CLI::Range(1, 1024));
}

/// Copies `flags` into the engine's `options` (timeouts in ms, the header limit in bytes).
inline void apply(const HttpFlags& flags, HttpServer::Options& options) {
  const auto ms = [](double s) { return static_cast<int>(std::lround(s * 1000)); };
  options.head_timeout_ms = ms(flags.head_timeout_s);
  options.body_timeout_ms = ms(flags.body_timeout_s);
  options.idle_timeout_ms = ms(flags.idle_timeout_s);
  options.max_connections = flags.max_connections;
  options.max_header_bytes = static_cast<std::size_t>(flags.max_header_kb) * 1024;
}

}  // namespace tensorhub
