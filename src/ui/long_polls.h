// The dashboard's long polls without a thread each: /api/tasks?since=V&wait=S and
// /api/searches/<name>?since=V&wait=S answer when the version the client has (V) is no longer
// the current one, or after S seconds. A request whose version is current is parked here as a
// Waiter, which holds only its HttpResponder (the connection stays on the event loop); ONE
// watcher thread, with a Hub of its own, sleeps in the queue's wait_for_change (woken at once
// by PostgreSQL's NOTIFY; SQLite, which has none, is looked at every 0.2 s), computes each
// waited-for answer once (the task list every look, a search at least every 0.5 s, as the
// thread-per-request code did) and sends it to every waiter whose version it no longer is or
// whose time ran out. Waiters whose client left (HttpResponder::abandoned) are dropped. A
// thousand open Tasks tabs thus cost a thousand sockets and one query per look, not a thousand
// threads and a thousand queries.
//
// Thread safety: add(), stop() and size() from any thread; the constructor starts the watcher,
// the destructor (stop() and join) from no watcher.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tensorhub/core/http_server.h"
#include "tensorhub/core/json.h"
#include "tensorhub/core/mutex.h"

namespace tensorhub {

class Hub;

class LongPolls {
 public:
  /// The current answer of `topic` ("" the task list, else a search's name) read from `hub`: a
  /// JSON object with a "version" string. May throw (an Error's kind sets the HTTP status).
  using Current = std::function<Json(Hub& hub, const std::string& topic)>;
  /// Opens a Hub for the watcher (again after one failed). May throw.
  using OpenHub = std::function<std::unique_ptr<Hub>()>;

  /// One parked request.
  struct Waiter {
    std::string topic;  ///< "" the task list, else a search's name
    std::string since;  ///< the version the client has
    std::chrono::steady_clock::time_point deadline;  ///< answered as it is at this time at the latest
    bool gzip = false;  ///< the client accepts gzip (http_reply.h)
    HttpResponder responder;
  };

  /// How often the watcher looks when no notification wakes it, and at most how often it
  /// reads a search again (its epoch reports send no notification).
  static constexpr double kLookSeconds = 0.2;
  static constexpr double kSearchSeconds = 0.5;

  /// Starts the watcher thread (idle, without a hub, while nobody waits).
  LongPolls(OpenHub open_hub, Current current);
  /// stop(), then joins the watcher.
  ~LongPolls();
  LongPolls(const LongPolls&) = delete;
  LongPolls& operator=(const LongPolls&) = delete;

  /// Parks `waiter`; false (and nothing parked) once stop() was called: the caller answers.
  bool add(Waiter waiter) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  /// Makes the watcher answer every parked waiter with the current answer and refuse later
  /// add()s; returns at once (the server's grace period covers the answers).
  void stop() TENSORHUB_LOCKS_EXCLUDED(mutex_);
  /// How many requests are parked now.
  std::size_t size() const TENSORHUB_LOCKS_EXCLUDED(mutex_);

 private:
  using Clock = std::chrono::steady_clock;
  void watch() TENSORHUB_LOCKS_EXCLUDED(mutex_);
  // One look: takes the waiters, answers those that are due, parks the rest again. False when
  // a read failed (the hub is then opened again).
  bool look(Hub& hub, bool changed, bool stopping) TENSORHUB_LOCKS_EXCLUDED(mutex_);

  OpenHub open_hub_;
  Current current_;
  mutable Mutex mutex_;
  std::condition_variable cv_;  // a waiter parked, or stopping
  std::vector<Waiter> waiters_ TENSORHUB_GUARDED_BY(mutex_);
  bool stopping_ TENSORHUB_GUARDED_BY(mutex_) = false;
  // Watcher-only state: when each search was last read.
  std::map<std::string, Clock::time_point> search_read_;
  std::thread watcher_;  // last: started once the members above exist
};

}  // namespace tensorhub
