// gRPC Predict against REST predict on the same `tensorhub serve` (both APIs share its models),
// same models, same run: half_plus_two (3 floats per request) and the MLP 784 -> 800 -> 800 -> 10
// with softmax (one 784-float instance per request), without and with --enable_batching; and
// against a peer of the same gRPC API, bench/peers/grpc_torch_server.py (python3-grpcio +
// PyTorch), loaded the same way.
//
// Load: both APIs are driven from outside the server by a C load generator of about the same
// cost per call, with the same concurrency (`connections` connections, one request outstanding
// on each, two threads): REST by wrk, gRPC by h2load (Debian's nghttp2-client). A unary gRPC
// call is an HTTP/2 POST to /tensorflow.serving.PredictionService/Predict with content-type
// application/grpc and te: trailers, its body the framed PredictRequest (grpc_frame), so h2load
// sends exactly what a gRPC client sends. h2load reads neither gRPC's status (an error is HTTP
// 200 too) nor the answers, so each gRPC cell is checked three ways: one call with grpc++'s
// client before the load must answer the right values (half_plus_two's, the MLP's REST answer);
// every call under load must have answered 200 with a DATA payload of that answer's size (an
// error has none); and the server's Prometheus counters must have counted exactly as many gRPC
// Predicts, all OK, as h2load saw answered (h2load runs a fixed number of calls, -n, so none is
// left in flight). The peer is checked the first two ways (it keeps no counters).
// The rows "gRPC (grpc++)" load the same server with bench_grpc_load, grpc++'s asynchronous
// client (a real client that reads each call's status): kept because they show what a C++ gRPC
// client costs, about three times h2load's CPU per call, which on 2 shared cores lowers the
// requests/s the server is seen to give; --no-grpcpp skips them.
//
// Each cell runs three times: requests/s, p50 and the server's CPU time per request (all its
// threads, from /proc) are the medians, p99 the worst of the three. CPU per request measures the
// server's own cost, whatever else the shared cores run (the load generator, other work).
//
// Usage: bench_serve_grpc [--duration S] [--connections C] [--no-grpcpp] [--peer SCRIPT] [--python PATH] [--no-peer]
// The last line is a JSON summary; exits 1 when a cell failed its checks. Needs wrk, h2load and
// curl (scripts/setup installs them) and bench_grpc_load (built with it).
//
// Figures (5 s x 3 runs, 32 connections, 2 cores shared with other helpers' work, load average
// 2.5-3.3; CPU is per request, medians; p99 the worst of three):
//                                     half_plus_two                         MLP
//                               req/s   p50   p99  server client    req/s   p50   p99  server client
//   REST (wrk)                  28799  1.08  3.09    55     10       6278  5.06  6.79   285     19
//   gRPC (h2load)               28701  1.02  2.45    55     13       5874  5.44  9.26   308     30
//   gRPC (grpc++ client)        22665  1.34  2.81    52     29       5019  6.47 10.80   322     75
//   batching REST (wrk)         36882  0.79  2.32    41      9       9124  3.28  6.63   198     18
//   batching gRPC (h2load)      38259  0.81  1.49    38     11       9671  3.09  6.38   150     19
//   batching gRPC (grpc++)      22968  1.32  2.99    45     33       8629  3.55  7.41   147     45
//   peer gRPC (h2load)           4232  7.40 10.50   278     31       1445 21.80 32.15   913     44
// gRPC / REST requests/s: 1.00 and 0.94 unbatched, 1.04 and 1.06 batched (server CPU 1.00, 1.08,
// 0.94, 0.76); a quieter run (load 1.6) gave 0.95, 0.96, 0.99, 0.92 with server CPU 1.01, 1.07,
// 0.97, 0.88: the server spends about the same per call on both APIs, and what is left of the
// requests/s gap is h2load's own cost (13 against wrk's 10 us a call, 30 against 19 with the
// MLP's 3 KB body, on the same 2 cores). gRPC / peer: 6.8x and 4.1x unbatched, 9.0x and 6.7x
// batched, at 0.14-0.29x the peer's p99.
// 10x the peer is out of reach on 2 cores. half_plus_two: 10x is 42k req/s; h2load alone takes
// 13 us a call, which leaves at most 35 us of server CPU a call, and gRPC's core and the
// kernel's TCP take about 30 of the 38 us a batched call costs now. The MLP: 10x is 14.5k req/s;
// unbatched, each call's three matrix-vector products read the 5 MB of weights (perf: OpenBLAS
// 47% of the 300 us a call), which caps 2 cores at about 13k req/s with nothing else running;
// batched, 150 us a call (the product and OpenBLAS repacking the weights per batch) caps them at
// about 13k before the client and the network. The peer does the same matmuls at 913 us a call.
// Before this version (same bench, grpc++ client only): gRPC 11k / 3.3k req/s unbatched against
// REST's 29k / 4.7k; the unbatched REST MLP's p99 was 33-41 ms (now 6.8 ms: its two replicas are
// handed out first come first served), half_plus_two cost 61 us a REST call (now 55: predict
// runs under InferenceMode) and the MLP 325 us a gRPC call (now 308: Predict's messages on an
// arena).
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/train/model.h"

