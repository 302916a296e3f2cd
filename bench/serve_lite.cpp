// The edge server against `tensorhub serve` on the same models in the same run:
// tensorhub-serve-lite (Eigen, static, no libtorch) and its peer each serve half_plus_two, the
// MLP 784 -> 800 -> 800 -> 10 softmax of bench_serve_rest, and a small CNN (Conv2D 8 3x3,
// MaxPooling2D, BatchNormalization, Dense 10). Measured per server and model: start-up (process
// start to the first 200 answer of a predict, median of --starts), requests/s, p50 and p99
// under wrk (one instance per request), the server's CPU time per request over that load
// (/proc/PID/stat: on a machine shared with other work, requests/s also measures how large a
// share of the cores a server's threads get), and peak resident memory after the load; per binary:
// the file's size and, for tensorhub, that of the shared libraries it loads (ldd). The arm64
// binary's size is printed when it was built (build/arm64/).
//
// Measured here (2 cores shared with wrk and other agents' builds, load average 9 to 12; one run
// with --lite of the former binary, whose HTTP code was its own with a thread per connection,
// and of this one, on the HTTP engine): start-up 0.04-0.08 s against serve's 1.4-1.5 s;
// requests/s lite / serve 3.41x on half_plus_two (33,612 against 9,849; the former lite 44,571),
// 5.14x on the MLP (4,579 / 890; former 5,624), 2.44x on the CNN (7,465 / 3,065; former 10,144).
// CPU per request: 20.8 us on half_plus_two against the former's 23.0 (the engine costs less
// per request), 348 / 311 us on the MLP and 186 / 165 us on the CNN (handing the predict to a
// worker and back costs about 12%); the lower requests/s is the share of a busy machine one
// loop thread gets, where 32 connection threads got more. Peak RSS 3-12 MB against 176-220 MB;
// 3.5 MB (x86-64) and 3.2 MB (arm64) static (3.2 and 2.8 MB with the former HTTP code).
//
// Usage: bench_serve_lite [--duration S] [--connections C] [--starts N] [--lite PATH]...
// The last line is a JSON summary. Needs wrk (Debian package wrk) and curl.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/train/model.h"

