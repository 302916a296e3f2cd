#include "tensorhub/ui/try_api.h"

#include <algorithm>
#include <iostream>

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
  std::lock_guard lock(mutex_);
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
  const auto docs = is_model_id(name) ? hub.find_models({{"id", std::stoll(name)}}, {}, 1) : std::vector<Document>{};
  if (docs.empty())
    throw NotFound("no model " + name + " in project " + project_ +
                   ": the dashboard serves its project's models by id (POST /v1/models/<id>:predict; the "
                   "Models view lists them)");
  recent_.emplace_front(name, docs[0].tags.value("model_name", ""));
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

}  // namespace tensorhub
