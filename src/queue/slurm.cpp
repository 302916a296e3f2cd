#include "tensorhub/queue/slurm.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "file_text.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/process.h"

namespace tensorhub {
namespace {

using detail::read_file;

// Characters an #SBATCH value may hold: those of partition names, GRES specs ("gpu:a100:2"),
// sizes ("8G"), times ("1-00:00:00") and job names. No space, quote or newline, so a value can
// neither end its line nor start another directive.
bool slurm_value_ok(const std::string& value) {
  return std::all_of(value.begin(), value.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("_.,:=+@%/-", c) != nullptr;
  });
}

void check_value(const std::string& flag, const std::string& value) {
  if (!slurm_value_ok(value))
    throw InvalidArgument(flag + " \"" + value +
                          "\" holds a character Slurm's option does not take here (allowed: letters, digits and "
                          "_ . , : = + @ % / -)");
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// A private directory for one command's stdout and stderr files.
std::filesystem::path capture_dir() {
  std::string templ = (std::filesystem::temp_directory_path() / "tensorhub-slurm-XXXXXX").string();
  if (!::mkdtemp(templ.data()))
    throw Unavailable("cannot create a temporary directory for a Slurm command's output: " +
                      std::string(std::strerror(errno)));
  return templ;
}

}  // namespace

void SlurmJobOptions::validate() const {
  if (runners < 1) throw InvalidArgument("--runners must be at least 1, got " + std::to_string(runners));
  if (grace_s < 0) throw InvalidArgument("--grace must be 0 or more seconds, got " + std::to_string(grace_s));
  if (cpus_per_task < 0)
    throw InvalidArgument("--cpus-per-task must be 1 or more (0: Slurm's default), got " + std::to_string(cpus_per_task));
  if (exit_when_idle_s < 0) throw InvalidArgument("--exit-when-idle must be 0 or more seconds");
  check_value("--partition", partition);
  check_value("--gres", gres);
  check_value("--mem", mem);
  if (!mem.empty()) slurm_runner_capacity(*this);  // throws "--mem: ..." for a size Slurm would refuse
  check_value("--time", time);
  check_value("--job-name", job_name);
  if (job_name.empty()) throw InvalidArgument("--job-name must not be empty (squeue finds the runners by it)");
  if (!output_dir.is_absolute())
    throw InvalidArgument("--output-dir \"" + output_dir.string() + "\" must be an absolute path every node can write");
  check_value("--output-dir", output_dir.string());
  if (!std::filesystem::path(program).is_absolute())
    throw InvalidArgument("the tensorhub program \"" + program + "\" must be an absolute path (--program)");
  if (hub_uri.empty()) throw InvalidArgument("--hub must name the hub every node reaches");
  for (const std::string& flag : runner_flags) {
    for (const char* own : {"--hub", "--project", "--exit-when-idle"})
      if (flag == own || flag.starts_with(std::string(own) + "="))
        throw InvalidArgument("the runner flag " + flag + " is set by `tensorhub slurm` itself; give it before `--` (" +
                              own + " of `tensorhub slurm submit`)");
  }
}

std::string slurm_batch_script(const SlurmJobOptions& o) {
  o.validate();
  std::ostringstream s;
  s << "#!/bin/sh\n";
  s << "# Written by `tensorhub slurm submit`: each element of this job array is one tensorhub runner.\n";
  s << "#SBATCH --job-name=" << o.job_name << "\n";
  s << "#SBATCH --array=0-" << (o.runners - 1) << "\n";
  // B: the signal goes to the batch shell only, which is the runner (exec below); it releases
  // its tasks, and Slurm's own SIGTERM/SIGKILL at the limit find nothing left to stop.
  s << "#SBATCH --signal=B:TERM@" << o.grace_s << "\n";
  s << "#SBATCH --output=" << (o.output_dir / "%x-%A_%a.out").string() << "\n";
  s << "#SBATCH " << (o.requeue ? "--requeue" : "--no-requeue") << "\n";
  if (!o.partition.empty()) s << "#SBATCH --partition=" << o.partition << "\n";
  if (!o.gres.empty()) s << "#SBATCH --gres=" << o.gres << "\n";
  if (o.cpus_per_task > 0) s << "#SBATCH --cpus-per-task=" << o.cpus_per_task << "\n";
  if (!o.mem.empty()) s << "#SBATCH --mem=" << o.mem << "\n";
  if (!o.time.empty()) s << "#SBATCH --time=" << o.time << "\n";
  s << "# The runner takes its cores, memory and GPUs from SLURM_CPUS_PER_TASK, SLURM_MEM_PER_NODE and\n"
       "# SLURM_JOB_GPUS, and records <SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID> as its job.\n";
  std::ostringstream exit_when_idle;
  exit_when_idle << o.exit_when_idle_s;
  std::vector<std::string> argv = {o.program, "runner", "--hub", o.hub_uri, "--project", o.project,
                                   "--exit-when-idle", exit_when_idle.str()};
  argv.insert(argv.end(), o.runner_flags.begin(), o.runner_flags.end());
  s << "exec";
  for (const std::string& word : argv) s << " " << shell_quote(word);
  s << "\n";
  return s.str();
}

SlurmCommandResult run_slurm_command(const std::vector<std::string>& argv, double timeout_s) {
  const std::filesystem::path dir = capture_dir();
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{dir};
  ProcessOptions options;
  options.output = dir / "stdout";
  options.error_output = dir / "stderr";
  options.append_output = false;
  options.own_process_group = true;  // a terminal's Ctrl-C reaches us, and we stop the command
  Process process = [&]() {
    try {
      return Process::spawn(argv, options);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kNotFound) throw;
      throw NotFound(argv[0] + " not found on PATH (" + e.message() +
                     "): Slurm's client commands must be installed here (Debian: slurm-client or slurm-wlm) and "
                     "on PATH");
    }
  }();
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  const std::optional<int> code = process.wait_for(timeout);
  if (!code) {
    process.stop(std::chrono::seconds(2));
    throw Unavailable(argv[0] + " did not answer within " + std::to_string(static_cast<int>(timeout_s)) +
                      " s (is slurmctld running and reachable? see `scontrol ping`)");
  }
  return {*code, read_file(dir / "stdout"), read_file(dir / "stderr")};
}

