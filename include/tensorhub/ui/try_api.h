// The dashboard's try-a-model endpoint: `tensorhub ui` answers TensorFlow Serving's predict API,
//   POST /v1/models/<id>:predict   (same JSON bodies as `tensorhub serve`, rest_server.h)
// for the hub models of its project, named by their model id, so that the Try page (ui/try.js)
// talks to its own origin only. Models are loaded on first use through the serve module (a
// ModelManager with one HubSource per model, as `tensorhub serve --hub_filter '{"id": ID}'`
// loads it) and kept loaded, at most `max_loaded` of them (least recently used dropped first).
//
// Thread safety: every method may be called from many threads at once.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <string_view>

#include "tensorhub/core/mutex.h"
#include "tensorhub/serve/model_manager.h"

namespace tensorhub {

class Hub;

class TryModels {
 public:
  /// Models are read from `project` of the hub at `hub_uri` (each loaded model keeps its own
  /// connection, as HubSource does).
  TryModels(std::string hub_uri, std::string project, std::size_t max_loaded = 8);
  ~TryModels();
  TryModels(const TryModels&) = delete;
  TryModels& operator=(const TryModels&) = delete;

  /// POST /v1/models/<name>:predict: `name` is a model id of the project; `body` TF Serving's
  /// predict JSON. Returns the response body ({"predictions": ...} or {"outputs": ...}).
  /// `hub` (the caller's connection) is used to look the model up before its first load.
  /// Throws NotFound for a name that is no model id of the project, and for a model that
  /// cannot be loaded (naming why: no weights, an architecture the trainer cannot build, ...);
  /// InvalidArgument with TF Serving's messages for a malformed body or an input of the wrong
  /// shape or type.
  std::string predict(Hub& hub, const std::string& name, std::string_view body);

 private:
  std::shared_ptr<const Servable> servable(Hub& hub, const std::string& name) TENSORHUB_LOCKS_EXCLUDED(mutex_);
  void add(Hub& hub, const std::string& name) TENSORHUB_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  std::string hub_uri_, project_;
  std::size_t max_loaded_;
  Mutex mutex_;  // guards recent_ and calls to manager_ (its add/replace/poll come in turn)
  // (id, model_name), most recent first
  std::list<std::pair<std::string, std::string>> recent_ TENSORHUB_GUARDED_BY(mutex_);
  ModelManager manager_ TENSORHUB_GUARDED_BY(mutex_);
};

/// A reply to pass on as it is: HTTP status and JSON body.
struct ForwardedReply {
  int status = 200;
  std::string body;
};

/// `tensorhub ui --serve_url URL`: the Try page's predictions run on that `tensorhub serve`
/// instead of in the ui. The predict of hub model `name` (a model id of the project, looked up
/// in `hub`) goes to POST URL/v1/models/<model_name>/versions/<id>:predict, the name and version
/// under which `tensorhub serve --hub ... --hub_model <model_name>` serves it (the Models view's
/// serve command); the server's status and body come back as they are (a model it does not
/// serve: its 404 {"error"}). `serve_url` is "http://host:port" (checked by check_serve_url).
/// Throws NotFound for a name that is no model id of the project, Unavailable naming the URL
/// when the server does not answer within `timeout_s` seconds.
ForwardedReply forward_predict(Hub& hub, const std::string& serve_url, const std::string& name, std::string_view body,
                               double timeout_s = 30);

/// Throws InvalidArgument unless `url` is "http://host[:port]" with nothing after it (no path,
/// no https: the serve's REST API is plain HTTP).
void check_serve_url(const std::string& url);

}  // namespace tensorhub
