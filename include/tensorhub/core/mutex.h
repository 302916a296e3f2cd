// Mutexes that Clang's Thread Safety Analysis can check: tensorhub::Mutex (std::mutex),
// MutexLock, SharedMutex (std::shared_mutex), WriterMutexLock and ReaderMutexLock, and the
// macros that say which mutex guards which member (TENSORHUB_GUARDED_BY) and which lock a
// function needs held (TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED) or not held
// (TENSORHUB_LOCKS_EXCLUDED).
// scripts/check-thread-safety compiles the libraries with clang++ -Wthread-safety
// -Werror=thread-safety, so that a member read or written without its lock is a build error
// instead of a data race found in production.
//
// Sources: Clang's Thread Safety Analysis documentation
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), whose attributes the macros below
// expand to, and abseil's absl/base/thread_annotations.h and absl::Mutex, whose macro names
// and lock-class shapes (MutexLock, ReaderMutexLock, WriterMutexLock) these follow.
//
// Why macros of our own instead of including abseil's (the same attributes under the same
// names, prefixed TENSORHUB_ rather than ABSL_):
//  - tensorhub-serve-lite (src/lite/) is also cross-compiled for arm64 (cmake/lite-arm64/),
//    whose include paths name its header-only libraries one by one, and abseil is not among
//    them; absl/base/thread_annotations.h is found there only because Debian's cross g++
//    searches this machine's /usr/include last, which cmake/lite-arm64 does not count on;
//  - Debian's abseil (20220623) thread_annotations.h also defines the unprefixed legacy macros
//    (GUARDED_BY, LOCKABLE, UNLOCK_FUNCTION, NO_THREAD_SAFETY_ANALYSIS, ...) through
//    absl/base/internal/thread_annotations.h, which would reach every file including this one.
// Under GCC, which has no such analysis, every macro expands to nothing.
//
// Usage:
//   class Counter {
//    public:
//     void add() TENSORHUB_LOCKS_EXCLUDED(mutex_) { MutexLock lock(mutex_); ++n_; }
//    private:
//     Mutex mutex_;
//     int n_ TENSORHUB_GUARDED_BY(mutex_) = 0;
//   };
// Waiting on a std::condition_variable goes through the Mutex (mutex_.wait(cv_)), in a
// `while (!condition) mutex_.wait(cv_);` loop: a predicate lambda is analysed as a function of
// its own, which holds no lock, so reading a guarded member there would be reported.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

// The attribute `x` under Clang, nothing elsewhere; the macros below are built on it.
#if defined(__clang__)
#define TENSORHUB_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TENSORHUB_THREAD_ANNOTATION(x)
#endif