void slurm_check(const std::string& command, const SlurmCommandResult& result) {
  if (result.exit_code == 0) return;
  std::string err = trim(result.err);
  if (err.empty()) err = trim(result.out);
  std::string message = command + " failed (exit " + std::to_string(result.exit_code) + ")" +
                        (err.empty() ? std::string() : ": " + err);
  std::string lower = err;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.find("munge") != std::string::npos || lower.find("authentication") != std::string::npos)
    message += "\n(Slurm authenticates with munge: is munged running on this machine and reachable through the "
               "socket of slurm.conf's AuthInfo? e.g. `systemctl start munge`, then `munge -n | unmunge`)";
  throw Unavailable(message);
}

std::string slurm_submit(const std::string& script, const std::filesystem::path& script_path) {
  {
    std::ofstream out(script_path, std::ios::binary | std::ios::trunc);
    out << script;
    out.close();
    if (!out) throw Unavailable("cannot write the batch script " + script_path.string());
  }
  std::filesystem::permissions(script_path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // A script that was never queued is not left behind to be mistaken for a submitted one.
  const auto remove_script = [&]() {
    std::error_code ignored;
    std::filesystem::remove(script_path, ignored);
  };
  SlurmCommandResult result;
  try {
    result = run_slurm_command({"sbatch", "--parsable", script_path.string()});
    slurm_check("sbatch", result);
  } catch (...) {
    remove_script();
    throw;
  }
  // --parsable prints "jobid" or "jobid;cluster"; warnings go to stderr.
  std::string id = trim(result.out);
  if (const auto nl = id.rfind('\n'); nl != std::string::npos) id = id.substr(nl + 1);
  id = id.substr(0, id.find(';'));
  if (id.empty() || !std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw Unavailable("sbatch answered without a job id: \"" + trim(result.out) + "\" " + trim(result.err));
  return id;
}

bool SlurmJob::pending() const {
  return state == "PENDING" || state == "REQUEUED" || state == "REQUEUE_HOLD" || state == "REQUEUE_FED" ||
         state == "CONFIGURING" || state == "RESV_DEL_HOLD" || state == "SUSPENDED" || state == "RESIZING";
}

bool SlurmJob::running() const { return state == "RUNNING" || state == "COMPLETING" || state == "STAGE_OUT"; }

std::vector<SlurmJob> parse_squeue_lines(const std::string& text) {
  std::vector<SlurmJob> jobs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::size_t begin = 0;
    for (;;) {
      const std::size_t bar = line.find('|', begin);
      f.push_back(line.substr(begin, bar == std::string::npos ? std::string::npos : bar - begin));
      if (bar == std::string::npos) break;
      begin = bar + 1;
    }
    if (f.size() != 7)
      throw Unavailable("squeue printed a line this version of tensorhub cannot read (7 fields expected): " + line);
    SlurmJob job{f[0], f[1], f[2], f[3], f[4], f[5], f[6]};
    if (job.node == "(null)") job.node.clear();
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::vector<SlurmJob> slurm_list_jobs(const std::string& job_name) {
  check_value("--job-name", job_name);
  const SlurmCommandResult result =
      run_slurm_command({"squeue", "--me", "-h", "-r", "-n", job_name, "-o", "%i|%A|%T|%N|%M|%r|%P"});
  slurm_check("squeue", result);
  return parse_squeue_lines(result.out);
}

SlurmScaleDecision decide_slurm_scale(std::int64_t pending, std::int64_t running_tasks, std::int64_t queued_jobs,
                                      std::int64_t running_jobs, int max_runners, std::int64_t pending_too_big) {
  const std::int64_t idle_running = std::max<std::int64_t>(0, running_jobs - running_tasks);
  const std::int64_t room = std::max<std::int64_t>(0, max_runners - queued_jobs - running_jobs);
  const std::int64_t uncovered = std::max<std::int64_t>(0, pending - queued_jobs - idle_running);
  const std::int64_t submit = std::min(room, uncovered);
  std::ostringstream why;
  why << pending << (pending == 1 ? " task" : " tasks") << " pending that fit, " << running_tasks << " running; runner jobs: "
      << queued_jobs << " queued, " << running_jobs << " running (" << idle_running << " idle): ";
  if (submit > 0)
    why << "submitting " << submit;
  else if (pending == 0 && pending_too_big > 0)
    why << "submitting none (" << pending_too_big << (pending_too_big == 1 ? " pending task asks" : " pending tasks ask")
        << " for more than a runner of this shape has: --cpus-per-task, --gres gpu:K, --mem)";
  else if (pending == 0)
    why << "submitting none (nothing waits)";
  else if (uncovered == 0)
    why << "submitting none (queued and idle runners cover the pending tasks)";
  else
    why << "submitting none (at --max-runners " << max_runners << ")";
  return {static_cast<int>(submit), why.str()};
}

TaskResources slurm_runner_capacity(const SlurmJobOptions& job) {
  TaskResources c;
  c.cpus = job.cpus_per_task > 0 ? job.cpus_per_task : 1;
  // --gres is a comma-separated list (gpu:2,mps:100): only its gpu entry counts GPUs.
  std::istringstream entries(job.gres);
  for (std::string entry; std::getline(entries, entry, ',');) {
    if (entry != "gpu" && !entry.starts_with("gpu:")) continue;
    const auto colon = entry.rfind(':');
    try {
      c.gpus = colon == std::string::npos ? 1 : std::stoi(entry.substr(colon + 1));
    } catch (const std::exception&) {
      c.gpus = 1;  // "gpu:a100": one GPU of that type
    }
  }
  c.memory_bytes = std::numeric_limits<std::int64_t>::max();
  if (!job.mem.empty()) {
    const bool bare = job.mem.find_first_not_of("0123456789") == std::string::npos;
    try {
      c.memory_bytes = parse_memory_size(bare ? job.mem + "M" : job.mem);
    } catch (const Error& e) {
      throw InvalidArgument("--mem: " + e.message());
    }
  }
  return c;
}

}  // namespace tensorhub