namespace {

namespace fs = std::filesystem;
using tensorhub::Json;
using tensorhub::bench::Clock;
using tensorhub::bench::command_output;

// Seconds from spawning `argv` (plus --rest_api_port) to the first 200 answer to `body` at
// `url_path`, polling with curl every 5 ms. The process is returned running in `server`.
double start_until_ready(std::vector<std::string> argv, int port, const std::string& url_path, const fs::path& body,
                         const fs::path& log, std::optional<tensorhub::Process>& server) {
  argv.insert(argv.end(), {"--rest_api_port", std::to_string(port)});
  const auto t0 = Clock::now();
  server.emplace(tensorhub::bench::start(argv, log, false));
  const std::string curl = "curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data @" +
                           body.string() + " http://127.0.0.1:" + std::to_string(port) + url_path;
  while (tensorhub::bench::seconds_since(t0) < 120) {
    if (command_output(curl) == "200") return tensorhub::bench::seconds_since(t0);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw std::runtime_error(argv[0] + " did not answer within 120 s; see " + log.string());
}

// Peak resident memory of `pid` (VmHWM), MB.
double peak_rss_mb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  return 0;
}

double mb(std::uintmax_t bytes) { return static_cast<double>(bytes) / 1e6; }

// The shared libraries `binary` loads (ldd), their total size in bytes.
std::uintmax_t shared_libraries_bytes(const std::string& binary) {
  std::uintmax_t total = 0;
  std::set<fs::path> seen;
  const std::string out = command_output("ldd " + binary + " 2>/dev/null");
  std::regex lib(R"(=>\s+(/\S+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), lib); it != std::sregex_iterator(); ++it) {
    std::error_code ec;
    const fs::path p = fs::canonical((*it)[1].str(), ec);
    if (!ec && seen.insert(p).second) total += fs::file_size(p, ec);
  }
  return total;
}

// A model directory <dir>/<name>/1 of `config` with weights from Model::from_config (seeded),
// BatchNormalization averages moved off 0 / 1.
void write_model(const fs::path& dir, const std::string& name, Json config) {
  config["seed"] = 3;
  const auto model = tensorhub::Model::from_config(config);
  tensorhub::NamedTensors weights = model.weights();
  std::mt19937 rng(5);
  for (auto& [key, t] : weights)
    if (key.find("moving_") != std::string::npos)
      for (std::int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = std::uniform_real_distribution<float>(0.5f, 1.5f)(rng);
  fs::create_directories(dir / name / "1");
  std::ofstream(dir / name / "1" / "model.json") << model.config().dump();
  tensorhub::write_safetensors(dir / name / "1" / "weights.safetensors", weights);
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 10, connections = 32, starts = 3;
  std::vector<std::string> lites;
  CLI::App app{"tensorhub-serve-lite against tensorhub serve: size, start-up, requests/s", "bench_serve_lite"};
  app.add_option("--duration", seconds, "seconds of wrk per server and model")
      ->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--connections", connections, "wrk's connections")->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--starts", starts, "start-ups timed per server and model (median)")
      ->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--lite", lites,
                 "a tensorhub-serve-lite binary to measure (repeatable, e.g. one built from an older commit beside "
                 "this build's; default: this build's)");
  tensorhub::bench::parse_or_exit(app, argc, argv);
  if (command_output("command -v wrk").empty() || command_output("command -v curl").empty()) {
    std::cerr << "wrk or curl is missing: apt-get install wrk curl (scripts/setup installs them)\n";
    return 2;
  }
  const std::string bin = TENSORHUB_BIN_DIR;
  const std::string tensorhub = bin + "/tensorhub";
  if (lites.empty()) lites.push_back(bin + "/tensorhub-serve-lite");
  // The servers measured: serve, and each lite under its name ("tensorhub-serve-lite" alone).
  std::vector<std::pair<std::string, std::string>> servers = {{"tensorhub serve", tensorhub}};
  for (const auto& l : lites) servers.push_back({lites.size() == 1 ? "tensorhub-serve-lite" : "lite " + l, l});
  char tmpl[] = "/tmp/tensorhub-lite-bench-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);

  Json mlp = tensorhub::mlp_config(800, 800);
  mlp["layers"].back()["activation"] = "softmax";
  write_model(dir, "mlp", mlp);
  write_model(dir, "cnn", Json::parse(R"({"input_shape": [784], "layers": [
      {"type": "Reshape", "target_shape": [28, 28, 1]},
      {"type": "Conv2D", "filters": 8, "kernel_size": 3, "activation": "relu"},
      {"type": "MaxPooling2D", "pool_size": 2}, {"type": "BatchNormalization"},
      {"type": "Flatten"}, {"type": "Dense", "units": 10, "activation": "softmax"}]})"));
  const std::map<std::string, std::string> bases = {
      {"half_plus_two", std::string(TENSORHUB_SOURCE_DIR) + "/examples/serving/half_plus_two"},
      {"mlp", (dir / "mlp").string()},
      {"cnn", (dir / "cnn").string()}};
  Json image = Json::array();
  for (int i = 0; i < 784; ++i) image.push_back((i % 255) / 255.0);
  const std::map<std::string, std::string> bodies = {{"half_plus_two", R"({"instances": [1.0, 2.0, 5.0]})"},
                                                      {"mlp", Json({{"instances", {image}}}).dump()},
                                                      {"cnn", Json({{"instances", {image}}}).dump()}};
  for (const auto& [name, body] : bodies) {
    std::ofstream(dir / (name + ".json")) << body;
    std::ofstream(dir / (name + ".lua"))
        << "wrk.method = 'POST'\nwrk.headers['Content-Type'] = 'application/json'\nwrk.body = [==[" << body << "]==]\n";
  }

