// HttpServer (core/http_server.h): Boost.Beast's HTTP/1.1 parser and serializer on
// Boost.Asio event loops (Options::event_loops of them, one thread each; the acceptor lives on
// the first and deals connections out round-robin; a connection stays on its loop for its
// life, so its state is only ever touched by one thread). Every connection is a Connection
// object owned by its pending asynchronous operations; every handler a loop runs captures the
// Server (the Impl) or its Loop by raw pointer (the Server owns the loops, each its
// io_context, so they outlive whatever runs in them). Only the responders' states, which
// worker threads hold, point at the Server and the Connection weakly.
//
// A connection moves through phases, each with its deadline (one lazily re-armed timer per
// connection, so that a keep-alive request costs no timer cancellation):
//   kIdle (keep-alive, waiting for a next request's first byte; idle_timeout_ms)
//   -> kHead (reading the request line and headers; head_timeout_ms)
//   -> kBody (reading the body; body_timeout_ms + body_ms_per_mib per MiB declared)
//   -> kHandling (the handler has the request; no deadline: the grace period bounds it at stop;
//      one read stays open meanwhile, so that a client that closes its end, a closed browser
//      tab, makes the responder abandoned() at once, as nginx takes such a close for an abort)
//   -> kWriting (the answer; body_timeout_ms) -> kIdle, or kClosing
//   kClosing: after an error answer, what the client still sends is read and dropped for a
//   moment, so that closing with unread bytes (a TCP reset) does not destroy the answer
//   before the client has read it.
#include "tensorhub/core/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <thread>
#include <unordered_set>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#ifdef TENSORHUB_HTTP_TLS
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#endif

#include "tensorhub/core/bind_failure.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/json.h"
#include "tensorhub/core/mutex.h"

namespace tensorhub {
namespace http_engine {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

constexpr auto kNoDeadline = Clock::time_point::max();
// How long a connection closing after an error answer keeps reading (and dropping) what the
// client still sends, and how much of it.
constexpr auto kLinger = std::chrono::milliseconds(1000);
constexpr std::size_t kLingerBytes = std::size_t{4} << 20;
// Connections being refused (503, then closed) at once, at most; beyond, closed unanswered.
constexpr int kMaxRefusing = 1024;
// After accept() failed for lack of descriptors or memory, the next try waits this long.
constexpr auto kAcceptRetry = std::chrono::milliseconds(50);
// The listen backlog: connections the kernel completes before the loop accepts them.
constexpr int kBacklog = 4096;
constexpr std::size_t kReadChunk = 4096;
// The body reserved at once for a declared Content-Length, at most: a client declaring
// 64 MiB and sending nothing costs no 64 MiB.
constexpr std::uint64_t kMaxReserve = std::uint64_t{1} << 20;

#ifdef TENSORHUB_HTTP_TLS
namespace ssl = asio::ssl;
using TlsContext = ssl::context;
#else
struct TlsContext {};  // a build without TLS (tensorhub-serve-lite): never made
#endif

// A connection's byte stream: its TCP socket, or TLS over that socket (Options::tls_cert_file).
// Beast reads and writes it as any Asio stream; every operation goes to the one layer in use.
// Not movable: the TLS stream holds a reference to the socket beside it.
class Stream {
 public:
  using executor_type = tcp::socket::executor_type;
  Stream(tcp::socket socket, TlsContext* tls) : socket_(std::move(socket)) {
#ifdef TENSORHUB_HTTP_TLS
    if (tls) tls_.emplace(socket_, *tls);
#endif
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  executor_type get_executor() { return socket_.get_executor(); }
  tcp::socket& tcp_socket() { return socket_; }
  bool is_tls() const {
#ifdef TENSORHUB_HTTP_TLS
    return tls_.has_value();
#else
    return false;
#endif
  }

  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
#ifdef TENSORHUB_HTTP_TLS
    if (tls_) return tls_->async_read_some(buffers, std::forward<Handler>(handler));
#endif
    socket_.async_read_some(buffers, std::forward<Handler>(handler));
  }
  template <typename Buffers, typename Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
#ifdef TENSORHUB_HTTP_TLS
    if (tls_) return tls_->async_write_some(buffers, std::forward<Handler>(handler));
#endif
    socket_.async_write_some(buffers, std::forward<Handler>(handler));
  }
  /// The server's side of the TLS handshake. REQUIRES: is_tls().
  template <typename Handler>
  void async_handshake(Handler&& handler) {
#ifdef TENSORHUB_HTTP_TLS
    tls_->async_handshake(ssl::stream_base::server, std::forward<Handler>(handler));
#endif
  }

