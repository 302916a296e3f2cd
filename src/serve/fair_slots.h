// FairSlots: a fixed set of interchangeable slots (a model's replicas) handed out first come,
// first served. A servable keeps one replica per core; when more callers than replicas arrive
// (32 REST connections, each on its own thread, for 2 replicas), a plain std::mutex per replica
// lets a caller that just released one take it again before those already waiting, so some
// requests wait many turns (the unbatched REST p99 of 35-56 ms against a p50 of 4 ms on the
// MLP). Here a freed slot goes straight to the longest waiter, with one wake-up, as a mutex's
// hand-off costs.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <optional>
#include <vector>

#include "tensorhub/core/mutex.h"

namespace tensorhub::detail {

class FairSlots {
 public:
  /// `n` slots, numbered 0 .. n-1, all free. n must be at least 1.
  explicit FairSlots(std::size_t n) {
    for (std::size_t i = n; i-- > 0;) free_.push_back(i);
  }
  FairSlots(const FairSlots&) = delete;
  FairSlots& operator=(const FairSlots&) = delete;

  /// A slot held until destruction (or release()); returns it to the FairSlots it came from.
  class Lease {
   public:
    Lease(FairSlots& slots, std::size_t index) : slots_(&slots), index_(index) {}
    Lease(Lease&& other) noexcept : slots_(other.slots_), index_(other.index_) { other.slots_ = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease() { release(); }
    /// The slot's number, 0 .. n-1.
    std::size_t index() const { return index_; }
    /// Gives the slot back now (to the longest waiter, if any).
    void release() {
      if (slots_) slots_->give_back(index_);
      slots_ = nullptr;
    }

   private:
    FairSlots* slots_;
    std::size_t index_;
  };

  /// A free slot at once when one is free and nobody waits; else waits, behind every caller
  /// already waiting, until one is handed over. The most recently freed slot is taken first
  /// (its replica's weights are the likeliest to be in cache).
  Lease acquire() TENSORHUB_LOCKS_EXCLUDED(mutex_) {
    MutexLock lock(mutex_);
    if (!free_.empty() && waiters_.empty()) {
      const std::size_t i = free_.back();
      free_.pop_back();
      return Lease(*this, i);
    }
    Waiter me;
    waiters_.push_back(&me);
    while (!me.slot) mutex_.wait(me.cv);
    return Lease(*this, *me.slot);
  }

  /// How many callers wait for a slot now.
  std::size_t waiting() const TENSORHUB_LOCKS_EXCLUDED(mutex_) {
    MutexLock lock(mutex_);
    return waiters_.size();
  }

 private:
  struct Waiter {
    std::condition_variable cv;
    std::optional<std::size_t> slot;  // set by give_back, under mutex_
  };

  void give_back(std::size_t slot) TENSORHUB_LOCKS_EXCLUDED(mutex_) {
    MutexLock lock(mutex_);
    if (waiters_.empty()) {
      free_.push_back(slot);
      return;
    }
    Waiter* next = waiters_.front();
    waiters_.pop_front();
    next->slot = slot;
    // Notified under the lock: the waiter (on its own stack) cannot see its slot, return and
    // destroy its condition variable before this call is done with it.
    next->cv.notify_one();
  }

  mutable Mutex mutex_;
  std::vector<std::size_t> free_ TENSORHUB_GUARDED_BY(mutex_);  // a stack: the last freed on top
  // In arrival order; each waits on its own stack until give_back hands it a slot.
  std::deque<Waiter*> waiters_ TENSORHUB_GUARDED_BY(mutex_);
};

}  // namespace tensorhub::detail
