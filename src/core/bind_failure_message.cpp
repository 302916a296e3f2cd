// bind_failure_message (bind_failure.h): the words for a bind that failed with a known errno.
// Apart from bind_failure.cpp so that a static binary using it links no getaddrinfo (whose
// glibc wants its shared NSS modules at run time).
#include <cerrno>
#include <cstring>

#include "tensorhub/core/bind_failure.h"

namespace tensorhub {

std::string bind_failure_message(const std::string& host, int port, int error, const std::string& host_flag,
                                 const std::string& port_flag) {
  const std::string where = "cannot listen on " + host + ":" + std::to_string(port);
  if (error == EADDRINUSE) return where + " (in use? choose another " + port_flag + "): " + std::strerror(error);
  if (error == EADDRNOTAVAIL)
    return where + ": " + host + " is not an address of this machine (" + std::strerror(error) + "); give " +
           host_flag + " one of its addresses, e.g. 127.0.0.1, or 0.0.0.0 for all";
  return where + ": " + std::strerror(error);
}

}  // namespace tensorhub
