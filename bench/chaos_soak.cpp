// Chaos soak of the queue: at-least-once execution, exactly-once completion, nothing stuck.
//
// N tasks (default 200), each appending one line "<i> <attempt>" to a shared file and writing
// the result {"i": <i>}, run by R `tensorhub runner` processes (default 4) while, every K
// seconds (default 2), one random runner is SIGKILLed and started again; on PostgreSQL the
// server is also restarted (pg_ctl restart -m fast) P times (default 2) during the run. At the
// end it checks, from the hub and the shared file:
//   - every task is finished, with the result its own hyperparameter says (no result lost or
//     swapped), and none is pending, running or failed (nothing stuck);
//   - every finished task ran at least once (it has a line), and the number of executions per
//     task (killed attempts run again: at-least-once execution);
// and prints those figures, the kills and restarts done, and the wall time. Exit status 1 if
// any check fails.
//
// Usage: bench_chaos_soak [--backend sqlite|postgresql] [--tasks N] [--runners R]
//          [--kill-every S] [--pg-restarts P] [--task-seconds T] [--seed SEED]
// PostgreSQL: the server of $TENSORHUB_TEST_POSTGRES_URI, $TENSORHUB_PGDATA and
// $TENSORHUB_PGBIN (scripts/pg-cluster start sets them; scripts/bench soak does it all).
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bench_util.h"
#include "tensorhub/core/process.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using tensorhub::Hub;
using tensorhub::Json;
using tensorhub::TaskQueue;

struct Options {
  std::string backend = "sqlite";
  int tasks = 200;
  int runners = 4;
  double kill_every_s = 2;
  int pg_restarts = 2;
  double task_seconds = 0.3;
  double give_up_s = 600;
  std::uint64_t seed = 1;
  std::string tensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";
};

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A runner with its output appended to `log`. It stays in our process group, so a SIGKILL
// reaches the runner alone, as in a crash: the tasks it leaves are the next runner's job.
tensorhub::Process spawn(const std::vector<std::string>& args, const fs::path& log) {
  tensorhub::ProcessOptions options;
  options.output = log;
  options.own_process_group = false;
  options.terminate_with_parent = true;
  return tensorhub::Process::spawn(args, options);
}

// A fresh hub: a SQLite file in `dir`, or a new database on the test PostgreSQL server.
std::string fresh_hub(const Options& o, const fs::path& dir) {
  if (o.backend == "sqlite") return "sqlite://" + (dir / "hub.db").string();
  const char* admin = std::getenv("TENSORHUB_TEST_POSTGRES_URI");
  if (!admin) throw std::runtime_error("--backend postgresql needs TENSORHUB_TEST_POSTGRES_URI (scripts/pg-cluster start)");
  const std::string name = "soak_" + std::to_string(getpid());
  const std::string psql = std::string(std::getenv("TENSORHUB_PGBIN") ? std::getenv("TENSORHUB_PGBIN") : "/usr/bin") + "/psql";
  if (std::system((psql + " -q '" + admin + "' -c 'CREATE DATABASE " + name + "' >/dev/null").c_str()) != 0)
    throw std::runtime_error("cannot create database " + name);
  std::string uri = admin;
  return uri.substr(0, uri.rfind('/') + 1) + name;
}

void restart_postgres() {
  const char* pgdata = std::getenv("TENSORHUB_PGDATA");
  const char* pgbin = std::getenv("TENSORHUB_PGBIN");
  if (!pgdata || !pgbin) throw std::runtime_error("PostgreSQL restarts need TENSORHUB_PGDATA and TENSORHUB_PGBIN");
  const std::string as_postgres = geteuid() == 0 ? "runuser -u postgres -- " : "";
  const std::string cmd = as_postgres + pgbin + "/pg_ctl -D " + pgdata + " -m fast -w restart >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("pg_ctl restart failed");
}

void create_tasks(const Options& o, const std::string& uri, const fs::path& lines) {
  Hub hub(uri, "soak");
  TaskQueue queue(hub);
  for (int i = 0; i < o.tasks; ++i) {
    tensorhub::TaskSpec s;
    s.task_name = "soak";
    s.hyper_parameters = {{"i", i}};
    s.saved_result_keys = {"i"};
    s.max_attempts = 1000;  // kills are failed attempts; the soak wants every task to finish
    s.command = "echo {i} $TENSORHUB_ATTEMPT >> " + lines.string() + "; sleep " + std::to_string(o.task_seconds) +
                "; echo '{\"i\": '{i}'}' > $TENSORHUB_RESULT_FILE";
    queue.create_task(s);
  }
}

struct Outcome {
  int finished = 0, wrong_result = 0, not_finished = 0, finished_never_ran = 0;
  int completed_twice = 0;  // tasks two runners both logged as finished (fencing failed)
  std::map<int, int> executions_histogram;  // executions -> tasks
  int executions = 0;
};

// Completions the runners logged ("task <id> (... finished in"), per task id. A runner killed
// between storing a result and logging it logs none, so each task must have at most one.
std::map<std::int64_t, int> logged_completions(const fs::path& dir) {
  std::map<std::int64_t, int> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      const auto at = line.find("] task ");
      if (at == std::string::npos || line.find(") finished in ") == std::string::npos) continue;
      ++out[std::stoll(line.substr(at + 7))];
    }
  }
  return out;
}

