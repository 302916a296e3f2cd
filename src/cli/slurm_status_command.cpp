// tensorhub slurm status: our runner jobs as squeue lists them, each joined with the runner it
// started (the runners table's slurm_job_id) and the task that runner holds (lease_owner).
#include <iostream>
#include <map>
#include <memory>

#include "commands.h"
#include "table.h"
#include "tensorhub/queue/slurm.h"
#include "tensorhub/queue/task_queue.h"

namespace tensorhub {
namespace {

struct StatusArgs {
  HubFlags hub;
  std::string job_name = "tensorhub-runner";
  bool json = false;
};

// One row per job: Slurm's view, then the runner's and its task's where the hub knows them.
Json status_row(const SlurmJob& job, const RunnerInfo* runner, const std::vector<const Task*>& tasks) {
  Json row = {{"job", job.job_id},   {"state", job.state},         {"node", job.node},
              {"elapsed", job.elapsed}, {"partition", job.partition}, {"reason", job.reason}};
  row["runner"] = runner ? runner->owner : "";
  Json ids = Json::array(), names = Json::array();
  for (const Task* t : tasks) {
    ids.push_back(t->id);
    names.push_back(t->spec.task_name);
  }
  row["tasks"] = ids;
  row["task_names"] = names;
  return row;
}

std::string ids_text(const Json& ids) {
  std::string text;
  for (const auto& id : ids) text += (text.empty() ? "" : ",") + std::to_string(id.get<std::int64_t>());
  return text;
}

}  // namespace

void add_slurm_status_command(CLI::App& slurm) {
  auto args = std::make_shared<StatusArgs>();
  auto* cmd = slurm.add_subcommand(
      "status", "list our runner jobs (squeue) with their Slurm state, node, elapsed time and the tasks each runs");
  add_hub_options(*cmd, args->hub);
  cmd->add_option("--job-name", args->job_name, "the runner jobs' name (as given to submit or scale)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print JSON instead of a table");
  cmd->callback([args]() {
    const std::vector<SlurmJob> jobs = slurm_list_jobs(args->job_name);
    Hub hub = open_hub(args->hub, OpenMode::kReadOnly);
    TaskQueue queue(hub);
    std::map<std::string, RunnerInfo> runner_of_job;
    for (RunnerInfo& r : queue.list_runners(true))
      if (!r.slurm_job_id.empty()) runner_of_job[r.slurm_job_id] = std::move(r);
    const std::vector<Task> running = queue.find_tasks({{"status", "running"}});
    Json rows = Json::array();
    for (const SlurmJob& job : jobs) {
      const auto it = runner_of_job.find(job.job_id);
      const RunnerInfo* runner = it == runner_of_job.end() ? nullptr : &it->second;
      std::vector<const Task*> tasks;
      if (runner)
        for (const Task& t : running)
          if (t.lease_owner == runner->owner) tasks.push_back(&t);
      rows.push_back(status_row(job, runner, tasks));
    }
    if (args->json) {
      std::cout << rows.dump(2) << std::endl;
      return;
    }
    if (rows.empty()) {
      std::cout << "no runner jobs named " << args->job_name << " in Slurm's queue" << std::endl;
      return;
    }
    std::vector<nlohmann::json> table;
    for (Json row : rows) {
      row["tasks"] = ids_text(row["tasks"]);
      table.push_back(row);
    }
    print_table(table, {"job", "state", "node", "elapsed", "reason", "runner", "tasks"});
  });
}

}  // namespace tensorhub
