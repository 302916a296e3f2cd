// One log format for the long-running commands (logging.h).
#include "logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "tensorhub/core/log.h"

namespace tensorhub {

void add_log_level_option(CLI::App& cmd, std::string& level) {
  cmd.add_option("--log-level", level, "least severe log lines shown: trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
}

void setup_logging(const std::string& level) {
  // stderr_color_sink colours only when stderr is a terminal: a log file gets plain lines.
  auto logger = spdlog::stderr_color_mt("tensorhub");
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);  // a log read while the program runs is complete
  spdlog::set_default_logger(logger);
  // The libraries' own messages (core/log.h: Keras's callback lines, BLAS warnings) in the
  // same format; a log line needs no blank line before it, as a progress bar's text does.
  set_log_sink([](LogLevel l, const std::string& message) {
    const std::string line = message.substr(std::min(message.find_first_not_of('\n'), message.size()));
    if (l == LogLevel::kWarning) spdlog::warn("{}", line);
    else spdlog::info("{}", line);
  });
}

std::function<void(const std::string&)> info_log() {
  return [](const std::string& line) {
    // A line a user must not miss is marked "warning: " (after a "[runner ...] " tag, if any):
    // it goes out at warn level without the mark, so --log-level warn still shows it.
    static const std::string kMark = "warning: ";
    std::size_t at = 0;
    if (line.starts_with("[")) {
      const auto close = line.find("] ");
      if (close != std::string::npos) at = close + 2;
    }
    if (line.compare(at, kMark.size(), kMark) == 0) spdlog::warn("{}{}", line.substr(0, at), line.substr(at + kMark.size()));
    else spdlog::info("{}", line);
  };
}

}  // namespace tensorhub
