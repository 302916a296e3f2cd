// Tasks of the queue as the hub stores them (queue/ owns their table and lifecycle). Lifecycle:
//   pending -> running -> finished | failed | cancelled
// A claim takes a lease (owner, expiry) and increments `attempt`; completion, heartbeats and
// failures are fenced by that attempt number, so a runner that lost its lease cannot touch a
// newer attempt. `failures` counts failed attempts (crash, timeout, expired lease); after
// max_attempts of them the task is failed for good.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/store/document.h"

namespace tensorhub {

enum class TaskStatus { kPending, kRunning, kFinished, kFailed, kCancelled };

/// "pending", "running", "finished", "failed", "cancelled".
std::string to_string(TaskStatus status);
/// Inverse of to_string. Throws InvalidArgument naming the allowed values.
TaskStatus task_status_from_string(const std::string& text);

/// The script_name of a script task created without one.
inline constexpr const char* kDefaultScriptName = "script.py";

/// What one attempt of a task needs of the runner that runs it (TaskSpec::resources), or, as
/// a capacity, what a runner has free. Every field 0 = "no request": a task that asks for
/// nothing fits any runner and takes nothing from its budget. Stored as the columns
/// tasks.cpus, tasks.gpus and tasks.memory_bytes.
struct TaskResources {
  /// Cores, fractional allowed (0.5 = half a core, enforced as cgroup cpu.max where the
  /// runner has the attempt's cgroup); also sets the attempt's OMP_NUM_THREADS to ceil(cpus).
  double cpus = 0;
  /// GPUs, a count: the runner picks which of its free devices the attempt gets and sets
  /// CUDA_VISIBLE_DEVICES to them.
  int gpus = 0;
  /// Memory in bytes (cgroup memory.max / memory.limit_in_bytes where the runner has the
  /// attempt's cgroup: over it the kernel kills the task, "out of memory (limit 8 GiB)").
  std::int64_t memory_bytes = 0;

