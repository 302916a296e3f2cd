// tensorhub-serve-lite: TF Serving's REST predict API for one model.json model, in one static
// binary without libtorch, a database or protobuf, for gateway-class devices (x86-64, arm64).
// Flags use TF Serving's names, as `tensorhub serve` does; the HTTP engine's (core/http_flags.h)
// are those of serve and ui.
//
// HTTP is core/http_server.h's event loops (Boost.Beast; --http_event_loops of them, by default
// one per core): an open connection costs a socket, not a thread. Predicts run on a pool of
// --rest_api_num_threads workers, but for those cheaper than the hand-over (kInlinePredictNs);
// status and metadata (read from memory) answer on the loop. Several loops, since most of the
// lite's answers are made on the loop: one loop would leave the other cores to the clients.
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <Eigen/Core>

#include "tensorhub/core/error.h"
#include "tensorhub/core/http_flags.h"
#include "tensorhub/core/http_server.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/core/thread_pool.h"
#include "tensorhub/core/version.h"
#include "tensorhub/lite/lite_server.h"
#include "tensorhub/lite/predict_json.h"

namespace tensorhub {
namespace {

struct Args {
  std::string model_name;
  std::string base_path;
  std::string host = "127.0.0.1";
  int port = 8501;
  double poll_seconds = 1;
  int max_body_mb = 64;
  int threads = 0;  // predict workers; 0: one per core
  int event_loops = 0;  // 0: one per core
  HttpFlags http;
};

void log_line(const std::string& text) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  std::cerr << "[" << stamp << "] tensorhub-serve-lite: " << text << std::endl;
}

std::string version_text() {
  std::string arch = "unknown";
#if defined(__aarch64__)
  arch = "aarch64";
#elif defined(__x86_64__)
  arch = "x86_64";
#endif
  return std::string("tensorhub-serve-lite ") + kVersion + " (commit " + kGitCommit + ", " + arch +
         ", Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + ")";
}

// A predict whose cost (LiteModel::predict_cost_ns: parsing, and the examples its body can
// hold at the speed measured at load) stays under this runs on the event loop: handing it to a
// worker costs two thread wake-ups (a futex, the loop's eventfd), tens of microseconds and more
// on a busy machine, which is more than the work (half_plus_two: about 1 us). Anything larger
// (the MLPs and CNNs of the bench, a big batch) runs on the pool, so the loop never waits long.
constexpr double kInlinePredictNs = 50'000;

// The engine's options from the flags.
HttpServer::Options http_options(const Args& a) {
  HttpServer::Options o;
  o.host = a.host;
  o.port = a.port;
  o.max_body_bytes = static_cast<std::size_t>(a.max_body_mb) << 20;
  o.too_large_reason =
      "the request body is larger than the server's limit of " + std::to_string(a.max_body_mb) + " MiB (--max_body_mb)";
  o.error_body = [](int, const std::string& reason) { return lite_error_body(reason); };
  apply(a.http, o);
  o.event_loops = a.event_loops;
  return o;
}

// "10", "0.5": seconds as a user wrote them.
std::string format_seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

// Set by serve() once the server has stopped; the model poller sleeps on it.
struct StopRequest {
  Mutex mutex;
  std::condition_variable cv;
  bool requested TENSORHUB_GUARDED_BY(mutex) = false;
};

// The poller thread: polls the model's base path every a.poll_seconds until `stop`, saying
// once (not at every poll) that it cannot be read, and once that it can again.
void poll_model(LiteModel& model, const Args& a, StopRequest& stop) {
  using std::chrono::steady_clock;
  const auto period = std::chrono::ceil<steady_clock::duration>(std::chrono::duration<double>(a.poll_seconds));
  MutexLock lock(stop.mutex);
  std::string last_error;
  while (true) {
    const auto deadline = steady_clock::now() + period;
    while (!stop.requested && stop.mutex.wait_until(stop.cv, deadline) == std::cv_status::no_timeout) {
    }
    if (stop.requested) return;
    lock.unlock();
    try {
      model.poll();
      if (!last_error.empty()) log_line("model " + a.model_name + ": its base path can be read again");
      last_error.clear();
    } catch (const Error& e) {
      if (e.message() != last_error)
        log_line("model " + a.model_name + ": " + e.message() + " (the served version keeps serving; retrying)");
      last_error = e.message();
    }
    lock.lock();
  }
}

