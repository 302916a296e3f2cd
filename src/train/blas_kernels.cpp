// Picking OpenBLAS's kernels for CPUs that Debian's OpenBLAS does not recognise.
//
// Debian's libopenblas0-openmp is built with DYNAMIC_ARCH: when it loads, it reads CPUID and
// picks kernels for the CPU model, or, for a model it does not know (0.3.21 does not know
// Sapphire/Emerald Rapids, for instance), falls back to its slowest x86-64 kernels
// ("Prescott", SSE3). Measured here (Xeon family 6 model 207, 2 threads, 256x800 @ 800x800):
// Prescott ~8.8 ms per product, SkylakeX ~1.7 ms. The environment variable OPENBLAS_CORETYPE
// overrides the choice, but OpenBLAS reads it in its load-time constructor, before main()
// runs; setting it from a .preinit_array entry does not work either (glibc's own initialiser
// resets the environment afterwards). Hence reexec_for_fast_blas: set it, exec again.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <torch/version.h>

#include <fmt/format.h>

#include "model_impl.h"
#include "tensorhub/core/log.h"

namespace tensorhub::detail {
namespace {

// The OpenBLAS core for this CPU's instruction set, or nullptr to leave OpenBLAS's choice.
const char* core_for_this_cpu() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

}  // namespace

std::string blas_kernels() {
  using Fn = char* (*)();
  auto corename = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return corename ? std::string(corename()) : std::string();
}

void warn_if_slow_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string core = blas_kernels();
    if (core != "Prescott" || !core_for_this_cpu()) return;
    log_warning(fmt::format("OpenBLAS runs its generic Prescott kernels on a CPU with {}; training is several "
                            "times slower. Set OPENBLAS_CORETYPE={} in the environment (or call "
                            "tensorhub::reexec_for_fast_blas first thing in main).",
                            core_for_this_cpu() == std::string("SkylakeX") ? "AVX-512" : "AVX2", core_for_this_cpu()));
  });
}

}  // namespace tensorhub::detail

namespace tensorhub {

std::string runtime_libraries() {
  std::string out = std::string("libtorch ") + TORCH_VERSION + "\n";
  // The BLAS libtorch calls: the file that defines sgemm_ (Debian's libblas.so.3 alternative).
  std::string file = "(not found)";
  if (void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_")) {
    Dl_info info{};
    // The real file: Debian's libblas.so.3 is a link chosen by update-alternatives.
    if (dladdr(sgemm, &info) && info.dli_fname) {
      char* real = realpath(info.dli_fname, nullptr);
      file = real ? real : info.dli_fname;
      std::free(real);
    }
  }
  using Fn = char* (*)();
  auto config = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  out += "BLAS: " + (config ? std::string(config()) + " (" + file + ")" : file);
  return out;
}

void reexec_for_fast_blas(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // chosen by the user, or done
  const char* core = detail::core_for_this_cpu();
  if (core == nullptr || detail::blas_kernels() != "Prescott") return;
  ::setenv("OPENBLAS_CORETYPE", core, 1);
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on with the slow kernels; children still get the variable.
}

}  // namespace tensorhub
