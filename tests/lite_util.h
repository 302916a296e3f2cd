// Which tensorhub-serve-lite binary a lite test runs, and how: the x86-64 one of this build,
// or the arm64 one (build/arm64/, cross-compiled) under Debian's qemu-aarch64-static. Shared by
// the lite tests that run the binary as a process (lite_serve_test, lite_slow_clients_test).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tensorhub {

/// Which tensorhub-serve-lite binary a test runs, and how.
struct Arch {
  std::string name;
  std::vector<std::string> launcher;  // qemu-aarch64-static for arm64
  std::string binary;
};

/// The path of `program` in /usr/bin, /usr/local/bin or /bin, or "".
inline std::string which(const std::string& program) {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"})
    if (std::filesystem::exists(std::string(dir) + "/" + program)) return std::string(dir) + "/" + program;
  return "";
}

/// "x86_64" (this build's binary) or "arm64" (build/arm64/'s, under qemu-aarch64-static).
inline Arch arch_named(const std::string& name) {
  if (name == "x86_64") return {name, {}, std::string(TENSORHUB_BIN_DIR) + "/tensorhub-serve-lite"};
  return {name, {which("qemu-aarch64-static")}, TENSORHUB_ARM64_LITE};
}

/// Why `arch` cannot run here, or "" when it can.
inline std::string missing(const Arch& arch) {
  if (arch.name == "arm64") {
    if (arch.launcher[0].empty())
      return "qemu-aarch64-static is not installed (Debian's qemu-user-static; scripts/setup installs it)";
    if (!std::filesystem::exists(arch.binary))
      return arch.binary + " was not built: aarch64-linux-gnu-g++ (crossbuild-essential-arm64, installed by "
             "scripts/setup) was missing when CMake configured build/";
  }
  return "";
}

}  // namespace tensorhub
