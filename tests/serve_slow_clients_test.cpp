// `tensorhub serve` as a real process under clients that cannot stall it (issue 26): a
// thousand connections that send a request head one byte every 2 s (a slowloris attack) while
// a normal client's predicts keep their latency; the slow ones cut at the head deadline
// (--http_head_timeout_s); SIGTERM under that load, within --shutdown_grace_s, a request in
// flight still answered; beyond --http_max_connections, 503 naming the flag.
//
// With cpp-httplib's thread per connection, 300 such clients left not one predict answered and
// SIGTERM waited for them forever. The latency bound is loose on purpose (twice the idle p99,
// never under kLatencyFloor): it tells an engine that serves beside slow clients from one
// that stalls, not a fast machine from a busy one.
#include <gtest/gtest.h>
#include <httplib.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <future>
#include <thread>

#include "listen_util.h"
#include "process_util.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/core/process.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;
using Clock = std::chrono::steady_clock;

const std::string kHalfPlusTwo = std::string(TENSORHUB_SOURCE_DIR) + "/examples/serving/half_plus_two";
const std::string kPredictPath = "/v1/models/half_plus_two:predict";
const std::string kPredictBody = R"({"instances": [1.0, 2.0, 5.0]})";
constexpr int kSlowClients = 1000;
// Below this a p99 says more about the scheduler of a shared machine (other processes, a
// timer tick) than about the server: the bound is never tighter. (Measured on 2 cores shared
// with other builds, load average 13: idle p99 1-8 ms, beside the slow clients 1-12 ms; with
// cpp-httplib's thread per connection no predict was answered at all.)
constexpr double kLatencyFloorMs = 20;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The 99th percentile (nearest rank) of `ms`.
double p99(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const auto rank = static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(ms.size())));
  return ms.at(std::max<std::size_t>(rank, 1) - 1);
}

// Enough descriptors for a thousand sockets and more (the soft limit may be 1024).
void raise_open_file_limit() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

// A blocking connection to 127.0.0.1:`port`; -1 when refused.
int connect_to(int port) {
  const int fd = start_connect(port);
  if (connected_within({fd}, std::chrono::milliseconds(5000)) != 1) {
    close(fd);
    return -1;
  }
  return fd;
}

