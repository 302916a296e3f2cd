#include "tensorhub/queue/runner.h"

#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <set>
#include <vector>

#include "attempt_usage.h"
#include "exec_child.h"
#include "runner_resources.h"
#include "task_limits.h"
#include "runner_watchdog.h"
#include "script_bootstrap.h"
#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/queue/command_template.h"
#include "tensorhub/queue/fork_server.h"
#include "task_processes.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/lineage.h"
#include "tensorhub/store/uri.h"

extern char** environ;

namespace tensorhub {
namespace {

using Clock = std::chrono::steady_clock;

// How often a runner reads whether its running tasks were cancelled (seconds).
constexpr double kCancelCheckS = 1.0;

// Fork servers that may die before spec tasks stop using one (each death is logged).
constexpr int kMaxForkServerDeaths = 3;

// With notifications (PostgreSQL), an idle runner still polls this often: the fallback for
// a notification lost with a dropped connection, and the pace of reaping expired leases.
constexpr double kNotifiedPollS = 1.0;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// "0.5", "10": seconds for messages, without printf's trailing zeros.
std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// "0.42 s", "12.3 s", "754 s": a task's duration for the log, to about three digits.
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 1 ? "%.2f s" : s < 100 ? "%.1f s" : "%.0f s", s);
  return buf;
}

// Why `trainer` (a program and its arguments) cannot be run, or "" if it can; `hint` says how
// to give another.
std::string trainer_not_executable(const std::vector<std::string>& trainer, const std::string& hint) {
  if (trainer.empty() || ::access(trainer[0].c_str(), X_OK) == 0) return "";
  return "the trainer for spec tasks " + trainer[0] + " is not an executable file (" + std::strerror(errno) + ")" +
         (hint.empty() ? "" : "; " + hint);
}

// The file `program` names: itself when it holds a "/", else the first executable file of that
// name in the ":"-separated `path` (as execvp searches). Throws InvalidArgument saying what
// was looked for and how to give an interpreter instead.
std::string find_python(const std::string& program, const std::string& path) {
  const std::string how = "; give the runner --python /path/to/python3 (RunnerOptions::python) or the task its "
                          "own python";
  if (program.find('/') != std::string::npos) {
    if (::access(program.c_str(), X_OK) == 0) return program;
    throw InvalidArgument("the Python interpreter " + program + " for script tasks is not an executable file (" +
                          std::strerror(errno) + ")" + how);
  }
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = end == start ? "." : path.substr(start, end - start);
    const std::string candidate = dir + "/" + program;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  throw InvalidArgument("no " + program + " on the runner's PATH (" + path + ") to run script tasks with" + how);
}

// A result for the runner's log: itself when short, else its size and keys (a task may
// return megabytes, which do not belong on one log line).
std::string describe_result(const Json& result) {
  constexpr std::size_t kShown = 200;
  const std::string text = result.dump();
  if (text.size() <= kShown) return text;
  std::string keys;
  for (const auto& [k, v] : result.items()) keys += (keys.empty() ? "" : ", ") + k;
  if (keys.size() > kShown) keys = keys.substr(0, kShown) + "...";
  return "a result of " + std::to_string(text.size()) + " bytes with keys " + keys;
}

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// What a model the task saves records of it (store/lineage.h): the task, its attempt, its
// hyperparameters and what it runs (its command, its spec's SHA-256, or its script's).
Json lineage_of(const Task& task) {
  Json l = {{"task_id", task.id},
            {"attempt", task.attempt},
            {"task_name", task.spec.task_name},
            {"hyper_parameters", encode_non_finite(task.spec.hyper_parameters)}};
  if (!task.spec.command.empty()) l["command"] = task.spec.command;
  if (!task.spec.train_spec.is_null()) l["spec_sha256"] = sha256_hex(task.spec.train_spec.dump());
  if (!task.spec.script_sha256.empty()) {
    l["script_name"] = task.spec.script_name;
    l["script_sha256"] = task.spec.script_sha256;
  }
  return l;
}

