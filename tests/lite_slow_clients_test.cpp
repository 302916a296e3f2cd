// tensorhub-serve-lite against slow and hostile clients, as a real process (x86-64, and arm64
// under qemu-aarch64-static), spoken to over raw loopback sockets (tests/http_client_util.h):
// a thousand connections sending a request head one byte every 2 s while a normal client's
// predicts keep answering (p99 under twice its idle p99, with a floor), the slow ones cut at
// --http_head_timeout_s; SIGTERM under that load: the slow ones closed at once, a request
// under way answered, the process gone within --shutdown_grace_s; and the connection cap's 503.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "http_client_util.h"
#include "lite_util.h"
#include "tensorhub/core/process.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace std::chrono_literals;
using namespace tensorhub::testing;

const std::string kHalfPlusTwo = std::string(TENSORHUB_SOURCE_DIR) + "/examples/serving/half_plus_two";
const std::string kBody = R"({"instances": [1.0, 2.0, 5.0]})";
const std::string kPredict = "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: h\r\nContent-Length: " +
                             std::to_string(kBody.size()) + "\r\n\r\n" + kBody;

class LiteSlowClientsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    arch_ = arch_named(GetParam());
    if (const std::string why = missing(arch_); !why.empty()) GTEST_SKIP() << "arm64 not tested: " << why;
    raise_nofile();
  }
  void TearDown() override {
    if (process_) process_->stop(5s);
  }

  // Starts the lite server on half_plus_two with `flags`; waits until it predicts.
  void start(const std::vector<std::string>& flags) {
    port_ = free_loopback_port();
    std::vector<std::string> argv = arch_.launcher;
    argv.insert(argv.end(), {arch_.binary, "--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo,
                             "--rest_api_port", std::to_string(port_)});
    argv.insert(argv.end(), flags.begin(), flags.end());
    ProcessOptions options;
    options.output = (dir_.path() / "lite.log").string();
    process_ = std::make_unique<Process>(Process::spawn(argv, options));
    const auto deadline = Clock::now() + 60s;
    while (Clock::now() < deadline) {
      std::this_thread::sleep_for(50ms);
      if (process_->wait_for(0ms)) break;
      const int fd = try_connect();
      if (fd < 0) continue;
      send_text(fd, kPredict);
      const auto r = read_reply(fd);
      ::close(fd);
      if (r && r->status == 200) return;
    }
    FAIL() << "the lite server did not come up: " << log();
  }
  int try_connect() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    ::close(fd);
    return -1;
  }
  std::string log() const {
    std::ifstream in(dir_.path() / "lite.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Under qemu every request costs far more, and its noise too: a larger floor for the p99 bound.
  double p99_floor_ms() const { return arch_.name == "arm64" ? 50 : 10; }

  Arch arch_;
  TempDir dir_;
  int port_ = 0;
  std::unique_ptr<Process> process_;
};

TEST_P(LiteSlowClientsTest, AThousandSlowClientsNeitherStallPredictsNorOutliveTheHeadDeadline) {
  ASSERT_NO_FATAL_FAILURE(start({"--http_head_timeout_s", "3"}));
  keep_alive_latencies(port_, kPredict, 100);  // warm up
  const double idle_p99 = p99(keep_alive_latencies(port_, kPredict, 500));
  SlowClients slow(port_, 1000, 2000ms);
  const auto loaded = keep_alive_latencies(port_, kPredict, 200, 2000ms);
  const double loaded_p99 = p99(loaded);
  EXPECT_LT(loaded_p99, std::max(2 * idle_p99, p99_floor_ms()))
      << "idle p99 " << idle_p99 << " ms, beside 1,000 slow clients " << loaded_p99 << " ms";
  EXPECT_EQ(slow.wait_all_closed(15000ms), 1000) << log();
  for (double ms : slow.lifetimes()) {
    EXPECT_GE(ms, 2900);
    EXPECT_LT(ms, 8000);
  }
  EXPECT_FALSE(slow.any_answer());
  std::printf("%s: predict p99 idle %.3f ms, beside 1,000 slow clients %.3f ms (%zu predicts)\n", arch_.name.c_str(),
              idle_p99, loaded_p99, loaded.size());
}

// SIGTERM with 1,000 slow clients connected (a head deadline far away), one request whose
// body is half sent and another whose body never comes: the slow ones are closed at once, the
// first request is answered (Connection: close) when its body arrives, and the process exits 0
// at the end of --shutdown_grace_s, the second request being given up.
TEST_P(LiteSlowClientsTest, SigtermUnderSlowClientLoadExitsWithinTheGrace) {
  ASSERT_NO_FATAL_FAILURE(start({"--http_head_timeout_s", "60", "--shutdown_grace_s", "3"}));
  SlowClients slow(port_, 1000, 2000ms);
  const std::string head = "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: h\r\nContent-Length: " +
                           std::to_string(kBody.size()) + "\r\n\r\n";
  const int finishing = connect_to(port_), never = connect_to(port_);
  send_text(finishing, head + kBody.substr(0, 10));
  send_text(never, head + kBody.substr(0, 10));
  std::this_thread::sleep_for(arch_.name == "arm64" ? 1500ms : 500ms);  // both heads have arrived
  const auto t0 = Clock::now();
  process_->signal(SIGTERM);
  EXPECT_EQ(slow.wait_all_closed(2000ms), 1000) << log();
  send_text(finishing, kBody.substr(10));
  std::string pending;
  const auto r = read_reply(finishing, pending, 3000ms);
  ASSERT_TRUE(r) << log();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, R"({"predictions":[2.5,3.0,4.5]})");
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_EQ(process_->wait_for(10s), std::optional<int>(0)) << log();
  const double exited_ms = ms_since(t0);
  EXPECT_GE(exited_ms, 2500);  // the grace: the unfinished request held it open
  EXPECT_LT(exited_ms, 6000);
  EXPECT_TRUE(closed_within(never, 1000ms));
  ::close(finishing);
  ::close(never);
  EXPECT_NE(log().find("got SIGTERM: finishing the requests under way (at most --shutdown_grace_s 3 s)"),
            std::string::npos) << log();
}

TEST_P(LiteSlowClientsTest, BeyondTheConnectionCapA503NamesTheFlag) {
  ASSERT_NO_FATAL_FAILURE(start({"--http_max_connections", "20"}));
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i) {
    fds.push_back(connect_to(port_));
    send_text(fds.back(), kPredict);
    const auto r = read_reply(fds.back());
    ASSERT_TRUE(r && r->status == 200) << log();
  }
  const int extra = connect_to(port_);
  const auto r = read_reply(extra);
  ASSERT_TRUE(r) << log();
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("--http_max_connections"), std::string::npos) << r->body;
  EXPECT_TRUE(closed_within(extra, 3000ms));
  ::close(extra);
  for (int fd : fds) ::close(fd);
}

INSTANTIATE_TEST_SUITE_P(Arch, LiteSlowClientsTest, ::testing::Values("x86_64", "arm64"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tensorhub
