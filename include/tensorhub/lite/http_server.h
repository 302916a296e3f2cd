// A small HTTP/1.1 server for tensorhub-serve-lite: POSIX sockets, one thread per open
// connection, keep-alive, Content-Length and chunked bodies, "Expect: 100-continue".
//
// Why not cpp-httplib, which `tensorhub serve` uses: Debian's libcpp-httplib-dev ships the
// declarations only (httplib.h is the split header) and its code as a shared library, so a
// static binary, for this machine or cross-compiled for arm64, cannot link it.
//
// Thread safety: stop() may be called from any thread (a signal-handling one), before or
// during run(). The handler runs on connection threads, many at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <string>

#include "tensorhub/core/mutex.h"

namespace tensorhub {

/// One request as the handler sees it.
struct HttpRequest {
  std::string method;  ///< "GET", "POST", ...
  std::string path;    ///< the target without its query string, e.g. "/v1/models/m:predict"
  std::string body;
};

/// The handler's answer.
struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  struct Options {
    std::string host = "127.0.0.1";  ///< a numeric IPv4 or IPv6 address, or "localhost"
    int port = 8501;                  ///< 0: any free port (bind() says which)
    std::size_t max_body_bytes = std::size_t{64} << 20;  ///< larger bodies get 413
    int max_connections = 256;        ///< connections served at once; more wait in the backlog
    /// A connection that sends nothing this long (idle between requests, or stalled inside
    /// one) is closed, so that silent clients cannot hold every connection thread.
    int idle_timeout_ms = 60000;
    std::string port_flag = "--rest_api_port", host_flag = "--rest_api_host";  ///< named in bind errors
  };

  /// `handler` answers every complete request; an exception it lets out becomes a 500 with
  /// {"error": ...}. `too_large` is the 413 body for a request over max_body_bytes.
  HttpServer(Options options, Handler handler, std::string too_large);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds and listens. Returns the port. Throws Unavailable naming host:port and the cause
  /// (a host that is no address, a port in use), and the flag to change.
  int bind();
  /// Accepts and serves until stop(); then closes the listening socket, lets each connection
  /// finish the request it is reading or answering, closes idle ones, and returns when none is
  /// left. Returns at once if stop() came first. REQUIRES: bind() succeeded.
  void run();
  /// Makes run() return as described (within about 100 ms). Idempotent.
  void stop();

 private:
  void serve_connection(int fd);
  bool reply(int fd, const HttpResponse& response, bool keep_alive);

  Options options_;
  Handler handler_;
  std::string too_large_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  Mutex mutex_;
  std::condition_variable changed_;  // active_ fell, or stopping
  int active_ TENSORHUB_GUARDED_BY(mutex_) = 0;  // connection threads running
};

}  // namespace tensorhub
