// One log format for the long-running commands (runner, serve, tune): spdlog on stderr, time
// and level on every line, colours only when stderr is a terminal, the level set by
// --log-level. Libraries below the CLI take a `log` callback; these functions make one.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

namespace tensorhub {

/// Adds --log-level (trace, debug, info, warn, error, off; default info) to `cmd`, filled
/// into `level`.
void add_log_level_option(CLI::App& cmd, std::string& level);

/// Sets up the stderr logger at `level` (as add_log_level_option accepts). Call once, in the
/// command's callback, before anything logs.
void setup_logging(const std::string& level);

/// A callback for RunnerOptions::log, TunerOptions::log, ManagerOptions::log: each line at
/// info level, except lines marked "warning: " (at their start, or after a "[...] " tag),
/// which go out at warn level without the mark.
std::function<void(const std::string&)> info_log();

}  // namespace tensorhub
