// Why a server could not listen on host:port, in words a user can act on.
#pragma once

#include <string>

namespace tensorhub {

/// Explains a failed listen on `host`:`port` (HTTP libraries such as cpp-httplib say only that
/// binding failed): resolves and binds a socket the same way (SO_REUSEADDR) and names the
/// cause from getaddrinfo's or bind's error: a host that is not an address of this machine,
/// a port in use, or another errno. `host_flag` and `port_flag` are the command-line flags the
/// message tells the user to change (e.g. "--rest_api_host", "--rest_api_port"). Never throws
/// for network reasons; the returned text starts with "cannot listen on HOST:PORT".
std::string bind_failure(const std::string& host, int port, const std::string& host_flag,
                         const std::string& port_flag);

/// The same words for a bind of `host`:`port` that already failed with errno `error`, found
/// without resolving or binding again (src/core/bind_failure_message.cpp, a file of its own so
/// that the static tensorhub-serve-lite links no getaddrinfo): EADDRINUSE names `port_flag`,
/// EADDRNOTAVAIL says `host` is not an address of this machine and names `host_flag`, any other
/// errno is given as strerror says it. Starts with "cannot listen on HOST:PORT".
std::string bind_failure_message(const std::string& host, int port, int error, const std::string& host_flag,
                                 const std::string& port_flag);

}  // namespace tensorhub
