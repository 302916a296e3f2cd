// Queue throughput and dispatch latency, on SQLite or PostgreSQL, against Optuna.
//
// For each worker count W (default 1, 2, 4), on a fresh database:
//  - "api": W processes, each looping create_task -> claim -> complete through TaskQueue:
//    the queue's bookkeeping cost per cycle.
//  - "raw": the same three statements straight on the database (queue_raw_loop.h), each its
//    own transaction as ours, by W processes: the floor; ratio ours api / raw.
//  - "runners": N/4 no-op tasks (`true`) run by W `tensorhub runner` processes: the
//    end-to-end rate including fork/exec of every task.
//  - "tuner": a random search of N/8 trials (Tuner, no-op command trials that only write
//    their result) run by W `tensorhub runner` processes: the search's bookkeeping per trial
//    (oracle, state snapshots in the hub, task create/claim/finish, one fork/exec per trial).
//  - peer: Optuna's ask -> tell with W processes on an RDBStorage in the same kind of
//    database (bench/peers/optuna_pg.py, Debian python3-optuna); ratio ours api / optuna.
// Then the dispatch latency (create_task -> task started, from the database's clock): one
// idle runner woken by PostgreSQL NOTIFY, against the same runner polling every second, as
// the original TensorHub did (PostgreSQL only: SQLite has no notifications).
//
// Usage: bench_queue_cycles [--backend sqlite|postgresql] [--postgres ADMIN_URI]
//          [--cycles N] [--workers 1,2,4] [--no-runners] [--latency-tasks N] [--peer SCRIPT] [--no-peer]
// --postgres defaults to $TENSORHUB_TEST_POSTGRES_URI (scripts/bench starts a server).
// The last line is a JSON summary.
#include <libpq-fe.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "queue_raw_loop.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/tune/tuner.h"