 private:
  tcp::socket socket_;
#ifdef TENSORHUB_HTTP_TLS
  std::optional<ssl::stream<tcp::socket&>> tls_;
#endif
};

class Connection;

// The parser of one request: Beast's basic_parser parses, this receives the pieces straight
// into an HttpRequest (headers in the order sent) and counts the header fields.
class RequestParser final : public http::basic_parser<true> {
 public:
  RequestParser(const HttpServer::Options& o) : max_fields_(o.max_header_count) {
    header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(o.max_header_bytes, 0xffffffffu)));
    body_limit(static_cast<std::uint64_t>(o.max_body_bytes));
  }

  HttpRequest request;
  int version = 11;  // 10: HTTP/1.0
  bool too_many_fields = false;
  bool expect_continue = false;

 private:
  void on_request_impl(http::verb, beast::string_view method, beast::string_view target, int v,
                       error_code&) override {
    version = v;
    request.method.assign(method.data(), method.size());
    request.target.assign(target.data(), target.size());
  }
  void on_response_impl(int, beast::string_view, int, error_code&) override {}
  void on_field_impl(http::field f, beast::string_view name, beast::string_view value, error_code& ec) override {
    if (++fields_ > max_fields_) {
      too_many_fields = true;
      ec = http::error::header_limit;
      return;
    }
    request.headers.emplace_back(std::string(name.data(), name.size()), std::string(value.data(), value.size()));
    if (f == http::field::expect && beast::iequals(value, "100-continue")) expect_continue = true;
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    if (length) request.body.reserve(static_cast<std::size_t>(std::min(*length, kMaxReserve)));
  }
  std::size_t on_body_impl(beast::string_view s, error_code&) override {
    request.body.append(s.data(), s.size());
    return s.size();
  }
  void on_chunk_header_impl(std::uint64_t, beast::string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, beast::string_view s, error_code&) override {
    request.body.append(s.data(), s.size());
    return s.size();
  }
  void on_finish_impl(error_code&) override {}

  int max_fields_;
  int fields_ = 0;
};

struct Server;

// One event loop: its io_context, run by one thread, and the connections it owns. Everything
// here but the io_context itself is that thread's only.
struct Loop {
  Loop(Server& s, std::size_t i) : server(s), index(i) {}
  /// Takes a connection accepted for this loop (on the accepting loop's thread, posted here).
  void adopt(tcp::socket socket, bool counted);
  void begin_stop();
  void finish();
  /// A connection closed: the loop may end if the server is stopping and none is left.
  void connection_gone(Connection* c, bool counted);

  Server& server;
  const std::size_t index;
  // Declared before the io_context: destroying it destroys the Connections its pending
  // operations own, which leave this set.
  std::unordered_set<Connection*> connections;
  int refusing = 0;
  bool stopping = false;  // begin_stop ran
  bool finishing = false;
  asio::io_context ioc{1};
  asio::steady_timer grace_timer{ioc};
  // Keeps ioc.run() running while the loop has nothing to do (all but the first have no
  // acceptor); reset by finish().
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
};

// The server's state: what the HttpServer owns (HttpServer::Impl is this type; the name is
// private to HttpServer, this one is not).
struct Server {
  Server(HttpServer::Options o, HttpServer::Handler h) : options(std::move(o)), handler(std::move(h)) {}
  /// Options::event_loops loops (0: one per core), at most 64.
  static std::vector<std::unique_ptr<Loop>> make_loops(Server& server, int wanted) {
    unsigned n = wanted > 0 ? static_cast<unsigned>(wanted) : std::thread::hardware_concurrency();
    n = std::clamp(n, 1u, 64u);
    std::vector<std::unique_ptr<Loop>> out;
    for (unsigned i = 0; i < n; ++i) out.push_back(std::make_unique<Loop>(server, i));
    return out;
  }

