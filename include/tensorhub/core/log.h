// The one path by which library code (train/'s callbacks, the BLAS check, ...) reports a
// message that is not an error: Keras's "Epoch 3: early stopping", a warning about slow
// kernels. By default each goes to stderr as one line, as Keras prints it; a program sets its
// own sink once (the tensorhub command line: spdlog, with time and level, --log-level).
// Components with a `log` option of their own (RunnerOptions, TunerOptions, ManagerOptions)
// take that instead, so that one process can run several with different prefixes.
//
// Thread safety: log_message may be called from any thread; set_log_sink too, though programs
// set it once before anything logs. A sink is called under a lock, one message at a time.
#pragma once

#include <functional>
#include <string>

namespace tensorhub {

enum class LogLevel { kInfo, kWarning };

/// Receives one message (no trailing newline) and its level.
using LogSink = std::function<void(LogLevel level, const std::string& message)>;

/// Sends every later message to `sink`; an empty sink restores the default (stderr, one line
/// each, a warning prefixed "warning: ").
void set_log_sink(LogSink sink);

/// Passes `message` to the sink. Never throws (a failing sink loses the message).
void log_message(LogLevel level, const std::string& message) noexcept;

inline void log_info(const std::string& message) noexcept { log_message(LogLevel::kInfo, message); }
inline void log_warning(const std::string& message) noexcept { log_message(LogLevel::kWarning, message); }

}  // namespace tensorhub
