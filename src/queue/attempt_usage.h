// Measuring what an attempt used (task_attempt.h: AttemptUsage), for the runner.
//
// CPU seconds: the attempt's cgroup v2 cpu.stat usage_usec where it has one (every process of
// the attempt, daemons included, and kept after they exit), else the rusage wait4(2) returns for
// its main process (ru_utime + ru_stime of it and of the descendants it waited for).
// Peak memory: cgroup v2 memory.peak (Linux 5.19, the memory controller enabled for it), else
// v1 memory.max_usage_in_bytes of the attempt's v1 memory cgroup, else ru_maxrss (the largest
// resident set of one process; kilobytes in Linux's rusage, getrusage(2)).
// GPU utilisation and memory: NVIDIA's management library (NVML), loaded at run time with
// dlopen("libnvidia-ml.so.1") so that a machine without it loads nothing and records no
// samples; sampled every few seconds while the attempt runs (GpuSampler).
//
// Thread-safety: GpuSampler belongs to one thread; nvml_gpu_reader's function may be called from
// any one thread at a time.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/queue/task_attempt.h"

namespace tensorhub {

/// CPU seconds of the cgroup v2 directory `cgroup` (cpu.stat usage_usec / 1e6); nullopt when
/// it has none.
std::optional<double> cgroup_cpu_seconds(const std::filesystem::path& cgroup);

/// The peak memory in bytes of cgroup v2 directory `cgroup` (memory.peak), else of the v1
/// memory cgroup directory `memory_v1` (memory.max_usage_in_bytes); nullopt when neither has it
/// (an empty path is skipped).
std::optional<std::int64_t> cgroup_peak_memory(const std::filesystem::path& cgroup,
                                               const std::filesystem::path& memory_v1);

/// What the attempt's cgroups say, read before they are removed; fields unset where not known.
struct CgroupUsage {
  std::optional<double> cpu_s;
  std::optional<std::int64_t> peak_memory_bytes;
};

/// Reads a cgroup's usage (both functions above); `cgroup`, `memory_v1` may be empty.
CgroupUsage read_cgroup_usage(const std::filesystem::path& cgroup, const std::filesystem::path& memory_v1);

/// Fills `usage`'s cpu_s, peak_memory_bytes and memory_source from the cgroup's figures where
/// known, else from `ru` (the attempt's main process's rusage from wait4; nullptr: unknown,
/// zeros and memory_source "").
void fill_usage(AttemptUsage& usage, const CgroupUsage& cgroup, const rusage* ru);

/// One reading of one GPU.
struct GpuReading {
  double utilization = 0;         ///< percent, 0-100
  std::int64_t memory_bytes = 0;  ///< device memory in use
};

/// Reads GPU `gpu` (a device index) now; nullopt when it cannot be read.
using GpuReader = std::function<std::optional<GpuReading>(int gpu)>;

/// A reader over NVML (nvmlInit_v2 once, nvmlDeviceGetHandleByIndex_v2,
/// nvmlDeviceGetUtilizationRates, nvmlDeviceGetMemoryInfo); nullptr when libnvidia-ml.so.1 is
/// not there or does not initialise (no driver): then no samples, silently. The device index
/// is NVML's, which is CUDA's when CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA's default order puts the
/// fastest device first). `library` names the file to dlopen (tests give one that is absent).
GpuReader nvml_gpu_reader(const std::string& library = "libnvidia-ml.so.1");

/// Samples an attempt's GPUs every `interval_s` while it runs, keeping at most `max_samples`:
/// when full, every second sample is dropped and the interval doubled, so the samples stay
/// evenly spread over the whole attempt.
class GpuSampler {
 public:
  /// `reader` nullptr or `gpus` empty: a sampler that never samples.
  GpuSampler(std::vector<int> gpus, GpuReader reader, double interval_s = 5, std::size_t max_samples = 500);

  /// Takes a sample of every GPU if `t` (seconds since the attempt started) is at least the
  /// interval past the last one (the first at t >= 0). True if it sampled.
  bool poll(double t);
  /// Seconds until the next sample is due at `t`; a large number when it never samples.
  double due_in(double t) const;
  bool active() const { return reader_ && !gpus_.empty(); }
  const std::vector<GpuSample>& samples() const { return samples_; }
  double interval_s() const { return interval_s_; }

 private:
  std::vector<int> gpus_;
  GpuReader reader_;
  double interval_s_;
  std::size_t max_samples_;
  double last_ = -1;
  std::vector<GpuSample> samples_;
};

/// One running attempt's measurement, from its start (construction) to the reap of its main
/// process (stop): the runner keeps one per running attempt.
class AttemptMeter {
 public:
  /// Starts the wall clock; samples `gpus` through `reader` (nullptr: no samples).
  AttemptMeter(std::vector<int> gpus, GpuReader reader, double sample_interval_s = 5);
  /// Takes the GPU samples that are due.
  void sample();
  /// Seconds until a GPU sample is due (a large number without GPUs).
  double due_in() const;
  /// At the reap of the attempt's main process: wall time, and its cgroup's figures (read
  /// before the cgroup is removed) or `ru` (wait4's rusage; nullptr if unknown). Only the first
  /// call counts.
  void stop(const std::filesystem::path& cgroup, const std::filesystem::path& memory_v1, const rusage* ru);
  /// What it measured (wall_s so far if not stopped yet).
  AttemptUsage usage() const;

 private:
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  GpuSampler gpus_;
  bool stopped_ = false;
  AttemptUsage usage_;
  double seconds() const;
};

}  // namespace tensorhub
