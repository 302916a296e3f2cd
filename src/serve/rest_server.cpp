#include "tensorhub/serve/rest_server.h"

#include <httplib.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <map>
#include <sstream>
#include <string_view>
#include <thread>

#include "tensorhub/core/bind_failure.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/serve/json_tensor.h"
#include "tensorhub/serve/status_codes.h"

namespace tensorhub {
namespace {

using Clock = std::chrono::steady_clock;

// Connections the kernel queues for accept() (capped by net.core.somaxconn).
constexpr int kListenBacklog = 4096;

// gRPC status names TF Serving reports in model_version_status and metrics.
struct Target {
  std::string model;
  std::optional<std::int64_t> version;
  std::optional<std::string> label;
};

Target target_of(const httplib::Request& req) {
  Target t;
  t.model = req.matches[1];
  if (req.matches[2].matched) {
    const std::string v = req.matches[2];
    if (v.size() > 18) throw InvalidArgument("Failed to convert version: " + v + " to numeric.");
    t.version = std::stoll(v);
  }
  if (req.matches[3].matched) t.label = std::string(req.matches[3]);
  return t;
}

Json status_json(const std::vector<VersionStatus>& states) {
  Json list = Json::array();
  for (const auto& s : states)
    list.push_back({{"version", std::to_string(s.version)},
                    {"state", to_string(s.state)},
                    {"status", {{"error_code", s.error.empty() ? "OK" : "UNKNOWN"}, {"error_message", s.error}}}});
  return {{"model_version_status", list}};
}

Json tensor_info_json(const TensorInfo& info) {
  Json dims = Json::array();
  for (auto d : info.shape) dims.push_back({{"size", std::to_string(d)}, {"name", ""}});
  Json shape = {{"dim", dims}, {"unknown_rank", info.unknown_rank}};
  if (info.unknown_rank) shape = {{"dim", Json::array()}, {"unknown_rank", true}};
  return {{"dtype", tf_dtype_name(info)}, {"tensor_shape", shape}, {"name", info.name}};
}

Json metadata_json(const std::string& model, std::int64_t version, const Servable& s) {
  Json defs = Json::object();
  for (const auto& [name, sig] : s.signatures()) {
    Json inputs = Json::object(), outputs = Json::object();
    for (const auto& [k, info] : sig.inputs) inputs[k] = tensor_info_json(info);
    for (const auto& [k, info] : sig.outputs) outputs[k] = tensor_info_json(info);
    defs[name] = {{"inputs", inputs}, {"outputs", outputs}, {"method_name", sig.method_name}};
  }
  return {{"model_spec", {{"name", model}, {"signature_name", ""}, {"version", std::to_string(version)}}},
          {"metadata", {{"signature_def", {{"signature_def", defs}}}}}};
}


}  // namespace

const Signature& predict_signature(const Servable& servable, const std::string& name) {
  const std::string key = name.empty() ? std::string(kDefaultSignature) : name;
  const auto& sigs = servable.signatures();
  auto it = sigs.find(key);
  if (it == sigs.end()) throw InvalidArgument("Serving signature name: \"" + key + "\" not found in signature def");
  if (it->second.method_name != kPredictMethodName)
    throw InvalidArgument("signature " + key + " has method_name " + it->second.method_name +
                          ": it reads tf.Examples; POST its examples to :" +
                          (it->second.method_name == kClassifyMethodName ? "classify" : "regress"));
  return it->second;
}

std::string answer_predict(const Servable& servable, std::string_view body, const PredictRunner& run) {
  const auto lookup = [&](const std::string& name) -> const Signature& { return predict_signature(servable, name); };
  PredictRequest request = parse_predict_request(body, lookup);
  const std::string signature = request.signature_name.empty() ? kDefaultSignature : request.signature_name;
  // DT_STRING inputs go through the model's decoding step before batching.
  for (const auto& [name, strings] : request.string_inputs)
    request.inputs[name] = servable.decode_string_input(signature, name, strings);
  const NamedTensors outputs = run(signature, std::move(request.inputs));
  return format_predict_response(outputs, lookup(signature), request.row_format);
}

struct RestServer::Impl {
  ModelManager& manager;
  ServerOptions options;
  httplib::Server server;
  std::shared_ptr<ServingMetrics> metrics;  // options.metrics, or the server's own
  std::shared_ptr<Batcher> batcher;         // options.batcher, or one for options.batching
  // httplib's stop() does nothing until its accept loop has started: a stop() that comes
  // before (a SIGTERM right after start) is remembered here and run() does not serve.
  Mutex run_mutex;
  bool stop_requested TENSORHUB_GUARDED_BY(run_mutex) = false;
  bool run_entered TENSORHUB_GUARDED_BY(run_mutex) = false;
  std::atomic<bool> run_returned{false};
  // The listening socket, as seen by the socket-options callback (bind() raises its backlog).
  socket_t listen_socket = INVALID_SOCKET;