  /// The JSON body of an engine reply.
  std::string error_body(int status, const std::string& reason) const {
    if (options.error_body) return options.error_body(status, reason);
    return Json{{"error", reason}}.dump();
  }
  // On the first loop's thread: accepting, and the start of a stop.
  void accept();
  void on_accept(const error_code& ec, tcp::socket socket, Loop& loop);
  void begin_stop();

  const HttpServer::Options options;
  const HttpServer::Handler handler;
  /// The certificate and key when serving HTTPS (loaded by bind()), else null.
  std::unique_ptr<TlsContext> tls;
  std::weak_ptr<Server> self;  // for the responders' states

  // Read from any thread.
  std::atomic<bool> stop_requested{false};
  std::atomic<int> grace_ms{0};
  std::atomic<std::int64_t> open{0}, accepted{0}, refused{0}, head_timeouts{0}, body_timeouts{0},
      idle_timeouts{0}, requests{0}, tls_handshake_failures{0};
  Mutex mutex;
  std::condition_variable run_done;  // running became false
  bool running TENSORHUB_GUARDED_BY(mutex) = false;

  // Destroyed after the acceptor and its timer (reverse order), which live on the first.
  // Initialised here, after options, since the acceptor below needs the first.
  std::vector<std::unique_ptr<Loop>> loops = make_loops(*this, options.event_loops);
  // The first loop's thread's only.
  tcp::acceptor acceptor{loops.front()->ioc};
  asio::steady_timer accept_retry{loops.front()->ioc};
  bool accepting_stopped = false;
  std::size_t next_loop = 0;  // round-robin
};

}  // namespace http_engine

struct HttpResponder::State {
  std::weak_ptr<http_engine::Server> server;
  std::weak_ptr<http_engine::Connection> connection;
  std::size_t loop = 0;                          // the connection's loop
  std::uint64_t sequence = 0;                    // which request of the connection this answers
  std::shared_ptr<std::atomic<bool>> closed;     // the connection's: closed, or past the grace
  std::atomic<bool> answered{false};
  /// Answers 500 if nobody did.
  ~State();
};