  /// True when nothing is asked for.
  bool empty() const { return cpus == 0 && gpus == 0 && memory_bytes == 0; }
  /// True when every field of `this` is at most that of `capacity` (the claim's rule).
  bool fits(const TaskResources& capacity) const {
    return cpus <= capacity.cpus && gpus <= capacity.gpus && memory_bytes <= capacity.memory_bytes;
  }
  /// Throws InvalidArgument naming the field (prefixed by `where`, e.g. "create_task \"x\": ")
  /// when cpus is negative, NaN, infinite or over a million, gpus negative or memory_bytes negative.
  void validate(const std::string& where) const;
  /// {"cpus": 2, "gpus": 1, "memory": "8 GiB", "memory_bytes": 8589934592}, every field
  /// present (memory as format_memory_size and as bytes).
  Json to_json() const;
  /// Reads {"cpus": number, "gpus": integer, "memory": "8GiB" or a byte count}, every key
  /// optional (missing = 0); also accepts "memory_bytes" (an integer) as to_json writes it.
  /// Throws InvalidArgument naming the key for an unknown key, a wrong type, a fractional or
  /// negative gpus, a memory that does not parse (parse_memory_size) or a negative value.
  static TaskResources from_json(const Json& json);
  /// "2 cpus, 1 GPU, 8 GiB" (fields that are 0 left out; "nothing" when empty).
  std::string to_string() const;
};

/// Parses a memory size to bytes. Accepted, case-insensitive, with optional spaces between
/// number and unit and a fractional number allowed with a unit (rounded down to a byte):
///   a plain integer                                 bytes ("1048576")
///   K, M, G, T                                      KiB, MiB, GiB, TiB, as Slurm's --mem ("8G")
///   KiB, MiB, GiB, TiB, Ki, Mi, Gi, Ti              1024^1..4 (IEC; Kubernetes' Ki, Mi, Gi, Ti)
///   KB, MB, GB, TB                                  1000^1..4 (SI decimal, as the IEC standard
///                                                   and Kubernetes' k, M, G, T read them)
///   B                                               bytes ("512B")
/// So "8G" = "8GiB" = 8589934592 but "8GB" = 8000000000. Throws InvalidArgument naming the
/// text and the accepted forms for anything else (empty, negative, unknown unit, overflow).
std::int64_t parse_memory_size(const std::string& text);

/// Bytes as the largest binary unit it reaches, up to two decimals, trailing zeros dropped:
/// 8589934592 -> "8 GiB", 1610612736 -> "1.5 GiB", 67108864 -> "64 MiB", 100 -> "100 B".
/// parse_memory_size reads it back (to within the rounding of the decimals).
std::string format_memory_size(std::int64_t bytes);

/// A count of cores as messages show it, printf's %g: 2 -> "2", 0.5 -> "0.5", 1e30 -> "1e+30".
std::string format_cpus(double cpus);

/// What create_task takes: TensorHub's task fields plus the queue's settings.
struct TaskSpec {
  std::string task_name;                  ///< runners claim by this name
  std::string command;                    ///< shell command; "{name}" -> hyperparameter value
  Json train_spec;  ///< a declarative training job (docs/spec-format.md); null if command given
  /// A Python script's source, UTF-8 (no NUL byte), as TensorHub's create_task(script=...)
  /// stored it: a runner writes it to the attempt's directory and runs it with a Python
  /// interpreter, the hyperparameters bound as its global variables and the saved_result_keys
  /// read from its globals at the end (runner.h). A task has exactly one of command,
  /// train_spec and script.
  std::string script;
  /// The script's file name without directories, e.g. "task_script.py" (tracebacks and
  /// `task show` name it); "" for a script task means "script.py".
  std::string script_name;
  /// Lowercase hex SHA-256 of `script`'s bytes. create_task computes it when empty and
  /// refuses a script whose bytes do not have the one given.
  std::string script_sha256;
  /// The Python interpreter of a script task, e.g. "/opt/venv/bin/python"; a name without
  /// "/" is looked up on the runner's PATH. "" (the default): the runner's (RunnerOptions::python).
  std::string python;
  Json hyper_parameters = Json::object(); ///< passed as TENSORHUB_HYPER_PARAMETERS
  std::vector<std::string> saved_result_keys;  ///< all must be in the result to finish
  int max_attempts = 3;                   ///< failed attempts before the task is failed
  double timeout_s = 0;                   ///< wall-clock limit per attempt; 0 = none
  int priority = 0;                       ///< higher is claimed first
  Json tags = Json::object();             ///< free-form, e.g. {"description": "..."}
  /// What an attempt needs (cores, GPUs, memory); default: nothing, fits any runner.
  TaskResources resources;
};

/// A stored task with its queue state.
struct Task {
  std::int64_t id = 0;
  std::string project_name;
  std::int64_t time = 0;  ///< creation, UTC microseconds
  TaskSpec spec;
  TaskStatus status = TaskStatus::kPending;
  int attempt = 0;        ///< number of claims so far; fences completion
  int failures = 0;       ///< failed attempts so far
  std::string lease_owner;
  std::int64_t lease_expires = 0;  ///< UTC microseconds; meaningful while running
  std::int64_t started_at = 0;
  std::int64_t finished_at = 0;
  Json result;            ///< the task's results (null until finished)
  std::string error;      ///< why the last attempt failed
  std::string log_tail;   ///< last lines of the last attempt's output

  /// Every field as JSON for display and `--json` (a script task's script as script_name,
  /// script_sha256 and script_bytes, its size, not its text); non-finite numbers (in hyperparameters,
  /// tags, result) in their {"$numberDouble": ...} form (encode_non_finite in document.h).
  Json to_json() const;
};

/// Which pending task a claim takes first (after priority).
enum class ClaimOrder { kNewestFirst, kOldestFirst };

}  // namespace tensorhub
