// gRPC Predict against REST predict on the same `tensorhub serve` (both APIs share its models),
// same models, same run: half_plus_two (3 floats per request) and the MLP 784 -> 800 -> 800 -> 10
// with softmax (one 784-float instance per request), without and with --enable_batching; and
// against a peer of the same gRPC API, bench/peers/grpc_torch_server.py (python3-grpcio +
// PyTorch). Both APIs are loaded from outside the server by a client process of their own with
// two threads: REST by wrk, gRPC by bench_grpc_load (asynchronous calls, `connections` channels,
// one call outstanding on each, as wrk's connections).
// Each cell runs three times: requests/s, p50 and the server's CPU time per request (all its
// threads, from /proc) are the medians, p99 the worst of the three. CPU per request measures the
// server's own cost, whatever else the shared cores run (the client, other work); gRPC's client
// costs about three times wrk's per request, which requests/s on 2 shared cores includes.
//
// Usage: bench_serve_grpc [--duration S] [--connections C] [--peer SCRIPT] [--python PATH] [--no-peer]
// The last line is a JSON summary. Needs wrk (Debian package wrk) and bench_grpc_load (built with it).
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/train/model.h"

namespace {

namespace fs = std::filesystem;
namespace tfs = tensorflow::serving;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  return out;
}

struct Result {
  double rps = 0, p50_ms = 0, p99_ms = 0;
  double server_us = 0;  // the server's CPU time per request (all its threads), microseconds
  long errors = 0;
};

// CPU seconds the process `pid` has used, user and system, all threads (/proc/<pid>/stat).
double cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // The command name, in parentheses, may hold spaces: fields are counted after it, from
  // field 3 (state); utime and stime are fields 14 and 15.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 1));
  std::string skip;
  for (int field = 3; field <= 13; ++field) rest >> skip;
  double utime = 0, stime = 0;
  rest >> utime >> stime;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// `once()` with the CPU time the server `pid` spent per request during it: unlike requests/s,
// this does not depend on what else the shared cores run (the load generator, other work).
template <typename F>
Result with_server_cpu(pid_t pid, int seconds, F once) {
  const double before = cpu_seconds(pid);
  Result r = once();
  const double requests = r.rps * seconds;
  if (requests > 0) r.server_us = (cpu_seconds(pid) - before) * 1e6 / requests;
  return r;
}

double to_ms(const std::string& value, const std::string& unit) {
  const double v = std::stod(value);
  if (unit == "us") return v / 1000;
  if (unit == "s") return v * 1000;
  return v;
}

Result wrk(const std::string& url, const std::string& lua, int connections, int seconds) {
  const std::string out = run("wrk -t2 -c" + std::to_string(connections) + " -d" + std::to_string(seconds) +
                              "s --latency -s " + lua + " " + url + " 2>&1");
  Result r;
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"(Requests/sec:\s+([0-9.]+))"))) r.rps = std::stod(m[1]);
  if (std::regex_search(out, m, std::regex(R"(50%\s+([0-9.]+)(us|ms|s))"))) r.p50_ms = to_ms(m[1], m[2]);
  if (std::regex_search(out, m, std::regex(R"(99%\s+([0-9.]+)(us|ms|s))"))) r.p99_ms = to_ms(m[1], m[2]);
  if (std::regex_search(out, m, std::regex(R"(Non-2xx or 3xx responses:\s+([0-9]+))"))) r.errors = std::stol(m[1]);
  return r;
}

// gRPC load from bench_grpc_load, a process of its own as wrk is for REST: `connections`
// channels with one call outstanding on each (as wrk's connections), driven asynchronously by
// two threads (wrk's -t2). The request is read from `request_file` (a serialized PredictRequest).
Result grpc_load(const std::string& target, const fs::path& request_file, int connections, double seconds) {
  const std::string out = run(std::string(TENSORHUB_BIN_DIR) + "/bench_grpc_load --target " + target + " --request " +
                              request_file.string() + " --connections " + std::to_string(connections) +
                              " --threads 2 --duration " + std::to_string(seconds) + " 2>&1");
  Result r;
  const auto brace = out.rfind("\n{");
  if (brace == std::string::npos) {
    std::cerr << "bench_grpc_load failed:\n" << out;
    r.errors = 1;
    return r;
  }
  const json j = json::parse(out.substr(brace + 1));
  r.rps = j.at("rps").get<double>();
  r.p50_ms = j.at("p50_ms").get<double>();
  r.p99_ms = j.at("p99_ms").get<double>();
  r.errors = j.at("errors").get<long>();
  if (r.errors) std::cerr << "gRPC errors: " << j.at("first_error").get<std::string>() << "\n";
  return r;
}

