#include "tensorhub/core/log.h"

#include <cstdio>

#include "tensorhub/core/mutex.h"

namespace tensorhub {
namespace {

struct Sink {
  Mutex mutex;  // one message at a time, and set_log_sink against log_message
  LogSink sink TENSORHUB_GUARDED_BY(mutex);
};

Sink& the_sink() {
  static Sink s;
  return s;
}

void to_stderr(LogLevel level, const std::string& message) {
  std::fprintf(stderr, "%s%s\n", level == LogLevel::kWarning ? "warning: " : "", message.c_str());
}

}  // namespace

void set_log_sink(LogSink sink) {
  Sink& s = the_sink();
  MutexLock lock(s.mutex);
  s.sink = std::move(sink);
}

void log_message(LogLevel level, const std::string& message) noexcept {
  Sink& s = the_sink();
  MutexLock lock(s.mutex);
  try {
    if (s.sink) s.sink(level, message);
    else to_stderr(level, message);
  } catch (...) {
    // A sink that throws (a closed stream) loses this message, not the caller's work.
  }
}

}  // namespace tensorhub
