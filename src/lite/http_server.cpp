// HttpServer (lite/http_server.h): HTTP/1.1 over POSIX sockets, a thread per connection.
#include "tensorhub/lite/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <thread>

#include "tensorhub/core/error.h"
#include "tensorhub/lite/predict_json.h"

namespace tensorhub {
namespace {

constexpr std::size_t kMaxHeaderBytes = 64 * 1024;
constexpr int kPollMs = 100;  // how often a waiting thread looks at stopping_

const char* reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads what the peer has sent into `buffer`, waiting in steps of kPollMs. Returns false on
// end of stream or error, after `idle_ms` without a byte, or when `stopping` holds while
// `buffer` is empty (an idle keep-alive connection is closed at shutdown; a request being read
// is read to its end).
bool read_more(int fd, std::string& buffer, const std::atomic<bool>& stopping, int idle_ms) {
  for (int waited = 0; waited < idle_ms; waited += kPollMs) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, kPollMs);
    if (ready < 0 && errno != EINTR) return false;
    if (ready > 0) {
      char chunk[16384];
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buffer.append(chunk, static_cast<std::size_t>(n));
      return true;
    }
    if (stopping && buffer.empty()) return false;
  }
  return false;
}

// One parsed request head.
struct Head {
  std::string method, target, version;
  std::size_t content_length = 0;
  bool chunked = false, keep_alive = true, expect_continue = false;
};

// Parses "METHOD TARGET HTTP/1.x" and the headers tensorhub-serve-lite acts on. Throws
// InvalidArgument for a malformed head.
Head parse_head(std::string_view text) {
  Head h;
  const std::size_t line_end = text.find("\r\n");
  const std::string_view line = text.substr(0, line_end);
  const std::size_t a = line.find(' '), b = line.rfind(' ');
  if (a == std::string_view::npos || b == a) throw InvalidArgument("malformed HTTP request line");
  h.method = std::string(line.substr(0, a));
  h.target = std::string(line.substr(a + 1, b - a - 1));
  h.version = std::string(line.substr(b + 1));
  if (h.version != "HTTP/1.1" && h.version != "HTTP/1.0") throw InvalidArgument("unsupported HTTP version " + h.version);
  h.keep_alive = h.version == "HTTP/1.1";
  std::size_t at = line_end == std::string_view::npos ? text.size() : line_end + 2;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find("\r\n", at), text.size());
    const std::string_view field = text.substr(at, end - at);
    at = end + 2;
    const std::size_t colon = field.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string name = lower(std::string(field.substr(0, colon)));
    const std::string value = trim(field.substr(colon + 1));
    if (name == "content-length") {
      const auto r = std::from_chars(value.data(), value.data() + value.size(), h.content_length);
      if (r.ec != std::errc() || r.ptr != value.data() + value.size()) throw InvalidArgument("malformed Content-Length");
    } else if (name == "transfer-encoding") {
      h.chunked = lower(value).find("chunked") != std::string::npos;
    } else if (name == "connection") {
      const std::string v = lower(value);
      if (v.find("close") != std::string::npos) h.keep_alive = false;
      if (v.find("keep-alive") != std::string::npos) h.keep_alive = true;
    } else if (name == "expect") {
      h.expect_continue = lower(value) == "100-continue";
    }
  }
  return h;
}

// The address to bind: numeric IPv4 / IPv6, or "localhost" (no resolver: a static binary has
// no NSS modules).
bool to_address(const std::string& host, int port, sockaddr_storage& out, socklen_t& len) {
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  std::memset(&out, 0, sizeof out);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
  if (::inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  if (::inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

}  // namespace

HttpServer::HttpServer(Options options, Handler handler, std::string too_large)
    : options_(std::move(options)), handler_(std::move(handler)), too_large_(std::move(too_large)) {}

HttpServer::~HttpServer() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

int HttpServer::bind() {
  const std::string where = "cannot listen on " + options_.host + ":" + std::to_string(options_.port);
  sockaddr_storage addr;
  socklen_t len = 0;
  if (!to_address(options_.host, options_.port, addr, len))
    throw Unavailable(where + ": " + options_.host + " is not an IP address; give " + options_.host_flag +
                      " one of this machine's addresses, e.g. 127.0.0.1, or 0.0.0.0 for all");
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Unavailable(where + ": " + std::strerror(errno));
  // SO_REUSEADDR (not SO_REUSEPORT): a restart binds past TIME_WAIT, a port in use is refused.
  int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 1024) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == EADDRINUSE) throw Unavailable(where + " (in use? choose another " + options_.port_flag + "): " + std::strerror(e));
    if (e == EADDRNOTAVAIL)
      throw Unavailable(where + ": " + options_.host + " is not an address of this machine; give " + options_.host_flag +
                        " one of its addresses, e.g. 127.0.0.1, or 0.0.0.0 for all");
    throw Unavailable(where + ": " + std::strerror(e));
  }
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  listen_fd_ = fd;
  return ntohs(addr.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&addr)->sin_port
                                         : reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

