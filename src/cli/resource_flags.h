// The resource flags of the commands that create tasks (`task create`, `tune`) and of
// `tensorhub runner`: --cpus, --gpus, --memory, read as text so that a bad value gets an error
// naming its flag and the accepted forms.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tensorhub/queue/task.h"

namespace tensorhub {

class TaskQueue;

/// The text of the flags as typed ("" when not given).
struct ResourceFlags {
  std::string cpus, gpus, memory;
};

/// Adds --cpus N (fractional ok), --gpus K (a count) and --memory SIZE (parse_memory_size) to a
/// task-creating command; `what` names what they apply to ("each attempt", "each trial").
void add_task_resource_options(CLI::App& cmd, ResourceFlags& flags, const std::string& what);

/// The TaskResources of the flags. Throws UsageError naming the flag for a value that is not a
/// number >= 0 (--cpus), not a whole count >= 0 (--gpus) or not a memory size (--memory).
TaskResources task_resources_of(const ResourceFlags& flags);

/// Prints TaskQueue::check_resources_fit's warning, if any, to stderr as "warning: ...";
/// lets its InvalidArgument (no live runner could ever run it) through.
void warn_if_no_runner_to_check(TaskQueue& queue, const TaskSpec& spec);

/// Adds the runner's --cpus N, --memory SIZE and --gpus 0,1,2,3 (what it gives its tasks).
void add_runner_resource_options(CLI::App& cmd, ResourceFlags& flags);

/// Sets `cpus`, `memory_bytes` and `gpus` from the runner's flags (unset flags leave them to
/// detection). Throws UsageError naming the flag for a bad value or a GPU id named twice.
void apply_runner_resource_flags(const ResourceFlags& flags, double& cpus, std::int64_t& memory_bytes,
                                 std::optional<std::vector<int>>& gpus);

}  // namespace tensorhub
