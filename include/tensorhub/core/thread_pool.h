// A fixed set of worker threads running short tasks in the order they were submitted, one
// class for every module that needs one: the data pipeline's map functions and interleaved
// reads (data/dataset_parallel.cpp; data/ keeps one process-wide pool, dataset.cpp), and the
// gRPC server's unbatched Predicts (serve/grpc_server.cpp: one worker per core, so that gRPC's
// own threads never wait on a model).
//
// The queue is unbounded: submit() never blocks and never refuses. Callers bound their own
// work (a parallel map keeps num_parallel_calls tasks in flight; the gRPC server takes one
// task per call gRPC admits). The destructor runs every task still queued, then joins the
// workers: a submitted task always runs (the gRPC server relies on it to answer every call
// it accepted).
//
// A thread that waits for its own tasks (ThreadPool::wait, wait_until) runs those that no worker
// has started yet itself, so a task that waits for tasks (a parallel map read inside a parallel
// interleave) cannot deadlock the pool however few workers it has. It never runs anyone else's
// task: such a task could block on something (a prefetch buffer) that only the waiter's caller
// would fill. Long-lived loops (a prefetch producer) do not belong here: they own a thread of
// their own, as tf.data's prefetch iterator does.
//
// Thread safety: every method may be called from any thread, the destructor from none of the
// pool's workers. The pool's state is guarded by one Mutex (core/mutex.h, checked by
// scripts/check-thread-safety).
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

/// Workers running submitted tasks in order; see the file comment.
class ThreadPool {
 public:
  /// State of one submitted task: wait() for it, or read `done` in wait_until's `ready`.
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

  /// Queues `fn`; never blocks. It runs on a worker or on a thread inside wait()/wait_until().
  /// What it throws is kept in the Task for wait() to rethrow: a task nobody waits for should
  /// catch its own exceptions, else they are dropped. Throws std::bad_alloc only.
  TaskHandle submit(std::function<void()> fn);

  /// Blocks until `task` (one of this pool's) is done, running it here if no worker has
  /// started it; rethrows what it threw.
  void wait(const TaskHandle& task);

  /// Blocks until `ready()` is true, running here those of `mine` that no worker has started.
  /// `ready` is evaluated with the pool's mutex held, after every task completes: it may read
  /// Task::done, nothing that needs another lock.
  void wait_until(const std::function<bool()>& ready, const std::vector<TaskHandle>& mine);

  /// Number of worker threads.
  std::size_t size() const noexcept { return workers_.size(); }

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