std::string read_tail(const std::filesystem::path& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::size_t>(in.tellg());
  const std::size_t start = size > bytes ? size - bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string out(size - start, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  return mask_passwords(out);  // a task that prints $TENSORHUB_URI must not publish its password
}

// The last non-blank line of a task's output, cut to 300 bytes: most programs say why they
// failed last ("tensorhub: hub dataset ... has no feature ...", "ValueError: ..."), which
// belongs in the task's error, not only in its log tail.
std::string last_line(const std::string& output) {
  std::size_t end = output.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  const std::size_t start = output.rfind('\n', end);
  std::string line = output.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
  constexpr std::size_t kMax = 300;
  if (line.size() > kMax) line = line.substr(0, kMax) + "...";
  return line;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

// One task running in a child process.
struct Slot {
  Task task;
  std::string attempt;  // TaskProcesses::attempt_name
  pid_t pid = -1;
  int pidfd = -1;  // readable once the process exits; -1 where the kernel lacks pidfd_open
  bool exited = false;       // reaped; its outcome is still to be stored in the hub
  Clock::time_point exited_at;  // when it was reaped
  int status = 0;            // wait status once exited
  std::string forced_error;  // why the runner killed it (timeout), if it did
  std::filesystem::path log_path;
  std::filesystem::path result_path;
  std::filesystem::path script_dir;  // script tasks: the attempt's directory holding the script
  Clock::time_point started;
  Clock::time_point last_heartbeat;
  std::vector<int> gpus;    // the GPU ids it was given (their locks held until erase)
  long long oom_kills = 0;  // processes of its memory cgroup the kernel's OOM killer killed
  std::unique_ptr<AttemptMeter> meter;  // with RunnerOptions::accounting; reset once its row is ended
};

// A wait status of a process ended by SIGTERM, or of a shell reporting its child's (143).
bool terminated_by_sigterm(int status) {
  return (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) || (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM);
}

}  // namespace

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

struct Runner::Impl {
  RunnerOptions opt;
  Hub hub;
  TaskQueue queue;
  std::vector<Slot> slots;
  RunnerStats stats;
  bool own_work_dir = false;
  bool bootstrap_written = false;         // script tasks' bootstrap is in work_dir
  std::unique_ptr<TaskProcesses> trees;  // every process of every task, daemons included
  std::unique_ptr<ForkServer> forks;     // spec tasks' fork server, once started
  std::unique_ptr<RunnerWatchdog> watchdog;  // kills the running attempts if this process dies
  bool forks_failed = false;             // it could not start or died too often: tasks are executed
  int fork_server_deaths = 0;            // servers that died; a new one starts up to kMaxForkServerDeaths
  Clock::time_point last_orphan_scan = Clock::now();
  Clock::time_point last_cancel_check = Clock::now();
  std::unique_ptr<detail::GpuLocks> gpu_locks;  // per-GPU flocks shared with other runners
  std::unique_ptr<TaskLimits> limits;           // per-attempt memory/cpu cgroups; null: not enforced
  bool registered = false;                      // this runner has its row in the runners table
  Clock::time_point last_touch = Clock::now();
  // After a task could not be started here (fork, cgroup, log file: a fault of this machine,
  // not of the task), claims pause until then, doubling from 1 s up to 60 s per fault in a
  // row, so a broken runner cannot burn through the queue's attempts; a start resets it.
  Clock::time_point claims_paused_until = Clock::now();
  double start_fault_pause_s = 0;

  explicit Impl(RunnerOptions o)
      : opt(std::move(o)), hub(opt.hub_uri, opt.project_name), queue(hub) {
    if (opt.owner.empty()) opt.owner = hostname() + ":" + std::to_string(getpid());
    if (opt.work_dir.empty()) {
      std::string pattern = (std::filesystem::temp_directory_path() / "tensorhub-runner-XXXXXX").string();
      if (!mkdtemp(pattern.data())) throw Unavailable("cannot create a runner work directory in /tmp: " + std::string(std::strerror(errno)));
      opt.work_dir = pattern;
      own_work_dir = true;
    } else {
      std::error_code ec;
      std::filesystem::create_directories(opt.work_dir, ec);
      if (ec) throw Unavailable("cannot create runner work directory " + opt.work_dir.string() + ": " + ec.message());
    }
    if (!opt.log) opt.log = [](const std::string& line) { std::cerr << line << std::endl; };
    trees = std::make_unique<TaskProcesses>(opt.task_cgroups, [this](const std::string& line) { log(line); });
    resolve_resources();
    // The runner's own cores (--cpus, Slurm's, else the machine's), not the machine's: a runner
    // given 1 of 64 cores must not tell its tasks to run 64 threads.
    if (opt.threads_per_task <= 0)
      opt.threads_per_task = static_cast<int>(std::clamp(std::floor(opt.cpus / opt.slots), 1.0, 4096.0));
  }

  // What the runner gives its tasks: RunnerOptions' values, else detected (runner_resources.h);
  // and where it enforces them.
  void resolve_resources() {
    std::string memory_source = "--memory", gpu_source = "--gpus";
    if (opt.cpus <= 0) opt.cpus = detail::detect_cpus();
    if (opt.memory_bytes <= 0)
      opt.memory_bytes = detail::detect_memory_bytes(opt.cpus, detail::own_cgroup_dirs(), "/proc/meminfo", &memory_source);
    if (!opt.gpus) opt.gpus = detail::detect_gpus(&gpu_source);
    if (!opt.gpus->empty()) gpu_locks = std::make_unique<detail::GpuLocks>(opt.work_dir);
    std::string why_not = "task cgroups are off";
    if (opt.task_cgroups) limits = TaskLimits::open(std::filesystem::path(trees->cgroup_of("x")).parent_path(), &why_not);
    log("resources: " + format_seconds(opt.cpus) + " cpus, " + format_memory_size(opt.memory_bytes) + " of memory (" +
        memory_source + "), GPUs " + (opt.gpus->empty() ? "none" : detail::gpu_id_list(*opt.gpus)) +
        (gpu_source.empty() ? "" : " (" + gpu_source + ")") +
        (gpu_locks ? ", GPU locks in " + gpu_locks->dir().string() : ""));
    if (limits) log("memory and cpu limits of tasks enforced by " + limits->describe());
    else log("memory limits not enforced: " + why_not);
  }

  // The row of this runner in the runners table (runner_registry.h).
  RunnerInfo runner_info() const {
    RunnerInfo info;
    info.owner = opt.owner;
    info.task_name = opt.task_name;
    info.host = hostname();
    info.pid = getpid();
    info.cpus = opt.cpus;
    info.memory_bytes = opt.memory_bytes;
    info.gpus = *opt.gpus;
    info.slots = opt.slots;
    info.lease_s = opt.lease_s;
    info.slurm_job_id = detail::detect_slurm_job_id();
    return info;
  }

  // Registers the runner, then touches its row at most every lease_s / 3 (registering again
  // if the row was removed as stale). May throw on a hub error: run() retries.
  void keep_registered() {
    if (registered && seconds_since(last_touch) < opt.lease_s / 3) return;
    last_touch = Clock::now();
    if (!registered || !queue.touch_runner(opt.owner)) queue.register_runner(runner_info());
    registered = true;
  }

  // What is free now: capacity less the cpus and memory of running attempts, and the GPUs no
  // attempt here holds whose lock no other process holds (locked into *gpus, to be handed to
  // the claimed task or unlocked by take_gpus).
  TaskResources free_resources(std::vector<int>* gpus) {
    double cpus = opt.cpus;
    std::int64_t memory = opt.memory_bytes;
    for (const Slot& s : slots) {
      cpus -= s.task.spec.resources.cpus;
      memory -= s.task.spec.resources.memory_bytes;
    }
    for (int id : *opt.gpus)
      if (!gpu_locks->held(id) && gpu_locks->try_lock(id)) gpus->push_back(id);
    // A sum of fractions may leave -1e-16: never below 0, where a task asking nothing still fits.
    return {std::max(0.0, cpus), static_cast<int>(gpus->size()), std::max<std::int64_t>(0, memory)};
  }

  // The first `n` of `offered` go to the task; the locks of the rest are given back.
  std::vector<int> take_gpus(std::vector<int>& offered, int n) {
    std::vector<int> taken(offered.begin(), offered.begin() + std::min<std::size_t>(n, offered.size()));
    for (std::size_t i = taken.size(); i < offered.size(); ++i) gpu_locks->unlock(offered[i]);
    offered.clear();
    return taken;
  }

  // What a child needs to start as an attempt: its log (stdout and stderr), the descriptor of
  // its cgroup's cgroup.procs (-1 without) and those of its limit cgroups; all close-on-exec,
  // closed by the parent after the fork (close()).
  struct AttemptFds {
    int log = -1, cgroup = -1;
    std::vector<int> limits;
    void close() {
      if (log >= 0) ::close(log);
      if (cgroup >= 0) ::close(cgroup);
      for (const int fd : limits) ::close(fd);
      log = cgroup = -1;
      limits.clear();
    }
  };

  // Opens the attempt's log and makes its cgroup and limit cgroups. Throws Unavailable naming
  // what failed, after closing what it opened and removing the limit cgroups it made.
  AttemptFds open_attempt(const std::string& attempt, const std::filesystem::path& log_path,
                          const TaskResources& resources) {
    AttemptFds fds;
    fds.log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fds.log < 0) throw Unavailable("cannot create task log " + log_path.string() + ": " + std::strerror(errno));
    try {
      fds.cgroup = trees->prepare(attempt);
      fds.limits = apply_limits(attempt, resources);
    } catch (...) {
      fds.close();
      if (limits) limits->remove(attempt);
      throw;
    }
    return fds;
  }

  // The attempt's memory/cpu cgroups (task_limits.h), after trees->prepare made its v2 cgroup:
  // descriptors the child joins by; none without limits or requests.
  std::vector<int> apply_limits(const std::string& attempt, const TaskResources& resources) {
    if (!limits || (resources.memory_bytes == 0 && resources.cpus == 0)) return {};
    return limits->apply(attempt, resources);
  }

  // Why this runner cannot train spec tasks, or "" if it can.
  std::string spec_trainer_problem() const {
    if (opt.spec_command.empty())
      return "this runner has no trainer for spec tasks (RunnerOptions::spec_command)" +
             (opt.trainer_hint.empty() ? "" : ": " + opt.trainer_hint);
    return trainer_not_executable(opt.spec_command, opt.trainer_hint);
  }

  ~Impl() {
    if (own_work_dir) {
      std::error_code ec;
      std::filesystem::remove_all(opt.work_dir, ec);
    }
  }

  void log(const std::string& what) { opt.log("[runner " + opt.owner + "] " + what); }

  std::string task_label(const Task& t) {
    return "task " + std::to_string(t.id) + " (" + t.spec.task_name + ", attempt " + std::to_string(t.attempt) + ")";
  }

  // What a task runs: argv, the TENSORHUB_HP_* variables of a command, and a line for the log.
  struct Launch {
    std::vector<std::string> args;
    std::vector<std::pair<std::string, std::string>> values;
    std::string shown;
    std::filesystem::path spec_path;  // spec tasks: the spec file given to the trainer
    std::filesystem::path script_dir;  // script tasks: the attempt's directory
  };

  // The PATH tasks see (path_prepend in front of the runner's).
  std::string task_path() const {
    const char* path = std::getenv("PATH");
    const std::string inherited = path && *path ? path : "/usr/bin:/bin";
    return opt.path_prepend.empty() ? inherited : opt.path_prepend + ":" + inherited;
  }

  // A script task runs the bootstrap with the task's (or the runner's) Python on the script,
  // written to the attempt's own directory under its script_name (tracebacks name it).
  Launch script_launch_of(const Task& task, const std::string& attempt) {
    Launch l;
    const std::string python = find_python(task.spec.python.empty() ? opt.python : task.spec.python, task_path());
    const std::filesystem::path bootstrap = opt.work_dir / "tensorhub_script_bootstrap.py";
    if (!bootstrap_written) {  // once per runner, over any older bootstrap in a given work_dir
      write_text(bootstrap, detail::script_bootstrap_source());
      bootstrap_written = true;
    }
    l.script_dir = opt.work_dir / attempt;
    std::error_code ec;
    std::filesystem::create_directories(l.script_dir, ec);
    if (ec) throw Unavailable("cannot create the attempt directory " + l.script_dir.string() + ": " + ec.message());
    const std::string name = task.spec.script_name.empty() ? kDefaultScriptName : task.spec.script_name;
    write_text(l.script_dir / name, task.spec.script);
    l.args = {python, bootstrap.string(), (l.script_dir / name).string(), Json(task.spec.saved_result_keys).dump()};
    l.shown = python + " " + name + " (sha256 " + task.spec.script_sha256.substr(0, 12) + ")" +
              (task.spec.hyper_parameters.empty() ? "" : " with " + task.spec.hyper_parameters.dump());
    return l;
  }

  static void write_text(const std::filesystem::path& path, std::string_view text) {
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    write_file_bytes(path, std::vector<std::byte>(p, p + text.size()));
  }

  // A command task runs under /bin/sh; a spec task runs the trainer on its spec file.
  Launch launch_of(const Task& task, const std::string& attempt) {
    if (!task.spec.script.empty()) return script_launch_of(task, attempt);
    Launch l;
    if (!task.spec.train_spec.is_null()) {
      l.spec_path = opt.work_dir / ("task-" + std::to_string(task.id) + ".spec.json");
      const std::string text = task.spec.train_spec.dump(2);
      const auto* p = reinterpret_cast<const std::byte*>(text.data());
      write_file_bytes(l.spec_path, std::vector<std::byte>(p, p + text.size()));
      l.args = opt.spec_command;
      for (const auto& a : l.args) l.shown += (l.shown.empty() ? "" : " ") + a;
      return l;
    }
    // Values travel in the environment, never in the script (command_template.h).
    ShellCommand shell = render_command(task.spec.command, task.spec.hyper_parameters);
    l.args = {"/bin/sh", "-c", shell.script};
    l.values = std::move(shell.env);
    l.shown = shell.script + (task.spec.hyper_parameters.empty() ? "" : " with " + task.spec.hyper_parameters.dump());
    return l;
  }

  // The runner's environment as tasks inherit it: less the runner's own TENSORHUB_* variables
  // (but with the machine's blob cache settings, TENSORHUB_BLOB_CACHE*, which tasks share) and
  // thread settings, PATH with path_prepend in front.
  std::vector<std::string> inherited_environment() const {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const bool runner_own = kv.starts_with("TENSORHUB_") && !kv.starts_with("TENSORHUB_BLOB_CACHE");
      if (runner_own || kv.starts_with("OMP_NUM_THREADS=")) continue;
      if (!opt.path_prepend.empty() && kv.starts_with("PATH=")) continue;  // set below
      env.push_back(kv);
    }
    if (!opt.path_prepend.empty()) {
      const char* path = std::getenv("PATH");
      env.push_back("PATH=" + opt.path_prepend + ":" + (path && *path ? path : "/usr/bin:/bin"));
    }
    return env;
  }

  // The task's environment: the runner's, less its TENSORHUB_* and thread settings (but with
  // the machine's blob cache settings, TENSORHUB_BLOB_CACHE*, which tasks share), plus the
  // variables of task_context.h and the launch's values.
  std::vector<std::string> environment_of(const Task& task, const Slot& slot, const Launch& l) {
    std::vector<std::string> env = inherited_environment();
    env.push_back("TENSORHUB_URI=" + hub.uri());
    env.push_back("TENSORHUB_PROJECT=" + opt.project_name);
    env.push_back("TENSORHUB_TASK_ID=" + std::to_string(task.id));
    env.push_back("TENSORHUB_ATTEMPT=" + std::to_string(task.attempt));
    // Non-finite values in their {"$numberDouble": ...} form, which TaskContext decodes.
    env.push_back("TENSORHUB_HYPER_PARAMETERS=" + encode_non_finite(task.spec.hyper_parameters).dump());
    env.push_back("TENSORHUB_RESULT_FILE=" + slot.result_path.string());
    env.push_back(std::string(kLineageEnv) + "=" + lineage_of(task).dump());
    // A task that asked for cpus gets ceil(cpus) threads, else the runner's share per slot.
    const double cpus = task.spec.resources.cpus;
    const int threads = cpus > 0 ? std::max(1, static_cast<int>(std::ceil(cpus))) : opt.threads_per_task;
    env.push_back("TENSORHUB_NUM_THREADS=" + std::to_string(threads));
    env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
    if (!opt.gpus->empty()) {
      // Its own GPUs only; none ("" and "none") for a task that asked for none, so it cannot
      // take one that another attempt holds.
      std::erase_if(env, [](const std::string& kv) {
        return kv.starts_with("CUDA_VISIBLE_DEVICES=") || kv.starts_with("NVIDIA_VISIBLE_DEVICES=");
      });
      const std::string ids = detail::gpu_id_list(slot.gpus);
      env.push_back("CUDA_VISIBLE_DEVICES=" + ids);
      env.push_back("NVIDIA_VISIBLE_DEVICES=" + (ids.empty() ? std::string("none") : ids));
    }
    if (!l.spec_path.empty()) env.push_back("TENSORHUB_SPEC_FILE=" + l.spec_path.string());
    for (const auto& [name, value] : l.values) env.push_back(name + "=" + value);
    return env;
  }

  // Forks and execs `args` with `env`, output to `log_path`, in its own process group and the
  // attempt's cgroup. Everything the child needs is prepared before fork(), so the child only
  // calls async-signal-safe functions.
  pid_t fork_task(const std::string& attempt, std::vector<std::string> args, std::vector<std::string> env,
                  const std::filesystem::path& log_path, const TaskResources& resources) {
    std::vector<char*> envp, argv;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    AttemptFds fds = open_attempt(attempt, log_path, resources);
    const int log_fd = fds.log, cgroup_fd = fds.cgroup;
    const std::vector<int>& limit_fds = fds.limits;
    const pid_t pid = fork();
    if (pid == 0) {
      if (cgroup_fd >= 0 && ::write(cgroup_fd, "0", 1) != 1) _exit(126);  // join the attempt's cgroup first
      for (const int fd : limit_fds)
        if (::write(fd, "0", 1) != 1) _exit(126);  // and its v1 memory/cpu cgroups (task_limits.h)
      setpgid(0, 0);  // own process group, so a kill reaches the task's children too
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a runner killed with SIGKILL takes its task along
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      detail::exec_child(argv.data(), envp.data());
    }
    const int fork_errno = errno;
    fds.close();
    if (pid < 0) {
      if (limits) limits->remove(attempt);
      throw Unavailable(std::string("fork failed: ") + std::strerror(fork_errno));
    }
    setpgid(pid, pid);  // also from the parent, so it holds before we might signal it
    return pid;
  }

  // The fork server for spec tasks, started on first use (again after one died); nullptr
  // without one: none asked for, or it could not start or died too often (logged), after
  // which spec tasks are executed.
  ForkServer* fork_server() {
    if (forks || forks_failed || opt.fork_server.empty()) return forks.get();
    try {
      if (!trees->is_subreaper()) throw Unavailable("the runner is not a child subreaper");
      forks = ForkServer::start(opt.fork_server, inherited_environment());
      log("spec tasks start as forks of " + opt.fork_server[0] + " (pid " + std::to_string(forks->pid()) + ")");
    } catch (const Error& e) {
      forks_failed = true;
      log("warning: no fork server (" + e.message() + "): each spec task is a new process");
    }
    return forks.get();
  }

  // A fork server that died (killed, out of memory): reaped at once, not left a zombie, and
  // replaced at the next spec task unless servers keep dying.
  void check_fork_server() {
    if (!forks) return;
    if (const auto status = forks->poll_exit()) fork_server_died("the fork server (pid " + std::to_string(forks->pid()) + ") " + describe_exit(*status));
  }

  void fork_server_died(const std::string& what) {
    forks.reset();
    forks_failed = ++fork_server_deaths >= kMaxForkServerDeaths;
    log("warning: " + what + (forks_failed ? "; it died " + std::to_string(fork_server_deaths) +
                                                 " times, so each spec task is a new process from now on"
                                           : "; the next spec task starts a new one"));
  }

  // Starts a spec task as a fork of the fork server; -1 if there is none or it failed (then
  // the caller executes the task).
  pid_t fork_from_server(const std::string& attempt, const Launch& l, const std::vector<std::string>& env,
                         const std::filesystem::path& log_path, const TaskResources& resources) {
    ForkServer* server = l.spec_path.empty() ? nullptr : fork_server();
    if (!server) return -1;
    AttemptFds fds = open_attempt(attempt, log_path, resources);
    const int log_fd = fds.log, cgroup_fd = fds.cgroup;
    const std::vector<int>& limit_fds = fds.limits;
    pid_t pid = -1;
    try {
      pid = server->spawn({l.args, env, log_fd, cgroup_fd});
      // The server's child cannot join v1 cgroups itself: moved by pid, just after the fork
      // (what it allocated before stays charged to the runner's cgroup).
      for (const int fd : limit_fds) {
        const std::string text = std::to_string(pid);
        if (::write(fd, text.data(), text.size()) < 0) log("warning: cannot move the task into its limit cgroup");
      }
    } catch (const Error& e) {
      // The server is gone or cannot fork: this task is executed instead.
      if (forks->poll_exit()) fork_server_died("the fork server failed (" + e.message() + ")");
      else {
        forks.reset();
        forks_failed = true;
        log("warning: the fork server failed (" + e.message() + "); each spec task is a new process from now on");
      }
    }
    fds.close();
    return pid;
  }

  // Starts an attempt of `task` in a new slot.
  void start(const Task& task, std::vector<int> gpus) {
    Slot slot;
    slot.task = task;
    slot.gpus = std::move(gpus);
    slot.attempt = TaskProcesses::attempt_name(task.id, task.attempt);
    slot.log_path = opt.work_dir / (slot.attempt + ".log");
    slot.result_path = opt.work_dir / (slot.attempt + ".result.json");
    std::filesystem::remove(slot.result_path);
    Launch l = launch_of(task, slot.attempt);
    slot.script_dir = l.script_dir;
    std::vector<std::string> env = environment_of(task, slot, l);
    slot.pid = fork_from_server(slot.attempt, l, env, slot.log_path, task.spec.resources);
    if (slot.pid < 0) slot.pid = fork_task(slot.attempt, l.args, std::move(env), slot.log_path, task.spec.resources);
    slot.pidfd = static_cast<int>(syscall(SYS_pidfd_open, slot.pid, 0));  // glibc 2.36 declares pidfd_open without C linkage
    slot.started = slot.last_heartbeat = Clock::now();
    if (watchdog) watchdog->add(slot.attempt, slot.pid, trees->cgroup_of(slot.attempt));
    begin_accounting(slot);
    ++stats.started;
    log(task_label(task) + " started: " + l.shown +
        (slot.gpus.empty() ? "" : " on GPU " + detail::gpu_id_list(slot.gpus)));
    slots.push_back(std::move(slot));
  }

  // Removes a slot whose process is gone.
  std::vector<Slot>::iterator erase(std::vector<Slot>::iterator it) {
    if (it->pidfd >= 0) ::close(it->pidfd);
    for (int id : it->gpus) gpu_locks->unlock(id);
    if (limits) limits->remove(it->attempt);
    if (!it->script_dir.empty()) {
      std::error_code ec;  // a script left behind is only disk space: never fail the runner for it
      std::filesystem::remove_all(it->script_dir, ec);
    }
    return slots.erase(it);
  }

  // Sleeps until a task's process exits, `seconds` pass, or, with `queue_changes`, the hub
  // announces a queue change (PostgreSQL NOTIFY; with notifications the sleep may last up to
  // `notified_seconds`, as polling is then only the fallback).
  void wait_for_event(double seconds, bool queue_changes, double notified_seconds) {
    std::vector<pollfd> fds;
    bool blind = false;  // a live task without a pidfd: wake often to reap it
    for (const auto& s : slots) {
      if (s.exited) continue;
      if (s.pidfd >= 0) fds.push_back({s.pidfd, POLLIN, 0});
      else blind = true;
    }
    // -1 without notifications, or while the connection is down: plain polling then.
    const int notify_fd = queue_changes ? queue.change_fd() : -1;
    if (notify_fd >= 0) {
      fds.push_back({notify_fd, POLLIN, 0});
      seconds = std::max(seconds, notified_seconds);
    }
    if (!slots.empty()) seconds = std::min(seconds, opt.lease_s / 6);  // heartbeats
    for (const auto& s : slots)
      if (s.meter) seconds = std::min(seconds, s.meter->due_in());  // GPU samples
    if (blind) seconds = std::min(seconds, 0.05);
    if (fds.empty()) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    else ::poll(fds.data(), fds.size(), static_cast<int>(seconds * 1000));
    if (notify_fd >= 0) queue.consume_changes();
  }

  // Kills a task's process group and reaps it.
  void kill_slot(Slot& s, int sig) {
    if (s.exited) return;
    ::kill(-s.pid, sig);
    int status = 0;
    rusage ru{};
    const bool reaped = wait4(s.pid, &status, 0, &ru) == s.pid;
    mark_exited(s, status, reaped ? &ru : nullptr);
  }

  // Records that a task's main process ended, and kills every process the task left:
  // grandchildren that ignored SIGTERM, left the process group or daemonised.
  void mark_exited(Slot& s, int status, const rusage* ru) {
    s.exited = true;
    s.exited_at = Clock::now();
    s.status = status;
    // Read before trees->end removes a v2 cgroup. A shell reports its child's SIGKILL as 137.
    const bool sigkill = (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                         (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL);
    s.oom_kills = limits ? limits->oom_kills(s.attempt, sigkill) : 0;
    if (s.meter)  // before the cgroups go
      s.meter->stop(trees->cgroup_of(s.attempt), limits ? limits->memory_v1_dir(s.attempt) : std::filesystem::path(), ru);
    trees->end(s.attempt, s.pid);
    if (watchdog) watchdog->remove(s.attempt);
    scan_orphans();
  }

  // Writes the row of an attempt that starts (RunnerOptions::accounting); a hub error is logged,
  // never fails the task.
  void begin_accounting(Slot& s) {
    if (!opt.accounting) return;
    // Its GPUs are sampled through NVML where the library loads (none: no samples, no cost).
    s.meter = std::make_unique<AttemptMeter>(s.gpus, s.gpus.empty() ? nullptr : nvml_gpu_reader());
    TaskAttempt row;
    row.task_id = s.task.id;
    row.attempt = s.task.attempt;
    row.owner = opt.owner;
    row.host = hostname();
    row.cpus = s.task.spec.resources.cpus;
    row.memory_limit_bytes = limits ? s.task.spec.resources.memory_bytes : 0;  // enforced only with limits
    row.gpus = s.gpus;
    try {
      queue.begin_attempt(row);
    } catch (const Error& e) {
      log("warning: could not record " + task_label(s.task) + " in task_attempts: " + e.message());
    }
  }

  // Completes the attempt's row with its outcome and usage, once; a hub error is logged.
  void end_accounting(Slot& s, const std::string& outcome, const std::string& error = "") {
    if (!s.meter) return;
    const std::unique_ptr<AttemptMeter> meter = std::move(s.meter);
    meter->stop(trees->cgroup_of(s.attempt), {}, nullptr);  // no-op if its process was reaped
    try {
      queue.end_attempt(s.task.id, s.task.attempt, outcome, error, meter->usage());
    } catch (const Error& e) {
      log("warning: could not record the end of " + task_label(s.task) + " in task_attempts: " + e.message());
    }
  }

  // Kills orphans of attempts that ended (a daemon whose parent exited after its task did).
  void scan_orphans() {
    std::set<std::string> running;
    for (const auto& s : slots)
      if (!s.exited) running.insert(s.attempt);
    trees->collect_orphans(running);
    last_orphan_scan = Clock::now();
  }

  // Handles a task whose process ended with `status`.
  void on_exit(Slot& s, int status) {
    const std::string tail = read_tail(s.log_path, opt.log_tail_bytes);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      // A child the kernel killed for memory while the main process went on to exit 0 (a shell
      // that `wait`s): the task says it succeeded, so it stays so, but the kill is noted.
      const std::string oom = oom_note(s);
      if (!oom.empty()) log("warning: " + task_label(s.task) + ": " + oom);
      const auto with_oom = [&](const std::string& error) { return oom.empty() ? error : error + "; " + oom; };
      Json result = Json::object();
      std::ifstream in(s.result_path);
      if (in) {
        std::stringstream text;
        text << in.rdbuf();
        result = Json::parse(text.str(), nullptr, false);
        if (result.is_discarded() || !result.is_object()) {
          record_failure(s, with_oom("the task's result file " + s.result_path.string() + " is not a JSON object"),
                         tail);
          return;
        }
      }
      const auto missing = missing_result_keys(s.task.spec, result);
      if (!missing.empty()) {
        std::string absent, null;
        for (const auto& k : missing) (result.contains(k) ? null : absent) += (absent.empty() && null.empty() ? "" : ", ") + k;
        std::string what = absent.empty() ? "" : "without the saved_result_keys " + absent;
        if (!null.empty()) what += (what.empty() ? "" : " and ") + std::string("with null for ") + null;
        record_failure(s, with_oom("the task exited 0 " + what +
                                   " in its result (TaskContext::set_result or TENSORHUB_RESULT_FILE)"), tail);
        return;
      }
      if (queue.complete(s.task, result, tail)) {
        end_accounting(s, "finished", oom);  // the row's error column holds the note
        ++stats.finished;
        log(task_label(s.task) + " finished in " + seconds_text(seconds_since(s.started)) + ": " + describe_result(result));
      } else {
        const bool cancelled = was_cancelled(s.task);
        ++(cancelled ? stats.cancelled : stats.lost);
        end_accounting(s, cancelled ? "cancelled" : "lost", oom);
        log(task_label(s.task) + " finished, but " +
            (cancelled ? "it was cancelled" : "its lease passed to another runner") + "; the result is discarded");
      }
      return;
    }
    if (s.oom_kills > 0) {
      // The kernel, not the runner, killed it: say so plainly, with the limit it asked for.
      log(task_label(s.task) + ": the kernel's OOM killer killed a process of it (the task " + describe_exit(status) + ")");
      record_failure(s, "out of memory (limit " + format_memory_size(s.task.spec.resources.memory_bytes) + ")", tail);
      return;
    }
    const std::string last = last_line(tail);
    record_failure(s, "the task " + describe_exit(status) + (last.empty() ? "" : "; its last output line: " + last), tail);
  }

  // "the kernel killed 2 processes of it for memory (limit 64 MiB)" for an attempt that lost
  // processes to the OOM killer, else "".
  static std::string oom_note(const Slot& s) {
    if (s.oom_kills <= 0) return "";
    return "the kernel killed " + std::to_string(s.oom_kills) + (s.oom_kills == 1 ? " process" : " processes") +
           " of it for memory (limit " + format_memory_size(s.task.spec.resources.memory_bytes) + ")";
  }

  void record_failure(Slot& s, const std::string& error, const std::string& tail) {
    count_failure(s.task);
    const bool held = queue.fail(s.task, error, tail);
    if (!held) ++stats.lost;
    end_accounting(s, held ? "failed" : "lost", error);
    log(task_label(s.task) + " failed: " + error);
  }

  // Whether `t` was cancelled: for the once-a-second check, and for messages (rather than its
  // lease taken by another runner). A deleted task or an unreachable hub reads as not
  // cancelled: the next heartbeat deals with both.
  bool was_cancelled(const Task& t) {
    try {
      return queue.get_task(t.id).status == TaskStatus::kCancelled;
    } catch (const Error&) {
      return false;  // deleted, or the hub is unreachable: say "lease"
    }
  }

  // A failed attempt either ends its task (failures reach max_attempts) or sends it back to
  // the queue for another attempt: the summary counts tasks, not attempts.
  void count_failure(const Task& t) {
    if (t.failures + 1 >= t.spec.max_attempts) ++stats.failed;
    else ++stats.retried;
  }

  // Kills a running task that was cancelled or whose lease another runner holds, counts and
  // logs it, and removes its slot; returns the next slot.
  std::vector<Slot>::iterator stop(std::vector<Slot>::iterator it, bool cancelled) {
    kill_slot(*it, SIGKILL);
    ++(cancelled ? stats.cancelled : stats.lost);
    end_accounting(*it, cancelled ? "cancelled" : "lost");
    log(task_label(it->task) + " stopped: " + (cancelled ? "it was cancelled" : "its lease passed to another runner"));
    return erase(it);
  }

  // Reaps ended tasks, enforces timeouts, heartbeats leases.
  void supervise() {
    // First reap and enforce timeouts for every task (no hub access, cannot fail), so a hub
    // outage never leaves an ended process unreaped.
    check_fork_server();
    if (watchdog) watchdog->check();
    for (Slot& s : slots) {
      if (!s.exited) {
        int status = 0;
        rusage ru{};
        if (wait4(s.pid, &status, WNOHANG, &ru) == s.pid) {
          mark_exited(s, status, &ru);
        } else if (s.meter) {
          s.meter->sample();
        }
        if (!s.exited && s.task.spec.timeout_s > 0 && seconds_since(s.started) > s.task.spec.timeout_s) {
          kill_slot(s, SIGKILL);
          s.forced_error = "the task ran past its timeout_s of " + format_seconds(s.task.spec.timeout_s) +
                           " s and was killed";
        }
      }
    }
    if (seconds_since(last_orphan_scan) > 1) scan_orphans();
    // A cancel is read once a second: a heartbeat (lease_s / 3) would also find it, later.
    const bool check_cancels = seconds_since(last_cancel_check) >= kCancelCheckS;
    if (check_cancels) last_cancel_check = Clock::now();
    // Then store outcomes and heartbeat leases (these need the hub and may throw).
    for (auto it = slots.begin(); it != slots.end();) {
      Slot& s = *it;
      if (s.exited) {
        // scancel, Slurm's preemption and a container's stop send SIGTERM to every process of
        // the job, this runner's tasks as well as the runner, in no set order: a task ended by
        // a SIGTERM the runner did not send waits a second for the runner's own, so that
        // shutdown() releases it instead of counting a failed attempt.
        if (s.forced_error.empty() && terminated_by_sigterm(s.status) && seconds_since(s.exited_at) < 1.0) {
          ++it;
          continue;
        }
        // If the hub is unreachable this throws and the slot stays, to be stored on the next
        // pass; completion is fenced, so a retry never records a result twice.
        finalize(s);
        it = erase(it);
        continue;
      }
      if (check_cancels && was_cancelled(s.task)) {
        it = stop(it, true);
        continue;
      }
      if (seconds_since(s.last_heartbeat) > opt.lease_s / 3) {
        s.last_heartbeat = Clock::now();
        if (!queue.heartbeat(s.task, opt.lease_s)) {
          it = stop(it, was_cancelled(s.task));
          continue;
        }
      }
      ++it;
    }
  }

  void finalize(Slot& s) {
    if (!s.forced_error.empty()) record_failure(s, s.forced_error, read_tail(s.log_path, opt.log_tail_bytes));
    else on_exit(s, s.status);
  }

  // Gives a task back to the queue at shutdown. If the hub is unreachable its lease simply
  // expires and another runner takes it.
  void release(Slot& s, const char* how) {
    end_accounting(s, "released");
    try {
      queue.release(s.task);
      ++stats.released;
      log(task_label(s.task) + " " + how + " and released to the queue (runner stopping)");
    } catch (const Error& e) {
      log(task_label(s.task) + " " + how + "; could not release it (" + e.what() + "), its lease will expire");
    }
  }

  // False once opt.max_claims tasks were claimed (never without a limit).
  bool may_claim() const { return opt.max_claims <= 0 || stats.claimed < opt.max_claims; }

  // Claims tasks into the free slots while may_claim() and starts them; true if it started
  // any. A task it cannot run fails its attempt.
  void pause_claims_after_start_fault() {
    start_fault_pause_s = std::min(60.0, start_fault_pause_s == 0 ? 1.0 : start_fault_pause_s * 2);
    claims_paused_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(start_fault_pause_s));
    log("claiming again in " + format_seconds(start_fault_pause_s) + " s");
  }

  bool fill_slots(const std::atomic<bool>& stop) {
    bool started = false;
    while (static_cast<int>(slots.size()) < opt.slots && !stop.load() && may_claim() &&
           Clock::now() >= claims_paused_until) {
      std::vector<int> offered;  // free GPUs, locked until the claim says how many the task takes
      const TaskResources free = free_resources(&offered);
      std::optional<Task> task;
      try {
        task = queue.claim(opt.task_name, opt.owner, opt.lease_s, opt.order, free);
      } catch (...) {
        take_gpus(offered, 0);
        throw;
      }
      std::vector<int> gpus = take_gpus(offered, task ? task->spec.resources.gpus : 0);
      if (!task) break;
      ++stats.claimed;
      if (!task->spec.train_spec.is_null()) {
        // Declarative spec tasks need the trainer entry point (tensorhub train-spec).
        if (const std::string problem = spec_trainer_problem(); !problem.empty()) {
          for (int id : gpus) gpu_locks->unlock(id);  // the attempt never starts: its GPUs are free
          queue.fail(*task, problem, "");
          count_failure(*task);
          log(task_label(*task) + " failed: " + problem);
          continue;
        }
      }
      try {
        start(*task, gpus);
      } catch (const Error& e) {
        for (int id : gpus) gpu_locks->unlock(id);
        // A command this runner cannot run as given (a task created before placeholders were
        // checked, InvalidArgument), or a start this machine could not make: either way the
        // attempt fails with the reason instead of holding the task until its lease expires.
        const bool machine_fault = e.kind() != ErrorKind::kInvalidArgument;
        const std::string why = machine_fault ? "the runner " + opt.owner + " could not start it: " + e.message()
                                              : std::string(e.what());
        queue.fail(*task, why, "");
        count_failure(*task);
        log(task_label(*task) + " failed: " + why);
        if (machine_fault) pause_claims_after_start_fault();
        continue;
      }
      start_fault_pause_s = 0;
      started = true;
    }
    return started;
  }

  void shutdown() {
    for (auto& s : slots)
      if (!s.exited) ::kill(-s.pid, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::duration<double>(opt.stop_grace_s);
    while (!slots.empty() && Clock::now() < deadline) {
      for (auto it = slots.begin(); it != slots.end();) {
        int status = 0;
        rusage ru{};
        if (it->exited || wait4(it->pid, &status, WNOHANG, &ru) == it->pid) {
          if (!it->exited) mark_exited(*it, status, &ru);
          if (it->forced_error.empty() && WIFEXITED(it->status) && WEXITSTATUS(it->status) == 0) {
            try {
              finalize(*it);  // it completed within the grace period: keep its result
            } catch (const Error& e) {
              log(task_label(it->task) + " finished, but its result could not be stored: " + e.what());
            }
          } else {
            release(*it, "stopped");
          }
          it = erase(it);
        } else {
          ++it;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto it = slots.begin(); it != slots.end();) {
      kill_slot(*it, SIGKILL);
      release(*it, "killed");
      it = erase(it);
    }
  }
};

Runner::Runner(RunnerOptions options) {
  if (options.slots < 1) throw InvalidArgument("runner slots must be at least 1");
  if (options.lease_s <= 0) throw InvalidArgument("runner lease_s must be positive");
  if (!(options.cpus >= 0) || !std::isfinite(options.cpus))
    throw InvalidArgument("runner cpus must be a finite number >= 0 (0: detect)");
  if (options.memory_bytes < 0) throw InvalidArgument("runner memory_bytes must be >= 0 (0: detect)");
  if (options.gpus) detail::parse_gpu_ids(detail::gpu_id_list(*options.gpus), "runner gpus");  // negative or twice
  if (options.hub_uri.empty()) throw InvalidArgument("runner needs a hub URI");
  // A trainer given explicitly must exist now, not fail every spec task the runner claims.
  if (const std::string problem = trainer_not_executable(options.spec_command, options.trainer_hint); !problem.empty())
    throw InvalidArgument(problem);
  // So is an interpreter given as a path; a name is looked up when a script task starts.
  if (options.python.find('/') != std::string::npos) find_python(options.python, "");
  impl_ = std::make_unique<Impl>(std::move(options));
}

Runner::~Runner() = default;

RunnerStats Runner::run() {
  Impl& r = *impl_;
  r.log("started: " + std::to_string(r.opt.slots) + " slot(s), " + std::to_string(r.opt.threads_per_task) +
        " thread(s) per task, task_name " + (r.opt.task_name.empty() ? "(any)" : "\"" + r.opt.task_name + "\"") +
        ", hub " + r.hub.display_uri() + ", project " + r.opt.project_name);
  try {
    r.watchdog = std::make_unique<RunnerWatchdog>([&r](const std::string& line) { r.log(line); });
  } catch (const Error& e) {
    r.log("warning: no watchdog (" + e.message() + "): tasks would outlive a killed runner");
  }
  auto idle_since = Clock::now();
  double backoff_s = 0;
  auto last_error_log = Clock::now() - std::chrono::hours(1);
  std::string last_error;
  std::int64_t suppressed = 0;
  while (!stop_.load()) {
    bool busy = false;
    try {
      r.keep_registered();  // the runners table: what this runner has (runner_registry.h)
      r.supervise();
      busy = r.fill_slots(stop_);
      backoff_s = 0;
    } catch (const Error& e) {
      // A busy or unreachable database must not kill the runner or its tasks: retry with
      // backoff, and say so once per minute, not once per retry.
      backoff_s = std::min(10.0, backoff_s == 0 ? 0.5 : backoff_s * 2);
      if (seconds_since(last_error_log) > 60 || e.what() != last_error) {
        r.log(std::string("hub error, retrying every ") + format_seconds(backoff_s) + " s up to 10 s: " + e.what() +
              (suppressed ? " (" + std::to_string(suppressed) + " similar errors not shown)" : ""));
        last_error_log = Clock::now();
        last_error = e.what();
        suppressed = 0;
      } else {
        ++suppressed;
      }
    }
    if (backoff_s == 0 && !last_error.empty()) {
      r.log("hub reachable again");
      last_error.clear();
    }
    if (!r.may_claim() && r.slots.empty()) {
      r.log("ran the " + std::to_string(r.stats.claimed) + " task(s) it was to claim, exiting");
      break;
    }
    if (!r.slots.empty() || busy) idle_since = Clock::now();
    if (r.opt.exit_when_idle_s >= 0 && r.slots.empty() && seconds_since(idle_since) >= r.opt.exit_when_idle_s) {
      r.log("idle for " + format_seconds(r.opt.exit_when_idle_s) + " s, exiting");
      break;
    }
    if (busy) continue;
    const bool full = static_cast<int>(r.slots.size()) == r.opt.slots;
    if (backoff_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(backoff_s));  // hub unreachable
    else if (full) r.wait_for_event(1.0, false, 0);            // nothing to claim: wait for an exit
    else r.wait_for_event(r.opt.poll_s, r.opt.notifications, kNotifiedPollS);  // wait for a new task or an exit
  }
  r.shutdown();
  if (r.registered) {
    try {
      r.queue.unregister_runner(r.opt.owner);
    } catch (const Error& e) {
      r.log(std::string("could not remove this runner from the runners table (") + e.what() +
            "); its row goes stale after lease_s");
    }
  }
  r.watchdog.reset();  // a clean exit: it leaves quietly
  const auto& st = r.stats;
  r.log("stopped: " + std::to_string(st.finished) + " task(s) finished, " + std::to_string(st.failed) +
        " failed for good, " + std::to_string(st.retried) + " failed attempt(s) sent back to the queue, " +
        std::to_string(st.cancelled) + " cancelled, " + std::to_string(st.released) + " released at stop, " +
        std::to_string(st.lost) + " taken over by another runner");
  return r.stats;
}

}  // namespace tensorhub