namespace http_engine {

// Queues `response` for the request `state` stands for, from any thread.
void deliver(const HttpResponder::State& state, HttpResponse response);

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Loop& loop, tcp::socket socket, bool counted)
      : server_(loop.server), loop_(loop), socket_(std::move(socket), loop.server.tls.get()), timer_(loop.ioc),
        counted_(counted) {
    error_code ec;
    const auto peer = socket_.tcp_socket().remote_endpoint(ec);
    if (!ec) remote_ = peer.address().to_string();
    loop_.connections.insert(this);
  }
  ~Connection() {
    if (phase_ != Phase::kClosed) {  // the io_context is being destroyed with us in it
      closed_->store(true);
      loop_.connections.erase(this);
      if (counted_) --server_.open;
    }
  }

  /// A new connection: its head (after its TLS handshake, if any) is due head_timeout_ms from now.
  void start() {
    if (!socket_.is_tls()) return begin_head();
    phase_ = Phase::kHead;
    set_deadline(after_ms(server_.options.head_timeout_ms));
    socket_.async_handshake([self = shared_from_this()](const error_code& ec) {
      if (self->phase_ == Phase::kClosed) return;
      if (ec) {
        ++self->server_.tls_handshake_failures;
        return self->close();  // not TLS, a certificate the client refused, or too late
      }
      self->begin_head();
    });
  }

  /// Over max_connections: 503, then close (TLS: closed at once, no answer before a handshake).
  void refuse() {
    if (socket_.is_tls()) return close();
    reply_error(503, "the server has " + std::to_string(server_.options.max_connections) +
                         " connections open, its limit (--http_max_connections); try again later");
  }

  /// The server stops: a connection that is idle, reading a head or closing goes now; one with
  /// a request under way finishes it (its answer says Connection: close).
  void on_stop() {
    if (phase_ == Phase::kIdle || phase_ == Phase::kHead || phase_ == Phase::kClosing) close();
  }

  /// The answer to request `sequence`, on the loop thread.
  void answer(std::uint64_t sequence, HttpResponse r) {
    if (sequence != sequence_ || phase_ != Phase::kHandling) return;
    build_response(std::move(r));
    write(keep_alive_ && !loop_.stopping);
  }

  /// Closes the socket now; pending operations end with operation_aborted.
  void close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    closed_->store(true);
    error_code ignored;
    socket_.tcp_socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket_.tcp_socket().close(ignored);
    timer_.cancel();
    loop_.connection_gone(this, counted_);
  }

 private:
  enum class Phase { kIdle, kHead, kBody, kHandling, kWriting, kClosing, kClosed };

  // ---- deadlines: one timer, re-armed only when a deadline comes earlier than its expiry.
  void set_deadline(Clock::time_point t) {
    deadline_ = t;
    if (t == kNoDeadline || (timer_armed_ && timer_.expiry() <= t)) return;
    timer_armed_ = true;
    timer_.expires_at(t);
    timer_.async_wait([self = shared_from_this()](const error_code& ec) { self->on_timer(ec); });
  }
  void on_timer(const error_code& ec) {
    if (ec == asio::error::operation_aborted || phase_ == Phase::kClosed) return;
    if (timer_.expiry() > Clock::now()) return;  // re-armed since this wait completed: a newer wait runs
    timer_armed_ = false;
    if (deadline_ == kNoDeadline) return;
    if (Clock::now() < deadline_) return set_deadline(deadline_);
    timed_out();
  }
  void timed_out() {
    if (phase_ == Phase::kIdle) ++server_.idle_timeouts;
    if (phase_ == Phase::kHead) ++server_.head_timeouts;
    if (phase_ == Phase::kBody) ++server_.body_timeouts;
    close();
  }
  static Clock::time_point after_ms(std::int64_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }

  // ---- reading a request.
  // After an answer: the next request's bytes may be here already (pipelined); else wait for
  // its first byte under the idle deadline (the peer watch's read, if still open, takes it).
  void wait_for_request() {
    if (buffer_.size() > 0) return begin_head();
    phase_ = Phase::kIdle;
    set_deadline(after_ms(server_.options.idle_timeout_ms));
    if (watching_) return;
    socket_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](const error_code& ec, std::size_t n) {
                              if (ec) return self->close();  // the client left (or we stopped)
                              self->buffer_.commit(n);
                              self->begin_head();
                            });
  }
  void begin_head() {
    phase_ = Phase::kHead;
    set_deadline(after_ms(server_.options.head_timeout_ms));
    parser_.emplace(server_.options);
    http::async_read_header(socket_, buffer_, *parser_, [self = shared_from_this()](const error_code& ec, std::size_t) {
      self->on_head(ec);
    });
  }
  void on_head(const error_code& ec) {
    if (phase_ == Phase::kClosed) return;
    if (ec) return read_failed(ec);
    phase_ = Phase::kBody;
    if (parser_->is_done()) return dispatch();
    set_deadline(after_ms(body_deadline_ms()));
    if (parser_->expect_continue) return send_continue();
    read_body();
  }
  // body_timeout_ms plus body_ms_per_mib per MiB declared (per MiB of max_body_bytes when chunked).
  std::int64_t body_deadline_ms() const {
    const auto& o = server_.options;
    const auto length = parser_->content_length();
    const std::uint64_t bytes = length ? *length : o.max_body_bytes;
    const std::uint64_t mib = (bytes + (std::uint64_t{1} << 20) - 1) >> 20;
    return o.body_timeout_ms + static_cast<std::int64_t>(mib) * o.body_ms_per_mib;
  }
  void send_continue() {
    interim_ = http::response<http::empty_body>();
    interim_.version(11);
    interim_.result(http::status::continue_);
    http::async_write(socket_, interim_, [self = shared_from_this()](const error_code& ec, std::size_t) {
      if (self->phase_ == Phase::kClosed) return;
      if (ec) return self->close();
      self->read_body();
    });
  }
  void read_body() {
    http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](const error_code& ec, std::size_t) {
      if (self->phase_ == Phase::kClosed) return;
      if (ec) return self->read_failed(ec);
      self->dispatch();
    });
  }
  // A head or body that could not be read: the client's fault gets its status and reason,
  // a client that left or a socket error closes quietly.
  void read_failed(const error_code& ec) {
    const auto& o = server_.options;
    if (parser_->too_many_fields)
      return reply_error(400, "the request has more than " + std::to_string(o.max_header_count) + " header fields");
    if (ec == http::error::header_limit)
      return reply_error(400, "the request line and headers are larger than the server's limit of " +
                                  kib_text(o.max_header_bytes) + " (--http_max_header_kb)");
    if (ec == http::error::body_limit) return reply_error(413, o.too_large_reason);
    if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message && ec != http::error::need_more)
      return reply_error(400, "malformed HTTP request: " + ec.message());
    close();
  }
  static std::string kib_text(std::size_t bytes) {
    return bytes % 1024 == 0 ? std::to_string(bytes / 1024) + " KiB" : std::to_string(bytes) + " bytes";
  }

  // ---- watching the peer while its request is handled: one read, whose bytes (a pipelined
  // next request) are kept for it, and whose end of stream or error marks the request
  // abandoned (the answer is still written: a client that only shut down its sending side
  // still reads it).
  void watch_peer() {
    watching_ = true;
    socket_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](const error_code& ec, std::size_t n) {
                              self->on_watch(ec, n);
                            });
  }
  void on_watch(const error_code& ec, std::size_t n) {
    watching_ = false;
    if (phase_ == Phase::kClosed) return;
    if (ec) {
      peer_gone_ = true;
      closed_->store(true);
      if (phase_ == Phase::kIdle) close();  // answered already: nothing more will come
      return;
    }
    buffer_.commit(n);
    if (phase_ == Phase::kIdle) begin_head();  // answered while this read waited
  }

  // ---- handing the request over.
  void dispatch() {
    phase_ = Phase::kHandling;
    set_deadline(kNoDeadline);
    ++sequence_;
    ++server_.requests;
    keep_alive_ = parser_->keep_alive();
    version_ = parser_->version;
    HttpRequest request = std::move(parser_->request);
    parser_.reset();
    const std::size_t q = request.target.find('?');
    request.path = request.target.substr(0, q);
    if (q != std::string::npos) request.query = request.target.substr(q + 1);
    request.remote = remote_;
    head_request_ = request.method == "HEAD";
    auto state = std::make_shared<HttpResponder::State>();
    state->server = server_.self;
    state->connection = weak_from_this();
    state->loop = loop_.index;
    state->sequence = sequence_;
    state->closed = closed_;
    const HttpResponder responder(state);
    state.reset();
    // Bytes already here are a pipelined next request: no end of stream can be seen past them.
    if (buffer_.size() == 0) watch_peer();
    try {
      server_.handler(std::move(request), responder);
    } catch (const Error& e) {
      responder.send({500, server_.error_body(500, "internal error: " + e.message())});
    } catch (const std::exception& e) {
      responder.send({500, server_.error_body(500, std::string("internal error: ") + e.what())});
    } catch (...) {
      responder.send({500, server_.error_body(500, "internal error: an unknown exception")});
    }
  }

  // ---- writing.
  void build_response(HttpResponse r) {
    response_ = http::response<http::string_body>();
    // The request's version: an HTTP/1.0 client asking for keep-alive is told
    // "Connection: keep-alive", which HTTP/1.1 leaves implicit.
    response_.version(version_);
    if (r.status < 100 || r.status > 999) r = {500, server_.error_body(500, "internal error: HTTP status " + std::to_string(r.status))};
    response_.result(static_cast<unsigned>(r.status));
    if (!r.content_type.empty()) response_.set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers)
      if (valid_field(name, value)) response_.insert(name, value);
    for (const auto& [name, value] : server_.options.default_headers)
      if (valid_field(name, value) && response_.find(name) == response_.end()) response_.insert(name, value);
    const bool bodiless = r.status < 200 || r.status == 204 || r.status == 304;
    if (!bodiless) response_.body() = std::move(r.body);
    response_.prepare_payload();
    if (head_request_) response_.body().clear();  // Content-Length stays the GET's
  }
  // A header a handler gives that would break the message (a line break, an empty name) is
  // dropped rather than written.
  static bool valid_field(const std::string& name, const std::string& value) {
    const auto bad = [](char c) { return c == '\r' || c == '\n'; };
    return !name.empty() && name.find(':') == std::string::npos && std::none_of(name.begin(), name.end(), bad) &&
           std::none_of(value.begin(), value.end(), bad);
  }
  void write(bool keep_alive) {
    response_.keep_alive(keep_alive);
    phase_ = Phase::kWriting;
    set_deadline(after_ms(server_.options.body_timeout_ms));
    http::async_write(socket_, response_, [self = shared_from_this(), keep_alive](const error_code& ec, std::size_t) {
      self->on_written(ec, keep_alive);
    });
  }
  void on_written(const error_code& ec, bool keep_alive) {
    if (phase_ == Phase::kClosed) return;
    if (ec) return close();
    if (error_reply_ && !loop_.stopping) return linger();
    if (!keep_alive || loop_.stopping || peer_gone_) return close();
    wait_for_request();
  }
  // An engine reply (400, 413, 503): written with Connection: close, then linger().
  void reply_error(int status, const std::string& reason) {
    parser_.reset();
    head_request_ = false;
    version_ = 11;
    build_response({status, server_.error_body(status, reason)});
    error_reply_ = true;
    write(false);
  }
  void linger() {
    phase_ = Phase::kClosing;
    error_code ignored;
    socket_.tcp_socket().shutdown(tcp::socket::shutdown_send, ignored);
    set_deadline(Clock::now() + kLinger);
    buffer_.consume(buffer_.size());
    drain();
  }
  void drain() {
    socket_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](const error_code& ec, std::size_t n) {
      if (self->phase_ == Phase::kClosed) return;
      self->drained_ += n;
      if (ec || self->drained_ > kLingerBytes) return self->close();
      self->drain();  // prepare() reuses the same bytes: nothing is committed
    });
  }

  Server& server_;
  Loop& loop_;
  Stream socket_;
  asio::steady_timer timer_;
  const bool counted_;  // counts against max_connections (a refused one does not)
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  http::response<http::empty_body> interim_;  // 100 Continue
  http::response<http::string_body> response_;
  Phase phase_ = Phase::kHead;
  Clock::time_point deadline_ = kNoDeadline;
  bool timer_armed_ = false;
  std::uint64_t sequence_ = 0;
  bool keep_alive_ = false;
  int version_ = 11;
  bool head_request_ = false;
  bool error_reply_ = false;
  bool watching_ = false;   // watch_peer's read is open
  bool peer_gone_ = false;  // the client closed its end while its request was under way
  std::size_t drained_ = 0;
  std::shared_ptr<std::atomic<bool>> closed_ = std::make_shared<std::atomic<bool>>(false);
};

