// The HTTP engine's ceiling: a bare handler of ours (core/http_server.h, Boost.Beast on one
// Boost.Asio loop) against libevent's evhttp (bench/peers/evhttp_fixed.c, TF Serving's HTTP
// library, one event loop), each answering every request with half_plus_two's fixed answer,
// in the same run under the same wrk (POST of {"instances": [1.0, 2.0, 5.0]}, keep-alive).
// Rounds alternate between the servers (the median of each is printed), since the machine's
// other load moves from one second to the next; besides req/s and latency, each server's CPU
// time per request (its utime + stime over the run, /proc/PID/stat), which that load moves
// far less: on a machine shared with other work, a one-thread server gets one thread's share
// of the cores, a thread-per-connection one 32 threads' share. Optionally the same load against
// tensorhub-serve-lite binaries serving half_plus_two (--lite PATH, repeatable: e.g. this
// build's and one built from an older commit), to see what a real handler costs beside the
// ceiling.
//
// Measured on a quiet machine (2 cores shared with wrk only; medians of 3 rounds of 5 s):
// ours 99,536 req/s at 9.85 us of CPU per request, a loop per core 103,802; evhttp 65,091 at
// 15.5 us: 1.53x the requests/s at 0.64x the CPU. tensorhub-serve-lite on half_plus_two with
// a loop per core 105,823 (1.02x that ceiling), its former HTTP code of its own 75,607;
// `tensorhub serve` 33,492 (0.34x the one-loop ceiling, 42 us per request), its former
// cpp-httplib server (git 1aff4a7) 23,764 at 63 us.
// Earlier, on a loaded machine (2 cores shared with wrk and other agents' builds, load average 12; medians of
// 5 rounds of 5 s): ours 28,650 req/s, p99 8.0 ms, 19.6 us of CPU per request; evhttp 20,946
// req/s, p99 8.5 ms, 30.7 us: 1.37x the requests/s at 0.64x the CPU per request. Most of it
// is the kernel's (perf: 66% kernel, 25% ours and Beast's, 7% libc); per request the engine
// makes one sendmsg and about 1.15 recvfrom (strace). tensorhub-serve-lite on half_plus_two,
// same run: 20,973 req/s at 22.0 us per request on the engine, 30,074 at 26.2 us with its
// former HTTP code of its own (a thread per connection: 32 threads get a larger share of a
// busy machine's cores than one loop thread does; per request it costs more).
//
// Usage: bench_http_engine [--duration S] [--connections C] [--rounds R] [--peer PATH] [--no-peer]
//                          [--lite PATH]... [--tensorhub PATH]...
// (--tensorhub: `tensorhub serve` of that binary on half_plus_two, unbatched, e.g. this build's
// and one from before the engine, against the one-loop ceiling; the lite against the ceiling of
// a loop per core, as it runs.)
// Prints req/s, p50 and p99 per server and round, the medians, the ratios ours / evhttp; the
// last line is a JSON summary. Needs wrk (Debian package wrk). Run with --serve PORT, it is the
// bare server itself (what the benchmark starts as a process, as it starts the peer).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "tensorhub/core/http_server.h"

namespace {

namespace fs = std::filesystem;
using tensorhub::Json;
namespace bench = tensorhub::bench;

const std::string kAnswer = R"({"predictions":[2.5,3.0,4.5]})";
const std::string kRequest = R"({"instances": [1.0, 2.0, 5.0]})";

// The bare server: every request answered kAnswer on its loop, `loops` event loops (0: one
// per core); until SIGTERM.
int serve(int port, int loops) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  tensorhub::HttpServer::Options o;
  o.port = port;
  o.event_loops = loops;
  tensorhub::HttpServer server(o, [](tensorhub::HttpRequest, tensorhub::HttpResponder res) {
    res.send({200, kAnswer});
  });
  server.bind();
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    server.stop(0);
  });
  server.run();
  waiter.join();
  return 0;
}