namespace {

namespace fs = std::filesystem;
namespace tfs = tensorflow::serving;
using nlohmann::json;

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
  double client_us = 0;  // the load generator's, microseconds
  long requests = 0;     // completed in the run (0: rps x seconds)
  long errors = 0;
  std::string first_error;
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

// CPU seconds, user and system, of this process's children that have ended (the load
// generators, which popen() waits for; not the servers, which run on).
double children_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// `once()` with the CPU time the server `pid` spent per request during it: unlike requests/s,
// this does not depend on what else the shared cores run (the load generator, other work).
// Also the load generator's CPU time per request, which the shared cores pay too.
template <typename F>
Result with_server_cpu(pid_t pid, int seconds, F once) {
  const double before = cpu_seconds(pid), client_before = children_cpu_seconds();
  Result r = once();
  const double requests = r.requests > 0 ? static_cast<double>(r.requests) : r.rps * seconds;
  if (requests > 0) {
    r.server_us = (cpu_seconds(pid) - before) * 1e6 / requests;
    r.client_us = (children_cpu_seconds() - client_before) * 1e6 / requests;
  }
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
  if (std::regex_search(out, m, std::regex(R"(([0-9]+) requests in)"))) r.requests = std::stol(m[1]);
  if (r.errors) r.first_error = std::to_string(r.errors) + " answers not 2xx";
  return r;
}

// The value at fraction `p` of `sorted` (nearest rank).
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<std::size_t>(p * static_cast<double>(sorted.size()));
  return sorted[std::min(sorted.size() - 1, i)];
}

// An h2load command for unary gRPC calls: each an HTTP/2 POST of `body` (a framed request,
// see grpc_frame) to the method's path with gRPC's headers; `connections` connections with one
// stream each (-m 1), as wrk's connections, and two threads, as wrk's -t2.
std::string h2load_command(const std::string& target, const fs::path& body, int connections) {
  return "h2load -t 2 -m 1 -c " + std::to_string(connections) +
         " -H 'content-type: application/grpc' -H 'te: trailers' -d " + body.string() + " http://" + target +
         "/tensorflow.serving.PredictionService/Predict";
}

// One h2load run of exactly `requests` calls (-n, so that each started call completes and the
// server's count of them can be compared with h2load's). h2load does not read gRPC's status
// (an error is HTTP 200 too, its status in the trailers): every call must have had 200 and a
// DATA payload of `response_bytes` (the framed answer of the checked call; an error has none).
// Latencies come from h2load's per-request log.
Result h2load(const std::string& target, const fs::path& body, int connections, long requests,
              std::size_t response_bytes, const fs::path& log) {
  fs::remove(log);  // h2load writes over an existing log without truncating it
  const std::string out = run(h2load_command(target, body, connections) + " -n " + std::to_string(requests) +
                              " --log-file " + log.string() + " 2>&1");
  Result r;
  std::smatch m;
  double seconds = 0;
  if (std::regex_search(out, m, std::regex(R"(finished in ([0-9.]+)(us|ms|s),)"))) seconds = to_ms(m[1], m[2]) / 1000;
  long two_xx = 0, data = -1;
  if (std::regex_search(out, m, std::regex(R"(status codes: ([0-9]+) 2xx)"))) two_xx = std::stol(m[1]);
  if (std::regex_search(out, m, std::regex(R"(\(([0-9]+)\) data)"))) data = std::stol(m[1]);
  r.requests = two_xx;
  r.rps = seconds > 0 ? static_cast<double>(two_xx) / seconds : 0;
  if (two_xx != requests) {
    r.errors = requests - two_xx;
    r.first_error = "h2load: " + std::to_string(two_xx) + " of " + std::to_string(requests) + " calls answered 200";
  } else if (data != static_cast<long>(response_bytes) * requests) {
    r.errors = 1;
    r.first_error = "h2load received " + std::to_string(data) + " bytes of DATA, not " + std::to_string(requests) +
                    " x " + std::to_string(response_bytes) + ": some calls did not answer the checked response";
  }
  if (r.errors) std::cerr << out;
  // Each line: start time (us since the epoch), HTTP status, duration (us).
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(requests));
  std::ifstream lines(log);
  long start = 0, status = 0;
  double micros = 0;
  while (lines >> start >> status >> micros) ms.push_back(micros / 1000);
  std::sort(ms.begin(), ms.end());
  r.p50_ms = percentile(ms, 0.50);
  r.p99_ms = percentile(ms, 0.99);
  return r;
}