void deliver(const HttpResponder::State& state, HttpResponse response) {
  const auto server = state.server.lock();
  if (!server) return;  // the server is gone: nobody to answer
  asio::post(server->loops.at(state.loop)->ioc, [connection = state.connection, sequence = state.sequence, r = std::move(response)]() mutable {
    if (const auto c = connection.lock()) c->answer(sequence, std::move(r));
  });
}

// Raises the soft limit on open descriptors to the hard one (Debian's default soft limit,
// 1024, would cap the server far below max_connections).
void raise_open_files_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace http_engine

// ---- HttpRequest

namespace {

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded decoding (the URL Standard's): '+' is a space, %XX a byte;
// a '%' not followed by two hex digits stays as it is.
std::string form_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (iequal(key, name)) return value;
  return std::nullopt;
}

std::optional<std::string> HttpRequest::query_param(std::string_view name) const {
  std::string_view rest = query;
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    if (form_decode(pair.substr(0, eq)) != name) continue;
    return eq == std::string_view::npos ? std::string() : form_decode(pair.substr(eq + 1));
  }
  return std::nullopt;
}

// ---- HttpResponder

HttpResponder::HttpResponder(std::shared_ptr<State> state) : state_(std::move(state)) {}

void HttpResponder::send(HttpResponse response) const {
  if (!state_ || state_->answered.exchange(true)) return;
  http_engine::deliver(*state_, std::move(response));
}

