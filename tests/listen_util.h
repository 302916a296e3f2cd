// Clients connecting all at once to a listening socket that does not accept yet: how many
// handshakes the kernel completes (the listen backlog), for the servers' listen tests.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace tensorhub::testing {

// Starts a non-blocking connect to 127.0.0.1:`port`; returns the socket.
inline int start_connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  return fd;
}

// How many of `fds` complete their handshake within `wait`.
inline int connected_within(const std::vector<int>& fds, std::chrono::milliseconds wait) {
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

}  // namespace tensorhub::testing
