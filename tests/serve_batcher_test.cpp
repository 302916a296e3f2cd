// The Batcher in-process, with a fake servable that records every batch it runs: requests
// merged into one batch and each caller's rows handed back, padding to allowed_batch_sizes,
// separate batches for separate signatures, deadlines and sizes. A "blocker" request holds the
// only worker inside the servable while the requests under test queue up behind it, so which
// requests share a batch never depends on timing.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/serve/batcher.h"
#include "test_util.h"

namespace tensorhub {
namespace {

constexpr float kBlock = -1;  // a request whose first value is this holds the servable

Tensor column(std::vector<float> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return Tensor::from(DType::kF32, {n, 1}, values);
}

std::vector<float> values_of(const Tensor& t) { return {t.as<float>(), t.as<float>() + t.numel()}; }

// y = 10 * x for x F32 [n, 1]; remembers the signature and x of every call.
class RecordingServable final : public Servable {
 public:
  RecordingServable() { signatures_[kDefaultSignature]; signatures_["other"]; }
  const std::map<std::string, Signature>& signatures() const override { return signatures_; }
  std::string source() const override { return "fake"; }

  NamedTensors predict(const std::string& signature, const NamedTensors& inputs) const override {
    const Tensor& x = inputs.at("x");
    std::unique_lock lock(mutex_);
    calls_.push_back({signature, values_of(x)});
    if (x.as<float>()[0] == kBlock) {
      blocked_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return released_; });
    }
    std::vector<float> y = values_of(x);
    for (float& v : y) v *= 10;
    return {{"y", Tensor::from(DType::kF32, x.shape, y)}};
  }

  void wait_until_blocked() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return blocked_; });
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  // (signature, x) of every call so far, in order.
  std::vector<std::pair<std::string, std::vector<float>>> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  mutable std::mutex mutex_;  // guards all below
  mutable std::vector<std::pair<std::string, std::vector<float>>> calls_;
  mutable bool blocked_ = false;
  bool released_ = false;
  mutable std::condition_variable changed_;  // blocked_ or released_ changed
  std::map<std::string, Signature> signatures_;
};

BatchingParameters batching(std::int64_t max_batch_size, std::vector<std::int64_t> allowed_batch_sizes = {},
                            std::int64_t max_enqueued_batches = 100) {
  BatchingParameters p;
  p.max_batch_size = max_batch_size;
  p.allowed_batch_sizes = std::move(allowed_batch_sizes);
  p.max_enqueued_batches = max_enqueued_batches;
  return p;
}

class BatcherTest : public ::testing::Test {
 protected:
  // Starts a batcher with one worker and parks that worker on a blocker request.
  void start(BatchingParameters params) {
    params.num_batch_threads = 1;
    batcher_ = std::make_unique<Batcher>(params);
    blocker_ = submit(kDefaultSignature, {kBlock});
    servable_->wait_until_blocked();
  }
  std::future<NamedTensors> submit(const std::string& signature, std::vector<float> x) {
    return std::async(std::launch::async, [this, signature, x] {
      return batcher_->predict(servable_, signature, {{"x", column(x)}});
    });
  }
  // Waits (without a time limit: the test's own timeout guards it) until `rows` rows queue.
  void wait_for_queued(std::int64_t rows) {
    while (batcher_->queued_rows() != rows) std::this_thread::yield();
  }
  // Lets the blocker finish; the worker then takes what queued behind it.
  void release() {
    servable_->release();
    EXPECT_EQ(values_of(blocker_.get().at("y")), (std::vector<float>{-10}));
  }

  std::shared_ptr<RecordingServable> servable_ = std::make_shared<RecordingServable>();
  std::unique_ptr<Batcher> batcher_;
  std::future<NamedTensors> blocker_;
};

