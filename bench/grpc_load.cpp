// A gRPC load generator for PredictionService.Predict, as wrk is for HTTP (and ghz for gRPC):
// a process of its own, so that the server under test is measured from outside by a cheap
// client, the same way for gRPC as wrk does it for REST. `--connections` channels (each its own
// TCP connection, as wrk's connections), `--concurrency` calls outstanding in all (spread over
// the channels), kept outstanding for `--duration` seconds with the asynchronous API: a few
// threads each drive a CompletionQueue, and a finished call starts the next at once. Each
// call's latency (start to status) is recorded.
//
// Usage: bench_grpc_load --target HOST:PORT --request FILE [--duration S] [--connections C]
//                        [--concurrency N] [--threads T] [--deadline-ms MS]
// FILE holds one serialized tensorflow.serving.PredictRequest (binary protobuf). Prints
// "requests/s p50 p99" in words, then one JSON line: {"rps", "p50_ms", "p99_ms", "calls",
// "errors", "first_error"}. Exits 0 when the load ran (errors are counted, not fatal), 1 when
// the channels could not connect, 2 for a wrong command line.
#include <CLI/CLI.hpp>
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace {

namespace tfs = tensorflow::serving;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string target;
  std::string request_file;
  double seconds = 5;
  int connections = 32;
  int concurrency = 0;  // 0: one call per connection
  int threads = 2;
  int deadline_ms = 30000;
};

// One outstanding call: its slot is reused for the next call when it finishes.
struct Call {
  tfs::PredictionService::Stub* stub = nullptr;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<tfs::PredictResponse>> reader;
  tfs::PredictResponse response;
  grpc::Status status;
  Clock::time_point started;
};

// What one driving thread measured.
struct Tally {
  std::vector<double> latencies_ms;
  long errors = 0;
  std::string first_error;
};

class Load {
 public:
  Load(const Options& o, tfs::PredictRequest request) : options_(o), request_(std::move(request)) {}

  // Connects every channel (false when one cannot connect within 10 s).
  bool connect() {
    for (int c = 0; c < options_.connections; ++c) {
      grpc::ChannelArguments args;
      args.SetInt("tensorhub.bench.channel", c);  // distinct arguments: a TCP connection of its own
      args.SetMaxReceiveMessageSize(-1);
      // No retry machinery per call (gRPC's default keeps a copy of each request to replay):
      // the load generator measures, a failed call is counted, not retried.
      args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
      channels_.push_back(grpc::CreateCustomChannel(options_.target, grpc::InsecureChannelCredentials(), args));
      stubs_.push_back(tfs::PredictionService::NewStub(channels_.back()));
    }
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
    for (auto& ch : channels_)
      if (!ch->WaitForConnected(deadline)) return false;
    return true;
  }