// Waits until 127.0.0.1:`port` answers a POST with 200 (curl), up to 60 s.
bool wait_ready(int port, const std::string& path, const fs::path& body) {
  for (int i = 0; i < 600; ++i) {
    if (bench::command_output("curl -s -o /dev/null -w '%{http_code}' --data @" + body.string() + " http://127.0.0.1:" +
                              std::to_string(port) + path) == "200")
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

struct Server {
  std::string name;
  std::vector<std::string> argv;  // without the port
  bool port_flag = false;         // the port as --rest_api_port PORT (lite), else as the last argument
  std::string path = "/";
};

}  // namespace

int main(int argc, char** argv) {
  int seconds = 5, connections = 32, rounds = 3, serve_port = -1, loops = 1;
  std::string peer = std::string(TENSORHUB_BIN_DIR) + "/bench_peer_evhttp_fixed";
  bool run_peer = true;
  std::vector<std::string> lites, tensorhubs;
  CLI::App app{"Our HTTP engine's bare handler against libevent's evhttp, under wrk", "bench_http_engine"};
  app.add_option("--duration", seconds, "seconds of wrk per server and round")
      ->capture_default_str()->check(bench::at_least_one());
  app.add_option("--connections", connections, "wrk's connections")->capture_default_str()->check(bench::at_least_one());
  app.add_option("--rounds", rounds, "rounds, alternating the servers (medians printed)")
      ->capture_default_str()->check(bench::at_least_one());
  app.add_option("--peer", peer, "the evhttp peer (bench/peers/evhttp_fixed.c, built beside this)")->capture_default_str();
  app.add_flag_callback("--no-peer", [&] { run_peer = false; }, "measure ours only");
  app.add_option("--lite", lites, "also a tensorhub-serve-lite binary on half_plus_two (repeatable)");
  app.add_option("--tensorhub", tensorhubs,
                 "also `tensorhub serve` of this tensorhub binary on half_plus_two, unbatched (repeatable)");
  app.add_option("--serve", serve_port, "run as the bare server on this port (what the benchmark starts)");
  app.add_option("--loops", loops, "with --serve: event loops (0: one per core)")->capture_default_str();
  bench::parse_or_exit(app, argc, argv);
  if (serve_port >= 0) return serve(serve_port, loops);
  if (bench::command_output("command -v wrk").empty() || bench::command_output("command -v curl").empty()) {
    std::cerr << "wrk or curl is missing: apt-get install wrk curl (scripts/setup --bench installs them)\n";
    return 2;
  }
  char tmpl[] = "/tmp/tensorhub-http-bench-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  std::ofstream(dir / "body.json") << kRequest;
  std::ofstream(dir / "post.lua") << "wrk.method = 'POST'\nwrk.headers['Content-Type'] = 'application/json'\n"
                                     "wrk.body = [==[" << kRequest << "]==]\n";

  const std::string self = fs::canonical("/proc/self/exe").string();
  // The ceilings: one loop (as evhttp's server and `tensorhub serve` run), and one per core (as
  // tensorhub-serve-lite runs).
  std::vector<Server> servers = {{"beast (ours, bare)", {self, "--serve"}},
                                 {"beast (ours, bare, a loop per core)", {self, "--loops", "0", "--serve"}}};
  if (run_peer) servers.push_back({"evhttp (bare)", {peer}});
  const std::string hpt = std::string(TENSORHUB_SOURCE_DIR) + "/examples/serving/half_plus_two";
  for (const auto& lite : lites)
    servers.push_back({"lite " + lite, {lite, "--model_name", "half_plus_two", "--model_base_path", hpt}, true,
                       "/v1/models/half_plus_two:predict"});
  // --port 0: no gRPC, so that two of them do not both want 8500.
  for (const auto& t : tensorhubs)
    servers.push_back({"serve " + t, {t, "serve", "--model_name", "half_plus_two", "--model_base_path", hpt, "--port", "0"},
                       true, "/v1/models/half_plus_two:predict"});

  std::vector<tensorhub::Process> processes;
  std::vector<int> ports;
  for (const auto& s : servers) {
    const int port = tensorhub::free_loopback_port();
    std::vector<std::string> args = s.argv;
    if (s.port_flag) args.push_back("--rest_api_port");
    args.push_back(std::to_string(port));
    processes.push_back(bench::start(args, dir / "servers.log"));
    ports.push_back(port);
    if (!wait_ready(port, s.path, dir / "body.json")) {
      std::cerr << s.name << " did not come up; see " << (dir / "servers.log").string() << "\n";
      bench::stop_all(processes);
      return 1;
    }
  }

  std::printf("load average: %s", bench::command_output("cut -d' ' -f1-3 /proc/loadavg").c_str());
  std::printf("wrk -t2 -c%d -d%ds on loopback, POST of %zu bytes, keep-alive; %d rounds alternating\n", connections,
              seconds, kRequest.size(), rounds);
  std::printf("%-50s %5s %10s %9s %9s %12s\n", "server", "round", "req/s", "p50 ms", "p99 ms", "CPU us/req");
  std::map<std::string, std::vector<bench::WrkResult>> runs;
  std::map<std::string, std::vector<double>> cpu_us;
  for (int round = 1; round <= rounds; ++round) {
    for (std::size_t i = 0; i < servers.size(); ++i) {
      const double cpu0 = bench::cpu_seconds(processes[i].pid());
      const auto r = bench::run_wrk("http://127.0.0.1:" + std::to_string(ports[i]) + servers[i].path,
                                    (dir / "post.lua").string(), connections, seconds);
      const double us = (bench::cpu_seconds(processes[i].pid()) - cpu0) * 1e6 / std::max(1.0, r.rps * seconds);
      std::printf("%-50s %5d %10.0f %9.3f %9.3f %12.2f\n", servers[i].name.c_str(), round, r.rps, r.p50_ms, r.p99_ms, us);
      runs[servers[i].name].push_back(r);
      cpu_us[servers[i].name].push_back(us);
    }
  }
  bench::stop_all(processes);

  Json summary = {{"connections", connections}, {"seconds", seconds}, {"rounds", rounds}, {"results", Json::object()}};
  std::printf("medians:\n");
  for (const auto& s : servers) {
    std::vector<double> rps, p50, p99;
    for (const auto& r : runs[s.name]) rps.push_back(r.rps), p50.push_back(r.p50_ms), p99.push_back(r.p99_ms);
    summary["results"][s.name] = {{"rps", bench::median(rps)},
                                  {"p50_ms", bench::median(p50)},
                                  {"p99_ms", bench::median(p99)},
                                  {"cpu_us_per_request", bench::median(cpu_us[s.name])}};
    std::printf("%-50s %5s %10.0f %9.3f %9.3f %12.2f\n", s.name.c_str(), "", bench::median(rps), bench::median(p50),
                bench::median(p99), bench::median(cpu_us[s.name]));
  }
  const Json& ours = summary["results"]["beast (ours, bare)"];
  if (run_peer) {
    const Json& peer_result = summary["results"]["evhttp (bare)"];
    bench::print_ratio("beast / evhttp requests/s", ours["rps"].get<double>() / peer_result["rps"].get<double>(), 2, "x");
    bench::print_ratio("beast / evhttp p99", ours["p99_ms"].get<double>() / peer_result["p99_ms"].get<double>(), 2, "x");
    bench::print_ratio("beast / evhttp CPU per request",
                       ours["cpu_us_per_request"].get<double>() / peer_result["cpu_us_per_request"].get<double>(), 2, "x");
  }
  const Json& per_core = summary["results"]["beast (ours, bare, a loop per core)"];
  bench::print_ratio("beast bare, a loop per core / one loop requests/s",
                     per_core["rps"].get<double>() / ours["rps"].get<double>(), 2, "x");
  // Each server against the ceiling of its own kind.
  const auto against = [&](const std::string& name, const Json& ceiling, const std::string& ceiling_name) {
    const Json& l = summary["results"][name];
    bench::print_ratio(name + " / " + ceiling_name + " requests/s", l["rps"].get<double>() / ceiling["rps"].get<double>(), 2, "x");
    bench::print_ratio(name + " / " + ceiling_name + " CPU per request",
                       l["cpu_us_per_request"].get<double>() / ceiling["cpu_us_per_request"].get<double>(), 2, "x");
  };
  for (const auto& lite : lites) against("lite " + lite, per_core, "beast bare, a loop per core");
  for (const auto& t : tensorhubs) against("serve " + t, ours, "beast bare");
  fs::remove_all(dir);
  std::cout << summary.dump() << std::endl;
  return 0;
}
