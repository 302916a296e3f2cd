// ThreadPool: workers plus help-while-waiting (see the header).
#include "tensorhub/core/thread_pool.h"

#include <algorithm>

namespace tensorhub {

ThreadPool::ThreadPool(std::size_t threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadPool::TaskHandle ThreadPool::submit(std::function<void()> fn) {
  auto task = std::make_shared<Task>();
  task->fn = std::move(fn);
  {
    MutexLock lock(mu_);
    queue_.push_back(task);
  }
  work_cv_.notify_one();
  return task;
}

void ThreadPool::run(const TaskHandle& task) {
  std::exception_ptr error;
  try {
    task->fn();
  } catch (...) {
    error = std::current_exception();
  }
  task->fn = nullptr;  // destroy the captures before anyone sees `done`
  bool wake = false;
  {
    MutexLock lock(mu_);
    task->error = error;
    task->done = true;
    wake = waiters_ > 0;
  }
  if (wake) done_cv_.notify_all();
}

void ThreadPool::worker_loop() {
  MutexLock lock(mu_);
  for (;;) {
    while (!stopping_ && queue_.empty()) mu_.wait(work_cv_);
    if (queue_.empty()) return;  // stopping, and every queued task has run
    auto task = std::move(queue_.front());
    queue_.pop_front();
    task->started = true;
    lock.unlock();
    run(task);
    lock.lock();
  }
}

ThreadPool::TaskHandle ThreadPool::claim(const std::vector<TaskHandle>& mine) {
  for (const auto& task : mine) {
    if (!task || task->started) continue;
    auto it = std::find(queue_.begin(), queue_.end(), task);
    if (it == queue_.end()) continue;
    queue_.erase(it);
    task->started = true;
    return task;
  }
  return nullptr;
}

void ThreadPool::wait_until(const std::function<bool()>& ready, const std::vector<TaskHandle>& mine) {
  MutexLock lock(mu_);
  while (!ready()) {
    if (auto task = claim(mine)) {  // ours and not started: run it rather than wait for a worker
      lock.unlock();
      run(task);
      lock.lock();
      continue;
    }
    ++waiters_;
    mu_.wait(done_cv_);
    --waiters_;
  }
}

void ThreadPool::wait(const TaskHandle& task) {
  wait_until([&] { return task->done; }, {task});
  if (task->error) std::rethrow_exception(task->error);
}

}  // namespace tensorhub
