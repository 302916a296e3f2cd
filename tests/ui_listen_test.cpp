// The dashboard's listening socket: a page's many requests, with other clients', connecting at
// once are queued by the kernel instead of having handshakes dropped (cpp-httplib's backlog of
// 5 cost each dropped one a 0.2-1 s retransmission), as the REST server's (serve_rest_listen_test).
#include <gtest/gtest.h>

#include "listen_util.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/ui/ui_server.h"
#include "test_util.h"

namespace tensorhub {
namespace {

TEST(UiListenTest, SixtyFourClientsConnectingAtOnceAreAllQueuedBeforeTheServerAccepts) {
  testing::TempDir dir;
  const std::string uri = "sqlite://" + (dir.path() / "hub.db").string();
  { Hub hub(uri, "p"); }
  UiOptions options;
  options.hub_uri = uri;
  options.project = "p";
  options.port = 0;
  UiServer server(options);
  const int port = server.bind();  // bound and listening; run() not called: nothing accepts yet
  std::vector<int> fds;
  for (int i = 0; i < 64; ++i) fds.push_back(testing::start_connect(port));
  EXPECT_EQ(testing::connected_within(fds, std::chrono::milliseconds(5000)), 64);
  for (int fd : fds) close(fd);
}

}  // namespace
}  // namespace tensorhub
