// LiteModel and the REST routes of tensorhub-serve-lite (lite/lite_server.h).
#include "tensorhub/lite/lite_server.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>

#include "tensorhub/core/error.h"
#include "tensorhub/serve/status_codes.h"

namespace tensorhub {
namespace {

// The numeric subdirectories of `base` (TF Serving's version directories; "00000123" is 123).
std::map<std::int64_t, std::filesystem::path> version_dirs(const std::filesystem::path& base) {
  std::error_code ec;
  if (!std::filesystem::is_directory(base, ec))
    throw NotFound("the model base path " + base.string() + " is not a directory (--model_base_path)");
  std::map<std::int64_t, std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.size() > 18 || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    if (entry.is_directory(ec)) out[std::stoll(name)] = entry.path();
  }
  if (ec) throw NotFound("cannot list the model base path " + base.string() + ": " + ec.message());
  return out;
}

// TF Serving's TensorInfo JSON.
Json tensor_info(const std::string& name, const std::vector<std::int64_t>& per_example, bool is_string) {
  Json dims = Json::array();
  dims.push_back({{"size", "-1"}, {"name", ""}});
  if (!is_string)
    for (auto d : per_example) dims.push_back({{"size", std::to_string(d)}, {"name", ""}});
  return {{"dtype", is_string ? "DT_STRING" : "DT_FLOAT"},
          {"tensor_shape", {{"dim", dims}, {"unknown_rank", false}}},
          {"name", name + ":0"}};
}

Json metadata(const std::string& model, const LiteServable& s) {
  const LiteSignature& sig = s.signature;
  Json def = {{"inputs", {{sig.input, tensor_info(sig.input, sig.input_shape, sig.string_input)}}},
              {"outputs", {{sig.output, tensor_info(sig.output, sig.output_shape, false)}}},
              {"method_name", "tensorflow/serving/predict"}};
  return {{"model_spec", {{"name", model}, {"signature_name", ""}, {"version", std::to_string(s.version)}}},
          {"metadata", {{"signature_def", {{"signature_def", {{"serving_default", def}}}}}}}};
}

// A REST path under /v1/models/: the model, an optional version or label, and what follows.
struct Route {
  std::string model;
  std::optional<std::int64_t> version;
  std::optional<std::string> label;
  std::string rest;  // "", "/metadata", ":predict", ...
};

// Splits "/v1/models/<name>[/versions/<v>|/labels/<l>]<rest>"; nullopt when it has no name.
std::optional<Route> parse_route(const std::string& path) {
  const std::string prefix = "/v1/models/";
  if (path.rfind(prefix, 0) != 0) return std::nullopt;
  Route r;
  std::size_t at = prefix.size();
  const std::size_t name_end = std::min(path.find_first_of("/:", at), path.size());
  r.model = path.substr(at, name_end - at);
  if (r.model.empty()) return std::nullopt;
  at = name_end;
  for (const std::string key : {"/versions/", "/labels/"}) {
    if (path.compare(at, key.size(), key) != 0) continue;
    const std::size_t begin = at + key.size();
    const std::size_t end = std::min(path.find_first_of("/:", begin), path.size());
    const std::string value = path.substr(begin, end - begin);
    if (value.empty()) return std::nullopt;
    if (key == "/labels/") {
      r.label = value;
    } else {
      if (!std::all_of(value.begin(), value.end(), ::isdigit)) return std::nullopt;
      if (value.size() > 18) throw InvalidArgument("Failed to convert version: " + value + " to numeric.");
      r.version = std::stoll(value);
    }
    at = end;
    break;
  }
  r.rest = path.substr(at);
  return r;
}

// The fastest of three predicts of one example of zeros (a valid id for an Embedding), ns; a
// second (so: never cheap) if the network refuses it.
double time_one_example(const LiteNetwork& network) {
  std::size_t n = 1;
  for (auto d : network.input_shape()) n *= static_cast<std::size_t>(d);
  const std::vector<float> zeros(n, 0.0f);
  double best = 1e9;
  try {
    for (int i = 0; i < 3; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      network.predict(zeros.data(), 1);
      best = std::min(best, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
    }
  } catch (const std::exception&) {
    return 1e9;
  }
  return best;
}

HttpResponse error_response(int status, const std::string& message) { return {status, lite_error_body(message)}; }

// TF Serving answers every path under /v1/ it cannot route with 400; others are not its API.
HttpResponse unmatched(const HttpRequest& req) {
  std::string path = req.path;
  std::transform(path.begin(), path.end(), path.begin(), [](unsigned char c) { return std::tolower(c); });
  if (path.rfind("/v1/", 0) != 0)
    return error_response(404, "Malformed request: " + req.method + " " + req.path + " (the REST API is under /v1/models)");
  if (req.method == "GET" && (path == "/v1/models" || path == "/v1/models/"))
    return error_response(400, "Missing model name in request.");
  return error_response(400, "Malformed request: " + req.method + " " + req.path);
}

std::string predict(const LiteServable& s, const std::string& body) {
  const LitePredictRequest req = parse_lite_predict(body, s.signature);
  const std::vector<float> y = s.network.predict(req.values.data(), req.batch);
  return format_lite_predict(y, req.batch, s.signature, req.row_format);
}

HttpResponse route(const LiteModel& model, const HttpRequest& req) {
  const auto r = parse_route(req.path);
  if (!r) return unmatched(req);
  const bool get = req.method == "GET", post = req.method == "POST";
  const bool is_predict = post && r->rest == ":predict";
  const bool example_method = post && (r->rest == ":classify" || r->rest == ":regress");
  if (!(get && (r->rest.empty() || r->rest == "/metadata")) && !is_predict && !example_method) return unmatched(req);
  if (r->model != model.name()) throw NotFound("Servable not found for request: Latest(" + r->model + ")");
  if (r->label) throw InvalidArgument("Unrecognized servable version label: " + *r->label);
  if (example_method)
    throw InvalidArgument("tensorhub-serve-lite answers predict only: " + r->rest.substr(1) +
                          " needs tensorhub serve (TF Serving's Classify and Regress API)");
  if (get && r->rest.empty()) return {200, model.status(r->version).dump()};
  const auto servable = model.get(r->version);
  if (get) return {200, metadata(model.name(), *servable).dump()};
  return {200, predict(*servable, req.body)};
}

}  // namespace

LiteModel::LiteModel(std::string name, std::filesystem::path base_path, std::function<void(const std::string&)> log)
    : name_(std::move(name)), base_(std::move(base_path)), log_(std::move(log)) {}

void LiteModel::poll() {
  const auto dirs = version_dirs(base_);
  MutexLock lock(mutex_);
  if (dirs.empty()) {
    const std::string why = base_.string() + " has no version directories (<base>/<version>/model.json)";
    if (listing_ != why) log_("model " + name_ + ": " + why);
    listing_ = why;
    return;
  }
  listing_.clear();
  const auto& [newest, dir] = *dirs.rbegin();
  if (current_ && current_->version == newest) return;
  if (versions_.count(newest) && versions_[newest].state == "END" && versions_[newest].error.empty()) return;
  const std::string before = versions_.count(newest) ? versions_[newest].error : "";
  versions_[newest] = {"LOADING", ""};
  lock.unlock();
  // Loading reads files and copies weights: outside the lock, so requests keep being served.
  std::shared_ptr<const LiteServable> loaded;
  std::string error;
  try {
    LiteNetwork network = LiteNetwork::load(dir);
    LiteSignature signature = LiteSignature::from_config(network.config(), network.input_shape(), network.output_shape());
    const double ns = time_one_example(network);
    loaded = std::make_shared<const LiteServable>(LiteServable{newest, std::move(network), std::move(signature), ns});
  } catch (const Error& e) {
    error = e.message();
  } catch (const std::exception& e) {
    error = e.what();
  }
  lock.lock();
  if (!loaded) {
    versions_[newest] = {"END", error};
    if (error != before) log_("model " + name_ + " version " + std::to_string(newest) + " failed to load: " + error);
    return;
  }
  if (current_) {
    versions_[current_->version] = {"END", ""};
    log_("model " + name_ + " version " + std::to_string(current_->version) + " unloaded");
  }
  current_ = loaded;
  versions_[newest] = {"AVAILABLE", ""};
  log_("model " + name_ + " version " + std::to_string(newest) + " AVAILABLE from " + dir.string());
}

double LiteModel::predict_cost_ns(std::size_t body_bytes) const {
  MutexLock lock(mutex_);
  if (!current_) return 0;
  return static_cast<double>(body_bytes / 2 + 1) * current_->predict_ns + 10.0 * static_cast<double>(body_bytes);
}

std::shared_ptr<const LiteServable> LiteModel::get(std::optional<std::int64_t> version) const {
  MutexLock lock(mutex_);
  if (current_ && (!version || *version == current_->version)) return current_;
  if (version) throw NotFound("Servable not found for request: Specific(" + name_ + ", " + std::to_string(*version) + ")");
  std::string why = listing_;
  for (auto it = versions_.rbegin(); it != versions_.rend(); ++it)
    why += (why.empty() ? "" : "; ") + std::string("version ") + std::to_string(it->first) + " is " + it->second.state +
           (it->second.error.empty() ? "" : ": " + it->second.error);
  throw NotFound("Servable not found for request: Latest(" + name_ + "): no version is loaded: " + why);
}

Json LiteModel::status(std::optional<std::int64_t> version) const {
  MutexLock lock(mutex_);
  Json list = Json::array();
  for (auto it = versions_.rbegin(); it != versions_.rend(); ++it) {
    if (version && it->first != *version) continue;
    const VersionState& s = it->second;
    list.push_back({{"version", std::to_string(it->first)},
                    {"state", s.state},
                    {"status", {{"error_code", s.error.empty() ? "OK" : "UNKNOWN"}, {"error_message", s.error}}}});
  }
  if (list.empty() && version)
    throw NotFound("Could not find version " + std::to_string(*version) + " of model " + name_);
  if (list.empty()) throw NotFound("Could not find any versions of model " + name_ + ": " + listing_);
  return {{"model_version_status", list}};
}

HttpResponse handle_lite_request(const LiteModel& model, const HttpRequest& req) {
  try {
    return route(model, req);
  } catch (const Error& e) {
    return error_response(http_status(e.kind()), e.message());
  } catch (const std::exception& e) {
    return error_response(500, std::string("internal error: ") + e.what());
  }
}

}  // namespace tensorhub
