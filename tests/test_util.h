// Helpers shared by the test binaries.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"

namespace tensorhub::testing {

/// A fresh directory under $TMPDIR (or /tmp), removed with its content on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// Sets environment variables for one test (set(name, nullptr) unsets one) and restores
/// their earlier values, in reverse order, on destruction.
class EnvVars {
 public:
  EnvVars() = default;
  EnvVars(const EnvVars&) = delete;
  EnvVars& operator=(const EnvVars&) = delete;
  void set(const char* name, const char* value);
  ~EnvVars();

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

/// Runs `fn` and expects a tensorhub::Error of `kind` whose message contains every entry of
/// `parts` (a GoogleTest failure otherwise).
void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::vector<std::string>& parts);

/// Runs `fn`, expects a tensorhub::Error of `kind` (a GoogleTest failure naming `label`
/// otherwise) and returns its message for further checks.
template <typename Fn>
std::string error_message_of(ErrorKind kind, Fn&& fn, const std::string& label) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << label << ": " << e.what();
    return e.message();
  } catch (const std::exception& e) {
    ADD_FAILURE() << label << ": threw a non-tensorhub exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << label << ": did not throw";
  return {};
}

/// Runs `command` with /bin/sh and returns its standard output; throws on a non-zero exit.
std::string run_command(const std::string& command);

/// Sends `request` (raw HTTP bytes) to 127.0.0.1:`port` and returns every byte received until
/// the server closes the connection (send "Connection: close"); "" when it cannot connect.
std::string raw_http_exchange(int port, const std::string& request);

}  // namespace tensorhub::testing
