#include "tensorhub/ui/try_api.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <regex>

#include "tensorhub/core/error.h"
#include "tensorhub/serve/hub_source.h"
#include "tensorhub/serve/rest_server.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

ManagerOptions manager_options() {
  ManagerOptions o;
  o.log = [](const std::string& line) { std::cerr << "tensorhub ui: " << line << std::endl; };
  return o;
}

// A model id as the URL spells it: 1 to 18 digits (no sign, no leading "+").
bool is_model_id(const std::string& name) {
  return !name.empty() && name.size() <= 18 && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// `text` as one URL path segment: bytes other than letters, digits and -._~ percent-encoded.
std::string path_segment(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      const char* hex = "0123456789ABCDEF";
      out += {'%', hex[c >> 4], hex[c & 15]};
    }
  }
  return out;
}

// The model document `name` names (a model id of the hub's project). Throws NotFound.
Document find_model(Hub& hub, const std::string& name, const std::string& project) {
  const auto docs = is_model_id(name) ? hub.find_models({{"id", std::stoll(name)}}, {}, 1) : std::vector<Document>{};
  if (docs.empty())
    throw NotFound("no model " + name + " in project " + project +
                   ": the dashboard serves its project's models by id (POST /v1/models/<id>:predict; the "
                   "Models view lists them)");
  return docs[0];
}

}  // namespace

TryModels::TryModels(std::string hub_uri, std::string project, std::size_t max_loaded)
    : hub_uri_(std::move(hub_uri)), project_(std::move(project)), max_loaded_(std::max<std::size_t>(1, max_loaded)),
      manager_(manager_options()) {}

TryModels::~TryModels() = default;

std::string TryModels::predict(Hub& hub, const std::string& name, std::string_view body) {
  const auto model = servable(hub, name);
  return answer_predict(*model, body, [&](const std::string& signature, NamedTensors inputs) {
    return model->predict(signature, inputs);
  });
}

std::shared_ptr<const Servable> TryModels::servable(Hub& hub, const std::string& name) {
  MutexLock lock(mutex_);
  const auto seen = std::find_if(recent_.begin(), recent_.end(), [&](const auto& m) { return m.first == name; });
  if (seen == recent_.end()) {
    add(hub, name);
  } else {
    recent_.splice(recent_.begin(), recent_, seen);
    try {
      return manager_.get(name);
    } catch (const Error&) {
      manager_.poll();  // it failed to load: tried again once its backoff has passed
    }
  }
  try {
    return manager_.get(name);
  } catch (const Error& e) {
    std::string why = e.message();
    try {
      for (const auto& s : manager_.status(name))
        if (!s.error.empty()) why = s.error;
    } catch (const Error& none) {
      why = none.message();
    }
    throw NotFound("model " + name + " of project " + project_ + " cannot be loaded: " + why);
  }
}

// Looks the model up, then serves it as `tensorhub serve --hub_filter '{"id": ID}'` would,
// dropping the least recently used model when more than max_loaded_ would be loaded.
void TryModels::add(Hub& hub, const std::string& name) {
  const Document doc = find_model(hub, name, project_);
  recent_.emplace_front(name, doc.tags.value("model_name", ""));
  const auto source = [&](const std::string& id, const std::string& model_name) {
    HubModelQuery q;
    q.hub_uri = hub_uri_;
    q.project = project_;
    q.model_name = model_name;
    q.filter = {{"id", std::stoll(id)}};
    return std::make_unique<HubSource>(q);
  };
  if (recent_.size() <= max_loaded_) {
    manager_.add_model(name, source(name, recent_.front().second));
    manager_.poll();
    return;
  }
  recent_.resize(max_loaded_);
  std::vector<ServedModel> models;
  for (const auto& [id, model_name] : recent_) models.push_back({id, source(id, model_name), {}, {}});
  manager_.replace_models(std::move(models), true);  // loads the new one, unloads the dropped one
}

void check_serve_url(const std::string& url) {
  static const std::regex form(R"(http://[^/:?#\s]+(:[0-9]{1,5})?/?)");
  if (!std::regex_match(url, form))
    throw InvalidArgument("--serve_url must be http://HOST:PORT of a tensorhub serve's REST API (e.g. "
                          "http://127.0.0.1:8501), got '" + url + "'");
}

ForwardedReply forward_predict(Hub& hub, const std::string& serve_url, const std::string& name, std::string_view body,
                               double timeout_s) {
  const Document doc = find_model(hub, name, hub.project_name());
  std::string base = serve_url;
  if (base.ends_with("/")) base.pop_back();
  httplib::Client client(base);
  const auto seconds = static_cast<time_t>(std::floor(timeout_s));
  const auto micros = static_cast<time_t>((timeout_s - std::floor(timeout_s)) * 1e6);
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  const std::string path = "/v1/models/" + path_segment(doc.tags.value("model_name", "")) +
                           "/versions/" + std::to_string(doc.id) + ":predict";
  const auto res = client.Post(path.c_str(), body.data(), body.size(), "application/json");
  if (!res)
    throw Unavailable("the tensorhub serve at " + base + " (--serve_url) did not answer POST " + path + ": " +
                      httplib::to_string(res.error()));
  return {res->status, res->body};
}

}  // namespace tensorhub
