// HttpServer: the one HTTP/1.1 engine of `tensorhub serve` (REST), `tensorhub ui` and
// `tensorhub-serve-lite`. Event-driven: an event loop (Boost.Asio's, epoll; Options::
// event_loops of them, each on a thread of its own) owns every connection, so an open
// connection costs a socket, never a thread; the HTTP parsing and
// serialising is Boost.Beast's (Debian's libboost-dev, header-only, so the static lite binary
// links it for x86-64 and arm64 alike). No byte of HTTP is parsed by code of ours.
//
// Why Beast rather than libevent's evhttp (TF Serving's choice): evhttp 2.1 (Debian 12) has
// only inactivity timeouts, which a client sending one byte every 2 s never trips, no cap on
// connections, and Debian's libevent-dev is not co-installable for arm64 (no static arm64
// library for the lite build). Figures: bench/http_engine (Beast's bare handler against
// evhttp's, same run).
//
// Every connection has deadlines (Options): the request head must arrive within
// head_timeout_ms of its first byte (or of the connection's accept), the body within
// body_timeout_ms plus body_ms_per_mib for each MiB it declares, and a keep-alive connection
// idle longer than idle_timeout_ms is closed; an answer the client does not read within
// body_timeout_ms closes it too. A late head or body is closed without an answer (no 408: the
// client is gone or hostile). A head larger than max_header_bytes or with more than
// max_header_count fields gets 400 with the reason (as the other malformed heads: 431 is
// not what TF Serving's users meet), a body over max_body_bytes 413, a malformed request (a
// negative Content-Length, a broken chunk) 400 with the parser's reason; then the connection
// closes. Beyond max_connections open connections a new one gets 503 and is closed.
//
// The handler runs on a loop thread and must not block: work that takes time (a predict, a
// hub query, a file read) goes to a thread pool of the caller's, which answers through the
// HttpResponder from there. One request is handled at a time per connection (pipelined
// requests are answered in order: the next is parsed once the answer is written). While a
// request is handled, the engine keeps reading its connection: a client that closes its end
// (a closed browser tab, a killed curl) makes the responder abandoned() at once, as nginx
// takes such a close for an abort; the answer, if any, is still written, for a client that
// only shut down its sending side. "Expect: 100-continue" is answered
// 100 Continue before the body is read, unless the declared body is already too large (413).
//
// Thread safety: bind() and run() from one thread; stop() and HttpResponder::send() from any
// thread, at any time (before run(), during it, after it). The handler is called only on a
// loop thread, one call at a time per loop: with event_loops > 1 it is called concurrently
// from several threads (the requests of one connection always from the same one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tensorhub {

/// One complete request as the handler sees it.
struct HttpRequest {
  std::string method;  ///< as sent, e.g. "GET", "POST"
  std::string target;  ///< the request target as sent, e.g. "/api/tasks?since=3"
  std::string path;    ///< target without its query string, not percent-decoded
  std::string query;   ///< what follows '?', not decoded ("" when none)
  std::vector<std::pair<std::string, std::string>> headers;  ///< in the order sent
  std::string body;    ///< the whole body (chunked bodies joined), at most max_body_bytes
  std::string remote;  ///< the peer's address, e.g. "127.0.0.1"

  /// The value of header `name` (case-insensitive; the first when repeated), or nullopt.
  std::optional<std::string> header(std::string_view name) const;
  /// The value of query parameter `name`, percent-decoded ('+' is a space), or nullopt.
  /// "a=1&b" gives "1" for a and "" for b.
  std::optional<std::string> query_param(std::string_view name) const;
};

/// The handler's answer.
struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers = {};  ///< extra headers (Cache-Control, ...)
};

/// Answers one request, once, from any thread. Copies share one request: the first send()
/// answers, later ones do nothing. If every copy is destroyed without a send(), the request is
/// answered 500 {"error": "internal error: the request was dropped unanswered"}.
class HttpResponder {
 public:
  struct State;
  explicit HttpResponder(std::shared_ptr<State> state);
  /// Queues `response` for writing on the loop; returns at once. Safe after the client left
  /// or the server stopped (the response is then dropped).
  void send(HttpResponse response) const;
  /// True when the client closed (or shut down the sending side of) its connection, the
  /// connection was closed, or the server is past its grace period: a long poll may stop
  /// waiting, a queued predict need not run. Never blocks.
  bool abandoned() const;

 private:
  std::shared_ptr<State> state_;
};