/// On a data member or global: it is read and written only with mutex `x` held (shared for
/// reads, exclusive for writes). abseil: ABSL_GUARDED_BY.
#define TENSORHUB_GUARDED_BY(x) TENSORHUB_THREAD_ANNOTATION(guarded_by(x))
/// On a pointer member: what it points to is accessed only with `x` held (the pointer itself
/// is not guarded). abseil: ABSL_PT_GUARDED_BY.
#define TENSORHUB_PT_GUARDED_BY(x) TENSORHUB_THREAD_ANNOTATION(pt_guarded_by(x))
/// On a function: callers hold these mutexes exclusively. abseil: ABSL_EXCLUSIVE_LOCKS_REQUIRED.
#define TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(...) TENSORHUB_THREAD_ANNOTATION(exclusive_locks_required(__VA_ARGS__))
/// On a function: callers hold these mutexes at least shared. abseil: ABSL_SHARED_LOCKS_REQUIRED.
#define TENSORHUB_SHARED_LOCKS_REQUIRED(...) TENSORHUB_THREAD_ANNOTATION(shared_locks_required(__VA_ARGS__))
/// On a function: callers must not hold these mutexes (it takes them itself; a caller holding
/// one would deadlock). abseil: ABSL_LOCKS_EXCLUDED.
#define TENSORHUB_LOCKS_EXCLUDED(...) TENSORHUB_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
/// On a class: its objects are mutexes (capabilities). abseil: ABSL_LOCKABLE.
#define TENSORHUB_LOCKABLE TENSORHUB_THREAD_ANNOTATION(lockable)
/// On a class: its objects hold a lock from construction to destruction (RAII). abseil:
/// ABSL_SCOPED_LOCKABLE.
#define TENSORHUB_SCOPED_LOCKABLE TENSORHUB_THREAD_ANNOTATION(scoped_lockable)
/// On a function: it takes these mutexes (none named: `this`) exclusively. abseil:
/// ABSL_EXCLUSIVE_LOCK_FUNCTION.
#define TENSORHUB_EXCLUSIVE_LOCK_FUNCTION(...) TENSORHUB_THREAD_ANNOTATION(exclusive_lock_function(__VA_ARGS__))
/// On a function: it takes these mutexes (none named: `this`) shared. abseil:
/// ABSL_SHARED_LOCK_FUNCTION.
#define TENSORHUB_SHARED_LOCK_FUNCTION(...) TENSORHUB_THREAD_ANNOTATION(shared_lock_function(__VA_ARGS__))
/// On a function: it releases these mutexes (none named: `this`), however they were held.
/// abseil: ABSL_UNLOCK_FUNCTION.
#define TENSORHUB_UNLOCK_FUNCTION(...) TENSORHUB_THREAD_ANNOTATION(unlock_function(__VA_ARGS__))
/// On a function returning bool: (result[, mutexes]) it took the mutexes (none named: `this`)
/// exclusively when it returned `result`. abseil: ABSL_EXCLUSIVE_TRYLOCK_FUNCTION.
#define TENSORHUB_EXCLUSIVE_TRYLOCK_FUNCTION(...) TENSORHUB_THREAD_ANNOTATION(exclusive_trylock_function(__VA_ARGS__))
/// On a function returning bool: (result[, mutexes]) it took the mutexes (none named: `this`)
/// shared when it returned `result`. abseil: ABSL_SHARED_TRYLOCK_FUNCTION.
#define TENSORHUB_SHARED_TRYLOCK_FUNCTION(...) TENSORHUB_THREAD_ANNOTATION(shared_trylock_function(__VA_ARGS__))

namespace tensorhub {

/// A std::mutex the analysis knows as a capability: members annotated TENSORHUB_GUARDED_BY it
/// may be touched only between lock() and unlock() (normally: while a MutexLock lives).
/// Thread safety: as std::mutex; not recursive.
class TENSORHUB_LOCKABLE Mutex {
 public:
  constexpr Mutex() noexcept = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  /// Blocks until this thread holds the mutex. Prefer MutexLock.
  void lock() TENSORHUB_EXCLUSIVE_LOCK_FUNCTION() { mutex_.lock(); }
  /// Releases the mutex, which this thread holds.
  void unlock() TENSORHUB_UNLOCK_FUNCTION() { mutex_.unlock(); }
  /// Takes the mutex if it is free; true when taken.
  bool try_lock() TENSORHUB_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mutex_.try_lock(); }

  /// std::condition_variable::wait on this mutex, which the caller holds (through a
  /// MutexLock): releases it while asleep, holds it again on return. Wakes spuriously too,
  /// so call it in a `while (!condition)` loop.
  void wait(std::condition_variable& cv) TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(this) {
    Adopted held(mutex_);
    cv.wait(held.lock);
  }

  /// wait() for at most `timeout`: std::cv_status::timeout when it passed.
  template <typename Rep, typename Period>
  std::cv_status wait_for(std::condition_variable& cv, const std::chrono::duration<Rep, Period>& timeout)
      TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(this) {
    Adopted held(mutex_);
    return cv.wait_for(held.lock, timeout);
  }

  /// wait() until `deadline`: std::cv_status::timeout when it passed.
  template <typename Clock, typename Duration>
  std::cv_status wait_until(std::condition_variable& cv, const std::chrono::time_point<Clock, Duration>& deadline)
      TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(this) {
    Adopted held(mutex_);
    return cv.wait_until(held.lock, deadline);
  }