  Impl(ModelManager& m, ServerOptions o) : manager(m), options(std::move(o)) {
    batcher = options.batcher;
    if (!batcher && options.batching) batcher = std::make_shared<Batcher>(*options.batching);
    metrics = options.metrics ? options.metrics : std::make_shared<ServingMetrics>();
    int threads = options.num_threads;
    // One thread serves one keep-alive connection at a time: with fewer threads than open
    // connections the rest wait (measured with wrk -c32 on 2 cores, MLP + batching: 16 threads
    // 6,670 req/s, 32 or 64 threads 9,200-9,300 req/s, 128 threads a worse p99).
    if (threads <= 0) threads = std::max(64, 8 * static_cast<int>(std::thread::hardware_concurrency()));
    // cpp-httplib holds one pool thread per open keep-alive connection: size it for the
    // connections expected (--rest_api_num_threads).
    server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
    // Without TCP_NODELAY every small response waits for a delayed ACK (~40 ms).
    server.set_tcp_nodelay(true);
    // cpp-httplib's default socket options set SO_REUSEPORT, with which a second server binds
    // a port another one listens on and the kernel splits the connections between the two.
    // SO_REUSEADDR alone still lets a restarted server bind while old connections linger in
    // TIME_WAIT, but refuses a port in use, so bind() fails as it should.
    server.set_socket_options([this](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      listen_socket = sock;  // the last one httplib tries is the one it binds
    });
    server.set_payload_max_length(options.max_body_bytes);
    server.set_keep_alive_max_count(1000000);
    routes();
  }

  std::string deadline_text() const {
    return "Deadline exceeded: the request took longer than --rest_api_timeout_in_ms=" +
           std::to_string(options.rest_api_timeout_in_ms) + " ms";
  }

  void reply_error(httplib::Response& res, int code, const std::string& message) {
    res.status = code;
    res.set_content(error_body(message), "application/json");
  }

  std::string too_large_text() const {
    return "the request body is larger than the server's limit of " + std::to_string(options.max_body_bytes >> 20) +
           " MiB (--max_body_mb)";
  }

  // servable->predict(signature, inputs), through the batcher when batching, answered by
  // `deadline` or DeadlineExceeded.
  NamedTensors run(const std::shared_ptr<const Servable>& servable, const std::string& signature, NamedTensors inputs,
                   Clock::time_point deadline) {
    NamedTensors outputs;
    if (batcher) {
      try {
        outputs = batcher->predict(servable, signature, std::move(inputs), deadline);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kDeadlineExceeded) throw;
        throw DeadlineExceeded(deadline_text() + " (it was waiting for its batch or running in it)");
      }
    } else {
      outputs = servable->predict(signature, inputs);
    }
    // Unbatched, the predict runs on this thread and cannot be interrupted: a late answer
    // is still refused, as TF Serving's session timeout would have.
    if (Clock::now() > deadline) throw DeadlineExceeded(deadline_text());
    return outputs;
  }

  // :classify and :regress (TF Serving's Classify and Regress API): the examples become rows
  // of the model's input, run as a predict of serving_default (so they batch with predicts).
  std::string classify_or_regress(const std::shared_ptr<const Servable>& servable, const std::string& method,
                                  const std::string& body, Clock::time_point deadline) {
    const Signature* sig = nullptr;
    ExamplesRequest request = parse_examples_request(body, [&](const std::string& name) -> const Signature& {
      sig = &example_signature(*servable, name, method == "classify");
      return *sig;
    });
    NamedTensors inputs;
    if (!request.bytes.empty()) {
      // A bytes feature: the model's decoding step makes its input, as for a DT_STRING predict.
      NamedStringTensors strings;
      auto& t = strings[sig->examples.input];
      t.shape = {static_cast<std::int64_t>(request.bytes.size())};
      t.values = std::move(request.bytes);
      inputs[sig->examples.input] = servable->decode_string_input(kDefaultSignature, sig->examples.input, t);
    } else {
      inputs[sig->examples.input] = std::move(request.rows);
    }
    const NamedTensors outputs = run(servable, kDefaultSignature, std::move(inputs), deadline);
    const auto y = outputs.find(sig->examples.output);
    if (y == outputs.end()) throw Internal("the model gave no output " + sig->examples.output);
    return method == "classify" ? format_classify_response(y->second, sig->examples.classes)
                                : format_regress_response(y->second);
  }

