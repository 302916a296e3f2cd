// Helpers shared by the test binaries.
#pragma once

#include <filesystem>
#include <string>

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

/// Runs `command` with /bin/sh and returns its standard output; throws on a non-zero exit.
std::string run_command(const std::string& command);

}  // namespace tensorhub::testing