// Whether the server at `target` answers the Predict in `request_file` (a readiness probe).
bool peer_answers(const std::string& target, const fs::path& request_file) {
  tfs::PredictRequest request;
  std::ifstream in(request_file, std::ios::binary);
  if (!request.ParseFromIstream(&in)) return false;
  auto stub = tfs::PredictionService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  tfs::PredictResponse response;
  return stub->Predict(&context, request, &response).ok();
}

// Three runs of `once` against the server `pid`: medians of requests/s, p50 and server CPU
// per request, the worst p99.
template <typename F>
Result three_runs(pid_t pid, int seconds, F once) {
  std::vector<double> rps, p50, server_us;
  Result out;
  for (int i = 0; i < 3; ++i) {
    const Result r = with_server_cpu(pid, seconds, once);
    rps.push_back(r.rps), p50.push_back(r.p50_ms), server_us.push_back(r.server_us);
    out.p99_ms = std::max(out.p99_ms, r.p99_ms);
    out.errors += r.errors;
  }
  out.rps = tensorhub::bench::median(rps);
  out.p50_ms = tensorhub::bench::median(p50);
  out.server_us = tensorhub::bench::median(server_us);
  return out;
}

// Writes a Predict request for `model` (one float input) to `file`; returns the file.
fs::path predict_request(const fs::path& file, const std::string& model, const std::string& input,
                         const std::vector<float>& x, std::vector<std::int64_t> shape) {
  tfs::PredictRequest req;
  req.mutable_model_spec()->set_name(model);
  auto& t = (*req.mutable_inputs())[input];
  t.set_dtype(tensorflow::DT_FLOAT);
  for (auto d : shape) t.mutable_tensor_shape()->add_dim()->set_size(d);
  for (float v : x) t.add_float_val(v);
  std::ofstream(file, std::ios::binary) << req.SerializeAsString();
  return file;
}