  // Runs the load for options_.seconds; returns the merged tally and the measured seconds.
  Tally run(double& seconds) {
    const int concurrency = options_.concurrency > 0 ? options_.concurrency : options_.connections;
    const int threads = std::max(1, std::min(options_.threads, concurrency));
    std::vector<Tally> tallies(threads);
    std::vector<std::thread> workers;
    const auto t0 = Clock::now();
    end_ = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.seconds));
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        std::vector<int> mine;  // call slots of this thread: every threads-th, round-robin over channels
        for (int i = t; i < concurrency; i += threads) mine.push_back(i);
        drive(mine, tallies[t]);
      });
    for (auto& w : workers) w.join();
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    Tally all;
    for (auto& t : tallies) {
      all.latencies_ms.insert(all.latencies_ms.end(), t.latencies_ms.begin(), t.latencies_ms.end());
      all.errors += t.errors;
      if (all.first_error.empty()) all.first_error = t.first_error;
    }
    return all;
  }

 private:
  void start(Call& call, grpc::CompletionQueue& cq) {
    call.context = std::make_unique<grpc::ClientContext>();
    call.context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options_.deadline_ms));
    call.response.Clear();
    call.started = Clock::now();
    call.reader = call.stub->PrepareAsyncPredict(call.context.get(), request_, &cq);
    call.reader->StartCall();
    call.reader->Finish(&call.response, &call.status, &call);
  }

  // Keeps the calls `slots` outstanding on one completion queue until end_, then drains them.
  void drive(const std::vector<int>& slots, Tally& tally) {
    grpc::CompletionQueue cq;
    std::vector<Call> calls(slots.size());
    tally.latencies_ms.reserve(1 << 16);
    for (std::size_t i = 0; i < slots.size(); ++i) {
      calls[i].stub = stubs_[static_cast<std::size_t>(slots[i]) % stubs_.size()].get();
      start(calls[i], cq);
    }
    std::size_t outstanding = calls.size();
    void* tag = nullptr;
    bool ok = false;
    while (outstanding > 0 && cq.Next(&tag, &ok)) {
      auto& call = *static_cast<Call*>(tag);
      const auto now = Clock::now();
      if (call.status.ok()) {
        // Calls that end after the measured window are not counted (as wrk).
        if (now <= end_) tally.latencies_ms.push_back(std::chrono::duration<double, std::milli>(now - call.started).count());
      } else if (tally.errors++ == 0) {
        tally.first_error = std::to_string(call.status.error_code()) + ": " + call.status.error_message();
      }
      if (now < end_) start(call, cq);
      else --outstanding;
    }
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }

  Options options_;
  tfs::PredictRequest request_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<tfs::PredictionService::Stub>> stubs_;
  Clock::time_point end_;
};

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<std::size_t>(p * static_cast<double>(sorted.size()));
  return sorted[std::min(sorted.size() - 1, i)];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"gRPC PredictionService.Predict load generator (asynchronous, a process of its own)", "bench_grpc_load"};
  app.add_option("--target", o.target, "server address, host:port")->required();
  app.add_option("--request", o.request_file, "file holding one serialized PredictRequest")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--duration", o.seconds, "seconds of load")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  app.add_option("--connections", o.connections, "channels, each its own TCP connection")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--concurrency", o.concurrency, "calls outstanding in all (0: one per connection)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--threads", o.threads, "threads driving completion queues")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--deadline-ms", o.deadline_ms, "deadline of each call")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  // As in GrpcServer::start(): no absl::Mutex deadlock detection (Debian's abseil has it on), a
  // debugging aid that costs the client a tenth of its CPU time per call.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::ifstream in(o.request_file, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  tfs::PredictRequest request;
  if (!request.ParseFromString(bytes.str())) {
    std::cerr << o.request_file << " is not a serialized tensorflow.serving.PredictRequest\n";
    return 2;
  }
  Load load(o, std::move(request));
  if (!load.connect()) {
    std::cerr << "cannot connect to " << o.target << " within 10 s\n";
    return 1;
  }
  double seconds = 0;
  Tally t = load.run(seconds);
  std::sort(t.latencies_ms.begin(), t.latencies_ms.end());
  const double rps = static_cast<double>(t.latencies_ms.size()) / o.seconds;
  const double p50 = percentile(t.latencies_ms, 0.50), p99 = percentile(t.latencies_ms, 0.99);
  std::printf("%s: %.0f requests/s, p50 %.2f ms, p99 %.2f ms, %zu calls, %ld errors (%.1f s)\n", o.target.c_str(), rps,
              p50, p99, t.latencies_ms.size(), t.errors, seconds);
  if (!t.first_error.empty()) std::printf("first error: %s\n", t.first_error.c_str());
  std::cout << nlohmann::json{{"rps", rps},       {"p50_ms", p50},        {"p99_ms", p99},
                              {"calls", t.latencies_ms.size()}, {"errors", t.errors}, {"first_error", t.first_error}}
                   .dump()
            << std::endl;
  return 0;
}
