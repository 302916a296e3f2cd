// Raw-socket HTTP/1.1 clients for the tests of the servers on core/http_server.h (the engine
// itself, tensorhub-serve-lite): every byte they send is written here, and answers are read
// with a parser of their own (status line, headers, Content-Length), so that nothing of the
// engine checks itself. And the slow clients of the issue: many connections each sending a
// request head one byte every 2 s.
#pragma once

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tensorhub::testing {

using Clock = std::chrono::steady_clock;

/// Milliseconds since `t0`.
inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// A blocking TCP connection to 127.0.0.1:`port` (a test failure if it cannot connect).
inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ADD_FAILURE() << "connect: " << std::strerror(errno);
  }
  return fd;
}

/// Sends all of `s` (a test failure if the peer is gone).
inline void send_text(int fd, const std::string& s) {
  std::size_t at = 0;
  while (at < s.size()) {
    const ssize_t n = ::send(fd, s.data() + at, s.size() - at, MSG_NOSIGNAL);
    if (n <= 0) {
      ADD_FAILURE() << "send: " << std::strerror(errno);
      return;
    }
    at += static_cast<std::size_t>(n);
  }
}

// Reads what arrives within `limit` into `in`; false when the peer closed (or reset).
inline bool read_some(int fd, std::string& in, std::chrono::milliseconds limit) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return true;
  char buf[16384];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n <= 0) return false;
  in.append(buf, static_cast<std::size_t>(n));
  return true;
}

// One parsed answer.
struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

/// `s` in ASCII lower case.
inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Takes one complete answer (Content-Length framed) off the front of `in`, if there is one.
inline std::optional<Reply> take_reply(std::string& in) {
  const std::size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return std::nullopt;
  Reply r;
  std::size_t at = in.find("\r\n");
  const std::string status_line = in.substr(0, at);
  r.status = std::stoi(status_line.substr(9, 3));
  while (at < end) {
    const std::size_t next = in.find("\r\n", at + 2);
    const std::string line = in.substr(at + 2, next - at - 2);
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      r.headers[lower(line.substr(0, colon))] = value;
    }
    at = next;
  }
  const std::size_t length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
  if (in.size() < end + 4 + length) return std::nullopt;
  r.body = in.substr(end + 4, length);
  in.erase(0, end + 4 + length);
  return r;
}

// Reads one answer from `fd` (keeping what follows in `pending`) within `limit`.
inline std::optional<Reply> read_reply(int fd, std::string& pending,
                                       std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto deadline = Clock::now() + limit;
  while (true) {
    if (auto r = take_reply(pending)) return r;
    if (Clock::now() >= deadline || !read_some(fd, pending, std::chrono::milliseconds(50))) return take_reply(pending);
  }
}
/// One answer from `fd` within 5 s, or nullopt.
inline std::optional<Reply> read_reply(int fd) {
  std::string pending;
  return read_reply(fd, pending);
}

// Whether the server closed `fd` within `limit` (anything it sent first is dropped).
inline bool closed_within(int fd, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  std::string ignored;
  while (Clock::now() < deadline)
    if (!read_some(fd, ignored, std::chrono::milliseconds(20))) return true;
  return false;
}

// Raises this process's soft limit on open files to the hard one (the clients' sockets and
// the server's, 2,000 and more).
inline void raise_nofile() {
  rlimit l{};
  getrlimit(RLIMIT_NOFILE, &l);
  l.rlim_cur = l.rlim_max;
  setrlimit(RLIMIT_NOFILE, &l);
}

// `n` clients that each send a request head one byte every `every` (the first at once), on
// one thread of their own; records when each was closed by the server.
class SlowClients {
 public:
  SlowClients(int port, int n, std::chrono::milliseconds every) : every_(every) {
    const std::string head = "GET / HTTP/1.1\r\nHost: slow\r\nX-Slow: " + std::string(100, 's') + "\r\n\r\n";
    for (int i = 0; i < n; ++i) {
      const int fd = connect_to(port);
      ::fcntl(fd, F_SETFL, O_NONBLOCK);
      clients_.push_back({fd, Clock::now(), {}, 0});
    }
    head_ = head;
    thread_ = std::thread([this] { loop(); });
  }
  ~SlowClients() {
    done_ = true;
    thread_.join();
    for (auto& c : clients_) ::close(c.fd);
  }
  // Waits until every client was closed (or `limit`); returns how many were.
  int wait_all_closed(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (closed_.load() < static_cast<int>(clients_.size()) && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return closed_.load();
  }
  int closed() const { return closed_.load(); }
  // Milliseconds from each closed client's connect to its close.
  std::vector<double> lifetimes() const {
    std::vector<double> out;
    for (const auto& c : clients_)
      if (c.closed_at) out.push_back(std::chrono::duration<double, std::milli>(*c.closed_at - c.connected).count());
    return out;
  }
  // Whether the server ever answered a slow client (it must not: no head ever completes).
  bool any_answer() const { return answered_.load(); }

 private:
  struct Client {
    int fd;
    Clock::time_point connected;
    std::optional<Clock::time_point> closed_at;
    std::size_t sent;
  };
  void loop() {
    // One byte to every client now, and again every `every_`.
    auto next = Clock::now();
    std::vector<pollfd> fds;
    while (!done_) {
      if (Clock::now() >= next) {
        for (auto& c : clients_)
          if (!c.closed_at && c.sent < head_.size() && ::send(c.fd, head_.data() + c.sent, 1, MSG_NOSIGNAL) == 1) ++c.sent;
        next += every_;
      }
      fds.clear();
      for (const auto& c : clients_) fds.push_back({c.closed_at ? -1 : c.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[512];
        const ssize_t n = ::recv(clients_[i].fd, buf, sizeof buf, 0);
        if (n > 0) answered_ = true;
        if (n > 0 || (n < 0 && errno == EAGAIN)) continue;
        clients_[i].closed_at = Clock::now();
        ++closed_;
      }
    }
  }

  std::chrono::milliseconds every_;
  std::string head_;
  std::vector<Client> clients_;
  std::atomic<bool> done_{false};
  std::atomic<bool> answered_{false};
  std::atomic<int> closed_{0};
  std::thread thread_;
};

// Latencies (ms) of `n` requests `request` (a complete HTTP/1.1 request, keep-alive) on one
// connection, one after the other, and more until `at_least` has passed; a request not
// answered 200 within 5 s is a test failure and ends the series.
inline std::vector<double> keep_alive_latencies(int port, const std::string& request, int n,
                                                std::chrono::milliseconds at_least = std::chrono::milliseconds(0)) {
  const int fd = connect_to(port);
  std::vector<double> out;
  std::string pending;
  const auto t0 = Clock::now();
  for (int i = 0; i < n || Clock::now() - t0 < at_least; ++i) {
    const auto start = Clock::now();
    send_text(fd, request);
    auto r = read_reply(fd, pending);
    if (!r || r->status != 200) {
      ADD_FAILURE() << "request " << i
                    << (r ? " answered " + std::to_string(r->status) + ": " + r->body : std::string(" unanswered"));
      break;
    }
    out.push_back(ms_since(start));
  }
  ::close(fd);
  return out;
}

/// The 99th percentile of `v` (nearest rank below), 0 for none.
inline double p99(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<std::size_t>(0.99 * static_cast<double>(v.size() - 1))];
}

}  // namespace tensorhub::testing