bool HttpResponder::abandoned() const { return !state_ || state_->closed->load(); }

HttpResponder::State::~State() {
  if (answered.exchange(true)) return;
  const auto s = server.lock();
  const std::string reason = "internal error: the request was dropped unanswered";
  http_engine::deliver(*this, {500, s ? s->error_body(500, reason) : Json{{"error", reason}}.dump()});
}

// ---- Server: accepting and stopping, on the loop thread

namespace http_engine {

void Server::accept() {
  Loop& loop = *loops[next_loop];
  next_loop = (next_loop + 1) % loops.size();
  acceptor.async_accept(loop.ioc, [this, &loop](const error_code& ec, tcp::socket socket) {
    on_accept(ec, std::move(socket), loop);
  });
}

void Server::on_accept(const error_code& ec, tcp::socket socket, Loop& loop) {
  if (accepting_stopped || !acceptor.is_open()) return;
  if (ec) {
    // Out of descriptors (or memory): the pending connection stays in the backlog; try later
    // rather than spin on accept().
    if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space || ec == asio::error::no_memory ||
        ec.value() == ENFILE) {
      accept_retry.expires_after(kAcceptRetry);
      accept_retry.async_wait([this](const error_code& e) {
        if (!e) accept();
      });
      return;
    }
    return accept();
  }
  ++accepted;
  error_code ignored;
  // Without TCP_NODELAY a small answer waits for the client's delayed ACK (~40 ms).
  socket.set_option(tcp::no_delay(true), ignored);
  const bool counted = open.load() < options.max_connections;
  if (counted) ++open;
  else ++refused;
  if (&loop == loops.front().get()) {
    loop.adopt(std::move(socket), counted);
  } else {
    asio::post(loop.ioc, [&loop, counted, s = std::move(socket)]() mutable { loop.adopt(std::move(s), counted); });
  }
  accept();
}