Outcome check(const Options& o, const std::string& uri, const fs::path& lines) {
  std::map<int, int> runs;
  std::ifstream in(lines);
  for (int i, attempt; in >> i >> attempt;) ++runs[i];
  Outcome out;
  for (const auto& [id, n] : logged_completions(lines.parent_path()))
    if (n > 1) ++out.completed_twice;
  Hub hub(uri, "soak");
  TaskQueue queue(hub);
  for (const auto& t : queue.find_tasks(Json::object())) {
    const int i = t.spec.hyper_parameters.at("i").get<int>();
    if (t.status != tensorhub::TaskStatus::kFinished) {
      ++out.not_finished;
      std::cerr << "task " << t.id << " (i=" << i << ") is " << tensorhub::to_string(t.status) << ": " << t.error << "\n";
      continue;
    }
    ++out.finished;
    if (t.result != Json{{"i", i}}) ++out.wrong_result;
    if (runs[i] == 0) ++out.finished_never_ran;
    ++out.executions_histogram[runs[i]];
    out.executions += runs[i];
  }
  return out;
}

int run(const Options& o) {
  std::string pattern = (fs::temp_directory_path() / "tensorhub-soak-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  const fs::path dir = pattern;
  const fs::path lines = dir / "executions.txt";
  const std::string uri = fresh_hub(o, dir);
  create_tasks(o, uri, lines);
  std::vector<std::string> args = {o.tensorhub, "runner", "--hub", uri, "--project", "soak", "--task-name", "soak",
                                   "--lease", "2", "--poll", "0.05", "--threads", "1"};
  std::vector<tensorhub::Process> runners;
  for (int r = 0; r < o.runners; ++r) runners.push_back(spawn(args, dir / ("runner" + std::to_string(r) + ".log")));

  std::mt19937_64 rng(o.seed);
  const auto start = Clock::now();
  const bool restarts = o.backend == "postgresql";
  // Restarts are spread over the run's expected length: tasks x seconds / runners.
  const double expected_s = o.tasks * o.task_seconds / o.runners;
  int kills = 0, pg_restarts = 0;
  auto last_kill = Clock::now();
  Hub hub(uri, "soak");
  TaskQueue queue(hub);
  bool done = false;
  while (!done && since(start) < o.give_up_s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (since(last_kill) >= o.kill_every_s) {
      const int r = static_cast<int>(rng() % runners.size());
      runners[r].signal(SIGKILL);
      runners[r].wait();
      runners[r] = spawn(args, dir / ("runner" + std::to_string(r) + ".log"));
      ++kills;
      last_kill = Clock::now();
    }
    if (restarts && pg_restarts < o.pg_restarts && since(start) > expected_s * (pg_restarts + 1) / (o.pg_restarts + 1)) {
      restart_postgres();
      ++pg_restarts;
      std::cout << "  PostgreSQL restarted at " << static_cast<int>(since(start)) << " s" << std::endl;
    }
    try {
      done = !queue.check_unfinished_task(Json{{"task_name", "soak"}});
    } catch (const tensorhub::Error&) {
      // The server is restarting: the next pass asks again.
    }
  }
  const double wall_s = since(start);
  tensorhub::bench::stop_all(runners);

  const Outcome c = check(o, uri, lines);
  const bool ok = done && c.finished == o.tasks && c.wrong_result == 0 && c.not_finished == 0 &&
                  c.finished_never_ran == 0 && c.completed_twice == 0;
  Json hist = Json::object();
  for (const auto& [runs, n] : c.executions_histogram) hist[std::to_string(runs)] = n;
  std::printf("%s: %d tasks, %d runners, %d SIGKILLs, %d PostgreSQL restarts, %.1f s\n", o.backend.c_str(), o.tasks,
              o.runners, kills, pg_restarts, wall_s);
  std::printf("  finished %d, not finished %d, wrong result %d, finished without running %d, completed twice %d\n",
              c.finished, c.not_finished, c.wrong_result, c.finished_never_ran, c.completed_twice);
  std::printf("  executions %d for %d tasks; tasks by executions: %s\n", c.executions, c.finished, hist.dump().c_str());
  std::printf("  %s\n", ok ? "OK: every task finished exactly once, none lost, none stuck" : "FAILED");
  std::cout << Json{{"backend", o.backend}, {"tasks", o.tasks}, {"runners", o.runners}, {"kills", kills},
                    {"pg_restarts", pg_restarts}, {"wall_s", wall_s}, {"finished", c.finished},
                    {"not_finished", c.not_finished}, {"wrong_result", c.wrong_result},
                    {"completed_twice", c.completed_twice},
                    {"executions", c.executions}, {"tasks_by_executions", hist}, {"ok", ok}}
                   .dump()
            << std::endl;
  if (ok) fs::remove_all(dir);
  else std::cerr << "logs kept in " << dir << "\n";
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Chaos soak of the queue: runners SIGKILLed and restarted, PostgreSQL restarted, every task must "
               "finish exactly once"};
  app.add_option("--backend", o.backend, "sqlite or postgresql")->check(CLI::IsMember({"sqlite", "postgresql"}))
      ->capture_default_str();
  app.add_option("--tasks", o.tasks, "tasks")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--runners", o.runners, "runner processes")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--kill-every", o.kill_every_s, "seconds between SIGKILLs of a random runner")->capture_default_str();
  app.add_option("--pg-restarts", o.pg_restarts, "PostgreSQL server restarts during the run")->capture_default_str();
  app.add_option("--task-seconds", o.task_seconds, "how long each task sleeps")->capture_default_str();
  app.add_option("--give-up", o.give_up_s, "seconds before unfinished tasks count as stuck")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the choice of runner to kill")->capture_default_str();
  tensorhub::bench::parse_or_exit(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "bench_chaos_soak: " << e.what() << std::endl;
    return 1;
  }
}