TEST_F(BatcherTest, RequestsOfOneTwoAndOneRowsShareOneBatchAndGetTheirOwnRows) {
  start(batching(4));
  auto a = submit(kDefaultSignature, {1});
  wait_for_queued(1);
  auto b = submit(kDefaultSignature, {2, 3});
  wait_for_queued(3);
  auto c = submit(kDefaultSignature, {4});
  wait_for_queued(4);
  release();
  const NamedTensors ya = a.get(), yb = b.get(), yc = c.get();
  EXPECT_EQ(ya.at("y").shape, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(values_of(ya.at("y")), (std::vector<float>{10}));
  EXPECT_EQ(yb.at("y").shape, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(values_of(yb.at("y")), (std::vector<float>{20, 30}));
  EXPECT_EQ(values_of(yc.at("y")), (std::vector<float>{40}));
  const auto calls = servable_->calls();
  ASSERT_EQ(calls.size(), 2u);  // the blocker, then one batch of the three requests in order
  EXPECT_EQ(calls[1].second, (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(BatcherTest, ABatchIsPaddedToAnAllowedSizeWithTheLastRequestsFirstRow) {
  start(batching(4, {2, 4}));
  auto a = submit(kDefaultSignature, {1});
  wait_for_queued(1);
  auto b = submit(kDefaultSignature, {2, 3});
  wait_for_queued(3);
  release();
  EXPECT_EQ(values_of(a.get().at("y")), (std::vector<float>{10}));
  EXPECT_EQ(values_of(b.get().at("y")), (std::vector<float>{20, 30}));  // the padding row is dropped
  const auto calls = servable_->calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].second, (std::vector<float>{1, 2, 3, 2}));
}

TEST_F(BatcherTest, RequestsForAnotherSignatureOrBeyondTheBatchSizeRunApart) {
  start(batching(2));
  auto a = submit(kDefaultSignature, {1});
  wait_for_queued(1);
  auto b = submit("other", {2});
  wait_for_queued(2);
  auto c = submit(kDefaultSignature, {3, 4});  // 1 + 2 rows would pass max_batch_size 2
  wait_for_queued(4);
  release();
  EXPECT_EQ(values_of(a.get().at("y")), (std::vector<float>{10}));
  EXPECT_EQ(values_of(b.get().at("y")), (std::vector<float>{20}));
  EXPECT_EQ(values_of(c.get().at("y")), (std::vector<float>{30, 40}));
  const auto calls = servable_->calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[1], (std::pair<std::string, std::vector<float>>{kDefaultSignature, {1}}));
  EXPECT_EQ(calls[2], (std::pair<std::string, std::vector<float>>{"other", {2}}));
  EXPECT_EQ(calls[3], (std::pair<std::string, std::vector<float>>{kDefaultSignature, {3, 4}}));
}

TEST_F(BatcherTest, AQueuedRequestPastItsDeadlineLeavesTheQueue) {
  start(batching(4));
  testing::expect_error(
      [&] { batcher_->predict(servable_, kDefaultSignature, {{"x", column({5})}}, std::chrono::steady_clock::now()); },
      ErrorKind::kDeadlineExceeded, {"Deadline exceeded"});
  EXPECT_EQ(batcher_->queued_rows(), 0);
  release();
  EXPECT_EQ(servable_->calls().size(), 1u);  // only the blocker ran
}

TEST_F(BatcherTest, MoreRowsThanTheBatchSizeOrTheQueueHoldsAreRefused) {
  start(batching(2, {}, 1));
  testing::expect_error([&] { batcher_->predict(servable_, kDefaultSignature, {{"x", column({1, 2, 3})}}); },
                        ErrorKind::kInvalidArgument, {"Task size 3 is larger than maximum input batch size 2"});
  auto a = submit(kDefaultSignature, {1, 2});
  wait_for_queued(2);
  testing::expect_error([&] { batcher_->predict(servable_, kDefaultSignature, {{"x", column({3})}}); },
                        ErrorKind::kUnavailable, {"the batch queue is full"});
  release();
  EXPECT_EQ(values_of(a.get().at("y")), (std::vector<float>{10, 20}));
}

// What submit()'s `done` received, once it has been called.
struct Answer {
  std::promise<std::pair<NamedTensors, std::exception_ptr>> promise;
  std::atomic<int> calls{0};
  Batcher::Done done() {
    return [this](NamedTensors outputs, std::exception_ptr error) {
      if (calls++ == 0) promise.set_value({std::move(outputs), error});
    };
  }
};

TEST_F(BatcherTest, SubmittedCallsShareABatchWithBlockingOnesAndEachDoneGetsItsRows) {
  start(batching(4));
  Answer a, c;
  batcher_->submit(servable_, kDefaultSignature, {{"x", column({1})}}, std::chrono::steady_clock::time_point::max(),
                   a.done());
  auto b = submit(kDefaultSignature, {2, 3});
  wait_for_queued(3);
  batcher_->submit(servable_, kDefaultSignature, {{"x", column({4})}}, std::chrono::steady_clock::time_point::max(),
                   c.done());
  EXPECT_EQ(a.calls, 0);  // queued behind the blocker: nothing answered yet
  release();
  auto [ya, ea] = a.promise.get_future().get();
  auto [yc, ec] = c.promise.get_future().get();
  EXPECT_FALSE(ea);
  EXPECT_FALSE(ec);
  EXPECT_EQ(values_of(ya.at("y")), (std::vector<float>{10}));
  EXPECT_EQ(values_of(b.get().at("y")), (std::vector<float>{20, 30}));
  EXPECT_EQ(values_of(yc.at("y")), (std::vector<float>{40}));
  EXPECT_EQ(a.calls, 1);
  EXPECT_EQ(c.calls, 1);
  const auto calls = servable_->calls();
  ASSERT_EQ(calls.size(), 2u);  // the blocker, then one batch of the three
  EXPECT_EQ(calls[1].second, (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(BatcherTest, ASubmittedCallPastItsDeadlineIsAnsweredDeadlineExceededAndNotRun) {
  start(batching(4));
  Answer late, on_time;
  batcher_->submit(servable_, kDefaultSignature, {{"x", column({5})}}, std::chrono::steady_clock::now(), late.done());
  batcher_->submit(servable_, kDefaultSignature, {{"x", column({6})}}, std::chrono::steady_clock::time_point::max(),
                   on_time.done());
  wait_for_queued(2);
  release();
  auto [y_late, e_late] = late.promise.get_future().get();
  ASSERT_TRUE(e_late);
  testing::expect_error([&] { std::rethrow_exception(e_late); }, ErrorKind::kDeadlineExceeded, {"Deadline exceeded"});
  EXPECT_TRUE(y_late.empty());
  EXPECT_EQ(values_of(on_time.promise.get_future().get().first.at("y")), (std::vector<float>{60}));
  const auto calls = servable_->calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].second, (std::vector<float>{6}));  // the late call never ran
}

TEST_F(BatcherTest, SubmitRefusesTooManyRowsAndAFullQueueAtOnceWithoutCallingDone) {
  start(batching(2, {}, 1));
  Answer too_big, full, queued;
  testing::expect_error(
      [&] {
        batcher_->submit(servable_, kDefaultSignature, {{"x", column({1, 2, 3})}},
                         std::chrono::steady_clock::time_point::max(), too_big.done());
      },
      ErrorKind::kInvalidArgument, {"Task size 3 is larger than maximum input batch size 2"});
  batcher_->submit(servable_, kDefaultSignature, {{"x", column({1, 2})}}, std::chrono::steady_clock::time_point::max(),
                   queued.done());
  testing::expect_error(
      [&] {
        batcher_->submit(servable_, kDefaultSignature, {{"x", column({3})}},
                         std::chrono::steady_clock::time_point::max(), full.done());
      },
      ErrorKind::kUnavailable, {"the batch queue is full"});
  release();
  EXPECT_EQ(values_of(queued.promise.get_future().get().first.at("y")), (std::vector<float>{10, 20}));
  batcher_.reset();  // every worker joined: a late `done` would have run by now
  EXPECT_EQ(too_big.calls, 0);
  EXPECT_EQ(full.calls, 0);
}

}  // namespace
}  // namespace tensorhub