namespace {

using Clock = std::chrono::steady_clock;
using tensorhub::Hub;
using tensorhub::TaskQueue;
using tensorhub::TaskSpec;

// The hub's tables and the queue's (created by its first statement), before any worker runs.
void create_schema(const std::string& uri) {
  Hub hub(uri, "bench");
  TaskQueue(hub).count_tasks();
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Options {
  std::string backend = "sqlite";
  std::string postgres;
  int cycles = 2000;
  std::vector<int> workers = {1, 2, 4};
  int latency_tasks = 40;
  bool runners = true;
  tensorhub::bench::PeerOptions peer{std::string(TENSORHUB_SOURCE_DIR) + "/bench/peers/optuna_pg.py"};
  std::string tensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";
};

// Fresh databases: SQLite files in a temp dir, or PostgreSQL databases on the admin server.
class Databases {
 public:
  explicit Databases(const Options& o) : o_(o) {
    std::string pattern = (std::filesystem::temp_directory_path() / "tensorhub-bench-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
  }
  ~Databases() {
    std::filesystem::remove_all(dir_);
    for (const auto& db : created_) admin("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
  }
  // {our hub URI, the SQLAlchemy URL Optuna uses for the same kind of database}
  std::pair<std::string, std::string> fresh(const std::string& name) {
    if (o_.backend == "sqlite")
      return {"sqlite://" + dir_ + "/" + name + ".db", "sqlite:///" + dir_ + "/" + name + "-optuna.db"};
    const std::string db = "bench_" + name + "_" + std::to_string(getpid());
    admin("CREATE DATABASE " + db);
    created_.push_back(db);
    const std::string base = o_.postgres.substr(0, o_.postgres.rfind('/'));
    return {base + "/" + db, "postgresql+psycopg2" + base.substr(base.find("://")) + "/" + db};
  }

 private:
  void admin(const std::string& sql) {
    PGconn* c = PQconnectdb(o_.postgres.c_str());
    if (PQstatus(c) == CONNECTION_OK) PQclear(PQexec(c, sql.c_str()));
    else std::cerr << "cannot reach " << o_.postgres << ": " << PQerrorMessage(c);
    PQfinish(c);
  }
  const Options& o_;
  std::string dir_;
  std::vector<std::string> created_;
};

// W forked workers, each running `per` create -> claim -> complete cycles.
double api_cycles_per_s(const std::string& uri, int workers, int per) {
  create_schema(uri);  // before the workers race for it
  const double seconds = tensorhub::bench::run_in_workers(
      workers,
      [&](int w) {
        Hub hub(uri, "bench");
        TaskQueue queue(hub);
        TaskSpec spec;
        spec.task_name = "noop";
        spec.command = "true";
        spec.saved_result_keys = {"value"};
        const std::string owner = "worker-" + std::to_string(w);
        for (int i = 0; i < per; ++i) {
          queue.create_task(spec);
          auto task = queue.claim("noop", owner, 30);
          if (!task || !queue.complete(*task, {{"value", i}})) throw std::runtime_error("a cycle lost its task");
        }
      },
      "api");
  return workers * per / seconds;
}

// A runner on `uri` with its output (the runner's log) discarded.
tensorhub::Process start_runner(const Options& o, const std::string& uri, std::vector<std::string> extra,
                                const std::string& task_name = "noop") {
  std::vector<std::string> args = {o.tensorhub, "runner", "--hub", uri, "--project", "bench", "--task-name", task_name};
  args.insert(args.end(), extra.begin(), extra.end());
  return tensorhub::bench::start(args, "/dev/null");
}

// N no-op tasks run by W real runner processes.
double runner_tasks_per_s(const Options& o, const std::string& uri, int workers, int n) {
  Hub hub(uri, "bench");
  TaskQueue queue(hub);
  TaskSpec spec;
  spec.task_name = "noop";
  spec.command = "true";
  for (int i = 0; i < n; ++i) queue.create_task(spec);
  const auto start = Clock::now();
  std::vector<tensorhub::Process> runners;
  for (int w = 0; w < workers; ++w) runners.push_back(start_runner(o, uri, {"--exit-when-idle", "0"}));
  for (auto& p : runners) p.wait();
  const double seconds = since(start);
  const auto counts = queue.count_tasks();
  if (counts.finished != n)
    throw std::runtime_error("runners finished " + std::to_string(counts.finished) + " of " + std::to_string(n));
  return n / seconds;
}

// A random search of n no-op trials run by W runner processes; trials per second.
double tuner_trials_per_s(const Options& o, const std::string& uri, int workers, int n) {
  create_schema(uri);
  std::vector<tensorhub::Process> runners;
  for (int w = 0; w < workers; ++w) runners.push_back(start_runner(o, uri, {"--poll", "0.01"}, "trial"));
  tensorhub::TunerOptions t;
  t.hub_uri = uri;
  t.project_name = "bench";
  t.search_name = "noop";
  t.oracle = "random";
  t.space.Float("x", -10, 10);
  t.oracle_options.objective = tensorhub::Objective::parse("loss");
  t.oracle_options.max_trials = n;
  t.oracle_options.seed = 1;
  t.command = "echo '{\"loss\": 1}' > \"$TENSORHUB_RESULT_FILE\"";
  t.max_parallel_trials = 2 * workers;
  t.poll_s = 0.01;
  const auto start = Clock::now();
  const auto summary = tensorhub::Tuner(t).search();
  const double seconds = since(start);
  tensorhub::bench::stop_all(runners);
  if (!summary.done || static_cast<int>(summary.trials.size()) != n)
    throw std::runtime_error("the search ran " + std::to_string(summary.trials.size()) + " of " + std::to_string(n));
  return n / seconds;
}

double optuna_cycles_per_s(const Options& o, const std::string& url, int workers, int trials) {
  return tensorhub::bench::run_peer(o.peer, {"--url", url, "--workers", std::to_string(workers), "--trials",
                                             std::to_string(trials)})
      .at("cycles_per_s")
      .get<double>();
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5))];
}

// create_task -> started_at latencies (ms) with one idle runner started with `extra` flags.
std::vector<double> dispatch_latencies_ms(const Options& o, const std::string& uri, std::vector<std::string> extra) {
  Hub hub(uri, "bench");
  TaskQueue queue(hub);
  auto runner = start_runner(o, uri, extra);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // let it go idle
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> gap_ms(150, 450);  // arrivals at random phases of any poll
  TaskSpec spec;
  spec.task_name = "noop";
  spec.command = "true";
  std::vector<std::int64_t> ids;
  for (int i = 0; i < o.latency_tasks; ++i) {
    ids.push_back(queue.create_task(spec));
    std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms(rng)));
  }
  queue.wait({}, nullptr, 0.1, 60);
  runner.stop();
  std::vector<double> out;
  for (auto id : ids) {
    const auto t = queue.get_task(id);
    out.push_back((t.started_at - t.time) / 1000.0);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const char* pg = std::getenv("TENSORHUB_TEST_POSTGRES_URI")) o.postgres = pg;
  CLI::App app{"Queue cycles (API, real runners, the tuner's trials) against Optuna's RDB storage",
               "bench_queue_cycles"};
  app.add_option("--backend", o.backend, "sqlite or postgresql")->capture_default_str()
      ->check(CLI::IsMember({"sqlite", "postgresql"}));
  app.add_option("--postgres", o.postgres, "admin URI of a PostgreSQL server (default: $TENSORHUB_TEST_POSTGRES_URI)");
  app.add_option("--cycles", o.cycles, "cycles per measurement")->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--workers", o.workers, "worker counts, comma-separated")->delimiter(',')->capture_default_str()
      ->check(tensorhub::bench::at_least_one());
  app.add_flag("!--no-runners", o.runners, "skip the runner and tuner rows (the API and raw rows only)");
  app.add_option("--latency-tasks", o.latency_tasks, "tasks of the dispatch latency measurement (PostgreSQL)")
      ->capture_default_str();
  tensorhub::bench::add_peer_options(app, o.peer);
  tensorhub::bench::parse_or_exit(app, argc, argv);
  if (o.backend == "postgresql" && o.postgres.empty()) {
    std::cerr << "--backend postgresql needs --postgres ADMIN_URI or TENSORHUB_TEST_POSTGRES_URI "
                 "(scripts/bench starts a private server)\n";
    return 2;
  }
  Databases dbs(o);
  nlohmann::json summary = {{"backend", o.backend}, {"cycles", o.cycles}, {"by_workers", nlohmann::json::array()}};
  std::printf("queue on %s, %d cycles per measurement\n", o.backend.c_str(), o.cycles);
  for (int w : o.workers) {
    nlohmann::json row = {{"workers", w}};
    const double api = api_cycles_per_s(dbs.fresh("api" + std::to_string(w)).first, w, o.cycles / w);
    std::printf("W=%d  ours api (create -> claim -> complete): %8.0f cycles/s\n", w, api);
    row["ours_api_cycles_per_s"] = api;
    const std::string raw_uri = dbs.fresh("raw" + std::to_string(w)).first;
    create_schema(raw_uri);  // the tables, as ours
    const double raw = tensorhub::bench::raw_cycles_per_s(raw_uri, w, o.cycles / w);
    std::printf("W=%d  raw statements (same SQL, no tensorhub):  %8.0f cycles/s   ratio ours api / raw: %.2f\n", w,
                raw, api / raw);
    row["raw_cycles_per_s"] = raw;
    row["ratio_api_over_raw"] = api / raw;
    if (!o.runners) {
      summary["by_workers"].push_back(row);
      continue;
    }
    const double runners = runner_tasks_per_s(o, dbs.fresh("runners" + std::to_string(w)).first, w, o.cycles / 4);
    std::printf("W=%d  ours runners (no-op task, fork/exec):   %8.0f tasks/s\n", w, runners);
    row["ours_runner_tasks_per_s"] = runners;
    const double tuner = tuner_trials_per_s(o, dbs.fresh("tuner" + std::to_string(w)).first, w, o.cycles / 8);
    std::printf("W=%d  ours tuner (random search, no-op trials): %6.0f trials/s\n", w, tuner);
    row["ours_tuner_trials_per_s"] = tuner;
    if (o.peer.run) {
      const double optuna = optuna_cycles_per_s(o, dbs.fresh("optuna" + std::to_string(w)).second, w, o.cycles / 8);
      std::printf("W=%d  optuna ask -> tell (RDBStorage):        %8.1f cycles/s   ratio ours api / optuna: %.1fx\n",
                  w, optuna, api / optuna);
      row["optuna_cycles_per_s"] = optuna;
      row["ratio_api_over_optuna"] = api / optuna;
      std::printf("W=%d  ratio ours tuner trials / optuna trials: %.1fx\n", w, tuner / optuna);
      row["ratio_tuner_over_optuna"] = tuner / optuna;
    }
    summary["by_workers"].push_back(row);
  }
  if (o.backend == "postgresql" && o.latency_tasks > 0) {
    const auto notify = dispatch_latencies_ms(o, dbs.fresh("latency_notify").first, {"--poll", "1"});
    const auto polling = dispatch_latencies_ms(o, dbs.fresh("latency_poll").first, {"--poll", "1", "--no-notify"});
    std::printf("dispatch latency, LISTEN/NOTIFY:   p50 %6.1f ms  p99 %6.1f ms\n", percentile(notify, 0.5),
                percentile(notify, 0.99));
    std::printf("dispatch latency, polling every 1 s: p50 %6.1f ms  p99 %6.1f ms\n", percentile(polling, 0.5),
                percentile(polling, 0.99));
    summary["latency_ms"] = {{"notify_p50", percentile(notify, 0.5)}, {"notify_p99", percentile(notify, 0.99)},
                             {"poll_1s_p50", percentile(polling, 0.5)}, {"poll_1s_p99", percentile(polling, 0.99)}};
  }
  std::cout << summary.dump() << std::endl;
  return 0;
}
