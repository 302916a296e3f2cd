// The REST server's listening socket: clients that connect all at once (a load balancer's pool,
// wrk's connections) are queued by the kernel instead of having their handshakes dropped, which
// cost each of them a retransmission (0.2-1 s) with cpp-httplib's backlog of 5.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "tensorhub/serve/rest_server.h"

namespace tensorhub {
namespace {

// Starts a non-blocking connect to 127.0.0.1:`port`; returns the socket.
int start_connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  return fd;
}

// How many of `fds` complete their handshake within `wait`.
int connected_within(const std::vector<int>& fds, std::chrono::milliseconds wait) {
  std::vector<bool> done(fds.size(), false);
  int connected = 0;
  const auto end = std::chrono::steady_clock::now() + wait;
  while (connected < static_cast<int>(fds.size()) && std::chrono::steady_clock::now() < end) {
    std::vector<pollfd> pending;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (!done[i]) pending.push_back({fds[i], POLLOUT, 0}), which.push_back(i);
    poll(pending.data(), pending.size(), 100);
    for (std::size_t k = 0; k < pending.size(); ++k) {
      if (!(pending[k].revents & (POLLOUT | POLLERR | POLLHUP))) continue;
      int error = 0;
      socklen_t len = sizeof error;
      getsockopt(pending[k].fd, SOL_SOCKET, SO_ERROR, &error, &len);
      done[which[k]] = true;
      if (error == 0) ++connected;
    }
  }
  return connected;
}

TEST(RestListenTest, SixtyFourClientsConnectingAtOnceAreAllQueuedBeforeTheServerAccepts) {
  ModelManager manager;
  ServerOptions options;
  options.port = 0;
  RestServer server(manager, options);
  const int port = server.bind();  // bound and listening; run() not called: nothing accepts yet
  std::vector<int> fds;
  for (int i = 0; i < 64; ++i) fds.push_back(start_connect(port));
  // With cpp-httplib's own backlog of 5, 6 handshakes complete and the other 58 SYNs are
  // dropped (retried after 1 s and 3 s, and dropped again while nothing accepts).
  EXPECT_EQ(connected_within(fds, std::chrono::milliseconds(5000)), 64);
  for (int fd : fds) close(fd);
}

}  // namespace
}  // namespace tensorhub