bool wait_ready(const std::string& url) {
  for (int i = 0; i < 300; ++i) {
    if (run("curl -s -o /dev/null -w '%{http_code}' " + url) == "200") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 5, connections = 32;
  tensorhub::bench::PeerOptions peer_options{std::string(TENSORHUB_SOURCE_DIR) + "/bench/peers/grpc_torch_server.py"};
  CLI::App app{"gRPC Predict against REST predict on one tensorhub serve, and a Python gRPC peer", "bench_serve_grpc"};
  app.add_option("--duration", seconds, "seconds per run (three runs per cell)")
      ->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--connections", connections, "concurrent connections (wrk's, and gRPC channels)")
      ->capture_default_str()->check(tensorhub::bench::at_least_one());
  tensorhub::bench::add_peer_options(app, peer_options);
  tensorhub::bench::parse_or_exit(app, argc, argv);
  if (run("command -v wrk").empty()) {
    std::cerr << "wrk is missing: apt-get install wrk (scripts/setup installs it)\n";
    return 2;
  }
  char tmpl[] = "/tmp/tensorhub-grpc-bench-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);

  // The peer's MLP: 784 -> 800 relu -> 800 relu -> 10 softmax.
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
  std::vector<float> image(784);
  for (int i = 0; i < 784; ++i) image[i] = static_cast<float>((i % 255) / 255.0);
  json image_json = image;
  std::ofstream(dir / "mlp.lua") << "wrk.method = 'POST'\nwrk.headers['Content-Type'] = 'application/json'\nwrk.body = [==["
                                 << json({{"instances", {image_json}}}).dump() << "]==]\n";
  std::ofstream(dir / "hpt.lua") << "wrk.method = 'POST'\nwrk.headers['Content-Type'] = 'application/json'\n"
                                 << "wrk.body = [==[{\"instances\": [1.0, 2.0, 5.0]}]==]\n";

  json summary = {{"connections", connections}, {"seconds", seconds}, {"results", json::object()}};
  std::string load = run("cut -d' ' -f1-3 /proc/loadavg");
  if (!load.empty() && load.back() == '\n') load.pop_back();
  std::printf("%d connections, %d s x 3 runs per cell on loopback, %u cores shared by server and load; load average %s\n",
              connections, seconds, std::thread::hardware_concurrency(), load.c_str());
  std::printf("%-28s %-14s %10s %9s %9s %13s\n", "server / API", "model", "req/s", "p50 ms", "p99 ms",
              "server us/req");
  const auto report = [&](const std::string& who, const std::string& model, const Result& r) {
    std::printf("%-28s %-14s %10.0f %9.2f %9.2f %13.0f%s\n", who.c_str(), model.c_str(), r.rps, r.p50_ms, r.p99_ms,
                r.server_us, r.errors ? (" (" + std::to_string(r.errors) + " errors)").c_str() : "");
    std::fflush(stdout);
    summary["results"][who][model] = {{"rps", r.rps},       {"p50_ms", r.p50_ms},       {"p99_ms", r.p99_ms},
                                      {"errors", r.errors}, {"server_us", r.server_us}};
  };
  const std::string tensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";
  for (const bool batching : {false, true}) {
    const int rest_port = tensorhub::free_loopback_port(), grpc_port = tensorhub::free_loopback_port();
    std::vector<std::string> args = {tensorhub, "serve", "--model_config_file", (dir / "models.config").string(),
                                     "--rest_api_port", std::to_string(rest_port), "--port", std::to_string(grpc_port)};
    if (batching) args.insert(args.end(), {"--enable_batching", "--batching_parameters_file", (dir / "batching.config").string()});
    const std::string name = batching ? "tensorhub+batching" : "tensorhub";
    auto server = tensorhub::bench::start(args, dir / (name + ".log"), false);
    const std::string base = "http://127.0.0.1:" + std::to_string(rest_port) + "/v1/models/";
    if (!wait_ready(base + "mlp") || !wait_ready(base + "half_plus_two")) {
      std::cerr << name << " did not come up; see " << (dir / (name + ".log")).string() << "\n";
      return 1;
    }
    // The MLP's input alias, as its metadata says.
    const json meta = json::parse(run("curl -s " + base + "mlp/metadata"));
    const std::string mlp_input =
        meta["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"].begin().key();
    const auto hpt_req = predict_request(dir / "hpt.pb", "half_plus_two", "x", {1.f, 2.f, 5.f}, {3});
    const auto mlp_req = predict_request(dir / "mlp.pb", "mlp", mlp_input, image, {1, 784});
    const std::string target = "127.0.0.1:" + std::to_string(grpc_port);
    for (const auto& [model, lua, req] : {std::tuple{"half_plus_two", "hpt.lua", hpt_req}, std::tuple{"mlp", "mlp.lua", mlp_req}}) {
      report(name + " REST", model, three_runs(server.pid(), seconds, [&] { return wrk(base + model + ":predict", (dir / lua).string(), connections, seconds); }));
      report(name + " gRPC", model, three_runs(server.pid(), seconds, [&] { return grpc_load(target, req, connections, seconds); }));
    }
    server.stop();
  }
  if (peer_options.run) {
    const int port = tensorhub::free_loopback_port();
    auto peer = tensorhub::bench::start({peer_options.python, peer_options.script, "--port", std::to_string(port)},
                                        dir / "peer.log", false);
    const std::string target = "127.0.0.1:" + std::to_string(port);
    const auto hpt_req = predict_request(dir / "peer_hpt.pb", "half_plus_two", "x", {1.f, 2.f, 5.f}, {3});
    const auto mlp_req = predict_request(dir / "peer_mlp.pb", "mlp", "x", image, {1, 784});
    bool up = false;
    for (int i = 0; i < 300 && !up; ++i) {
      up = peer_answers(target, hpt_req);
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (!up) {
      std::cerr << "the peer did not come up; see " << (dir / "peer.log").string() << "\n";
      return 1;
    }
    report("python grpc+torch peer", "half_plus_two", three_runs(peer.pid(), seconds, [&] { return grpc_load(target, hpt_req, connections, seconds); }));
    report("python grpc+torch peer", "mlp", three_runs(peer.pid(), seconds, [&] { return grpc_load(target, mlp_req, connections, seconds); }));
    peer.stop();
    for (const char* model : {"half_plus_two", "mlp"}) {
      const double peer_rps = summary["results"]["python grpc+torch peer"][model]["rps"].get<double>();
      for (const char* ours : {"tensorhub gRPC", "tensorhub+batching gRPC"}) {
        const double r = summary["results"][ours][model]["rps"].get<double>() / peer_rps;
        tensorhub::bench::print_ratio(std::string(ours) + " / peer on " + model, r, 1, "x requests/s");
        summary["ratios"][std::string(ours) + "/peer/" + model] = r;
      }
    }
  }
  for (const char* mode : {"tensorhub", "tensorhub+batching"})
    for (const char* model : {"half_plus_two", "mlp"}) {
      const double r = summary["results"][std::string(mode) + " gRPC"][model]["rps"].get<double>() /
                       summary["results"][std::string(mode) + " REST"][model]["rps"].get<double>();
      tensorhub::bench::print_ratio(std::string(mode) + " gRPC / REST on " + model, r, 2, "x requests/s");
      summary["ratios"][std::string(mode) + "/grpc_over_rest/" + model] = r;
      const double cpu = summary["results"][std::string(mode) + " gRPC"][model]["server_us"].get<double>() /
                         summary["results"][std::string(mode) + " REST"][model]["server_us"].get<double>();
      tensorhub::bench::print_ratio(std::string(mode) + " gRPC / REST server CPU per request on " + model, cpu, 2, "x");
      summary["ratios"][std::string(mode) + "/grpc_over_rest_server_cpu/" + model] = cpu;
    }
  fs::remove_all(dir);
  std::cout << summary.dump() << std::endl;
  return 0;
}
