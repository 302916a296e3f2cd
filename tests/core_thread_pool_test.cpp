// core/thread_pool.h: what its two users rely on. The gRPC server: tasks run in submission
// order on one worker, and the destructor runs every queued task before it joins (each answers
// a call). The data pipeline: wait() rethrows a task's exception, and a thread waiting for its
// own unstarted task runs it itself, so nested waits finish even with every worker busy.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tensorhub/core/thread_pool.h"

namespace tensorhub {
namespace {

TEST(ThreadPool, OneWorkerRunsTasksInSubmissionOrder) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1u);
  std::vector<int> order;  // only the one worker writes it
  std::vector<ThreadPool::TaskHandle> tasks;
  for (int i = 0; i < 100; ++i) tasks.push_back(pool.submit([&order, i] { order.push_back(i); }));
  for (const auto& t : tasks) pool.wait(t);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(ThreadPool, DestructorRunsEveryQueuedTaskBeforeJoining) {
  std::atomic<int> ran{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::thread opener;
  {
    ThreadPool pool(2);
    // Both workers blocked, so the next 50 tasks are still queued when the destructor starts
    // (the opener releases the workers 50 ms later).
    for (int i = 0; i < 2; ++i) pool.submit([released, &ran] { released.wait(); ++ran; });
    for (int i = 0; i < 50; ++i) pool.submit([&ran] { ++ran; });
    opener = std::thread([&release] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release.set_value();
    });
  }
  opener.join();
  EXPECT_EQ(ran.load(), 52);
}

TEST(ThreadPool, WaitRethrowsWhatTheTaskThrew) {
  ThreadPool pool(2);
  auto bad = pool.submit([] { throw std::runtime_error("task failed: record 7"); });
  try {
    pool.wait(bad);
    FAIL() << "wait did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "task failed: record 7");
  }
  auto good = pool.submit([] {});
  EXPECT_NO_THROW(pool.wait(good));
}

TEST(ThreadPool, AWaiterRunsItsOwnUnstartedTaskWhenEveryWorkerIsBusy) {
  ThreadPool pool(1);
  std::atomic<bool> inner_ran{false};
  // The only worker runs `outer`, which submits `inner` and waits for it: without help-while-
  // waiting no thread would ever start `inner`.
  auto outer = pool.submit([&] {
    auto inner = pool.submit([&] { inner_ran = true; });
    pool.wait(inner);
  });
  pool.wait(outer);
  EXPECT_TRUE(inner_ran.load());
}

TEST(ThreadPool, ZeroThreadsMeansOnePerCore) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace tensorhub
