// What the benchmarks share: their command lines (CLI11, the peer options), the MNIST data
// they train on, the peers they start (a script that prints JSON, a server) and the lines
// they print. Header-only: each benchmark is one translation unit.
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensorhub/core/json.h"
#include "tensorhub/core/process.h"
#include "tensorhub/data/idx.h"

namespace tensorhub::bench {

using Clock = std::chrono::steady_clock;

/// Seconds since `t0`.
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// The median of `v` (the mean of the two middle values for an even size); `v` must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/// Parses the command line into `app`'s options: --help prints the usage and exits 0, a wrong
/// command line prints what was wrong and exits 2.
inline void parse_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
}

/// The check of a count option (epochs, rounds, threads, ...): at least 1. Says "Value 0 not in
/// range 1 to 2147483647" where CLI::PositiveNumber would print a 300-digit bound.
inline CLI::Range at_least_one() { return CLI::Range(1, std::numeric_limits<int>::max()); }

/// --data DIR, an MNIST-format directory (train-images-idx3-ubyte[.gz], ...); `dir` starts as
/// default_mnist_dir().
inline void add_mnist_option(CLI::App& app, std::string& dir) {
  dir = default_mnist_dir().string();
  app.add_option("--data", dir, "MNIST-format directory (Fashion-MNIST)")->capture_default_str();
}

/// All 60,000 training images and the 10,000 test images of the MNIST-format `dir`, as the
/// peers train on them (load_mnist_dataset with n_train = 60000: no validation split).
inline MnistSplits load_mnist_for_peer_comparison(const std::string& dir) {
  return load_mnist_dataset(dir, 60000);
}

/// The peer of a benchmark: the script to run, the interpreter, and whether to run it at all.
struct PeerOptions {
  std::string script;
  std::string python = "/usr/bin/python3";
  bool run = true;
};

/// --peer SCRIPT, --python PATH and --no-peer on `app`, defaults from `peer`.
inline void add_peer_options(CLI::App& app, PeerOptions& peer) {
  app.add_option("--peer", peer.script, "the peer's script")->capture_default_str();
  app.add_option("--python", peer.python, "the Python that runs the peer")->capture_default_str();
  app.add_flag_callback("--no-peer", [&peer] { peer.run = false; }, "measure ours only");
}

/// Runs `python script args...` to completion (its stderr passes through) and returns its last
/// line parsed as JSON. Throws std::runtime_error with the output when it fails or prints no JSON.
inline Json run_peer(const PeerOptions& peer, const std::vector<std::string>& args) {
  std::string cmd = shell_quote(peer.python) + " " + shell_quote(peer.script);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  std::cerr << "peer: " << cmd << "\n";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot start the peer: " + cmd);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  const int status = pclose(pipe);
  if (status != 0)
    throw std::runtime_error("the peer failed (status " + std::to_string(status) + "): " + cmd + "\n" + out);
  const std::size_t end = out.find_last_not_of('\n');
  if (end == std::string::npos) throw std::runtime_error("the peer printed nothing: " + cmd);
  const std::size_t nl = out.rfind('\n', end);
  const std::size_t begin = nl == std::string::npos ? 0 : nl + 1;
  return Json::parse(out.substr(begin, end + 1 - begin));
}

/// Starts `argv` (a server, a runner) with stdout and stderr in `log` (appended, or truncated
/// when `append` is false; empty: ours), in a process group of its own, and SIGTERMed if the
/// benchmark dies first. Throws as Process::spawn.
inline Process start(const std::vector<std::string>& argv, const std::filesystem::path& log = {}, bool append = true,
                     const std::filesystem::path& cwd = {}) {
  ProcessOptions options;
  options.output = log;
  options.append_output = append;
  options.cwd = cwd;
  options.terminate_with_parent = true;
  return Process::spawn(argv, options);
}

/// The port `tensorhub ui --port 0` printed in `log` ("tensorhub ui: http://127.0.0.1:PORT/"),
/// waited for up to 30 s. Throws std::runtime_error naming the log when it did not start.
inline int wait_for_ui_port(const std::filesystem::path& log) {
  const std::regex listening(R"(tensorhub ui: http://127\.0\.0\.1:(\d+)/)");
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (std::regex_search(text, m, listening)) return std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("tensorhub ui did not start: see " + log.string());
}

/// SIGTERM to every process in `processes` (their groups), then waits for all of them.
inline void stop_all(std::vector<Process>& processes) {
  for (auto& p : processes) p.signal(SIGTERM);
  for (auto& p : processes) p.wait();
}

/// Runs `cmd` with /bin/sh and returns what it wrote to standard output ("" if it cannot start).
inline std::string command_output(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  return out;
}

/// CPU seconds (user + system) process `pid` has used so far: /proc/PID/stat's utime and stime
/// (fields 14 and 15, in clock ticks); 0 when it cannot be read.
inline double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const std::size_t end = text.rfind(')');  // the command name may hold spaces and ')'
  if (end == std::string::npos || end + 2 > text.size()) return 0;
  std::istringstream fields(text.substr(end + 2));  // from field 3 on
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// What one wrk run measured.
struct WrkResult {
  double rps = 0, p50_ms = 0, p99_ms = 0;
  bool non_2xx = false;  ///< some answers were not 2xx (wrk's "Non-2xx or 3xx responses")
};

/// Runs `wrk -t<threads> -c<connections> -d<seconds>s --latency [-s <lua>] <url>` (Debian's wrk
/// 4.1) and reads requests/s and the 50th and 99th latency percentiles off its report (us, ms
/// or s, given in ms). A run with non-2xx answers says so on stderr.
inline WrkResult run_wrk(const std::string& url, const std::string& lua, int connections, int seconds, int threads = 2) {
  const std::string out = command_output("wrk -t" + std::to_string(threads) + " -c" + std::to_string(connections) + " -d" +
                                         std::to_string(seconds) + "s --latency " + (lua.empty() ? "" : "-s " + lua + " ") +
                                         url + " 2>&1");
  const auto ms = [](const std::string& value, const std::string& unit) {
    const double v = std::stod(value);
    return unit == "us" ? v / 1000 : unit == "s" ? v * 1000 : v;
  };
  WrkResult r;
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"(Requests/sec:\s+([0-9.]+))"))) r.rps = std::stod(m[1]);
  if (std::regex_search(out, m, std::regex(R"(50%\s+([0-9.]+)(us|ms|s))"))) r.p50_ms = ms(m[1], m[2]);
  if (std::regex_search(out, m, std::regex(R"(99%\s+([0-9.]+)(us|ms|s))"))) r.p99_ms = ms(m[1], m[2]);
  r.non_2xx = out.find("Non-2xx") != std::string::npos;
  if (r.non_2xx) std::cerr << "warning: non-2xx answers:\n" << out;
  return r;
}

/// Prints "ratio <label>: <value with `decimals` decimals><suffix>" on its own line.
inline void print_ratio(const std::string& label, double value, int decimals = 3, const std::string& suffix = "") {
  std::printf("ratio %s: %.*f%s\n", label.c_str(), decimals, value, suffix.c_str());
}

}  // namespace tensorhub::bench
