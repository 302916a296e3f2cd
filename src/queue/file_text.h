// Whole small files as text, for the queue's readers of /proc, cgroup files and a child's
// captured output.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tensorhub::detail {

/// The bytes of the file at `path`, or "" when it cannot be opened (a cgroup file the kernel
/// does not offer, a /proc entry of a process that is gone). Never throws for a missing file.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace tensorhub::detail
