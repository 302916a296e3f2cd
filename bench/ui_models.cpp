// bench_ui_models: the dashboard's leaderboard on a large project. A SQLite hub with --models
// models (30,000 by default, each with metrics and hyperparameters as tags); `tensorhub ui`
// serves it; we time GET /api/models?sort=test_accuracy:-1&limit=50 over HTTP (the sorted first
// page the Models view asks for), against a naive baseline of our own in the same run: an HTTP
// server in this process that sends every model document unreduced (Hub::find_models, as JSON),
// which the client parses and sorts itself before keeping the first 50. Both answers must hold
// the same ids in the same order. Goal (issue 13): under 100 ms for ours.
//
//   bench_ui_models [--models 30000] [--requests 20] [--dir DIR]
#include <httplib.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <thread>

#include "bench_util.h"
#include "tensorhub/core/error.h"
#include "tensorhub/store/hub.h"

namespace tensorhub::bench {
namespace {

constexpr const char* kProject = "bench";
constexpr int kPage = 50;

struct Options {
  int models = 30000;
  int requests = 20;
  std::string dir;  // default: a new temporary directory, removed afterwards
};

Json mlp_architecture() {
  return {{"name", "mlp"},
          {"input_shape", {784}},
          {"layers", {{{"type", "Dense"}, {"units", 32}, {"activation", "relu"}}, {{"type", "Dense"}, {"units", 10}}}}};
}

// n models with random metrics and hyperparameters (seeded: the same hub every run).
void seed(Hub& hub, int n) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0, 1);
  const Json arch = mlp_architecture();
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    hub.save_model(arch, {}, "mlp",
                   {{"test_accuracy", 0.5 + 0.5 * unit(rng)},
                    {"val_loss", 2 * unit(rng)},
                    {"name", "run-" + std::to_string(i)},
                    {"lr", std::pow(10.0, -4 + 3 * unit(rng))},
                    {"units", 32 << (i % 5)},
                    {"optimizer", i % 2 ? "adam" : "sgd"}});
  }
  std::printf("seeded %d models in %.1f s\n", n, seconds_since(t0));
}

// The port `tensorhub ui` prints on its first line.
std::string get(httplib::Client& c, const std::string& path) {
  const auto res = c.Get(path.c_str());
  if (!res || res->status != 200)
    throw std::runtime_error("GET " + path + " failed: " + (res ? res->body : httplib::to_string(res.error())));
  return res->body;
}

// Median and best of `requests` timed calls of `once` (after one untimed warm-up call), in ms.
template <typename F>
std::pair<double, double> time_ms(int requests, F once) {
  once();
  std::vector<double> ms;
  for (int i = 0; i < requests; ++i) {
    const auto t0 = Clock::now();
    once();
    ms.push_back(seconds_since(t0) * 1e3);
  }
  return {median(ms), *std::min_element(ms.begin(), ms.end())};
}

std::vector<std::int64_t> ours_first_page(httplib::Client& c) {
  const Json body = Json::parse(get(c, "/api/models?sort=test_accuracy:-1&limit=" + std::to_string(kPage)));
  std::vector<std::int64_t> ids;
  for (const auto& m : body.at("models")) ids.push_back(m.at("id"));
  return ids;
}

// The naive client: every document, parsed, sorted by test_accuracy (best first, then id).
std::vector<std::int64_t> naive_first_page(httplib::Client& c) {
  Json all = Json::parse(get(c, "/all"));
  std::vector<std::pair<double, std::int64_t>> rows;
  for (const auto& m : all) rows.emplace_back(m.at("tags").at("test_accuracy").get<double>(), m.at("id"));
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::int64_t> ids;
  for (int i = 0; i < kPage && i < static_cast<int>(rows.size()); ++i) ids.push_back(rows[i].second);
  return ids;
}