// Connections that each send a request head one byte every `period` and never finish it. A
// thread of their own sends the bytes and watches for the server closing each connection
// (end of file or a reset), noting when.
class SlowClients {
 public:
  SlowClients(int port, int count, std::chrono::milliseconds period = std::chrono::milliseconds(2000))
      : period_(period), start_(Clock::now()) {
    for (int i = 0; i < count; ++i) {
      const int fd = connect_to(port);
      if (fd >= 0) fds_.push_back(fd);
    }
    open_ = static_cast<int>(fds_.size());
    sent_.assign(fds_.size(), 0);
    closed_.assign(fds_.size(), false);
    thread_ = std::thread([this] { loop(); });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) close(fd);
  }
  int connected() const { return static_cast<int>(fds_.size()); }
  int open() const { return open_; }
  // Seconds from the first connect to the first and to the last close by the server (-1: none yet).
  std::pair<double, double> closed_between() const {
    MutexLock lock(mutex_);
    return {first_close_, last_close_};
  }

 private:
  static constexpr std::string_view kHead =
      "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 32\r\n";

  void loop() {
    auto next_send = Clock::now();
    while (!stop_) {
      if (Clock::now() >= next_send) {
        send_one_byte_each();
        next_send += period_;
      }
      watch_for_closes(std::chrono::milliseconds(50));
    }
  }

  void send_one_byte_each() {
    for (std::size_t i = 0; i < fds_.size(); ++i) {
      if (closed_[i] || sent_[i] >= kHead.size()) continue;
      if (::send(fds_[i], kHead.data() + sent_[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) ++sent_[i];
      else if (errno != EAGAIN) mark_closed(i);
    }
  }

  // Waits up to `wait` for any open connection to become readable: the server closed it (or
  // answered before closing; the answer is read and dropped).
  void watch_for_closes(std::chrono::milliseconds wait) {
    std::vector<pollfd> polled;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < fds_.size(); ++i)
      if (!closed_[i]) polled.push_back({fds_[i], POLLIN, 0}), which.push_back(i);
    if (polled.empty()) {
      std::this_thread::sleep_for(wait);
      return;
    }
    if (poll(polled.data(), polled.size(), static_cast<int>(wait.count())) <= 0) return;
    char buf[4096];
    for (std::size_t k = 0; k < polled.size(); ++k) {
      if (!polled[k].revents) continue;
      ssize_t n;
      while ((n = recv(polled[k].fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
      }
      if (n == 0 || errno != EAGAIN) mark_closed(which[k]);
    }
  }

  void mark_closed(std::size_t i) {
    closed_[i] = true;
    --open_;
    const double at = seconds_since(start_);
    MutexLock lock(mutex_);
    if (first_close_ < 0) first_close_ = at;
    last_close_ = at;
  }

  const std::chrono::milliseconds period_;
  const Clock::time_point start_;
  std::vector<int> fds_;
  std::vector<std::size_t> sent_;  // bytes of kHead sent, per connection (the thread's own)
  std::vector<bool> closed_;       // the thread's own
  std::atomic<int> open_{0};
  std::atomic<bool> stop_{false};
  mutable Mutex mutex_;
  double first_close_ TENSORHUB_GUARDED_BY(mutex_) = -1;
  double last_close_ TENSORHUB_GUARDED_BY(mutex_) = -1;
  std::thread thread_;
};

// A `tensorhub serve` of half_plus_two on a free port (no gRPC); SIGTERM and reaped at the end.
class Server {
 public:
  Server(const std::vector<std::string>& flags, const std::string& log) : port_(free_loopback_port()), log_(log) {
    std::vector<std::string> args = {kTensorhub, "serve", "--port", "0", "--rest_api_port", std::to_string(port_),
                                     "--model_name", "half_plus_two", "--model_base_path", kHalfPlusTwo};
    args.insert(args.end(), flags.begin(), flags.end());
    pid_ = spawn(args, log);
  }
  ~Server() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      if (!wait_exit_within(pid_, std::chrono::milliseconds(30000))) ADD_FAILURE() << "serve did not exit";
    }
  }
  // Whether half_plus_two became AVAILABLE (asked by its status: a predict would wait for a
  // batch where batching is on).
  bool ready() {
    return eventually([&] {
      auto r = client().Get("/v1/models/half_plus_two");
      return r && r->status == 200 && r->body.find("AVAILABLE") != std::string::npos;
    }, std::chrono::milliseconds(60000));
  }
  // A keep-alive client of this thread's own.
  httplib::Client& client() {
    if (!client_) {
      client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
      client_->set_keep_alive(true);
      // Else the request's body, written after its head, waits for the server's delayed ACK
      // of the head (Nagle's algorithm): ~40 ms a request, whatever the server.
      client_->set_tcp_nodelay(true);
      client_->set_read_timeout(30, 0);
    }
    return *client_;
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  void forget() { pid_ = -1; }
  std::string log() const { return read_text(log_); }

 private:
  int port_;
  std::string log_;
  pid_t pid_ = -1;
  std::unique_ptr<httplib::Client> client_;
};

// Predict latencies in ms, one request after the other on one keep-alive connection, for
// `duration`; a request that fails or answers anything but half_plus_two's answer counts as
// `failures`.
std::vector<double> predict_latencies(httplib::Client& client, std::chrono::milliseconds duration, int& failures) {
  std::vector<double> ms;
  const auto end = Clock::now() + duration;
  while (Clock::now() < end) {
    const auto t = Clock::now();
    auto r = client.Post(kPredictPath, kPredictBody, "application/json");
    ms.push_back(seconds_since(t) * 1000);
    if (!r || r->status != 200 || r->body != R"({"predictions":[2.5,3.0,4.5]})") ++failures;
  }
  return ms;
}

class ServeSlowClientsTest : public ::testing::Test {
 protected:
  void SetUp() override { raise_open_file_limit(); }
  TempDir dir;
  std::string log = (dir.path() / "server.log").string();
};

// A thousand slow clients: predicts keep their idle p99 (within twice, or the floor) while the
// slow ones trickle, and every slow one is closed at the head deadline, none before it. The
// idle p99 is measured before the slow clients come and again after they are gone, and the
// worse of the two is the reference, so that a burst of other work on the machine during
// either phase does not decide the outcome alone.
TEST_F(ServeSlowClientsTest, PredictsKeepTheirLatencyAndSlowClientsAreCutAtTheHeadDeadline) {
  constexpr int kHeadTimeoutS = 8;
  Server server({"--http_head_timeout_s", std::to_string(kHeadTimeoutS)}, log);
  ASSERT_TRUE(server.ready()) << server.log();
  int failures = 0;
  predict_latencies(server.client(), std::chrono::milliseconds(300), failures);  // warm-up
  const double idle_before = p99(predict_latencies(server.client(), std::chrono::milliseconds(2000), failures));

  SlowClients slow(server.port(), kSlowClients);
  ASSERT_EQ(slow.connected(), kSlowClients);
  // Over two rounds of bytes (every 2 s), all of them still open.
  const auto loaded_ms = predict_latencies(server.client(), std::chrono::milliseconds(4500), failures);
  const double loaded = p99(loaded_ms);
  EXPECT_EQ(slow.open(), kSlowClients) << "closed before the head deadline";

  // Each is closed once its head is kHeadTimeoutS old: not before, and soon after.
  EXPECT_TRUE(eventually([&] { return slow.open() == 0; }, std::chrono::milliseconds(kHeadTimeoutS * 1000 + 5000)))
      << slow.open() << " slow clients still open";
  const auto [first, last] = slow.closed_between();
  EXPECT_GE(first, kHeadTimeoutS - 0.5);
  EXPECT_LE(last, kHeadTimeoutS + 3.0);

  const double idle_after = p99(predict_latencies(server.client(), std::chrono::milliseconds(2000), failures));
  EXPECT_EQ(failures, 0);
  const double idle = std::max(idle_before, idle_after);
  EXPECT_LT(loaded, std::max(2 * idle, kLatencyFloorMs))
      << "idle p99 " << idle_before << " ms before, " << idle_after << " ms after; p99 beside " << kSlowClients
      << " slow clients " << loaded << " ms over " << loaded_ms.size() << " predicts";
  std::printf("predict p99: idle %.3f / %.3f ms (before / after), beside %d slow clients %.3f ms (%zu predicts)\n",
              idle_before, idle_after, kSlowClients, loaded, loaded_ms.size());
}

// SIGTERM with a thousand slow clients and a predict waiting in the batcher: the slow ones are
// closed at once, no new connection is taken, the predict is answered, and the process is gone
// within --shutdown_grace_s.
TEST_F(ServeSlowClientsTest, SigtermUnderLoadExitsWithinTheGracePeriod) {
  constexpr int kGraceS = 4;
  const auto batching = dir.path() / "batching.config";
  std::ofstream(batching) << "max_batch_size { value: 64 }\nbatch_timeout_micros { value: 1500000 }\n";
  Server server({"--shutdown_grace_s", std::to_string(kGraceS), "--enable_batching", "--batching_parameters_file",
                 batching.string()},
                log);
  ASSERT_TRUE(server.ready()) << server.log();
  SlowClients slow(server.port(), kSlowClients);
  ASSERT_EQ(slow.connected(), kSlowClients);
  auto in_flight = std::async(std::launch::async, [&] {
    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(30, 0);
    auto r = client.Post(kPredictPath, R"({"instances": [1.0]})", "application/json");
    return r ? std::make_pair(r->status, r->body) : std::make_pair(-1, httplib::to_string(r.error()));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the predict waits 1.5 s for its batch
  const auto sigterm = Clock::now();
  kill(server.pid(), SIGTERM);
  EXPECT_TRUE(eventually([&] { return slow.open() == 0; }, std::chrono::milliseconds(1000)))
      << slow.open() << " slow clients still open 1 s after SIGTERM";
  const auto [status, body] = in_flight.get();
  EXPECT_EQ(status, 200) << body << "\n" << server.log();
  EXPECT_EQ(body, R"({"predictions":[2.5]})");
  const auto code = wait_exit_within(server.pid(), std::chrono::milliseconds(kGraceS * 1000 + 10000));
  const double took = seconds_since(sigterm);
  server.forget();
  ASSERT_TRUE(code) << "serve still running " << took << " s after SIGTERM\n" << server.log();
  EXPECT_EQ(*code, 0) << server.log();
  EXPECT_LT(took, kGraceS + 1.0) << took << " s\n" << server.log();
  EXPECT_NE(server.log().find("draining"), std::string::npos) << server.log();
}

// A request slower than the grace period is cut at its end: the process does not wait for it.
TEST_F(ServeSlowClientsTest, SigtermCutsARequestLongerThanTheGrace) {
  const auto batching = dir.path() / "batching.config";
  // A lone predict waits 8 s for its batch; the grace is 1 s.
  std::ofstream(batching) << "max_batch_size { value: 64 }\nbatch_timeout_micros { value: 8000000 }\n";
  Server server({"--shutdown_grace_s", "1", "--enable_batching", "--batching_parameters_file", batching.string()}, log);
  ASSERT_TRUE(server.ready()) << server.log();
  auto in_flight = std::async(std::launch::async, [&] {
    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(30, 0);
    auto r = client.Post(kPredictPath, R"({"instances": [1.0]})", "application/json");
    return r ? r->status : -1;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto sigterm = Clock::now();
  kill(server.pid(), SIGTERM);
  EXPECT_EQ(in_flight.get(), -1);  // closed unanswered once the grace was over
  EXPECT_LT(seconds_since(sigterm), 2.5);
  const auto code = wait_exit_within(server.pid(), std::chrono::milliseconds(15000));
  const double took = seconds_since(sigterm);
  server.forget();
  ASSERT_TRUE(code) << server.log();
  EXPECT_EQ(*code, 0) << server.log();
  // The grace and a margin for a busy machine's exit, far from the 7.7 s the batch had left.
  EXPECT_LT(took, 3.0) << took << " s\n" << server.log();
}

// --http_max_connections: the connection beyond the cap gets 503 naming the flag and is
// closed; once some close, new ones are served again.
TEST_F(ServeSlowClientsTest, ConnectionsBeyondTheCapGet503) {
  constexpr int kCap = 40;
  Server server({"--http_max_connections", std::to_string(kCap)}, log);
  ASSERT_TRUE(server.ready()) << server.log();
  server.client().stop();  // the readiness probe's connection is not one of the cap
  std::vector<int> held;
  for (int i = 0; i < kCap; ++i) held.push_back(connect_to(server.port()));
  ASSERT_EQ(std::count(held.begin(), held.end(), -1), 0);
  // Accepted in order: once the 503 comes, all kCap are counted.
  std::string reply;
  ASSERT_TRUE(eventually([&] {
    reply = raw_http_exchange(server.port(), "GET /v1/models/half_plus_two HTTP/1.1\r\nHost: x\r\n\r\n");
    return reply.rfind("HTTP/1.1 503", 0) == 0;
  }, std::chrono::milliseconds(5000)))
      << reply;
  EXPECT_NE(reply.find("--http_max_connections"), std::string::npos) << reply;
  for (int i = 0; i < 5; ++i) close(held[i]);
  ASSERT_TRUE(eventually([&] {
    httplib::Client fresh("127.0.0.1", server.port());
    auto r = fresh.Post(kPredictPath, kPredictBody, "application/json");
    return r && r->status == 200;
  }, std::chrono::milliseconds(5000)));
  for (std::size_t i = 5; i < held.size(); ++i) close(held[i]);
}

}  // namespace
}  // namespace tensorhub