// A calibration run of h2load for `seconds` (-D; it also warms the server): its requests/s.
double h2load_rate(const std::string& target, const fs::path& body, int connections, int seconds) {
  const std::string out = run(h2load_command(target, body, connections) + " -D " + std::to_string(seconds) + " 2>&1");
  std::smatch m;
  return std::regex_search(out, m, std::regex(R"(finished in [0-9.]+(?:us|ms|s), ([0-9.]+) req/s)")) ? std::stod(m[1]) : 0;
}

// gRPC load from bench_grpc_load (grpc++'s asynchronous client, `connections` channels with one
// call outstanding on each, driven by two threads). The request is read from `request_file`.
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
  r.requests = j.at("calls").get<long>();
  if (r.errors) r.first_error = "gRPC errors: " + j.at("first_error").get<std::string>();
  return r;
}

// The server's Prometheus counters of `model`: OK answers (any API) and gRPC Predicts (any status).
struct Counts {
  long ok = 0, grpc_predicts = 0;
};

Counts counts(const std::string& metrics_url, const std::string& model) {
  const std::string text = run("curl -s " + metrics_url);
  const auto value = [&](const std::string& series) -> long {
    const auto at = text.find(series + " ");
    return at == std::string::npos ? 0 : std::stol(text.substr(at + series.size() + 1));
  };
  return {value(":tensorflow:serving:request_count{model_name=\"" + model + "\",status=\"OK\"}"),
          value(":tensorflow:serving:request_latency_count{model_name=\"" + model +
                "\",API=\"Predict\",entrypoint=\"GRPC\"}")};
}

// The server's own count of a run: it must have answered OK every call h2load saw answered
// (nothing else calls it during the run); an error otherwise.
Result checked_by_server(const std::string& metrics_url, const std::string& model, const std::function<Result()>& once) {
  const Counts before = counts(metrics_url, model);
  Result r = once();
  const Counts after = counts(metrics_url, model);
  const long ok = after.ok - before.ok, calls = after.grpc_predicts - before.grpc_predicts;
  if (!r.errors && (ok != r.requests || calls != r.requests)) {
    r.errors = 1;
    r.first_error = "the server counted " + std::to_string(calls) + " gRPC Predicts, " + std::to_string(ok) +
                    " OK, h2load " + std::to_string(r.requests) + " answered";
  }
  return r;
}

// The float values of the one output of `response` (float_val or tensor_content).
std::vector<float> output_values(const tfs::PredictResponse& response) {
  if (response.outputs().size() != 1) return {};
  const auto& t = response.outputs().begin()->second;
  if (!t.tensor_content().empty()) {
    std::vector<float> v(t.tensor_content().size() / sizeof(float));
    std::memcpy(v.data(), t.tensor_content().data(), v.size() * sizeof(float));
    return v;
  }
  return {t.float_val().begin(), t.float_val().end()};
}

// One Predict of `request` with grpc++'s client before the load: the answer's one output must
// be `expect` (within 1e-5), or, with `expect` empty, 10 probabilities summing to 1. Returns the
// framed size of the answer (5 + its bytes), which every call under load must then have; 0 when
// the call fails or answers other values (printed).
std::size_t checked_answer(const std::string& target, const tfs::PredictRequest& request,
                           const std::vector<float>& expect) {
  auto stub = tfs::PredictionService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  tfs::PredictResponse response;
  const grpc::Status status = stub->Predict(&context, request, &response);
  if (!status.ok()) {
    std::cerr << target << " answered " << status.error_code() << ": " << status.error_message() << "\n";
    return 0;
  }
  const std::vector<float> y = output_values(response);
  bool right = !y.empty();
  if (expect.empty()) {
    double sum = 0;
    for (float v : y) sum += v;
    right = y.size() == 10 && std::abs(sum - 1) < 1e-4;
  } else {
    right = y.size() == expect.size();
    for (std::size_t i = 0; right && i < y.size(); ++i) right = std::abs(y[i] - expect[i]) < 1e-5;
  }
  if (!right) {
    std::cerr << target << " answered " << request.model_spec().name() << " with other values: "
              << response.ShortDebugString() << "\n";
    return 0;
  }
  return 5 + response.ByteSizeLong();
}

