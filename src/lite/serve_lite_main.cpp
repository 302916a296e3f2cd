// tensorhub-serve-lite: TF Serving's REST predict API for one model.json model, in one static
// binary without libtorch, a database or protobuf, for gateway-class devices (x86-64, arm64).
// Flags use TF Serving's names, as `tensorhub serve` does.
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
#include "tensorhub/core/mutex.h"
#include "tensorhub/core/version.h"
#include "tensorhub/lite/http_server.h"
#include "tensorhub/lite/lite_server.h"


namespace tensorhub {
namespace {

struct Args {
  std::string model_name;
  std::string base_path;
  std::string host = "127.0.0.1";
  int port = 8501;
  double poll_seconds = 1;
  int max_body_mb = 64;
  int connections = 256;
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
  HttpServer::Options options;
  options.host = a.host;
  options.port = a.port;
  options.max_body_bytes = static_cast<std::size_t>(a.max_body_mb) << 20;
  options.max_connections = a.connections;
  HttpServer server(options, [&](const HttpRequest& r) { return handle_lite_request(model, r); },
                    "the request body is larger than the server's limit of " + std::to_string(a.max_body_mb) +
                        " MiB (--max_body_mb)");
  const int port = server.bind();
  log_line("serving model " + a.model_name + " on " + a.host + ":" + std::to_string(port) + " (REST)");

  StopRequest stop;
  std::thread poller([&] { poll_model(model, a, stop); });
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != 0) log_line(std::string("got ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") + ": draining requests in flight");
    server.stop();
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
  app.add_option("--rest_api_num_threads", a.connections, "connections served at once (a thread each)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
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