  // Reads the whole request body into `body`, up to options.max_body_bytes. On failure
  // replies 413 (too large) or 400 (multipart form data, a broken stream) and returns false.
  bool read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                 std::string& body) {
    // RFC 9112 section 6.3: a request with neither Content-Length nor Transfer-Encoding has no
    // body (`curl -X POST`); httplib would wait for one until its read timeout (5 s).
    if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
      body.clear();
      return true;
    }
    if (req.is_multipart_form_data()) {
      // Drain the parts so that the connection stays usable, then say what to send instead.
      const bool read = reader([](const httplib::MultipartFormData&) { return true; },
                               [](const char*, std::size_t) { return true; });
      reply_error(res, read ? 400 : 413,
                  read ? "the body is multipart form data (curl -F); send the JSON request itself as the body "
                         "(curl -d @request.json, or --data-binary)"
                       : too_large_text());
      return false;
    }
    bool too_large = false;
    const bool read = reader([&](const char* data, std::size_t n) {
      if (body.size() + n > options.max_body_bytes) return !(too_large = true);
      body.append(data, n);
      return true;
    });
    if (read) return true;
    // httplib sets 413 itself when Content-Length is over the limit; a chunked body is
    // counted by the receiver above.
    if (too_large || res.status == 413) reply_error(res, 413, too_large_text());
    else reply_error(res, 400, "the request body could not be read (a connection closed or a malformed chunk)");
    return false;
  }

  // Runs `body`, turning any exception into TF Serving's error reply, and records metrics.
  template <typename F>
  void guarded(const httplib::Request& req, httplib::Response& res, const std::string& api, F body) {
    const auto start = Clock::now();
    // Only served models get their own series: any name a client sends would otherwise add one.
    std::string model = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
    if (!manager.has_model(model)) model.clear();
    std::string status = "OK";
    try {
      body();
    } catch (const Error& e) {
      status = grpc_code_name(e.kind());  // DEADLINE_EXCEEDED: TF Serving's REST API answers 504
      reply_error(res, http_status(e.kind()), e.message());
    } catch (const std::exception& e) {
      status = "INTERNAL";
      reply_error(res, 500, std::string("internal error: ") + e.what());
    }
    metrics->record(model, api, status, std::chrono::duration<double>(Clock::now() - start).count(), "REST");
  }

  // TF Serving hands every path under /v1/ to its REST handler, which refuses what it cannot
  // route as INVALID_ARGUMENT (400); other paths are not its API (404).
  void unmatched_route(const httplib::Request& req, httplib::Response& res) {
    std::string path = req.path;
    std::transform(path.begin(), path.end(), path.begin(), [](unsigned char c) { return std::tolower(c); });
    if (path.rfind("/v1/", 0) != 0) {
      reply_error(res, 404, "Malformed request: " + req.method + " " + req.path + " (the REST API is under /v1/models)");
      return;
    }
    if (req.method == "GET" && (path == "/v1/models" || path == "/v1/models/"))
      reply_error(res, 400, "Missing model name in request.");
    else
      reply_error(res, 400, "Malformed request: " + req.method + " " + req.path);
  }

  void routes() {
    const std::string prefix = R"(/v1/models/([^/:]+)(?:/versions/([0-9]+)|/labels/([^/:]+))?)";
    server.Get(prefix + "(/metadata)?", [this](const httplib::Request& req, httplib::Response& res) {
      const bool metadata = req.matches[4].matched;
      guarded(req, res, metadata ? "GetModelMetadata" : "GetModelStatus", [&] {
        const Target t = target_of(req);
        if (!metadata) {
          res.set_content(status_json(manager.status(t.model, t.version, t.label)).dump(), "application/json");
          return;
        }
        const std::int64_t v = manager.resolve_version(t.model, t.version, t.label);
        const auto servable = manager.get(t.model, v);
        res.set_content(metadata_json(t.model, v, *servable).dump(), "application/json");
      });
    });
    // A content reader takes the body as it comes, whatever its Content-Type, as TF Serving
    // does: without one, cpp-httplib (a compiled library here, so its macros cannot be changed)
    // refuses an application/x-www-form-urlencoded body over 8 KiB, which `curl -d` sends.
    server.Post(prefix + ":(predict|classify|regress)", [this](const httplib::Request& req, httplib::Response& res,
                                                               const httplib::ContentReader& reader) {
      const auto deadline = options.rest_api_timeout_in_ms > 0
                                ? Clock::now() + std::chrono::milliseconds(options.rest_api_timeout_in_ms)
                                : Clock::time_point::max();
      std::string body;
      if (!read_body(req, res, reader, body)) return;
      guarded(req, res, std::string(req.matches[4]), [&] {
        const std::string method = req.matches[4];
        const Target t = target_of(req);
        const auto servable = manager.get(t.model, t.version, t.label);
        if (method != "predict") {
          res.set_content(classify_or_regress(servable, method, body, deadline), "application/json");
          return;
        }
        const auto runner = [&](const std::string& signature, NamedTensors inputs) {
          return run(servable, signature, std::move(inputs), deadline);
        };
        res.set_content(answer_predict(*servable, body, runner), "application/json");
      });
    });
    // Any other POST: read (and drop) its body the same way, so that only --max_body_mb
    // limits it, then answer as TF Serving (unmatched_route).
    server.Post(".*", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
      std::string body;
      if (read_body(req, res, reader, body)) unmatched_route(req, res);
    });
    server.Get("/monitoring/prometheus/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics->text(), "text/plain; version=0.0.4");
    });
    server.Get(".*", [this](const httplib::Request& req, httplib::Response& res) { unmatched_route(req, res); });
    // Other methods route nowhere either: under /v1/ that is TF Serving's 400, as for GET and
    // POST (bodies read the same way, so --max_body_mb alone limits them).
    const auto unmatched_with_body = [this](const httplib::Request& req, httplib::Response& res,
                                            const httplib::ContentReader& reader) {
      std::string body;
      if (read_body(req, res, reader, body)) unmatched_route(req, res);
    };
    server.Put(".*", unmatched_with_body);
    server.Patch(".*", unmatched_with_body);
    server.Delete(".*", [this](const httplib::Request& req, httplib::Response& res) { unmatched_route(req, res); });
    server.Options(".*", [this](const httplib::Request& req, httplib::Response& res) { unmatched_route(req, res); });
    // Replies httplib makes itself (unknown route, body too large) get TF Serving's JSON form.
    server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413)
        res.set_content(error_body(too_large_text()), "application/json");
      else if (res.status == 404)
        res.set_content(error_body("Malformed request: " + req.method + " " + req.path), "application/json");
      else
        res.set_content(error_body("HTTP " + std::to_string(res.status)), "application/json");
    });
  }
};