  Json summary = {{"connections", connections}, {"seconds", seconds}, {"sizes_mb", Json::object()}, {"results", Json::object()}};
  const double lite_mb = mb(fs::file_size(lites.front())), serve_mb = mb(fs::file_size(tensorhub));
  const double serve_libs_mb = mb(shared_libraries_bytes(tensorhub));
  summary["sizes_mb"] = {{"tensorhub-serve-lite x86_64 (static)", lite_mb}, {"tensorhub", serve_mb},
                         {"tensorhub shared libraries", serve_libs_mb}};
  std::printf("binary sizes: tensorhub-serve-lite x86_64 %.1f MB (static, all it needs); tensorhub %.1f MB + %.1f MB "
              "of shared libraries (libtorch, gRPC, ...)\n", lite_mb, serve_mb, serve_libs_mb);
  const fs::path arm64 = fs::path(bin).parent_path() / "arm64" / "tensorhub-serve-lite";
  if (fs::exists(arm64)) {
    summary["sizes_mb"]["tensorhub-serve-lite arm64 (static)"] = mb(fs::file_size(arm64));
    std::printf("binary size: tensorhub-serve-lite arm64 %.1f MB (static)\n", mb(fs::file_size(arm64)));
  } else {
    std::printf("binary size: tensorhub-serve-lite arm64 not built (aarch64-linux-gnu-g++ missing at configure)\n");
  }
  std::printf("load average: %s", command_output("cut -d' ' -f1-3 /proc/loadavg").c_str());
  std::printf("wrk -t2 -c%d -d%ds on loopback, 2 cores shared by server and wrk; start-up: median of %d\n", connections,
              seconds, starts);
  std::printf("%-22s %-14s %10s %10s %9s %9s %9s %11s\n", "server", "model", "start s", "req/s", "p50 ms", "p99 ms",
              "RSS MB", "CPU us/req");
  for (const auto& [model, base] : bases) {
    for (const auto& [server, binary] : servers) {
      std::vector<std::string> argv = server == "tensorhub serve"
                                          ? std::vector<std::string>{tensorhub, "serve", "--port", "0"}
                                          : std::vector<std::string>{binary};
      argv.insert(argv.end(), {"--model_name", model, "--model_base_path", base});
      const std::string path = "/v1/models/" + model + ":predict";
      std::vector<double> times;
      std::optional<tensorhub::Process> process;
      int port = 0;
      for (int i = 0; i < starts; ++i) {
        if (process) process->stop();
        process.reset();
        port = tensorhub::free_loopback_port();
        times.push_back(start_until_ready(argv, port, path, dir / (model + ".json"), dir / "server.log", process));
      }
      // The server's CPU time per request (`tensorhub serve` execs tensorhub-torch in the same
      // process), which the machine's other load moves less than requests/s.
      const double cpu0 = tensorhub::bench::cpu_seconds(process->pid());
      const auto r = tensorhub::bench::run_wrk("http://127.0.0.1:" + std::to_string(port) + path,
                                               (dir / (model + ".lua")).string(), connections, seconds);
      const double cpu_us = (tensorhub::bench::cpu_seconds(process->pid()) - cpu0) * 1e6 / std::max(1.0, r.rps * seconds);
      const double rss = peak_rss_mb(process->pid());
      process->stop();
      const double start_s = tensorhub::bench::median(times);
      std::printf("%-22s %-14s %10.3f %10.0f %9.2f %9.2f %9.1f %11.1f\n", server.c_str(), model.c_str(), start_s, r.rps,
                  r.p50_ms, r.p99_ms, rss, cpu_us);
      summary["results"][server][model] = {{"start_s", start_s}, {"rps", r.rps},         {"p50_ms", r.p50_ms},
                                           {"p99_ms", r.p99_ms},   {"peak_rss_mb", rss}, {"cpu_us_per_request", cpu_us}};
    }
    const Json& s = summary["results"]["tensorhub serve"][model];
    for (std::size_t i = 1; i < servers.size(); ++i) {
      const Json& l = summary["results"][servers[i].first][model];
      const std::string name = lites.size() == 1 ? "lite" : servers[i].first;
      tensorhub::bench::print_ratio(name + " / serve requests/s on " + model, l["rps"].get<double>() / s["rps"].get<double>(), 2, "x");
      tensorhub::bench::print_ratio(name + " / serve CPU per request on " + model,
                                    l["cpu_us_per_request"].get<double>() / s["cpu_us_per_request"].get<double>(), 2, "x");
      tensorhub::bench::print_ratio(name + " / serve start-up on " + model,
                                    l["start_s"].get<double>() / s["start_s"].get<double>(), 3, "x");
    }
  }
  fs::remove_all(dir);
  std::cout << summary.dump() << std::endl;
  return 0;
}
