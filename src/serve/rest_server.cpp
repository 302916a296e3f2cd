#include "tensorhub/serve/rest_server.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/core/thread_pool.h"
#include "tensorhub/serve/json_tensor.h"
#include "tensorhub/serve/status_codes.h"

namespace tensorhub {
namespace {

// The response header naming the model version that answered a predict, classify or regress.
constexpr const char* kVersionHeader = "X-Tensorhub-Model-Version";


using Clock = std::chrono::steady_clock;

constexpr std::string_view kMetricsPath = "/monitoring/prometheus/metrics";

// ---- routing: TF Serving's two regular expressions (http_rest_api_util.cc), by hand --------
//   POST (?i)/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:(classify|regress|predict)
//   GET  (?i)/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?
// matched in full against the path as sent (not decoded); the name and the label are then
// percent-decoded (its DecodeArg). A name or label cannot hold '/' or ':', so each part ends
// at the first of them and only the GET form's optional name needs a second try.

enum class Api { kStatus, kMetadata, kPredict, kClassify, kRegress };

struct Route {
  Api api = Api::kStatus;
  std::string model;                 ///< percent-decoded; "" only for GET /v1/models
  std::string version;               ///< the digits as sent; "" when none
  std::optional<std::string> label;  ///< percent-decoded
};

// The label metrics and logs give each API (TF Serving's names).
std::string api_name(Api api) {
  switch (api) {
    case Api::kStatus: return "GetModelStatus";
    case Api::kMetadata: return "GetModelMetadata";
    case Api::kPredict: return "predict";
    case Api::kClassify: return "classify";
    case Api::kRegress: return "regress";
  }
  return "";
}

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Removes `literal` (lower case) from the front of `s` if `s` starts with it in any case.
bool consume(std::string_view& s, std::string_view literal) {
  if (s.size() < literal.size()) return false;
  for (std::size_t i = 0; i < literal.size(); ++i)
    if (lower(s[i]) != literal[i]) return false;
  s.remove_prefix(literal.size());
  return true;
}

// Removes and returns the longest prefix of `s` without '/' or ':' ([^/:]*).
std::string_view take_segment(std::string_view& s) {
  const std::size_t n = std::min(s.find_first_of("/:"), s.size());
  const std::string_view out = s.substr(0, n);
  s.remove_prefix(n);
  return out;
}

// Removes and returns the longest prefix of `s` of decimal digits (\d*).
std::string_view take_digits(std::string_view& s) {
  std::size_t n = 0;
  while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n]))) ++n;
  const std::string_view out = s.substr(0, n);
  s.remove_prefix(n);
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "%XX" decoded, anything else (a '%' without two hex digits, '+') kept: what TF Serving's
// DecodeArg (curl_easy_unescape) does.
std::string percent_decoded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The optional "/versions/<digits>" or "/labels/<label>" part; false when `s` starts with
// neither in full (then `s` is unchanged).
bool take_version_or_label(std::string_view& s, Route& route) {
  std::string_view rest = s;
  if (consume(rest, "/versions/")) {
    const auto digits = take_digits(rest);
    if (digits.empty()) return false;
    route.version = std::string(digits);
  } else if (consume(rest, "/labels/")) {
    const auto label = take_segment(rest);
    if (label.empty()) return false;
    route.label = percent_decoded(label);
  } else {
    return false;
  }
  s = rest;
  return true;
}

// POST's route, after "/v1/models/".
std::optional<Route> post_route(std::string_view s) {
  Route route;
  const auto name = take_segment(s);
  if (name.empty()) return std::nullopt;
  route.model = percent_decoded(name);
  take_version_or_label(s, route);
  if (!consume(s, ":")) return std::nullopt;
  if (consume(s, "predict")) route.api = Api::kPredict;
  else if (consume(s, "classify")) route.api = Api::kClassify;
  else if (consume(s, "regress")) route.api = Api::kRegress;
  else return std::nullopt;
  if (!s.empty()) return std::nullopt;
  return route;
}

