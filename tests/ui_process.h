// A real `tensorhub ui --port 0` process for the dashboard's API tests (ui_try_test.cpp,
// ui_errors_test.cpp), and raw HTTP for requests cpp-httplib's client cannot send (a POST
// without Content-Length, as `curl -X POST` sends it).
#pragma once

#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "process_util.h"
#include "test_util.h"

namespace tensorhub::testing {

/// `tensorhub ui --hub <h.uri> --project <project> --port 0 <extra>`; the port is read from its
/// first line. SIGTERM when destroyed.
class UiProcess {
 public:
  UiProcess(const SqliteHubPaths& h, const std::string& project, const std::vector<std::string>& extra = {})
      : log_(h.log) {
    std::vector<std::string> args = {kTensorhub, "ui", "--hub", h.uri, "--project", project, "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = spawn(args, h.log);
    port_ = port_from_log(log_, R"(tensorhub ui: http://127\.0\.0\.1:(\d+)/)");
  }
  ~UiProcess() {
    if (pid_ == 0) return;
    kill(pid_, SIGTERM);
    wait_exit(pid_);
  }
  UiProcess(const UiProcess&) = delete;
  UiProcess& operator=(const UiProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  /// Sends SIGTERM and waits up to `limit` for the exit: its code, or nullopt when it was still
  /// running (it is then killed).
  std::optional<int> terminate(std::chrono::milliseconds limit) {
    kill(pid_, SIGTERM);
    const auto code = wait_exit_within(pid_, limit);
    pid_ = 0;
    return code;
  }
  std::string log() const { return read_text(log_); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(90, 0);
    return c;
  }

  /// Sends `request` (a whole HTTP/1.1 request, "Connection: close" in it) as it is and returns
  /// the whole reply, headers and body.
  std::string raw(const std::string& request) const { return raw_http_exchange(port_, request); }

 private:
  std::string log_;
  pid_t pid_ = 0;
  int port_ = 0;
};

}  // namespace tensorhub::testing
