// What a runner has to give its tasks, found from its environment when RunnerOptions does not
// say (runner.h): cores, memory, GPU ids, and the Slurm job it runs in; and the per-GPU locks
// that keep two runners on one machine, given the same ids, from handing one GPU out twice.
//
// Sources, first found wins:
//   cpus    SLURM_CPUS_PER_TASK, SLURM_CPUS_ON_NODE (Slurm's sbatch(1) output variables),
//           else available_cores() (sched_getaffinity).
//   memory  SLURM_MEM_PER_NODE (MiB), SLURM_MEM_PER_CPU (MiB) * cpus, else the smaller of the
//           machine's MemTotal (/proc/meminfo) and this process's cgroup limit: cgroup v2
//           memory.max, or v1 memory.limit_in_bytes of the memory hierarchy, located through
//           /proc/self/cgroup and /proc/self/mountinfo (proc(5)).
//   gpus    CUDA_VISIBLE_DEVICES (integer ids only), else SLURM_STEP_GPUS, SLURM_JOB_GPUS,
//           else none.
//
// Thread-safety: free functions without shared state; one GpuLocks per runner thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tensorhub::detail {

/// This process's cgroup directories: the v2 one (the unified hierarchy), and the v1 memory and
/// cpu ones where those controllers are mounted as v1 hierarchies; empty paths for those
/// absent.
struct CgroupDirs {
  std::filesystem::path v2;
  std::filesystem::path v1_memory;
  std::filesystem::path v1_cpu;
};

/// The directories from the text of /proc/self/cgroup ("ID:CONTROLLERS:PATH" lines; "0::PATH" is
/// v2) and of /proc/self/mountinfo (mount root in field 4, mount point in field 5, filesystem
/// type after " - "). A mount whose root is not "/" (a container's view) is joined with the
/// path less that root.
CgroupDirs cgroup_dirs(const std::string& proc_cgroup, const std::string& mountinfo);
/// cgroup_dirs of this process.
CgroupDirs own_cgroup_dirs();

/// The memory limit of `dirs` in bytes: v2 memory.max, else v1 memory.limit_in_bytes; nothing
/// when unlimited ("max", or v1's near-2^63 "no limit") or unreadable.
std::optional<std::int64_t> cgroup_memory_limit(const CgroupDirs& dirs);

/// MemTotal of a /proc/meminfo file, bytes; 0 if unreadable.
std::int64_t meminfo_total(const std::filesystem::path& meminfo = "/proc/meminfo");

/// Cores to give tasks (see the file comment). Throws InvalidArgument naming the variable when
/// a Slurm variable is set but not a positive number.
double detect_cpus();

/// Memory to give tasks, bytes (see the file comment); `cpus` multiplies SLURM_MEM_PER_CPU.
/// `source` (optional) gets where it came from, e.g. "SLURM_MEM_PER_NODE".
std::int64_t detect_memory_bytes(double cpus, const CgroupDirs& dirs, const std::filesystem::path& meminfo,
                                 std::string* source = nullptr);

/// GPU ids from a comma-separated list ("0,1,3"); `what` names the source in errors (a flag or a
/// variable). Slurm's ranges ("0-3", "0,2-3") are expanded. "" gives none. Throws
/// InvalidArgument naming `what` for an entry that is no id >= 0 (a UUID included) or an id
/// named twice.
std::vector<int> parse_gpu_ids(const std::string& text, const std::string& what);

/// GPU ids to hand out (see the file comment); `source` (optional) gets the variable read, or
/// "" for none. CUDA_VISIBLE_DEVICES of UUIDs or MIG names is not read (the runner cannot name
/// a subset of them by index): the runner then has no GPUs unless given --gpus.
std::vector<int> detect_gpus(std::string* source = nullptr);

/// "<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>" when both are set, else SLURM_JOB_ID, else "".
std::string detect_slurm_job_id();

/// "0,1,3"; "" for none.
std::string gpu_id_list(const std::vector<int>& ids);

/// One exclusive flock(2) per GPU id, held while an attempt uses that GPU, on the file
/// <dir>/tensorhub-gpu-<id>.lock, so runners on one machine that were given the same ids never
/// use a GPU at once: a GPU whose lock another process holds counts as busy. The kernel drops a
/// lock when its holder dies, so a killed runner frees its GPUs.
class GpuLocks {
 public:
  /// The lock files go to /run/lock where writable (and `use_run_lock`), else to `fallback`
  /// (the runner's work directory: then only runners sharing it see each other's locks).
  /// TENSORHUB_GPU_LOCK_DIR, when set, overrides both (runners that share a GPU set but not
  /// /run/lock, e.g. in separate containers, give a shared directory). dir() says which.
  explicit GpuLocks(const std::filesystem::path& fallback, bool use_run_lock = true);
  ~GpuLocks();
  GpuLocks(const GpuLocks&) = delete;
  GpuLocks& operator=(const GpuLocks&) = delete;

  /// Takes the lock of GPU `id` without waiting; false when another process (or this one,
  /// already) holds it or the lock file cannot be opened.
  bool try_lock(int id);
  /// Releases the lock of `id` (no-op if not held).
  void unlock(int id);
  /// True while this object holds `id`.
  bool held(int id) const { return fds_.count(id) != 0; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::map<int, int> fds_;  // GPU id -> descriptor holding its lock
};

}  // namespace tensorhub::detail
