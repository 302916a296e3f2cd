// Helpers shared by the test binaries.
#pragma once

#include <filesystem>
#include <functional>
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

/// Runs `fn` and expects a tensorhub::Error of `kind` whose message contains every entry of
/// `parts` (a GoogleTest failure otherwise).
void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::vector<std::string>& parts);

/// Runs `command` with /bin/sh and returns its standard output; throws on a non-zero exit.
std::string run_command(const std::string& command);

}  // namespace tensorhub::testing
