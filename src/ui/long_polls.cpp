// The dashboard's parked long polls and their one watcher thread (long_polls.h).
#include "long_polls.h"

#include <algorithm>
#include <map>
#include <optional>

#include "http_reply.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

// One topic's answer of one look, dumped once and gzip-compressed at most once, however many
// waiters get it.
struct Answer {
  HttpResponse response;
  std::string version;  ///< "" for an error (every waiter gets it)
  std::optional<std::string> gzipped;

  HttpResponse for_client(bool gzip) {
    if (!gzip || !worth_gzip(response)) return response;
    if (!gzipped) gzipped = gzip_bytes(response.body);
    HttpResponse r = response;
    r.body = *gzipped;
    r.headers.emplace_back("Content-Encoding", "gzip");
    r.headers.emplace_back("Vary", "Accept-Encoding");
    return r;
  }
};

}  // namespace

LongPolls::LongPolls(OpenHub open_hub, Current current)
    : open_hub_(std::move(open_hub)), current_(std::move(current)), watcher_([this] { watch(); }) {}

LongPolls::~LongPolls() {
  stop();
  watcher_.join();
}

bool LongPolls::add(Waiter waiter) {
  MutexLock lock(mutex_);
  if (stopping_) return false;
  waiters_.push_back(std::move(waiter));
  cv_.notify_one();
  return true;
}

void LongPolls::stop() {
  MutexLock lock(mutex_);
  stopping_ = true;
  cv_.notify_one();
}

std::size_t LongPolls::size() const {
  MutexLock lock(mutex_);
  return waiters_.size();
}

void LongPolls::watch() {
  std::unique_ptr<Hub> hub;
  std::unique_ptr<TaskQueue> queue;  // on *hub: destroyed first
  for (;;) {
    bool stopping = false;
    {
      MutexLock lock(mutex_);
      while (!stopping_ && waiters_.empty()) mutex_.wait(cv_);
      if (stopping_ && waiters_.empty()) return;
      stopping = stopping_;
    }
    bool changed = false;
    try {
      if (!hub) {
        hub = open_hub_();
        queue = std::make_unique<TaskQueue>(*hub);
      }
      if (!stopping) changed = queue->wait_for_change(kLookSeconds);
    } catch (...) {
      // No hub to read: every waiter gets the error its own request would have got.
      queue.reset();
      hub.reset();
      const HttpResponse failure = current_error_response();
      std::vector<Waiter> all;
      {
        MutexLock lock(mutex_);
        all.swap(waiters_);
      }
      for (const Waiter& w : all) w.responder.send(failure);
      continue;
    }
    if (!look(*hub, changed, stopping)) {
      queue.reset();  // its connection may be broken: a new one at the next look
      hub.reset();
    }
  }
}

bool LongPolls::look(Hub& hub, bool changed, bool stopping) {
  std::vector<Waiter> mine;
  {
    MutexLock lock(mutex_);
    mine.swap(waiters_);
    stopping = stopping || stopping_;
  }
  std::erase_if(mine, [](const Waiter& w) { return w.responder.abandoned(); });
  const auto now = Clock::now();

  // The topics to read now: the task list at every look; a search when something changed, its
  // last read is kSearchSeconds old, or one of its waiters is due anyway.
  std::map<std::string, bool> due;  // topic -> read it now
  for (const Waiter& w : mine) {
    bool& read = due[w.topic];
    read = read || w.topic.empty() || changed || stopping || now >= w.deadline;
  }
  for (auto& [topic, read] : due) {
    if (read) continue;
    const auto last = search_read_.find(topic);
    read = last == search_read_.end() || now - last->second >= std::chrono::duration<double>(kSearchSeconds);
  }
  std::erase_if(search_read_, [&](const auto& s) { return !due.count(s.first); });

  std::map<std::string, Answer> answers;
  bool failed = false;
  for (const auto& [topic, read] : due) {
    if (!read) continue;
    Answer& a = answers[topic];
    try {
      const Json current = current_(hub, topic);
      a.response = json_response(current);
      a.version = current.value("version", "");
    } catch (...) {
      a.response = current_error_response();
      failed = true;
    }
    if (!topic.empty()) search_read_[topic] = now;
  }

  std::vector<Waiter> kept;
  for (Waiter& w : mine) {
    const auto it = answers.find(w.topic);
    if (it == answers.end()) {
      kept.push_back(std::move(w));
      continue;
    }
    Answer& a = it->second;
    const bool moved = a.version.empty() || a.version != w.since;
    if (moved || stopping || now >= w.deadline) w.responder.send(a.for_client(w.gzip));
    else kept.push_back(std::move(w));
  }
  MutexLock lock(mutex_);
  waiters_.insert(waiters_.end(), std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
  return !failed;
}

}  // namespace tensorhub