// GET's route after an optional name: [version or label][/metadata], then the end.
std::optional<Route> get_route_tail(std::string_view s, Route route) {
  take_version_or_label(s, route);
  if (consume(s, "/metadata")) route.api = Api::kMetadata;
  if (!s.empty()) return std::nullopt;
  return route;
}

// GET's route, after "/v1/models".
std::optional<Route> get_route(std::string_view s) {
  std::string_view rest = s;
  if (consume(rest, "/")) {
    const auto name = take_segment(rest);
    if (!name.empty()) {
      Route named;
      named.model = percent_decoded(name);
      if (auto route = get_route_tail(rest, named)) return route;
    }
  }
  return get_route_tail(s, {});  // the regex's other choice: no name (then "Missing model name")
}

// The route of `method` `path`, or nullopt when TF Serving's expressions do not match.
std::optional<Route> route_of(const std::string& method, std::string_view path) {
  if (method == "POST" && consume(path, "/v1/models/")) return post_route(path);
  if (method == "GET" && consume(path, "/v1/models")) return get_route(path);
  return std::nullopt;
}

// TF Serving's absl::SimpleAtoi of the version: digits that do not fit an int64 are refused.
std::optional<std::int64_t> version_of(const std::string& digits) {
  if (digits.empty()) return std::nullopt;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size())
    throw InvalidArgument("Failed to convert version: " + digits + " to numeric.");
  return v;
}

bool starts_with_ci(std::string_view s, std::string_view lower_prefix) { return consume(s, lower_prefix); }

// A batched request's wait for its batch (Batcher::submit answers on a batch thread): ended
// by the answer, by the request's deadline, or by release() when the server has stopped and
// its grace is over, so that no worker (and no exit) waits for a batch nobody will read.
struct BatchWait {
  Mutex mutex;
  std::condition_variable cv;
  bool done TENSORHUB_GUARDED_BY(mutex) = false;
  bool released TENSORHUB_GUARDED_BY(mutex) = false;
  NamedTensors outputs TENSORHUB_GUARDED_BY(mutex);
  std::exception_ptr error TENSORHUB_GUARDED_BY(mutex);

  void answer(NamedTensors out, std::exception_ptr e) TENSORHUB_LOCKS_EXCLUDED(mutex) {
    {
      MutexLock lock(mutex);
      outputs = std::move(out);
      error = std::move(e);
      done = true;
    }
    cv.notify_one();
  }
  void release() TENSORHUB_LOCKS_EXCLUDED(mutex) {
    {
      MutexLock lock(mutex);
      released = true;
    }
    cv.notify_one();
  }
};

// ---- answers -------------------------------------------------------------------------------

HttpResponse json_response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse error_response(int status, const std::string& message) { return json_response(status, error_body(message)); }

// TF Serving's ToStatusProto of a version's health: "OK", or the gRPC code name of the load
// error's kind (an exception of no tensorhub kind, from a library, is UNKNOWN).
std::string error_code(const VersionStatus& s) {
  if (s.error.empty()) return "OK";
  return s.error_kind ? std::string(grpc_code_name(*s.error_kind)) : "UNKNOWN";
}

