// --cpus, --gpus and --memory of the task-creating commands and of the runner (resource_flags.h).
#include "resource_flags.h"

#include <cmath>
#include <iostream>

#include "../queue/runner_resources.h"
#include "commands.h"
#include "tensorhub/queue/task_queue.h"

namespace tensorhub {
namespace {

double cpus_of(const std::string& text) {
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || !(v >= 0) || !std::isfinite(v))
    throw UsageError("--cpus \"" + text + "\" is not a number of cores >= 0, e.g. 2 or 0.5");
  return v;
}

std::int64_t memory_of(const std::string& text) {
  try {
    return parse_memory_size(text);
  } catch (const Error& e) {
    throw UsageError("--memory: " + e.message());
  }
}

// An empty value ("--memory ''", an unset shell variable) would read as no flag at all.
const CLI::Validator kNotEmpty(
    [](std::string& value) { return value.empty() ? std::string("is empty; give a value or leave the flag out") : ""; },
    "", "not empty");

}  // namespace

void add_task_resource_options(CLI::App& cmd, ResourceFlags& flags, const std::string& what) {
  cmd.add_option("--cpus", flags.cpus,
                 "cores " + what + " needs (fractional ok, e.g. 0.5); sets its OMP_NUM_THREADS and, where the "
                 "runner has cgroups, its CPU quota")
      ->check(kNotEmpty);
  cmd.add_option("--gpus", flags.gpus,
                 "GPUs " + what + " needs, a count; the runner picks which and sets CUDA_VISIBLE_DEVICES")
      ->check(kNotEmpty);
  cmd.add_option("--memory", flags.memory,
                 "memory " + what + " needs, e.g. 8G or 8GiB (1024-based, as Slurm's --mem), 8GB (1000-based) or "
                 "bytes; over it the kernel kills the task where the runner has cgroups")
      ->check(kNotEmpty);
}

TaskResources task_resources_of(const ResourceFlags& flags) {
  TaskResources r;
  if (!flags.cpus.empty()) r.cpus = cpus_of(flags.cpus);
  if (!flags.gpus.empty()) {
    const bool digits = flags.gpus.size() < 7 && flags.gpus.find_first_not_of("0123456789") == std::string::npos;
    if (!digits)
      throw UsageError("--gpus \"" + flags.gpus + "\" is not a count of GPUs (a whole number >= 0, e.g. 1); the "
                       "runner picks which GPUs a task gets");
    r.gpus = std::stoi(flags.gpus);
  }
  if (!flags.memory.empty()) r.memory_bytes = memory_of(flags.memory);
  return r;
}

void warn_if_no_runner_to_check(TaskQueue& queue, const TaskSpec& spec) {
  if (const std::string warning = queue.check_resources_fit(spec); !warning.empty())
    std::cerr << "warning: " << warning << std::endl;
}

void add_runner_resource_options(CLI::App& cmd, ResourceFlags& flags) {
  cmd.add_option("--cpus", flags.cpus,
                 "cores this runner gives its tasks (default: SLURM_CPUS_PER_TASK, SLURM_CPUS_ON_NODE, else its cores)")
      ->check(kNotEmpty);
  cmd.add_option("--memory", flags.memory,
                 "memory this runner gives its tasks, e.g. 64G (default: SLURM_MEM_PER_NODE / SLURM_MEM_PER_CPU, "
                 "else its cgroup's limit, else the machine's)")
      ->check(kNotEmpty);
  cmd.add_option("--gpus", flags.gpus,
                 "GPU ids it hands out, one task per GPU at a time, e.g. 0,1,2,3 (default: CUDA_VISIBLE_DEVICES, "
                 "else SLURM_STEP_GPUS / SLURM_JOB_GPUS, else none)")
      ->check(kNotEmpty);
}

void apply_runner_resource_flags(const ResourceFlags& flags, double& cpus, std::int64_t& memory_bytes,
                                 std::optional<std::vector<int>>& gpus) {
  if (!flags.cpus.empty()) {
    cpus = cpus_of(flags.cpus);
    if (cpus == 0) throw UsageError("--cpus 0 gives tasks no cores; give a number > 0 or leave it out to detect");
  }
  if (!flags.memory.empty()) {
    memory_bytes = memory_of(flags.memory);
    if (memory_bytes == 0) throw UsageError("--memory 0 gives tasks no memory; give a size or leave it out to detect");
  }
  if (!flags.gpus.empty()) {
    try {
      gpus = detail::parse_gpu_ids(flags.gpus, "--gpus");
    } catch (const Error& e) {
      throw UsageError(e.message());
    }
  }
}

}  // namespace tensorhub
