// Trial start-up: how long a `tensorhub train-spec` run (what a runner starts for every spec
// trial) takes before it trains, with the per-machine blob cache warm, for Fashion-MNIST
// held in the hub two ways:
//   tensors  dataset "fashion_mnist" of tensors (`tensorhub dataset import`): the spec of
//            examples/tune (train + validation tensors) with fit.epochs 0, so the process loads
//            the 50,000 + 10,000 images and builds the model, and stops;
//   shards   the same 50,000 training images as 5 GZIP TFRecord shards of Examples
//            (examples/tfrecord's records, `tensorhub dataset import --tfrecord`) read by a
//            spec pipeline (from_hub -> parse -> shuffle(10000) -> batch(128)) with
//            steps_per_epoch 1 and epochs 1: the process streams what its first batch needs
//            (the shuffle buffer) and trains that batch;
//   process  `tensorhub train-spec --help`: the process alone (loading libtorch's libraries).
// Each runs two ways: as a new process (exec, how a runner started every task before) and as a
// fork of a fork server (`tensorhub fork-server`, queue/fork_server.h: how `tensorhub runner`
// starts spec tasks now), --runs times each after one untimed run that fills the cache; medians
// are compared. The data's own share is a variant's median minus the process's.
//
// Measured (2 cores, another engineer's benchmarks queued behind a lock, load 1.4-2.4, --runs 5):
//   exec:   process alone 0.558 s, tensors 1.195 s (data 0.637 s), streamed shards 0.650 s
//   forked: process alone 0.010 s, tensors 0.661 s (data 0.651 s), streamed shards 0.102 s
// Streamed shards and a fork: 0.102 s, under the 0.2 s goal (6.4x faster than exec). A new
// process pays the dynamic loading and static initialisation of libtorch (~0.45 s) and, at
// exit, libtorch's static destructors deregistering every operator (~0.1 s); a fork pays
// neither (it ends with _exit after flushing its output).
//
// Usage: bench_trial_startup [--runs N] [--data DIR]
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "../examples/tfrecord/fashion_mnist_records.h"
#include "bench_util.h"
#include "tensorhub/data/hub_dataset.h"
#include "tensorhub/data/idx.h"
#include "tensorhub/queue/fork_server.h"

namespace {

namespace th = tensorhub;
namespace bench = tensorhub::bench;
namespace fs = std::filesystem;

const th::Json kMlp = {{"name", "fashion_mlp"},
                       {"input_shape", {784}},
                       {"seed", 1},
                       {"layers",
                        {{{"type", "Dense"}, {"units", 320}, {"activation", "relu"}}, {{"type", "Dense"}, {"units", 10}}}},
                       {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.001}}}};

void write_json(const fs::path& path, const th::Json& j) { std::ofstream(path) << j.dump(2); }

// The variables every run gets, besides this process's environment.
std::map<std::string, std::string> run_env(const fs::path& dir) {
  return {{"TENSORHUB_BLOB_CACHE_DIR", (dir / "cache").string()}, {"OMP_NUM_THREADS", "1"}};
}

// Seconds `argv` takes to exit, executed as a new process (its output in `log`); throws when
// it fails.
double time_run(const std::vector<std::string>& argv, const fs::path& log) {
  const auto t0 = bench::Clock::now();
  th::ProcessOptions options;
  options.output = log;
  options.env = run_env(log.parent_path());
  if (th::Process::spawn(argv, options).wait() != 0)
    throw std::runtime_error(argv[0] + " " + argv[1] + " failed; see " + log.string());
  return bench::seconds_since(t0);
}

