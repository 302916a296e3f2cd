// Model server throughput and latency with wrk on loopback, against the FastAPI + uvicorn +
// PyTorch peer (bench/peers/fastapi_server.py) serving the same two models in the same run:
// half_plus_two, and the MLP 784 -> 800 -> 800 -> 10 with softmax (one 784-float instance per
// request). Ours runs without and with --enable_batching.
//
// Usage: bench_serve_rest [--duration S] [--connections C] [--peer SCRIPT] [--python PATH] [--no-peer]
//                         [--tensorhub PATH]...
// (--tensorhub: another tensorhub binary measured the same way in the same run, e.g. one built
// from an older commit, named by its path.)
// Prints requests/s, p50 and p99 per server and model, and the ratios ours / peer; the last
// line is a JSON summary. Needs wrk (Debian package wrk).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/train/model.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  return out;
}

// Waits until a POST of `body` to `url` answers 200.
bool wait_ready(const std::string& url, const std::string& body_file) {
  for (int i = 0; i < 300; ++i) {
    if (run("curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data @" + body_file +
            " " + url) == "200")
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

double to_ms(const std::string& value, const std::string& unit) {
  const double v = std::stod(value);
  if (unit == "us") return v / 1000;
  if (unit == "s") return v * 1000;
  return v;
}

struct Result {
  double rps = 0, p50_ms = 0, p99_ms = 0;
};

Result wrk(const std::string& url, const std::string& lua, int connections, int seconds) {
  const std::string out = run("wrk -t2 -c" + std::to_string(connections) + " -d" + std::to_string(seconds) +
                              "s --latency -s " + lua + " " + url + " 2>&1");
  Result r;
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"(Requests/sec:\s+([0-9.]+))"))) r.rps = std::stod(m[1]);
  if (std::regex_search(out, m, std::regex(R"(50%\s+([0-9.]+)(us|ms|s))"))) r.p50_ms = to_ms(m[1], m[2]);
  if (std::regex_search(out, m, std::regex(R"(99%\s+([0-9.]+)(us|ms|s))"))) r.p99_ms = to_ms(m[1], m[2]);
  if (out.find("Non-2xx") != std::string::npos) std::cerr << "warning: non-2xx answers:\n" << out;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 10, connections = 32;
  std::vector<std::string> others;
  tensorhub::bench::PeerOptions peer_options{std::string(TENSORHUB_SOURCE_DIR) + "/bench/peers/fastapi_server.py"};
  CLI::App app{"The model server under wrk against the FastAPI + PyTorch peer", "bench_serve_rest"};
  app.add_option("--duration", seconds, "seconds of wrk per server and model")
      ->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--connections", connections, "wrk's connections")->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--tensorhub", others, "also this tensorhub binary, unbatched and batched (repeatable)");
  tensorhub::bench::add_peer_options(app, peer_options);
  tensorhub::bench::parse_or_exit(app, argc, argv);
  const bool run_peer = peer_options.run;
  const std::string& peer = peer_options.script;
  if (run("command -v wrk").empty()) {
    std::cerr << "wrk is missing: apt-get install wrk (scripts/setup installs it)\n";
    return 2;
  }
  char tmpl[] = "/tmp/tensorhub-serve-bench-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);

  // The MLP of the peer: 784 -> 800 relu -> 800 relu -> 10 softmax.
  json config = tensorhub::mlp_config(800, 800);
  config["layers"].back()["activation"] = "softmax";
  auto model = tensorhub::Model::from_config(config);
  fs::create_directories(dir / "mlp" / "1");
  std::ofstream(dir / "mlp" / "1" / "model.json") << model.config().dump();
  tensorhub::write_safetensors(dir / "mlp" / "1" / "weights.safetensors", model.weights());
  const std::string hpt = std::string(TENSORHUB_SOURCE_DIR) + "/examples/serving/half_plus_two";
  std::ofstream(dir / "models.config") << "model_config_list { config { name: 'half_plus_two' base_path: '" << hpt
                                       << "' } config { name: 'mlp' base_path: '" << (dir / "mlp").string() << "' } }";
  std::ofstream(dir / "batching.config")
      << "max_batch_size { value: 64 } batch_timeout_micros { value: 500 } num_batch_threads { value: 2 }";
  // wrk request bodies.
  json image = json::array();
  for (int i = 0; i < 784; ++i) image.push_back((i % 255) / 255.0);
  const std::string mlp_body = json({{"instances", {image}}}).dump();
  const std::string hpt_body = R"({"instances": [1.0, 2.0, 5.0]})";
  std::ofstream(dir / "mlp.json") << mlp_body;
  std::ofstream(dir / "hpt.json") << hpt_body;
  for (const auto& [name, body] : {std::pair{"mlp", mlp_body}, std::pair{"hpt", hpt_body}})
    std::ofstream(dir / (std::string(name) + ".lua"))
        << "wrk.method = 'POST'\nwrk.headers['Content-Type'] = 'application/json'\nwrk.body = [==[" << body << "]==]\n";

  struct Server {
    std::string name;
    std::vector<std::string> args;
    std::string cwd;
  };
  std::vector<Server> servers;
  // --port 0: no gRPC, so that servers started one after the other never wait for 8500.
  const auto add_tensorhub = [&](const std::string& name, const std::string& binary) {
    servers.push_back({name, {binary, "serve", "--port", "0", "--model_config_file", (dir / "models.config").string()}, ""});
    servers.push_back({name + "+batching",
                       {binary, "serve", "--port", "0", "--model_config_file", (dir / "models.config").string(),
                        "--enable_batching", "--batching_parameters_file", (dir / "batching.config").string()},
                       ""});
  };
  add_tensorhub("tensorhub", std::string(TENSORHUB_BIN_DIR) + "/tensorhub");
  for (const auto& other : others) add_tensorhub(other, other);
  if (run_peer)
    servers.push_back({"fastapi", {peer_options.python, peer, "--workers", "2"}, fs::path(peer).parent_path().string()});

  json summary = {{"connections", connections}, {"seconds", seconds}, {"results", json::object()}};
  std::printf("wrk -t2 -c%d -d%ds on loopback, 2 cores shared by server and wrk\n", connections, seconds);
  std::printf("%-20s %-14s %10s %9s %9s\n", "server", "model", "req/s", "p50 ms", "p99 ms");
  std::printf("load average: %s", run("cut -d' ' -f1-3 /proc/loadavg").c_str());
  for (auto& s : servers) {
    const int port = tensorhub::free_loopback_port();
    s.args.push_back(s.name == "fastapi" ? "--port" : "--rest_api_port");
    s.args.push_back(std::to_string(port));
    auto server = tensorhub::bench::start(s.args, dir / (s.name + ".log"), /*append=*/false, s.cwd);
    const std::string base = "http://127.0.0.1:" + std::to_string(port) + "/v1/models/";
    if (!wait_ready(base + "mlp:predict", (dir / "mlp.json").string())) {
      std::cerr << s.name << " did not come up; see " << (dir / (s.name + ".log")).string() << "\n";
      server.stop();
      return 1;
    }
    for (const auto& [model, lua] : {std::pair{"half_plus_two", "hpt.lua"}, std::pair{"mlp", "mlp.lua"}}) {
      const Result r = wrk(base + model + ":predict", (dir / lua).string(), connections, seconds);
      std::printf("%-20s %-14s %10.0f %9.2f %9.2f\n", s.name.c_str(), model, r.rps, r.p50_ms, r.p99_ms);
      summary["results"][s.name][model] = {{"rps", r.rps}, {"p50_ms", r.p50_ms}, {"p99_ms", r.p99_ms}};
    }
    server.stop();
  }
  for (const auto& other : others)
    for (const char* model : {"half_plus_two", "mlp"})
      for (const std::string suffix : {"", "+batching"}) {
        const double r = summary["results"]["tensorhub" + suffix][model]["rps"].get<double>() /
                         summary["results"][other + suffix][model]["rps"].get<double>();
        tensorhub::bench::print_ratio("tensorhub" + suffix + " / " + other + suffix + " on " + model, r, 2, "x requests/s");
      }
  if (run_peer) {
    for (const char* model : {"half_plus_two", "mlp"}) {
      const double peer_rps = summary["results"]["fastapi"][model]["rps"].get<double>();
      for (const char* ours : {"tensorhub", "tensorhub+batching"}) {
        const double r = summary["results"][ours][model]["rps"].get<double>() / peer_rps;
        tensorhub::bench::print_ratio(std::string(ours) + " / fastapi on " + model, r, 1, "x requests/s");
        summary["ratios"][std::string(ours) + "/" + model] = r;
      }
    }
  }
  fs::remove_all(dir);
  std::cout << summary.dump() << std::endl;
  return 0;
}
