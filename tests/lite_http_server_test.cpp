// tensorhub-serve-lite's HTTP/1.1 server in this process, spoken to over raw loopback sockets:
// keep-alive, chunked bodies, "Expect: 100-continue", the body limit, the idle timeout, a
// handler that throws, and stop() with a connection open.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tensorhub/lite/http_server.h"

namespace tensorhub {
namespace {

// A server on a free loopback port, running on a thread until the fixture ends.
class LiteHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServer::Options o;
    o.port = 0;
    o.max_body_bytes = 1000;
    o.idle_timeout_ms = 300;
    server_ = std::make_unique<HttpServer>(o, [](const HttpRequest& r) -> HttpResponse {
      if (r.path == "/throw") throw std::runtime_error("boom");
      return {200, r.method + " " + r.path + " " + std::to_string(r.body.size()) + " " + r.body, "text/plain"};
    }, "too large");
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
  }

  int connect_socket() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    return fd;
  }
  static void send_text(int fd, const std::string& s) { ASSERT_EQ(::send(fd, s.data(), s.size(), 0), static_cast<ssize_t>(s.size())); }
  // Reads until `count` responses (by their Content-Length) arrived, the peer closed, or 5 s.
  static std::string read_responses(int fd, int count) {
    std::string in;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      int complete = 0;
      for (std::size_t at = 0; (at = in.find("\r\n\r\n", at)) != std::string::npos; at += 4) {
        const std::size_t cl = in.rfind("Content-Length: ", at);
        if (cl != std::string::npos && at + 4 + std::stoul(in.substr(cl + 16)) <= in.size()) ++complete;
      }
      if (complete >= count) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<std::size_t>(n));
    }
    return in;
  }
  // Reads until `needle` arrived, the peer closed, or 5 s.
  static std::string read_until(int fd, const std::string& needle) {
    std::string in;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (in.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<std::size_t>(n));
    }
    return in;
  }
  // Whether the server closed `fd` within `limit`.
  static bool closed_within(int fd, std::chrono::milliseconds limit) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return false;
    char c;
    return ::recv(fd, &c, 1, 0) == 0;
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::thread thread_;
};

TEST_F(LiteHttpServerTest, KeepAliveAnswersRequestsInOrderOnOneConnection) {
  const int fd = connect_socket();
  send_text(fd, "GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz");
  const std::string in = read_responses(fd, 2);
  EXPECT_NE(in.find("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\r\nGET /a 0 "), std::string::npos) << in;
  EXPECT_NE(in.find("POST /b 3 xyz"), std::string::npos) << in;
  ::close(fd);
}

TEST_F(LiteHttpServerTest, ChunkedBodiesAndExpectContinue) {
  const int fd = connect_socket();
  send_text(fd, "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n2\r\nef\r\n0\r\n\r\n");
  EXPECT_NE(read_responses(fd, 1).find("POST /c 6 abcdef"), std::string::npos);
  send_text(fd, "POST /d HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
  const std::string in = read_until(fd, "\r\n\r\n");
  EXPECT_EQ(in, "HTTP/1.1 100 Continue\r\n\r\n");
  send_text(fd, "hi");
  EXPECT_NE(read_responses(fd, 1).find("POST /d 2 hi"), std::string::npos);
  ::close(fd);
}

TEST_F(LiteHttpServerTest, ABodyOverTheLimitIs413AndAThrowingHandler500) {
  int fd = connect_socket();
  send_text(fd, "POST /e HTTP/1.1\r\nContent-Length: 5000\r\n\r\n");
  std::string in = read_responses(fd, 1);
  EXPECT_NE(in.find("HTTP/1.1 413 Payload Too Large"), std::string::npos) << in;
  EXPECT_NE(in.find(R"({"error":"too large"})"), std::string::npos) << in;
  EXPECT_TRUE(closed_within(fd, std::chrono::milliseconds(2000)));
  ::close(fd);
  fd = connect_socket();
  send_text(fd, "GET /throw HTTP/1.1\r\n\r\n");
  in = read_responses(fd, 1);
  EXPECT_NE(in.find("HTTP/1.1 500 Internal Server Error"), std::string::npos) << in;
  EXPECT_NE(in.find(R"({"error":"internal error: boom"})"), std::string::npos) << in;
  ::close(fd);
}

TEST_F(LiteHttpServerTest, ASilentConnectionIsClosedAfterTheIdleTimeout) {
  const int fd = connect_socket();
  send_text(fd, "GET /f HTTP/1.1\r\n");  // a head that never ends
  EXPECT_FALSE(closed_within(fd, std::chrono::milliseconds(100)));
  EXPECT_TRUE(closed_within(fd, std::chrono::milliseconds(3000)));
  ::close(fd);
}

// TearDown's stop() and join() return although this connection stays open and idle.
TEST_F(LiteHttpServerTest, StopClosesIdleKeepAliveConnections) {
  const int fd = connect_socket();
  send_text(fd, "GET /g HTTP/1.1\r\n\r\n");
  EXPECT_NE(read_responses(fd, 1).find("GET /g 0"), std::string::npos);
  server_->stop();
  EXPECT_TRUE(closed_within(fd, std::chrono::milliseconds(2000)));
  ::close(fd);
}

}  // namespace
}  // namespace tensorhub