// This process's environment with `extra` set: "NAME=value" each.
std::vector<std::string> environment_with(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (!extra.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

// Seconds `argv` takes to exit as a fork of `server`, as a runner starts spec tasks.
double time_fork(th::ForkServer& server, const std::vector<std::string>& argv, const fs::path& log) {
  const auto t0 = bench::Clock::now();
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) throw std::runtime_error("cannot create " + log.string());
  const pid_t pid = server.spawn({argv, environment_with(run_env(log.parent_path())), out, -1});
  ::close(out);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("forked " + argv[1] + " failed; see " + log.string());
  return bench::seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir;
  int runs = 5;
  CLI::App app{"start-up of a spec trial process: tensors vs streamed TFRecord shards", "bench_trial_startup"};
  bench::add_mnist_option(app, data_dir);
  app.add_option("--runs", runs, "timed runs per variant")->capture_default_str()->check(bench::at_least_one());
  bench::parse_or_exit(app, argc, argv);
  try {
    const std::string bin = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";
    const fs::path dir = fs::temp_directory_path() / ("bench_trial_startup-" + std::to_string(::getpid()));
    fs::create_directories(dir / "shards");
    const std::string hub = "sqlite://" + (dir / "hub.db").string();
    const std::vector<std::string> on_hub = {"--hub", hub, "--project", "p"};
    auto cmd = [&](std::vector<std::string> args) {
      args.insert(args.begin(), on_hub.begin(), on_hub.end());
      args.insert(args.begin(), bin);
      return args;
    };
    time_run(cmd({"dataset", "import", "--name", "fashion_mnist", "--idx", data_dir}), dir / "import.log");
    const th::Tensor images = th::read_idx(fs::path(data_dir) / "train-images-idx3-ubyte.gz");
    const th::Tensor labels = th::read_idx(fs::path(data_dir) / "train-labels-idx1-ubyte.gz");
    th::examples::write_example_shards(dir / "shards", "train", images, labels, 0, 50000, 5,
                                       th::TFRecordCompression::kGzip);
    write_json(dir / "features.json", th::feature_specs_to_json(th::examples::fashion_mnist_features()));
    time_run(cmd({"dataset", "import", "--tfrecord", (dir / "shards" / "train-*.tfrecord.gz").string(), "--compression",
                  "GZIP", "--features", (dir / "features.json").string(), "--name", "fashion_mnist_shards"}),
             dir / "import-shards.log");

    th::Json rescaled = kMlp;
    rescaled["layers"].insert(rescaled["layers"].begin(), th::Json{{"type", "Rescaling"}, {"scale", 1.0 / 255}});
    write_json(dir / "tensors.json",
               {{"model", kMlp},
                {"data", {{"dataset", "fashion_mnist"}, {"validation", {{"x", "X_val"}, {"y", "y_val"}}}}},
                {"fit", {{"epochs", 0}, {"batch_size", 128}, {"verbose", 0}}},
                {"save_model", false}});
    write_json(dir / "shards.json",
               {{"model", rescaled},
                {"data",
                 {{"train",
                   {{"hub", "fashion_mnist_shards"},
                    {"x", "image"},
                    {"y", "label"},
                    {"decode_raw", {{"image", "uint8"}}},
                    {"shuffle", {{"buffer_size", 10000}, {"seed", 1}}}}}}},
                {"fit", {{"epochs", 1}, {"steps_per_epoch", 1}, {"batch_size", 128}, {"verbose", 0}}},
                {"save_model", false}});

    const std::vector<std::pair<std::string, std::vector<std::string>>> variants = {
        {"process", {bin, "train-spec", "--help"}},
        {"tensors", cmd({"train-spec", "--spec", (dir / "tensors.json").string()})},
        {"shards", cmd({"train-spec", "--spec", (dir / "shards.json").string()})}};
    // A runner's fork server (queue/fork_server.h): this process adopts its forks, as a runner.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    auto server = th::ForkServer::start({bin, "fork-server"}, environment_with(run_env(dir)));
    std::map<std::string, std::vector<double>> seconds;
    for (const auto& [name, argv] : variants) time_run(argv, dir / (name + ".log"));  // fills the cache
    for (int r = 0; r < runs; ++r)
      for (const auto& [name, argv] : variants) {
        seconds[name].push_back(time_run(argv, dir / (name + ".log")));
        seconds[name + "_forked"].push_back(time_fork(*server, argv, dir / (name + "-forked.log")));
      }
    server.reset();
    fs::remove_all(dir);

    auto median = [&](const std::string& name) { return bench::median(seconds[name]); };
    for (const std::string how : {"", "_forked"}) {
      const double process = median("process" + how), tensors = median("tensors" + how), shards = median("shards" + how);
      std::printf("trial start-up, %s, warm blob cache (median of %d): process alone %.3f s, tensors %.3f s "
                  "(data %.3f s), streamed shards %.3f s (data %.3f s)\n",
                  how.empty() ? "a new process (exec)" : "a fork of the fork server", runs, process, tensors,
                  tensors - process, shards, shards - process);
    }
    bench::print_ratio("trial start-up tensors / streamed shards (exec)", median("tensors") / median("shards"), 2, "x");
    bench::print_ratio("trial start-up streamed shards, exec / forked", median("shards") / median("shards_forked"), 2, "x");
    bench::print_ratio("trial start-up streamed shards, forked", median("shards_forked"), 3,
                       " s (goal < 0.2 s; exec: " + std::to_string(median("shards")).substr(0, 5) + " s)");
    th::Json summary = {{"bench", "trial_startup"}, {"runs", seconds}};
    std::cout << summary.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_trial_startup: %s\n", e.what());
    return 1;
  }
}