void HttpServer::run() {
  while (!stopping_) {
    {
      // At most max_connections threads: the rest wait in the listen backlog.
      MutexLock lock(mutex_);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPollMs);
      while (active_ >= options_.max_connections && !stopping_ &&
             mutex_.wait_until(changed_, deadline) == std::cv_status::no_timeout) {
      }
      if (active_ >= options_.max_connections) continue;
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // Without TCP_NODELAY a small response waits for the client's delayed ACK (~40 ms).
    int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    {
      MutexLock lock(mutex_);
      ++active_;
    }
    std::thread([this, fd] {
      serve_connection(fd);
      ::close(fd);
      MutexLock lock(mutex_);
      --active_;
      changed_.notify_all();
    }).detach();
  }
  ::close(listen_fd_);
  listen_fd_ = -1;
  MutexLock lock(mutex_);
  while (active_ != 0) mutex_.wait(changed_);
}

void HttpServer::stop() {
  stopping_ = true;
  changed_.notify_all();
}

bool HttpServer::reply(int fd, const HttpResponse& r, bool keep_alive) {
  std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\nContent-Type: " +
                     r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n";
  if (!keep_alive) head += "Connection: close\r\n";
  head += "\r\n";
  return send_all(fd, head + r.body);
}

void HttpServer::serve_connection(int fd) {
  std::string buffer;
  for (;;) {
    // The head.
    std::size_t head_end;
    while ((head_end = buffer.find("\r\n\r\n")) == std::string::npos) {
      if (buffer.size() > kMaxHeaderBytes) {
        reply(fd, {431, lite_error_body("the request's headers are larger than 64 KiB")}, false);
        return;
      }
      if (!read_more(fd, buffer, stopping_, options_.idle_timeout_ms)) return;
    }
    Head head;
    try {
      head = parse_head(std::string_view(buffer).substr(0, head_end));
    } catch (const Error& e) {
      reply(fd, {400, lite_error_body(e.message())}, false);
      return;
    }
    buffer.erase(0, head_end + 4);
    if (!head.chunked && head.content_length > options_.max_body_bytes) {
      reply(fd, {413, lite_error_body(too_large_)}, false);
      return;
    }
    if (head.expect_continue && !send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n")) return;
    // The body: Content-Length bytes, or chunks (size in hex, CRLF, data, CRLF; 0 ends).
    HttpRequest request;
    if (head.chunked) {
      for (;;) {
        std::size_t line_end;
        while ((line_end = buffer.find("\r\n")) == std::string::npos)
          if (!read_more(fd, buffer, stopping_, options_.idle_timeout_ms)) return;
        std::size_t size = 0;
        const auto r = std::from_chars(buffer.data(), buffer.data() + line_end, size, 16);
        if (r.ec != std::errc()) {
          reply(fd, {400, lite_error_body("the request body could not be read (a malformed chunk)")}, false);
          return;
        }
        if (request.body.size() + size > options_.max_body_bytes) {
          reply(fd, {413, lite_error_body(too_large_)}, false);
          return;
        }
        while (buffer.size() < line_end + 2 + size + 2)
          if (!read_more(fd, buffer, stopping_, options_.idle_timeout_ms)) return;
        request.body.append(buffer, line_end + 2, size);
        buffer.erase(0, line_end + 2 + size + 2);  // a last chunk's trailers are not supported
        if (size == 0) break;
      }
    } else {
      while (buffer.size() < head.content_length)
        if (!read_more(fd, buffer, stopping_, options_.idle_timeout_ms)) return;
      request.body = buffer.substr(0, head.content_length);
      buffer.erase(0, head.content_length);
    }
    request.method = head.method;
    request.path = head.target.substr(0, head.target.find('?'));
    HttpResponse response;
    try {
      response = handler_(request);
    } catch (const std::exception& e) {
      response = {500, lite_error_body(std::string("internal error: ") + e.what())};
    }
    // Judged now: a stop() that came while this request was read or run closes the connection.
    const bool keep_alive = head.keep_alive && !stopping_;
    if (!reply(fd, response, keep_alive) || !keep_alive) return;
  }
}

}  // namespace tensorhub
