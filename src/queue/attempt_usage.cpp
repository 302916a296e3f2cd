// Measuring what an attempt used (attempt_usage.h).
#include "attempt_usage.h"

#include <dlfcn.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

namespace tensorhub {
namespace {

namespace fs = std::filesystem;

// The first integer of the file, or nullopt ("max" and missing files included).
std::optional<std::int64_t> read_integer(const fs::path& path) {
  std::ifstream in(path);
  std::int64_t value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

// --- NVML, declared from NVIDIA's documentation of nvml.h (the NVML API Reference Guide):
// nvmlReturn_t is an enum with NVML_SUCCESS = 0; nvmlDevice_t an opaque pointer;
// nvmlUtilization_t {unsigned int gpu, memory} (percent); nvmlMemory_t {unsigned long long
// total, free, used} (bytes).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;

// The library, loaded and initialised once per process; shut down at exit.
class Nvml {
 public:
  static std::shared_ptr<Nvml> load(const std::string& library) {
    void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return nullptr;
    auto nvml = std::shared_ptr<Nvml>(new Nvml(handle));
    if (!nvml->init_ || !nvml->shutdown_ || !nvml->handle_by_index_ || !nvml->utilization_ || !nvml->memory_ ||
        nvml->init_() != kNvmlSuccess) {
      nvml->shutdown_ = nullptr;  // not initialised: nothing to shut down
      return nullptr;
    }
    return nvml;
  }
  ~Nvml() {
    if (shutdown_) shutdown_();
    ::dlclose(handle_);
  }
  std::optional<GpuReading> read(int gpu) {
    const std::lock_guard lock(mutex_);
    nvmlDevice_t device = nullptr;
    nvmlUtilization_t util{};
    nvmlMemory_t mem{};
    if (gpu < 0 || handle_by_index_(static_cast<unsigned>(gpu), &device) != kNvmlSuccess) return std::nullopt;
    if (utilization_(device, &util) != kNvmlSuccess || memory_(device, &mem) != kNvmlSuccess) return std::nullopt;
    return GpuReading{static_cast<double>(util.gpu), static_cast<std::int64_t>(mem.used)};
  }

 private:
  explicit Nvml(void* handle) : handle_(handle) {
    init_ = reinterpret_cast<nvmlReturn_t (*)()>(::dlsym(handle, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<nvmlReturn_t (*)()>(::dlsym(handle, "nvmlShutdown"));
    handle_by_index_ =
        reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(::dlsym(handle, "nvmlDeviceGetHandleByIndex_v2"));
    utilization_ = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*)>(
        ::dlsym(handle, "nvmlDeviceGetUtilizationRates"));
    memory_ = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(::dlsym(handle, "nvmlDeviceGetMemoryInfo"));
  }
  void* handle_;
  std::mutex mutex_;
  nvmlReturn_t (*init_)() = nullptr;
  nvmlReturn_t (*shutdown_)() = nullptr;
  nvmlReturn_t (*handle_by_index_)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*utilization_)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory_)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
};

}  // namespace

std::optional<double> cgroup_cpu_seconds(const fs::path& cgroup) {
  if (cgroup.empty()) return std::nullopt;
  std::ifstream in(cgroup / "cpu.stat");
  for (std::string key; in >> key;) {
    std::int64_t value = 0;
    if (!(in >> value)) break;
    if (key == "usage_usec") return static_cast<double>(value) / 1e6;
  }
  return std::nullopt;
}

std::optional<std::int64_t> cgroup_peak_memory(const fs::path& cgroup, const fs::path& memory_v1) {
  if (!cgroup.empty())
    if (const auto v = read_integer(cgroup / "memory.peak")) return v;
  if (!memory_v1.empty())
    if (const auto v = read_integer(memory_v1 / "memory.max_usage_in_bytes")) return v;
  return std::nullopt;
}

CgroupUsage read_cgroup_usage(const fs::path& cgroup, const fs::path& memory_v1) {
  return {cgroup_cpu_seconds(cgroup), cgroup_peak_memory(cgroup, memory_v1)};
}

void fill_usage(AttemptUsage& usage, const CgroupUsage& cgroup, const rusage* ru) {
  auto seconds = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; };
  if (cgroup.cpu_s) usage.cpu_s = *cgroup.cpu_s;
  else if (ru) usage.cpu_s = seconds(ru->ru_utime) + seconds(ru->ru_stime);
  if (cgroup.peak_memory_bytes) {
    usage.peak_memory_bytes = *cgroup.peak_memory_bytes;
    usage.memory_source = "cgroup";
  } else if (ru) {
    usage.peak_memory_bytes = static_cast<std::int64_t>(ru->ru_maxrss) * 1024;  // Linux: kilobytes
    usage.memory_source = "rusage";
  }
}

GpuReader nvml_gpu_reader(const std::string& library) {
  // One load per library name for the process: dlopen and nvmlInit cost milliseconds.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<Nvml>> loaded;
  std::shared_ptr<Nvml> nvml;
  {
    const std::lock_guard lock(mutex);
    auto it = loaded.find(library);
    if (it == loaded.end()) it = loaded.emplace(library, Nvml::load(library)).first;
    nvml = it->second;
  }
  if (!nvml) return nullptr;
  return [nvml](int gpu) { return nvml->read(gpu); };
}

GpuSampler::GpuSampler(std::vector<int> gpus, GpuReader reader, double interval_s, std::size_t max_samples)
    : gpus_(std::move(gpus)), reader_(std::move(reader)), interval_s_(interval_s),
      max_samples_(std::max<std::size_t>(max_samples, 2)) {}

double GpuSampler::due_in(double t) const {
  if (!active()) return std::numeric_limits<double>::max();
  return last_ < 0 ? 0 : std::max(0.0, last_ + interval_s_ - t);
}

bool GpuSampler::poll(double t) {
  if (!active() || due_in(t) > 0) return false;
  last_ = t;
  if (samples_.size() + gpus_.size() > max_samples_) {
    // Keep every second time point (the first, third, ...) and sample half as often.
    std::vector<GpuSample> kept;
    std::size_t point = 0;
    for (std::size_t i = 0; i < samples_.size(); ++i) {
      if (i > 0 && samples_[i].t != samples_[i - 1].t) ++point;
      if (point % 2 == 0) kept.push_back(samples_[i]);
    }
    samples_ = std::move(kept);
    interval_s_ *= 2;
  }
  for (const int gpu : gpus_)
    if (const auto r = reader_(gpu)) samples_.push_back({t, r->utilization, r->memory_bytes, gpu});
  return true;
}

AttemptMeter::AttemptMeter(std::vector<int> gpus, GpuReader reader, double sample_interval_s)
    : gpus_(std::move(gpus), std::move(reader), sample_interval_s) {}

double AttemptMeter::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void AttemptMeter::sample() {
  if (!stopped_) gpus_.poll(seconds());
}

double AttemptMeter::due_in() const { return stopped_ ? std::numeric_limits<double>::max() : gpus_.due_in(seconds()); }

void AttemptMeter::stop(const fs::path& cgroup, const fs::path& memory_v1, const rusage* ru) {
  if (stopped_) return;
  stopped_ = true;
  usage_.wall_s = seconds();
  fill_usage(usage_, read_cgroup_usage(cgroup, memory_v1), ru);
}

AttemptUsage AttemptMeter::usage() const {
  AttemptUsage u = usage_;
  if (!stopped_) u.wall_s = seconds();
  u.gpu_samples = gpus_.samples();
  return u;
}

}  // namespace tensorhub
