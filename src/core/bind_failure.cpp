// bind_failure (bind_failure.h): the cause of a failed listen, found by binding again.
#include "tensorhub/core/bind_failure.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace tensorhub {

std::string bind_failure(const std::string& host, int port, const std::string& host_flag,
                         const std::string& port_flag) {
  const std::string where = "cannot listen on " + host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return where + ": " + host + " is not an address this machine can bind (" + gai_strerror(rc) +
           "); give " + host_flag + " one of its addresses, e.g. 127.0.0.1, or 0.0.0.0 for all";
  int error = 0;
  for (addrinfo* a = found; a; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    error = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    close(fd);
    if (error == 0 || error == EADDRINUSE) break;
  }
  freeaddrinfo(found);
  if (error == 0) return where + " (the port was free when checked again)";
  return bind_failure_message(host, port, error, host_flag, port_flag);
}

}  // namespace tensorhub