int serve(const Args& a) {
  // SIGTERM and SIGINT are taken by sigwait below: blocked before any thread starts, so every
  // thread inherits the mask and none is killed by them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  LiteModel model(a.model_name, a.base_path, log_line);
  model.poll();  // a base path that is no directory fails here, before the port is taken
  // Declared after the model, destroyed before it: its last tasks still predict.
  ThreadPool pool(static_cast<std::size_t>(a.threads));
  HttpServer server(http_options(a), [&](HttpRequest r, HttpResponder res) {
    // Status and metadata (memory only) and predicts cheaper than the hand-over itself answer
    // here; every other predict runs on a worker.
    if (r.method != "POST" || model.predict_cost_ns(r.body.size()) <= kInlinePredictNs)
      return res.send(handle_lite_request(model, r));
    pool.submit([&model, r = std::move(r), res] { res.send(handle_lite_request(model, r)); });
  });
  const int port = server.bind();
  log_line("serving model " + a.model_name + " on " + a.host + ":" + std::to_string(port) + " (REST)");

  StopRequest stop;
  std::thread poller([&] { poll_model(model, a, stop); });
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != 0)
      log_line(std::string("got ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
               ": finishing the requests under way (at most --shutdown_grace_s " + format_seconds(a.http.shutdown_grace_s) +
               " s)");
    server.stop(a.http.grace_ms());
  });
  server.run();
  {
    MutexLock lock(stop.mutex);
    stop.requested = true;
  }
  stop.cv.notify_all();
  poller.join();
  waiter.join();  // run() returns only after stop(), which the waiter called
  log_line("stopped");
  return 0;
}

}  // namespace
}  // namespace tensorhub

int main(int argc, char** argv) {
  using tensorhub::Args;
  Args a;
  CLI::App app{"tensorhub-serve-lite: TF Serving's REST predict API for one model.json model (Dense, Conv2D, "
               "MaxPooling2D, Conv1D, MaxPooling1D, Embedding, GlobalAveragePooling1D, BatchNormalization, "
               "Rescaling, Reshape, Flatten, Activation, Dropout), computed with Eigen; no libtorch, no database."};
  app.set_version_flag("--version", tensorhub::version_text());
  app.add_option("--model_name", a.model_name, "the model's name in the URLs")->required();
  app.add_option("--model_base_path", a.base_path, "its base path: <base>/<version>/model.json + weights.safetensors")
      ->required();
  app.add_option("--rest_api_port", a.port, "REST port (0: any free one; the log says which)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("--rest_api_host", a.host, "address to listen on (numeric, or localhost; 0.0.0.0 for all)")
      ->capture_default_str();
  app.add_option("--file_system_poll_wait_seconds", a.poll_seconds, "how often the base path is scanned for a newer version")
      ->capture_default_str()->check(CLI::Range(0.01, 86400.0));
  app.add_option("--max_body_mb", a.max_body_mb, "largest request body accepted, MiB")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--rest_api_num_threads", a.threads,
                 "threads computing predictions (0: one per core); connections are not threads")
      ->capture_default_str()->check(CLI::Range(0, 4096));
  app.add_option("--http_event_loops", a.event_loops,
                 "event loops answering HTTP, a thread each, sharing the connections (0: one per core)")
      ->capture_default_str()->check(CLI::Range(0, 64));
  tensorhub::add_http_flags(app, a.http);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    app.exit(e);
    return 2;  // the command line is wrong, as for tensorhub
  }
  try {
    return tensorhub::serve(a);
  } catch (const tensorhub::Error& e) {
    std::cerr << "tensorhub-serve-lite: " << e.message() << std::endl;
    return 1;
  }
}