// The naive server: every model document of the project, unreduced.
void serve_everything(httplib::Server& server, const std::string& uri) {
  server.Get("/all", [uri](const httplib::Request&, httplib::Response& res) {
    Hub hub(uri, kProject, OpenMode::kExisting);
    Json all = Json::array();
    for (const auto& d : hub.find_models())
      all.push_back({{"id", d.id}, {"model_name", d.tags.value("model_name", "")}, {"time", d.time}, {"tags", d.tags}});
    res.set_content(all.dump(), "application/json");
  });
}

int run(const Options& o) {
  const std::filesystem::path dir =
      o.dir.empty() ? std::filesystem::temp_directory_path() / ("bench-ui-models-" + std::to_string(getpid())) : std::filesystem::path(o.dir);
  std::filesystem::create_directories(dir);
  const std::string uri = "sqlite://" + (dir / "hub.db").string();
  {
    Hub hub(uri, kProject);
    const auto have = hub.count_documents(Collection::kModels);
    if (have != o.models) {
      hub.delete_models();
      seed(hub, o.models);
    }
  }
  const auto log = dir / "ui.log";
  Process ui = start({std::string(TENSORHUB_BIN_DIR) + "/tensorhub", "ui", "--hub", uri, "--project", kProject,
                      "--port", "0"},
                     log, false);
  httplib::Client ours("127.0.0.1", wait_for_ui_port(log));
  ours.set_read_timeout(120, 0);

  httplib::Server naive_server;
  serve_everything(naive_server, uri);
  const int naive_port = naive_server.bind_to_any_port("127.0.0.1");
  std::thread naive_thread([&] { naive_server.listen_after_bind(); });
  httplib::Client naive("127.0.0.1", naive_port);
  naive.set_read_timeout(120, 0);

  const auto cold = Clock::now();
  const auto ours_ids = ours_first_page(ours);  // the first request reads every model once
  const double cold_ms = seconds_since(cold) * 1e3;
  const auto naive_ids = naive_first_page(naive);
  if (ours_ids != naive_ids) throw std::runtime_error("ours and the naive baseline disagree on the first page");

  const auto [ours_median, ours_best] = time_ms(o.requests, [&] { ours_first_page(ours); });
  const auto [naive_median, naive_best] = time_ms(std::max(3, o.requests / 4), [&] { naive_first_page(naive); });
  std::printf("%d models, first page of %d sorted by test_accuracy (desc), over HTTP on loopback\n", o.models, kPage);
  std::printf("ours  GET /api/models?sort=test_accuracy:-1&limit=%d: median %7.1f ms  best %7.1f ms  (goal < 100 ms)\n",
              kPage, ours_median, ours_best);
  std::printf("ours  the first request after start (reads every model into the index): %7.1f ms\n", cold_ms);
  std::printf("naive every document sent, sorted by the client:    median %7.1f ms  best %7.1f ms\n", naive_median,
              naive_best);
  print_ratio("naive / ours (median)", naive_median / ours_median, 1, "x");

  naive_server.stop();
  naive_thread.join();
  ui.stop();
  if (o.dir.empty()) std::filesystem::remove_all(dir);
  std::cout << Json({{"models", o.models},
                     {"ours_median_ms", ours_median},
                     {"ours_best_ms", ours_best},
                     {"ours_first_request_ms", cold_ms},
                     {"naive_median_ms", naive_median},
                     {"naive_best_ms", naive_best}})
                   .dump()
            << std::endl;
  std::printf("goal (ours under 100 ms): %s\n", ours_median < 100 ? "met" : "missed");
  return 0;
}

}  // namespace
}  // namespace tensorhub::bench

int main(int argc, char** argv) {
  using namespace tensorhub::bench;
  Options o;
  CLI::App app("The dashboard's sorted models page against a naive every-document baseline");
  app.add_option("--models", o.models, "models in the hub")->check(at_least_one())->capture_default_str();
  app.add_option("--requests", o.requests, "timed requests of ours")->check(at_least_one())->capture_default_str();
  app.add_option("--dir", o.dir, "keep the hub here (re-used when it holds --models models)");
  parse_or_exit(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "bench_ui_models: " << e.what() << "\n";
    return 2;
  }
}
