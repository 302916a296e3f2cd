// Training throughput of the original TensorLayer MLP (mlp_config(800, 800), Adam 1e-4,
// batch 256) on Fashion-MNIST, ours against the PyTorch peer, measured in the same run.
//
// Fairness: the peer (bench/peers/pytorch_mlp.py) trains on all 60,000 training images per
// epoch, shuffled, batch 256, and times only its epoch loop; so do we (load_mnist_dataset with
// n_train = 60000, timing the fit() call, which also includes the one copy of the inputs into
// a torch tensor). Both use the same thread count and run one after the other, never together.
//
// Usage: bench_train_throughput [--epochs N] [--threads T] [--rounds R] [--data DIR]
//                               [--peer SCRIPT] [--python PATH] [--no-peer]
// Prints one line per side and round, the best of each side, the ratio ours / pytorch of
// the bests, and a JSON summary as the last line. The machine's speed drifts (shared cores):
// use --rounds 3 or more for a figure to trust.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "tensorhub/data/idx.h"
#include "tensorhub/train/model.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace th = tensorhub;
namespace bench = tensorhub::bench;

// The BLAS libraries mapped into this process (from /proc/self/maps): shows whether libtorch's
// libblas.so.3 resolved to OpenBLAS or to the reference BLAS.
std::string loaded_blas() {
  std::ifstream maps("/proc/self/maps");
  std::string line, out;
  while (std::getline(maps, line)) {
    const auto pos = line.find('/');
    if (pos == std::string::npos) continue;
    const std::string path = line.substr(pos);
    if ((path.find("blas") != std::string::npos || path.find("lapack") != std::string::npos) &&
        out.find(path) == std::string::npos)
      out += (out.empty() ? "" : ", ") + path;
  }
  return out;
}

// OpenBLAS's own description ("OpenBLAS 0.3.21 ... DYNAMIC_ARCH ... MAX_THREADS=64"), the
// kernels it picked for this CPU and its thread count, if OpenBLAS is loaded.
std::string openblas_config() {
  using Fn = char* (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  if (!fn) return "not loaded";
  using Threads = int (*)();
  auto threads = reinterpret_cast<Threads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  // The config string names the build target; with DYNAMIC_ARCH the kernels actually used are
  // those of openblas_get_corename() (OPENBLAS_CORETYPE overrides it at load time).
  auto corename = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  std::string s = fn();
  if (corename) s += ", kernels " + std::string(corename());
  if (threads) s += ", openblas threads " + std::to_string(threads());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything else: OpenBLAS kernels that fit this CPU, for us and (inherited through
  // the environment) for the peer. To measure OpenBLAS's own choice, run with
  // OPENBLAS_CORETYPE set, e.g. OPENBLAS_CORETYPE=Prescott.
  th::reexec_for_fast_blas(argv);
  int epochs = 1, rounds = 1;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string data;
  bench::PeerOptions peer{std::string(TENSORHUB_SOURCE_DIR) + "/bench/peers/pytorch_mlp.py"};
  CLI::App app{"Training throughput of the original MLP, ours against the PyTorch peer", "bench_train_throughput"};
  app.add_option("--epochs", epochs, "epochs per run")->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--threads", threads, "threads of both sides")->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--rounds", rounds, "runs per side; the best of each is compared")
      ->capture_default_str()->check(tensorhub::bench::at_least_one());
  bench::add_mnist_option(app, data);
  bench::add_peer_options(app, peer);
  bench::parse_or_exit(app, argc, argv);
  const bool with_peer = peer.run;

  try {
    th::set_num_threads(threads);
    // The peer trains on all 60,000 training images per epoch: so do we.
    const auto splits = bench::load_mnist_for_peer_comparison(data);
    const std::int64_t n = splits.X_train.shape[0];
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    std::cout << "blas: " << loaded_blas() << "\n"
              << "openblas: " << openblas_config() << " (OPENBLAS_CORETYPE="
              << (coretype ? coretype : "unset") << ")\n"
              << "torch threads: " << th::get_num_threads() << "\n";

    // One training run of ours: a fresh model, `epochs` epochs; returns samples/s.
    auto run_ours = [&](int round) {
      auto model = th::Model::from_config(th::mlp_config(800, 800, 1e-4));
      th::FitOptions options;
      options.batch_size = 256;
      options.epochs = epochs;
      options.seed = static_cast<std::uint64_t>(round + 1);
      options.verbose = 1;
      const auto t0 = Clock::now();
      model.fit(splits.X_train, splits.y_train, options);
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      const double rate = static_cast<double>(n) * epochs / seconds;
      const double acc = model.evaluate(splits.X_test, splits.y_test).accuracy;
      std::printf("round %d ours:    %8.0f samples/s  (%.2f s for %d x %lld samples, test "
                  "accuracy %.4f)\n",
                  round + 1, rate, seconds, epochs, static_cast<long long>(n), acc);
      std::fflush(stdout);
      return rate;
    };
    auto run_theirs = [&](int round) {
      const auto r = bench::run_peer(peer, {"--data", data, "--epochs", std::to_string(epochs), "--threads",
                                            std::to_string(threads)});
      const double rate = r.at("samples_per_s").get<double>();
      std::printf("round %d pytorch: %8.0f samples/s  (epoch_s %s, test accuracy %.4f)\n",
                  round + 1, rate, r.at("epoch_s").dump().c_str(), r.value("test_accuracy", 0.0));
      std::fflush(stdout);
      return rate;
    };

    // Rounds alternate the order (ours first, then the peer first, ...) so that a drift in
    // the machine's speed does not favour one side; the best of each side is compared.
    std::vector<double> ours, theirs;
    nlohmann::json per_round = nlohmann::json::array();
    for (int r = 0; r < rounds; ++r) {
      double o = 0, t = 0;
      if (r % 2 == 0 || !with_peer) {
        o = run_ours(r);
        if (with_peer) t = run_theirs(r);
      } else {
        t = run_theirs(r);
        o = run_ours(r);
      }
      ours.push_back(o);
      if (with_peer) theirs.push_back(t);
      per_round.push_back(with_peer ? nlohmann::json{{"ours", o}, {"pytorch", t}, {"ratio", o / t}}
                                    : nlohmann::json{{"ours", o}});
    }
    const double best_ours = *std::max_element(ours.begin(), ours.end());
    nlohmann::json summary = {{"bench", "train_throughput"}, {"epochs", epochs},
                              {"threads", threads},          {"rounds", per_round},
                              {"samples_per_epoch", n},      {"ours_samples_per_s", best_ours}};
    std::printf("ours:    %8.0f samples/s (best of %d)\n", best_ours, rounds);
    if (with_peer) {
      const double best_theirs = *std::max_element(theirs.begin(), theirs.end());
      std::printf("pytorch: %8.0f samples/s (best of %d)\n", best_theirs, rounds);
      bench::print_ratio("ours/pytorch", best_ours / best_theirs);
      summary["pytorch_samples_per_s"] = best_theirs;
      summary["ratio"] = best_ours / best_theirs;
    }
    std::cout << summary.dump() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bench_train_throughput: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