 private:
  // The caller's lock of mutex_ as the std::unique_lock a condition_variable wants: adopted
  // for the wait and given back (released, not unlocked) afterwards, even if the wait throws,
  // so that the caller's MutexLock still owns it.
  struct Adopted {
    explicit Adopted(std::mutex& m) : lock(m, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    Adopted(const Adopted&) = delete;
    Adopted& operator=(const Adopted&) = delete;
    std::unique_lock<std::mutex> lock;
  };

  std::mutex mutex_;
};

/// Holds a Mutex from construction to destruction, as std::lock_guard; unlock() and lock()
/// release and take it again mid-scope (around slow work that must not hold it), and the
/// analysis follows both. Thread safety: one object belongs to one thread.
class TENSORHUB_SCOPED_LOCKABLE MutexLock {
 public:
  /// Takes `mutex`; it must outlive this object.
  explicit MutexLock(Mutex& mutex) TENSORHUB_EXCLUSIVE_LOCK_FUNCTION(mutex) : mutex_(mutex) { mutex_.lock(); }
  /// Releases the mutex if held.
  ~MutexLock() TENSORHUB_UNLOCK_FUNCTION() {
    if (held_) mutex_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  /// Releases the mutex before the end of the scope. Must be held.
  void unlock() TENSORHUB_UNLOCK_FUNCTION() {
    mutex_.unlock();
    held_ = false;
  }
  /// Takes the mutex again after unlock().
  void lock() TENSORHUB_EXCLUSIVE_LOCK_FUNCTION() {
    mutex_.lock();
    held_ = true;
  }

 private:
  Mutex& mutex_;
  bool held_ = true;
};

/// A std::shared_mutex the analysis knows as a capability: many readers (ReaderMutexLock)
/// or one writer (WriterMutexLock) at a time. Members annotated TENSORHUB_GUARDED_BY it may be
/// read under either lock and written under the writer's only. Thread safety: as
/// std::shared_mutex.
class TENSORHUB_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  /// Takes the mutex exclusively (a writer). Prefer WriterMutexLock.
  void lock() TENSORHUB_EXCLUSIVE_LOCK_FUNCTION() { mutex_.lock(); }
  /// Releases the exclusive hold.
  void unlock() TENSORHUB_UNLOCK_FUNCTION() { mutex_.unlock(); }
  /// Takes the mutex exclusively if it is free; true when taken.
  bool try_lock() TENSORHUB_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mutex_.try_lock(); }
  /// Takes the mutex shared (a reader). Prefer ReaderMutexLock.
  void lock_shared() TENSORHUB_SHARED_LOCK_FUNCTION() { mutex_.lock_shared(); }
  /// Releases a shared hold.
  void unlock_shared() TENSORHUB_UNLOCK_FUNCTION() { mutex_.unlock_shared(); }
  /// Takes the mutex shared unless a writer holds it; true when taken.
  bool try_lock_shared() TENSORHUB_SHARED_TRYLOCK_FUNCTION(true) { return mutex_.try_lock_shared(); }

 private:
  std::shared_mutex mutex_;
};

/// Holds a SharedMutex exclusively from construction to destruction (std::unique_lock on a
/// std::shared_mutex). Thread safety: one object belongs to one thread.
class TENSORHUB_SCOPED_LOCKABLE WriterMutexLock {
 public:
  /// Takes `mutex` exclusively; it must outlive this object.
  explicit WriterMutexLock(SharedMutex& mutex) TENSORHUB_EXCLUSIVE_LOCK_FUNCTION(mutex) : mutex_(mutex) {
    mutex_.lock();
  }
  ~WriterMutexLock() TENSORHUB_UNLOCK_FUNCTION() { mutex_.unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex& mutex_;
};

/// Holds a SharedMutex shared from construction to destruction (std::shared_lock). Thread
/// safety: one object belongs to one thread.
class TENSORHUB_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  /// Takes `mutex` shared; it must outlive this object.
  explicit ReaderMutexLock(SharedMutex& mutex) TENSORHUB_SHARED_LOCK_FUNCTION(mutex) : mutex_(mutex) {
    mutex_.lock_shared();
  }
  ~ReaderMutexLock() TENSORHUB_UNLOCK_FUNCTION() { mutex_.unlock_shared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex& mutex_;
};

}  // namespace tensorhub
