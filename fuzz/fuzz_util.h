// Helpers shared by the libFuzzer targets in fuzz/ (built by scripts/fuzz).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "tensorhub/core/error.h"

namespace tensorhub::fuzz {

/// Reports a broken invariant and aborts, so that libFuzzer records the input as a crash.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

/// Runs `parse`: returning or throwing tensorhub::Error (a clean refusal) is fine; any other
/// exception is a bug (a library's exception leaking through the module's error contract).
template <typename Fn>
void expect_clean(Fn&& parse) {
  try {
    parse();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    fail(std::string("a non-tensorhub exception escaped: ") + e.what());
  }
}

/// A file of this process under $TMPDIR (default /tmp) holding `size` bytes of `data`, for
/// parsers that read files; rewritten for every input, removed at exit.
inline std::filesystem::path input_file(const std::uint8_t* data, std::size_t size,
                                        const char* suffix = "") {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto d = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
             ("tensorhub-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    static const std::string to_remove = d.string();
    std::atexit([] { std::filesystem::remove_all(to_remove); });
    return d;
  }();
  const auto path = dir / (std::string("input") + suffix);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0)
    fail("cannot write the input file " + path.string());
  return path;
}

}  // namespace tensorhub::fuzz
