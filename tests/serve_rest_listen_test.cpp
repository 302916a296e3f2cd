// The REST server's listening socket: clients that connect all at once (a load balancer's pool,
// wrk's connections) are queued by the kernel instead of having their handshakes dropped, which
// cost each of them a retransmission (0.2-1 s) with cpp-httplib's backlog of 5.
#include <gtest/gtest.h>

#include "listen_util.h"
#include "tensorhub/serve/rest_server.h"

namespace tensorhub {
namespace {

using testing::connected_within;
using testing::start_connect;

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