// Whether the server at `target` answers the Predict `request` (a readiness probe).
bool answers(const std::string& target, const tfs::PredictRequest& request) {
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
  std::vector<double> rps, p50, server_us, client_us;
  Result out;
  for (int i = 0; i < 3; ++i) {
    const Result r = with_server_cpu(pid, seconds, once);
    rps.push_back(r.rps), p50.push_back(r.p50_ms), server_us.push_back(r.server_us), client_us.push_back(r.client_us);
    out.p99_ms = std::max(out.p99_ms, r.p99_ms);
    out.errors += r.errors;
    if (out.first_error.empty()) out.first_error = r.first_error;
  }
  out.rps = tensorhub::bench::median(rps);
  out.p50_ms = tensorhub::bench::median(p50);
  out.server_us = tensorhub::bench::median(server_us);
  out.client_us = tensorhub::bench::median(client_us);
  return out;
}

// A Predict request for `model` (one float input).
tfs::PredictRequest predict_request(const std::string& model, const std::string& input, const std::vector<float>& x,
                                    const std::vector<std::int64_t>& shape) {
  tfs::PredictRequest req;
  req.mutable_model_spec()->set_name(model);
  auto& t = (*req.mutable_inputs())[input];
  t.set_dtype(tensorflow::DT_FLOAT);
  for (auto d : shape) t.mutable_tensor_shape()->add_dim()->set_size(d);
  for (float v : x) t.add_float_val(v);
  return req;
}

// `request` serialized into `file` (bench_grpc_load's --request); returns the file.
fs::path write_request(const fs::path& file, const tfs::PredictRequest& request) {
  std::ofstream(file, std::ios::binary) << request.SerializeAsString();
  return file;
}