/// Counts the engine keeps, for tests, metrics and `/monitoring` pages.
struct HttpServerStats {
  std::int64_t open_connections = 0;       ///< now
  std::int64_t accepted_connections = 0;   ///< since start
  std::int64_t refused_connections = 0;    ///< answered 503 over max_connections
  std::int64_t head_timeouts = 0;          ///< closed for a late request head (slow or silent clients)
  std::int64_t body_timeouts = 0;          ///< closed for a late body
  std::int64_t idle_timeouts = 0;          ///< keep-alive connections closed when idle
  std::int64_t requests = 0;               ///< complete requests handed to the handler
  std::int64_t tls_handshake_failures = 0; ///< HTTPS connections closed for a failed or late handshake
};

class HttpServer {
 public:
  /// Called on a loop thread for every complete request; answers through the responder,
  /// now or later. An exception it lets out becomes 500 {"error": "internal error: ..."}.
  using Handler = std::function<void(HttpRequest request, HttpResponder responder)>;
  /// Makes the JSON error body of the engine's own replies (400, 413, 500, 503): given the
  /// status and the reason, e.g. (413, "the request body is larger than ...").
  /// Default: {"error": reason}.
  using ErrorBody = std::function<std::string(int status, const std::string& reason)>;

  struct Options {
    std::string host = "127.0.0.1";  ///< a numeric IPv4 or IPv6 address, or "localhost"
    int port = 8501;                  ///< 0: any free port (bind() says which)
    std::string port_flag = "--rest_api_port";  ///< named in bind errors: the flag to change
    std::string host_flag = "--rest_api_host";
    std::size_t max_body_bytes = std::size_t{64} << 20;  ///< larger bodies get 413
    /// What the 413 reply says, e.g. "... larger than the server's limit of 64 MiB (--max_body_mb)".
    std::string too_large_reason = "the request body is larger than the server's limit";
    int max_connections = 10000;      ///< open at once; beyond, 503 and close (--http_max_connections)
    /// Event loops, each run by a thread of its own; new connections are dealt to them in
    /// turn. 0: one per core. More than one needs a thread-safe handler. A server whose requests are mostly cheap answers made on the loop (tensorhub-serve-lite) uses
    /// every core with one per core; one whose work goes to a pool anyway gains little.
    int event_loops = 1;
    int head_timeout_ms = 10000;      ///< request line + headers (--http_head_timeout_s)
    int body_timeout_ms = 10000;      ///< body, plus body_ms_per_mib per MiB declared (--http_body_timeout_s)
    int body_ms_per_mib = 1000;       ///< chunked bodies: per MiB of max_body_bytes
    int idle_timeout_ms = 60000;      ///< keep-alive idle between requests (--http_idle_timeout_s)
    std::size_t max_header_bytes = 32 * 1024;  ///< request line + headers; beyond: 400 (--http_max_header_kb)
    int max_header_count = 100;       ///< header fields; beyond: 400
    ErrorBody error_body;             ///< null: {"error": reason}
    /// Extra headers on every response (the ui's X-Content-Type-Options, ...).
    std::vector<std::pair<std::string, std::string>> default_headers;
    /// HTTPS: PEM files of the certificate (chain) and its private key, both or neither
    /// (OpenSSL, TLS 1.2 and later, through Boost.Asio's ssl::stream). Every connection then
    /// completes its TLS handshake within head_timeout_ms before its head is read; over
    /// max_connections a connection is closed without an answer (none can be sent before a
    /// handshake). tensorhub-serve-lite is built without TLS: bind() refuses the options there.
    std::string tls_cert_file;
    std::string tls_key_file;
  };

  HttpServer(Options options, Handler handler);
  /// Stops (as stop(0)) and waits for run() to return if it is running on another thread.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds and listens (SO_REUSEADDR, never SO_REUSEPORT: a second server on a port in use
  /// must fail). With tls_cert_file, first loads the certificate and key: InvalidArgument
  /// naming the file OpenSSL could not read or the mismatch of key and certificate. Also raises the soft RLIMIT_NOFILE to the hard one, so that max_connections
  /// sockets can be open. Returns the port. Throws Unavailable naming host:port, the cause
  /// (not an address of this machine, in use) and the flag to change (bind_failure.h).
  int bind();
  /// Serves until stop() and its grace period are over; returns at once if stop() came first.
  /// Runs the first event loop on the calling thread and the others on threads of its own,
  /// joined before it returns. REQUIRES: bind() succeeded.
  void run();
  /// Stops accepting; closes at once every connection that is idle or still reading a request
  /// head; lets requests whose head has arrived (reading their body, being handled, being
  /// written) finish for at most `grace_ms`, each answer sent with "Connection: close"; then
  /// closes what is left and makes run() return. Idempotent (the first call's grace holds);
  /// callable from any thread, a signal-watching one included (not from a signal handler).
  void stop(int grace_ms = 10000);
  /// The counts now; from any thread.
  HttpServerStats stats() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tensorhub