void Loop::adopt(tcp::socket socket, bool counted) {
  if (stopping) {  // accepted just before the stop reached this loop
    error_code ignored;
    socket.close(ignored);
    if (counted) --server.open;
    return;
  }
  if (counted) return std::make_shared<Connection>(*this, std::move(socket), true)->start();
  if (refusing >= kMaxRefusing) return;  // closed unanswered
  ++refusing;
  std::make_shared<Connection>(*this, std::move(socket), false)->refuse();
}

void Loop::connection_gone(Connection* c, bool counted) {
  connections.erase(c);
  if (counted) --server.open;
  else --refusing;
  if (stopping && connections.empty() && !finishing) {
    finishing = true;
    boost::asio::post(ioc, [this] { finish(); });
  }
}

void Server::begin_stop() {
  accepting_stopped = true;
  error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  for (auto& loop : loops) {
    Loop* l = loop.get();
    if (l == loops.front().get()) l->begin_stop();
    else asio::post(l->ioc, [l] { l->begin_stop(); });
  }
}

void Loop::begin_stop() {
  stopping = true;
  const std::vector<Connection*> now(connections.begin(), connections.end());
  for (auto* c : now) c->on_stop();
  if (connections.empty()) {
    if (!finishing) finish();
    return;
  }
  grace_timer.expires_after(std::chrono::milliseconds(std::max(0, server.grace_ms.load())));
  grace_timer.async_wait([this](const error_code& ec) {
    if (!ec) finish();
  });
}

// The grace period is over (or nothing is left): closes what is left, and the loop's run()
// returns.
void Loop::finish() {
  finishing = true;
  grace_timer.cancel();
  const std::vector<Connection*> left(connections.begin(), connections.end());
  for (auto* c : left) c->close();
  work.reset();
  ioc.stop();
}

}  // namespace http_engine

// ---- HttpServer

struct HttpServer::Impl : http_engine::Server {
  using Server::Server;
};

HttpServer::HttpServer(Options options, Handler handler)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(handler))) {
  impl_->self = impl_;
}

HttpServer::~HttpServer() {
  stop(0);
  MutexLock lock(impl_->mutex);
  while (impl_->running) impl_->mutex.wait(impl_->run_done);
}