RestServer::RestServer(ModelManager& manager, ServerOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}

RestServer::~RestServer() = default;

int RestServer::bind() {
  const auto& o = impl_->options;
  const int port = o.port == 0 ? impl_->server.bind_to_any_port(o.host) : impl_->server.bind_to_port(o.host, o.port)
                                                                               ? o.port
                                                                               : -1;
  if (port <= 0) throw Unavailable(bind_failure(o.host, o.port, "--rest_api_host", "--rest_api_port"));
  // cpp-httplib 0.11 listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into the
  // library): when more clients connect at once, as wrk's 32 connections do, the kernel drops
  // the handshakes that overflow it and those clients wait for a retransmission, 0.2 to 1 s
  // (the REST p99 of 150-800 ms some benchmark runs saw). listen() again on the bound socket
  // sets the backlog; the kernel caps it at net.core.somaxconn.
  if (::listen(impl_->listen_socket, kListenBacklog) != 0)
    throw Unavailable("cannot listen on " + o.host + ":" + std::to_string(port) + ": " + std::strerror(errno));
  return port;
}

void RestServer::run() {
  {
    MutexLock lock(impl_->run_mutex);
    if (impl_->stop_requested) return;
    impl_->run_entered = true;
  }
  impl_->server.listen_after_bind();
  impl_->run_returned = true;
}

void RestServer::stop() {
  {
    MutexLock lock(impl_->run_mutex);
    if (impl_->stop_requested) return;
    impl_->stop_requested = true;
    if (!impl_->run_entered) return;  // run() will see the request and return at once
  }
  // run() is in, or on its way into, httplib's accept loop; httplib's stop() is a no-op until
  // the loop runs (is_running()), so wait for it to start, or for run() to have returned.
  while (!impl_->run_returned) {
    if (impl_->server.is_running()) {
      impl_->server.stop();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace tensorhub