Json status_json(const std::vector<VersionStatus>& states) {
  Json list = Json::array();
  for (const auto& s : states)
    list.push_back({{"version", std::to_string(s.version)},
                    {"state", to_string(s.state)},
                    {"status", {{"error_code", error_code(s)}, {"error_message", s.error}}}});
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
  std::shared_ptr<ServingMetrics> metrics;  // options.metrics, or the server's own
  std::shared_ptr<Batcher> batcher;         // options.batcher, or one for options.batching
  // Batched requests waiting on workers (run_batched), for release_waits().
  Mutex waits_mutex;
  std::set<std::shared_ptr<BatchWait>> waits TENSORHUB_GUARDED_BY(waits_mutex);
  bool waits_released TENSORHUB_GUARDED_BY(waits_mutex) = false;
  // Declared before the server, so destroyed after it: tasks still queued when the server is
  // gone run (and, their requests abandoned, return at once) while the members they use live.
  ThreadPool pool;
  HttpServer server;

  Impl(ModelManager& m, ServerOptions o)
      : manager(m),
        options(std::move(o)),
        metrics(options.metrics ? options.metrics : std::make_shared<ServingMetrics>()),
        batcher(options.batcher ? options.batcher
                                : options.batching ? std::make_shared<Batcher>(*options.batching) : nullptr),
        pool(static_cast<std::size_t>(worker_count(options.num_threads))),
        server(http_options(), [this](HttpRequest request, HttpResponder responder) {
          handle(std::move(request), std::move(responder));
        }) {}

  // The pool's destructor (after this) runs what is queued and joins the workers: none may be
  // left waiting for a batch.
  ~Impl() {
    server.stop(0);
    release_waits();
  }

  // --rest_api_num_threads, 0 meaning max(64, 8 x cores): a batched request holds its worker
  // while it waits for its batch, so a batch of 64 needs 64 of them (measured with wrk -c32 on
  // 2 cores, MLP + batching: 16 threads 6,670 req/s, 32 or 64 threads 9,200-9,300 req/s).
  static int worker_count(int flag) {
    return flag > 0 ? flag : std::max(64, 8 * static_cast<int>(std::thread::hardware_concurrency()));
  }

  HttpServer::Options http_options() const {
    HttpServer::Options o = options.http;
    o.host = options.host;
    o.port = options.port;
    o.host_flag = "--rest_api_host";
    o.port_flag = "--rest_api_port";
    o.max_body_bytes = options.max_body_bytes;
    o.too_large_reason = too_large_text();
    return o;
  }

  std::string too_large_text() const {
    return "the request body is larger than the server's limit of " + std::to_string(options.max_body_bytes >> 20) +
           " MiB (--max_body_mb)";
  }

  std::string deadline_text() const {
    return "Deadline exceeded: the request took longer than --rest_api_timeout_in_ms=" +
           std::to_string(options.rest_api_timeout_in_ms) + " ms";
  }

  Clock::time_point deadline_from(Clock::time_point start) const {
    return options.rest_api_timeout_in_ms > 0 ? start + std::chrono::milliseconds(options.rest_api_timeout_in_ms)
                                              : Clock::time_point::max();
  }

  // servable->predict(signature, inputs), through the batcher when batching, answered by
  // `deadline` or DeadlineExceeded.
  NamedTensors run(const std::shared_ptr<const Servable>& servable, const std::string& signature, NamedTensors inputs,
                   Clock::time_point deadline) {
    NamedTensors outputs = batcher ? run_batched(servable, signature, std::move(inputs), deadline)
                                   : servable->predict(signature, inputs);
    // Unbatched, the predict runs on this thread and cannot be interrupted: a late answer
    // is still refused, as TF Serving's session timeout would have.
    if (Clock::now() > deadline) throw DeadlineExceeded(deadline_text());
    return outputs;
  }

  // The batcher's answer, waited for on this worker until `deadline` or release_waits(). A call
  // left at its deadline stays queued until its batch forms, and is then dropped unrun.
  NamedTensors run_batched(const std::shared_ptr<const Servable>& servable, const std::string& signature,
                           NamedTensors inputs, Clock::time_point deadline) TENSORHUB_LOCKS_EXCLUDED(waits_mutex) {
    auto wait = std::make_shared<BatchWait>();
    {
      MutexLock lock(waits_mutex);
      if (waits_released) throw Unavailable("the server is stopping");
      waits.insert(wait);
    }
    struct Forget {  // out of `waits` however this ends
      Impl& impl;
      const std::shared_ptr<BatchWait>& wait;
      ~Forget() {
        MutexLock lock(impl.waits_mutex);
        impl.waits.erase(wait);
      }
    } forget{*this, wait};
    batcher->submit(servable, signature, std::move(inputs), deadline,
                    [wait](NamedTensors out, std::exception_ptr e) { wait->answer(std::move(out), std::move(e)); });
    MutexLock lock(wait->mutex);
    while (!wait->done && !wait->released && Clock::now() < deadline) {
      if (deadline == Clock::time_point::max()) wait->mutex.wait(wait->cv);
      else wait->mutex.wait_until(wait->cv, deadline);
    }
    if (wait->released && !wait->done) throw Unavailable("the server stopped before the request's batch ran");
    if (!wait->done) throw DeadlineExceeded(deadline_text() + " (it was waiting for its batch or running in it)");
    if (!wait->error) return std::move(wait->outputs);
    try {
      std::rethrow_exception(wait->error);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kDeadlineExceeded) throw;
      throw DeadlineExceeded(deadline_text() + " (it was waiting for its batch or running in it)");
    }
  }

  // Ends every batch wait, now and later: the server has stopped and its grace is over.
  void release_waits() TENSORHUB_LOCKS_EXCLUDED(waits_mutex) {
    MutexLock lock(waits_mutex);
    waits_released = true;
    for (const auto& w : waits) w->release();
  }

  // :classify and :regress (TF Serving's Classify and Regress API): the examples become rows
  // of the model's input, run as a predict of serving_default (so they batch with predicts).
  std::string classify_or_regress(const std::shared_ptr<const Servable>& servable, Api api, const std::string& body,
                                  Clock::time_point deadline) {
    const Signature* sig = nullptr;
    ExamplesRequest request = parse_examples_request(body, [&](const std::string& name) -> const Signature& {
      sig = &example_signature(*servable, name, api == Api::kClassify);
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
    return api == Api::kClassify ? format_classify_response(y->second, sig->examples.classes)
                                 : format_regress_response(y->second);
  }

  // Runs `body` (returning the response body), turning any exception into TF Serving's error
  // reply, and records the request in the metrics from `start`, under the version `*answered`
  // names once `body` returned or threw (0, or no `answered`: none).
  template <typename F>
  HttpResponse guarded(const Route& route, Clock::time_point start, F body, const std::int64_t* answered = nullptr) {
    HttpResponse response;
    std::string status = "OK";
    try {
      response.body = body();
    } catch (const Error& e) {
      status = grpc_code_name(e.kind());  // DEADLINE_EXCEEDED: TF Serving's REST API answers 504
      response = error_response(http_status(e.kind()), e.message());
    } catch (const std::exception& e) {
      status = "INTERNAL";
      response = error_response(500, std::string("internal error: ") + e.what());
    }
    // Only served models get their own series: any name a client sends would otherwise add one.
    const std::string model = manager.has_model(route.model) ? route.model : "";
    metrics->record(model, api_name(route.api), status, std::chrono::duration<double>(Clock::now() - start).count(),
                    "REST", answered ? *answered : 0);
    return response;
  }

  // Model status, on the loop: the manager's states are in memory.
  std::string model_status(const Route& route) {
    if (route.model.empty()) throw InvalidArgument("Missing model name in request.");
    return status_json(manager.status(route.model, version_of(route.version), route.label)).dump();
  }

  // Metadata, predict, classify, regress: on a worker.
  // `routing_key` (the X-Request-Id header, "" without one) places an unversioned request in a
  // weighted split, after the body's routing_key_field where the server has one; `answered`
  // receives the version that answers, for the response's header.
  std::string model_work(const Route& route, const std::string& body, Clock::time_point start,
                         std::string_view routing_key, std::int64_t& answered) {
    if (route.model.empty()) throw InvalidArgument("Missing model name in request.");
    const auto version = version_of(route.version);
    const auto deadline = deadline_from(start);
    if (route.api == Api::kMetadata) {
      const std::int64_t v = manager.resolve_version(route.model, version, route.label);
      return metadata_json(route.model, v, *manager.get(route.model, v)).dump();
    }
    // A request that waited for a worker past its deadline is not run.
    if (Clock::now() > deadline) throw DeadlineExceeded(deadline_text() + " (it was waiting for a worker)");
    std::string field_key;  // parsed only for an unversioned request, the one a split may place
    if (!options.routing_key_field.empty() && !version && !route.label)
      field_key = request_field_text(body, options.routing_key_field);
    const std::int64_t resolved =
        manager.resolve_version(route.model, version, route.label, field_key.empty() ? routing_key : field_key);
    // By its label where it names one, so that a label's version not loaded is said so.
    const auto servable = route.label ? manager.get(route.model, version, route.label) : manager.get(route.model, resolved);
    // Only now: a version a client made up (no servable) must add no metrics series.
    answered = resolved;
    if (route.api != Api::kPredict) return classify_or_regress(servable, route.api, body, deadline);
    return answer_predict(*servable, body, [&](const std::string& signature, NamedTensors inputs) {
      return run(servable, signature, std::move(inputs), deadline);
    });
  }

  // TF Serving hands every path under /v1/ (in any case) to its REST handler, which refuses
  // what it cannot route as INVALID_ARGUMENT (400); other paths are not its API (404).
  static HttpResponse unmatched(const HttpRequest& request) {
    const std::string what = request.method + " " + request.path;
    if (!starts_with_ci(request.path, "/v1/"))
      return error_response(404, "Malformed request: " + what + " (the REST API is under /v1/models)");
    if (request.method == "GET" && (request.path.size() == 11 && starts_with_ci(request.path, "/v1/models/")))
      return error_response(400, "Missing model name in request.");
    return error_response(400, "Malformed request: " + what);
  }

  // `curl -F` sends multipart form data, which no TF Serving route reads.
  static bool multipart(const HttpRequest& request) {
    const auto type = request.header("Content-Type");
    return type && starts_with_ci(*type, "multipart/form-data");
  }

  // The engine's handler, on the loop thread: answers what is in memory, hands the rest to a
  // worker. Never blocks.
  void handle(HttpRequest request, HttpResponder responder) {
    const auto start = Clock::now();
    if (request.method == "GET" && request.path == kMetricsPath) {
      HttpResponse r = json_response(200, metrics->text());
      r.content_type = "text/plain; version=0.0.4";
      responder.send(std::move(r));
      return;
    }
    if (multipart(request)) {
      responder.send(error_response(400, "the body is multipart form data (curl -F); send the JSON request itself as "
                                         "the body (curl -d @request.json, or --data-binary)"));
      return;
    }
    std::optional<Route> route = route_of(request.method, request.path);
    if (!route) {
      responder.send(unmatched(request));
      return;
    }
    if (route->api == Api::kStatus) {
      responder.send(guarded(*route, start, [&] { return model_status(*route); }));
      return;
    }
    struct Work {
      Route route;
      std::string body;
      std::string request_id;  // X-Request-Id: keeps a client on one side of a weighted split
    };
    auto work = std::make_shared<Work>(
        Work{std::move(*route), std::move(request.body), request.header("X-Request-Id").value_or("")});
    pool.submit([this, work, responder, start] {
      // Its client left, or the server stopped and its grace is over: nobody would read it.
      if (responder.abandoned()) return;
      std::int64_t answered = 0;
      HttpResponse response = guarded(
          work->route, start, [&] { return model_work(work->route, work->body, start, work->request_id, answered); },
          &answered);
      // Which version answered (a weighted split, a label), as gRPC's model_spec says it.
      if (answered != 0) response.headers.emplace_back(kVersionHeader, std::to_string(answered));
      responder.send(std::move(response));
    });
  }
};

RestServer::RestServer(ModelManager& manager, ServerOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}

RestServer::~RestServer() = default;

int RestServer::bind() { return impl_->server.bind(); }

void RestServer::run() {
  impl_->server.run();
  // Stopped and past the grace: requests still waiting for a batch are not waited for.
  impl_->release_waits();
}

void RestServer::stop(int grace_ms) { impl_->server.stop(grace_ms); }

HttpServerStats RestServer::stats() const { return impl_->server.stats(); }

}  // namespace tensorhub
