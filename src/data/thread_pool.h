// The data pipeline's thread pool: a fixed set of workers running short tasks (a map
// function on one element, a block of reads from one interleaved input).
//
// A thread that waits for its own tasks (ThreadPool::wait, wait_until) runs those that no worker
// has started yet itself, so a task that waits for tasks (a parallel map read inside a parallel
// interleave) cannot deadlock the pool however few workers it has. It never runs anyone else's
// task: such a task could block on something (a prefetch buffer) that only the waiter's caller
// would fill. Long-lived loops (a prefetch producer) do not belong here: they own a thread of
// their own, as tf.data's prefetch iterator does.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "tensorhub/core/mutex.h"

namespace tensorhub {

class ThreadPool {
 public:
  /// State of one submitted task; compare with ThreadPool::done / wait.
  struct Task {
    std::function<void()> fn;  ///< released (captures destroyed) before `done` is set
    // Guarded by the pool's mutex; not annotated, since a Task has no way to name it.
    bool started = false;      ///< guarded by the pool's mutex
    bool done = false;         ///< guarded by the pool's mutex
    std::exception_ptr error;  ///< what `fn` threw, if anything
  };
  using TaskHandle = std::shared_ptr<Task>;

  /// Starts `threads` workers; 0 means std::thread::hardware_concurrency() (at least 1).
  explicit ThreadPool(std::size_t threads = 0);
  /// Runs every task still queued, then joins the workers. Must not run on a worker.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Queues `fn`. It runs on a worker or on a thread inside wait()/wait_until().
  TaskHandle submit(std::function<void()> fn);

  /// Blocks until `task` is done (running it here if no worker has started it); rethrows
  /// what it threw.
  void wait(const TaskHandle& task);

  /// Blocks until `ready()` is true, running here those of `mine` that no worker has started.
  /// `ready` is evaluated with the pool's mutex held, after every task completes: it may read
  /// Task::done, nothing that needs another lock.
  void wait_until(const std::function<bool()>& ready, const std::vector<TaskHandle>& mine);

  /// Number of worker threads.
  std::size_t size() const noexcept { return workers_.size(); }

  /// The process-wide pool every pipeline shares unless its options ask for a private one.
  /// Sized by set_shared_threads() if called first, else TENSORHUB_DATA_THREADS if set, else
  /// hardware_concurrency.
  static ThreadPool& shared();
  /// Sets the shared pool's size before its first use. Throws FailedPrecondition once the
  /// shared pool exists, InvalidArgument for 0.
  static void set_shared_threads(std::size_t threads);

 private:
  void worker_loop() TENSORHUB_LOCKS_EXCLUDED(mu_);
  void run(const TaskHandle& task) TENSORHUB_LOCKS_EXCLUDED(mu_);
  // Removes an unstarted task of `mine` from the queue and marks it started; null if none.
  TaskHandle claim(const std::vector<TaskHandle>& mine) TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  std::condition_variable work_cv_;  // a task queued, or stopping: wakes a worker
  std::condition_variable done_cv_;  // a task done: wakes the threads in wait_until
  std::size_t waiters_ TENSORHUB_GUARDED_BY(mu_) = 0;  // threads in wait_until (no broadcast without one)
  std::deque<TaskHandle> queue_ TENSORHUB_GUARDED_BY(mu_);
  bool stopping_ TENSORHUB_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace tensorhub
