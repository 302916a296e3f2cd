// Named leases (tune/search_lease.h: acquire_lease / renew_lease / release_lease), what keeps a search to
// one tuner, on every backend: taken atomically by one of many contenders, refused to others
// while held, free again when released or expired, and a holder that lost its lease knows.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "backend_factory.h"
#include "tensorhub/store/backend.h"
#include "tensorhub/tune/search_lease.h"

namespace tensorhub {
namespace {

using testing::BackendParam;
using testing::TestDatabase;

constexpr std::int64_t kMinute = 60'000'000;  // microseconds

class LeaseTest : public testing::BackendTest {
 protected:
  void set_up() override { b_ = open_backend(db_->uri()); }
  std::unique_ptr<Backend> b_;
};

TEST_P(LeaseTest, HeldLeasesAreRefusedToOthersUntilReleased) {
  const Lease mine = acquire_lease(b_->sql(), "p", "tune/s", "alice", kMinute);
  EXPECT_EQ(mine.owner, "alice");
  EXPECT_EQ(mine.remaining_us, kMinute);

  const Lease refused = acquire_lease(b_->sql(), "p", "tune/s", "bob", kMinute);
  EXPECT_EQ(refused.owner, "alice");
  EXPECT_GT(refused.remaining_us, kMinute - 10'000'000);
  EXPECT_LE(refused.remaining_us, kMinute);
  EXPECT_FALSE(renew_lease(b_->sql(), "p", "tune/s", "bob", kMinute));
  release_lease(b_->sql(), "p", "tune/s", "bob");  // not bob's: nothing happens
  EXPECT_EQ(acquire_lease(b_->sql(), "p", "tune/s", "bob", kMinute).owner, "alice");

  // Other names and projects are other leases.
  EXPECT_EQ(acquire_lease(b_->sql(), "p", "tune/t", "bob", kMinute).owner, "bob");
  EXPECT_EQ(acquire_lease(b_->sql(), "q", "tune/s", "bob", kMinute).owner, "bob");

  EXPECT_TRUE(renew_lease(b_->sql(), "p", "tune/s", "alice", kMinute));
  EXPECT_EQ(acquire_lease(b_->sql(), "p", "tune/s", "alice", kMinute).owner, "alice");  // the holder again: extended
  release_lease(b_->sql(), "p", "tune/s", "alice");
  EXPECT_EQ(acquire_lease(b_->sql(), "p", "tune/s", "bob", kMinute).owner, "bob");
  EXPECT_FALSE(renew_lease(b_->sql(), "p", "tune/s", "alice", kMinute));  // alice released it: bob's now
}

TEST_P(LeaseTest, AnExpiredLeaseGoesToTheNextOwnerAndTheOldHolderLearnsItLostIt) {
  ASSERT_EQ(acquire_lease(b_->sql(), "p", "tune/s", "alice", 200'000).owner, "alice");
  // Expired but not taken: still alice's, and she may renew it.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(renew_lease(b_->sql(), "p", "tune/s", "alice", 200'000));
  EXPECT_EQ(acquire_lease(b_->sql(), "p", "tune/s", "bob", kMinute).owner, "alice");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Lease taken = acquire_lease(b_->sql(), "p", "tune/s", "bob", kMinute);
  EXPECT_EQ(taken.owner, "bob");
  EXPECT_FALSE(renew_lease(b_->sql(), "p", "tune/s", "alice", kMinute));
  release_lease(b_->sql(), "p", "tune/s", "alice");  // too late: bob keeps it
  EXPECT_EQ(acquire_lease(b_->sql(), "p", "tune/s", "carol", kMinute).owner, "bob");
}

TEST_P(LeaseTest, OfManyContendersAtOnceExactlyOneGetsTheLease) {
  constexpr int kContenders = 8;
  std::vector<std::unique_ptr<Backend>> connections;
  for (int i = 0; i < kContenders; ++i) connections.push_back(open_backend(db_->uri()));
  std::atomic<int> ready{0};
  std::vector<std::string> seen(kContenders);
  std::vector<std::thread> threads;
  for (int i = 0; i < kContenders; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (ready.load() < kContenders) std::this_thread::yield();
      seen[i] = acquire_lease(connections[i]->sql(), "p", "tune/race", "owner" + std::to_string(i), kMinute).owner;
    });
  }
  for (auto& t : threads) t.join();
  // Everyone saw the same single winner.
  int winners = 0;
  for (int i = 0; i < kContenders; ++i) {
    EXPECT_EQ(seen[i], seen[0]) << "contender " << i;
    winners += seen[i] == "owner" + std::to_string(i);
  }
  EXPECT_EQ(winners, 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, LeaseTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