namespace {

// The certificate and key of Options::tls_cert_file / tls_key_file as a server context:
// TLS 1.2 or later. Throws InvalidArgument naming the file and OpenSSL's reason.
std::unique_ptr<http_engine::TlsContext> load_tls(const HttpServer::Options& o) {
  if (o.tls_cert_file.empty() != o.tls_key_file.empty())
    throw InvalidArgument("HTTPS needs both a certificate and its private key (--tls-cert and --tls-key)");
#ifdef TENSORHUB_HTTP_TLS
  namespace ssl = boost::asio::ssl;
  auto tls = std::make_unique<ssl::context>(ssl::context::tls_server);
  tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  http_engine::error_code ec;
  tls->use_certificate_chain_file(o.tls_cert_file, ec);
  if (ec) throw InvalidArgument("cannot use " + o.tls_cert_file + " as a PEM certificate (chain): " + ec.message());
  tls->use_private_key_file(o.tls_key_file, ssl::context::pem, ec);
  if (ec)
    throw InvalidArgument("cannot use " + o.tls_key_file + " as the PEM private key of " + o.tls_cert_file + ": " +
                          ec.message());
  return tls;
#else
  throw InvalidArgument("this program is built without TLS: serve HTTPS with tensorhub serve or tensorhub ui, or put a "
                        "TLS proxy in front");
#endif
}

}  // namespace

int HttpServer::bind() {
  using namespace http_engine;
  const Options& o = impl_->options;
  if (!o.tls_cert_file.empty() || !o.tls_key_file.empty()) impl_->tls = load_tls(o);
  raise_open_files_limit();
  error_code ec;
  const auto address = asio::ip::make_address(o.host == "localhost" ? "127.0.0.1" : o.host, ec);
  if (ec)
    throw Unavailable("cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " + o.host +
                      " is not a numeric IP address (nor localhost); give " + o.host_flag +
                      " one of this machine's addresses, e.g. 127.0.0.1, or 0.0.0.0 for all");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(o.port));
  tcp::acceptor& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  // SO_REUSEADDR (never SO_REUSEPORT): a restart binds past TIME_WAIT, a port in use is refused.
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(kBacklog, ec);
  if (ec) {
    error_code ignored;
    a.close(ignored);
    throw Unavailable(bind_failure_message(o.host, o.port, ec.value(), o.host_flag, o.port_flag));
  }
  return a.local_endpoint().port();
}

void HttpServer::run() {
  {
    MutexLock lock(impl_->mutex);
    impl_->running = true;
  }
  auto& loops = impl_->loops;
  if (!impl_->stop_requested.load()) {
    for (auto& loop : loops) loop->work.emplace(boost::asio::make_work_guard(loop->ioc));
    impl_->accept();
    std::vector<std::thread> others;
    for (std::size_t i = 1; i < loops.size(); ++i) others.emplace_back([loop = loops[i].get()] { loop->ioc.run(); });
    loops.front()->ioc.run();
    for (auto& t : others) t.join();
  }
  // Whatever the loops left (nothing, unless stop() came before run()) closes here.
  http_engine::error_code ignored;
  impl_->acceptor.close(ignored);
  for (auto& loop : loops) {
    loop->work.reset();
    const std::vector<http_engine::Connection*> left(loop->connections.begin(), loop->connections.end());
    for (auto* c : left) c->close();
  }
  MutexLock lock(impl_->mutex);
  impl_->running = false;
  impl_->run_done.notify_all();
}

void HttpServer::stop(int grace_ms) {
  if (impl_->stop_requested.exchange(true)) return;
  impl_->grace_ms.store(grace_ms);
  Impl* impl = impl_.get();
  boost::asio::post(impl_->loops.front()->ioc, [impl] { impl->begin_stop(); });
}

HttpServerStats HttpServer::stats() const {
  const Impl& i = *impl_;
  return {i.open.load(), i.accepted.load(), i.refused.load(), i.head_timeouts.load(), i.body_timeouts.load(),
          i.idle_timeouts.load(), i.requests.load(), i.tls_handshake_failures.load()};
}

}  // namespace tensorhub