// `request` as the body of a unary gRPC call into `file`: a byte 0 (not compressed), its
// length (4 bytes, big-endian), its bytes (gRPC over HTTP/2's Length-Prefixed-Message).
fs::path grpc_frame(const fs::path& file, const tfs::PredictRequest& request) {
  const std::string bytes = request.SerializeAsString();
  const auto n = static_cast<std::uint32_t>(bytes.size());
  const char prefix[5] = {0, static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                          static_cast<char>(n)};
  std::ofstream(file, std::ios::binary) << std::string(prefix, 5) << bytes;
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
  bool grpcpp = true;
  tensorhub::bench::PeerOptions peer_options{std::string(TENSORHUB_SOURCE_DIR) + "/bench/peers/grpc_torch_server.py"};
  CLI::App app{"gRPC Predict against REST predict on one tensorhub serve, and a Python gRPC peer", "bench_serve_grpc"};
  app.add_option("--duration", seconds, "seconds per run (three runs per cell)")
      ->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--connections", connections, "concurrent connections (wrk's, h2load's, gRPC channels)")
      ->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_flag_callback("--no-grpcpp", [&grpcpp] { grpcpp = false; }, "skip the rows of grpc++'s client (bench_grpc_load)");
  tensorhub::bench::add_peer_options(app, peer_options);
  tensorhub::bench::parse_or_exit(app, argc, argv);
  for (const auto& [tool, package] : {std::pair{"wrk", "wrk"}, std::pair{"h2load", "nghttp2-client"}, std::pair{"curl", "curl"}})
    if (run(std::string("command -v ") + tool).empty()) {
      std::cerr << tool << " is missing: apt-get install " << package << " (scripts/setup installs it)\n";
      return 2;
    }
  // As the server (GrpcServer::start): no absl::Mutex deadlock detection in our checking client.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
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
  std::ofstream(dir / "mlp.json") << json({{"instances", {image_json}}}).dump();
  std::ofstream(dir / "mlp.lua") << "wrk.method = 'POST'\nwrk.headers['Content-Type'] = 'application/json'\nwrk.body = [==["
                                 << json({{"instances", {image_json}}}).dump() << "]==]\n";
  std::ofstream(dir / "hpt.lua") << "wrk.method = 'POST'\nwrk.headers['Content-Type'] = 'application/json'\n"
                                 << "wrk.body = [==[{\"instances\": [1.0, 2.0, 5.0]}]==]\n";
  const std::vector<float> hpt_x = {1.f, 2.f, 5.f}, hpt_y = {2.5f, 3.f, 4.5f};

  json summary = {{"connections", connections}, {"seconds", seconds}, {"results", json::object()}};
  bool failed = false;
  std::string load = run("cut -d' ' -f1-3 /proc/loadavg");
  if (!load.empty() && load.back() == '\n') load.pop_back();
  std::printf("%d connections, %d s x 3 runs per cell on loopback, %u cores shared by server and load; load average %s\n",
              connections, seconds, std::thread::hardware_concurrency(), load.c_str());
  std::printf("%-36s %-14s %10s %9s %9s %13s %13s\n", "server / API (client)", "model", "req/s", "p50 ms", "p99 ms",
              "server us/req", "client us/req");
  const auto report = [&](const std::string& who, const std::string& model, const Result& r) {
    std::printf("%-36s %-14s %10.0f %9.2f %9.2f %13.0f %13.0f%s\n", who.c_str(), model.c_str(), r.rps, r.p50_ms,
                r.p99_ms, r.server_us, r.client_us, r.errors ? (" FAILED: " + r.first_error).c_str() : "");
    std::fflush(stdout);
    summary["results"][who][model] = {{"rps", r.rps},       {"p50_ms", r.p50_ms},       {"p99_ms", r.p99_ms},
                                      {"errors", r.errors}, {"server_us", r.server_us}, {"client_us", r.client_us}};
    if (r.errors) {
      summary["results"][who][model]["error"] = r.first_error;
      failed = true;
    }
  };
  // A cell of h2load: a 1 s calibration run (which also warms the server up) sets the number
  // of calls of each of the three runs to about `seconds` of them. With `metrics_url` (ours),
  // each run is checked against the server's own counts.
  const auto h2load_cell = [&](pid_t pid, const std::string& target, const fs::path& framed, std::size_t response_bytes,
                               const std::string& metrics_url, const std::string& model) {
    if (response_bytes == 0) {
      Result r;
      r.errors = 1;
      r.first_error = "the checked call failed";
      return r;
    }
    const double rate = h2load_rate(target, framed, connections, 1);
    const long n = std::max<long>(connections, std::lround(rate * seconds));
    return three_runs(pid, seconds, [&] {
      const auto once = [&] { return h2load(target, framed, connections, n, response_bytes, dir / "h2load.log"); };
      return metrics_url.empty() ? once() : checked_by_server(metrics_url, model, once);
    });
  };
  const std::string tensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";
  for (const bool batching : {false, true}) {
    const int rest_port = tensorhub::free_loopback_port(), grpc_port = tensorhub::free_loopback_port();
    std::vector<std::string> args = {tensorhub, "serve", "--model_config_file", (dir / "models.config").string(),
                                     "--rest_api_port", std::to_string(rest_port), "--port", std::to_string(grpc_port)};
    if (batching) args.insert(args.end(), {"--enable_batching", "--batching_parameters_file", (dir / "batching.config").string()});
    const std::string name = batching ? "tensorhub+batching" : "tensorhub";
    auto server = tensorhub::bench::start(args, dir / (name + ".log"), false);
    const std::string rest = "http://127.0.0.1:" + std::to_string(rest_port);
    const std::string base = rest + "/v1/models/";
    if (!wait_ready(base + "mlp") || !wait_ready(base + "half_plus_two")) {
      std::cerr << name << " did not come up; see " << (dir / (name + ".log")).string() << "\n";
      return 1;
    }
    // The MLP's input alias, as its metadata says, and its answer over REST, which gRPC's must equal.
    const json meta = json::parse(run("curl -s " + base + "mlp/metadata"));
    const std::string mlp_input =
        meta["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"].begin().key();
    const json rest_mlp = json::parse(run("curl -s -d @" + (dir / "mlp.json").string() + " " + base + "mlp:predict"));
    const auto mlp_y = rest_mlp.at("predictions").at(0).get<std::vector<float>>();
    const auto hpt_req = predict_request("half_plus_two", "x", hpt_x, {3});
    const auto mlp_req = predict_request("mlp", mlp_input, image, {1, 784});
    const std::string target = "127.0.0.1:" + std::to_string(grpc_port);
    for (const auto& [model, lua, req, expect] :
         {std::tuple{"half_plus_two", "hpt.lua", hpt_req, hpt_y}, std::tuple{"mlp", "mlp.lua", mlp_req, mlp_y}}) {
      const fs::path framed = grpc_frame(dir / (std::string(model) + ".grpc"), req);
      report(name + " REST (wrk)", model, three_runs(server.pid(), seconds, [&] { return wrk(base + model + ":predict", (dir / lua).string(), connections, seconds); }));
      report(name + " gRPC (h2load)", model,
             h2load_cell(server.pid(), target, framed, checked_answer(target, req, expect), rest + "/monitoring/prometheus/metrics", model));
      if (grpcpp) {
        const fs::path file = write_request(dir / (std::string(model) + ".pb"), req);
        report(name + " gRPC (grpc++)", model, three_runs(server.pid(), seconds, [&] { return grpc_load(target, file, connections, seconds); }));
      }
    }
    server.stop();
  }
  const std::string peer_row = "python peer gRPC (h2load)";
  if (peer_options.run) {
    const int port = tensorhub::free_loopback_port();
    auto peer = tensorhub::bench::start({peer_options.python, peer_options.script, "--port", std::to_string(port)},
                                        dir / "peer.log", false);
    const std::string target = "127.0.0.1:" + std::to_string(port);
    const auto hpt_req = predict_request("half_plus_two", "x", hpt_x, {3});
    const auto mlp_req = predict_request("mlp", "x", image, {1, 784});
    bool up = false;
    for (int i = 0; i < 300 && !up; ++i) {
      up = answers(target, hpt_req);
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (!up) {
      std::cerr << "the peer did not come up; see " << (dir / "peer.log").string() << "\n";
      return 1;
    }
    // The peer's MLP has weights of its own: its answer is checked as 10 probabilities.
    report(peer_row, "half_plus_two",
           h2load_cell(peer.pid(), target, grpc_frame(dir / "peer_hpt.grpc", hpt_req), checked_answer(target, hpt_req, hpt_y), "", ""));
    report(peer_row, "mlp",
           h2load_cell(peer.pid(), target, grpc_frame(dir / "peer_mlp.grpc", mlp_req), checked_answer(target, mlp_req, {}), "", ""));
    peer.stop();
    for (const char* model : {"half_plus_two", "mlp"}) {
      const json& them = summary["results"][peer_row][model];
      for (const char* mode : {"tensorhub", "tensorhub+batching"}) {
        const json& us = summary["results"][std::string(mode) + " gRPC (h2load)"][model];
        const double r = us["rps"].get<double>() / them["rps"].get<double>();
        const double p99 = us["p99_ms"].get<double>() / them["p99_ms"].get<double>();
        tensorhub::bench::print_ratio(std::string(mode) + " gRPC / peer on " + model, r, 1, "x requests/s");
        tensorhub::bench::print_ratio(std::string(mode) + " gRPC / peer p99 on " + model, p99, 2, "x");
        summary["ratios"][std::string(mode) + "/peer/" + model] = r;
        summary["ratios"][std::string(mode) + "/peer_p99/" + model] = p99;
      }
    }
  }
  for (const char* mode : {"tensorhub", "tensorhub+batching"})
    for (const char* model : {"half_plus_two", "mlp"}) {
      const json& grpc = summary["results"][std::string(mode) + " gRPC (h2load)"][model];
      const json& rest = summary["results"][std::string(mode) + " REST (wrk)"][model];
      const double r = grpc["rps"].get<double>() / rest["rps"].get<double>();
      tensorhub::bench::print_ratio(std::string(mode) + " gRPC / REST on " + model, r, 2, "x requests/s");
      summary["ratios"][std::string(mode) + "/grpc_over_rest/" + model] = r;
      const double cpu = grpc["server_us"].get<double>() / rest["server_us"].get<double>();
      tensorhub::bench::print_ratio(std::string(mode) + " gRPC / REST server CPU per request on " + model, cpu, 2, "x");
      summary["ratios"][std::string(mode) + "/grpc_over_rest_server_cpu/" + model] = cpu;
    }
  fs::remove_all(dir);
  std::cout << summary.dump() << std::endl;
  if (failed) std::cerr << "some cells FAILED (see above)\n";
  return failed ? 1 : 0;
}
