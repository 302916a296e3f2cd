// `tensorhub ui`'s HTTP server: the embedded page and the /api/ endpoints over cpp-httplib.
#include "tensorhub/ui/ui_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "tensorhub/core/bind_failure.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/log.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "assets.h"
#include "curves_api.h"
#include "dashboard_api.h"
#include "graph_api.h"
#include "projector_api.h"
#include "search_api.h"
#include "task_usage_api.h"
#include "tensorhub/ui/try_api.h"
#include "tensorhub/serve/status_codes.h"

namespace tensorhub {
namespace {

// Only the server's own files may run or load: a string from the hub that somehow reached
// the page as markup could still not run a script.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

// Hubs for request threads: a Hub is one connection, used by one thread at a time. A hub whose
// request failed is dropped (its connection may be broken); a new one is opened on demand.
class HubPool {
 public:
  /// `writable`: open the hub to be written where this user may (the dashboard's cancel).
  HubPool(std::string uri, std::string project, bool writable)
      : uri_(std::move(uri)), project_(std::move(project)), writable_(writable) {}

  template <typename F>
  auto with_hub(F body) {
    std::unique_ptr<Hub> hub = take();
    auto result = body(*hub);  // on an exception the hub is dropped, not returned
    give_back(std::move(hub));
    return result;
  }

 private:
  std::unique_ptr<Hub> take() TENSORHUB_LOCKS_EXCLUDED(mutex_) {
    {
      MutexLock lock(mutex_);
      if (!free_.empty()) {
        auto hub = std::move(free_.back());
        free_.pop_back();
        return hub;
      }
    }
    return open();
  }
  // A new connection to the dashboard's hub, never created. Read-only (OpenMode::kReadOnly), so
  // that the dashboard works on a hub its user may only read; writable where `writable` and the
  // hub allow it (a cancel on a read-only hub then says at once that it is read-only).
  std::unique_ptr<Hub> open() const {
    if (writable_) {
      try {
        return std::make_unique<Hub>(uri_, project_, OpenMode::kExisting);
      } catch (const Error& e) {
        if (!is_read_only_error(e)) throw;
      }
    }
    return std::make_unique<Hub>(uri_, project_, OpenMode::kReadOnly);
  }
  void give_back(std::unique_ptr<Hub> hub) TENSORHUB_LOCKS_EXCLUDED(mutex_) {
    MutexLock lock(mutex_);
    free_.push_back(std::move(hub));
  }

  std::string uri_, project_;
  bool writable_;
  Mutex mutex_;
  std::vector<std::unique_ptr<Hub>> free_ TENSORHUB_GUARDED_BY(mutex_);
};


// 128 random bits as hex: the token a page needs to cancel a task, new at each start.
std::string random_token() {
  std::random_device device;
  std::string token;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) token += hex[device() % 16];
  return token;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Predict bodies above this are refused (a 28x28 image as JSON floats is about 10 KiB).
constexpr std::size_t kMaxPredictBody = std::size_t{16} << 20;

// What an error reply httplib made itself means, for its {"error": ...} body.
std::string error_text(const httplib::Request& req, int status) {
  const std::string what = req.method + " " + req.path;
  if (status == 404) return "no such page or endpoint: " + what + " (see README's \"The web dashboard\" for the API)";
  if (status == 400 && req.method == "POST" && !req.has_header("Content-Length"))
    return "malformed request: " + what + " has no Content-Length header (with curl, add -d '')";
  return "HTTP " + std::to_string(status) + " for " + what;
}

// Drops "br" from the request's Accept-Encoding, so that answers are gzip-compressed (or sent
// as they are), never Brotli-compressed: cpp-httplib compresses with Brotli at its slowest
// quality, 13 s for a 5 MB series on this machine and 0.2 s for uPlot's 50 kB, where gzip
// takes 0.7 s and 5 ms.
void without_brotli(httplib::Request& req) {
  const auto it = req.headers.find("Accept-Encoding");
  if (it == req.headers.end() || it->second.find("br") == std::string::npos) return;
  std::string kept;
  for (std::size_t start = 0; start <= it->second.size();) {
    std::size_t end = it->second.find(',', start);
    if (end == std::string::npos) end = it->second.size();
    std::string coding = it->second.substr(start, end - start);
    coding.erase(0, coding.find_first_not_of(' '));
    if (coding.rfind("br", 0) != 0 && !coding.empty()) kept += (kept.empty() ? "" : ", ") + coding;
    start = end + 1;
  }
  req.headers.erase(it);
  req.headers.emplace("Accept-Encoding", kept);
}

void reply_json(httplib::Response& res, const Json& body, int status = 200) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(body.dump(), "application/json");
}

// A long poll's ?wait=S: seconds in 0..60, 25 when absent. Throws InvalidArgument.
double wait_seconds(const httplib::Request& req) {
  if (!req.has_param("wait")) return 25;
  double wait_s = 0;
  try {
    wait_s = std::stod(req.get_param_value("wait"));
  } catch (const std::exception&) {
    throw InvalidArgument("wait must be a number of seconds, got '" + req.get_param_value("wait") + "'");
  }
  if (!(wait_s >= 0 && wait_s <= 60)) throw InvalidArgument("wait must be in 0..60 seconds");
  return wait_s;
}

}  // namespace

struct UiServer::Impl {
  UiOptions options;
  HubPool hubs;
  httplib::Server server;
  std::atomic<bool> stopping{false};
  std::string cancel_token = random_token();
  int port = 0;  ///< the bound port, for the Host check
  socket_t listen_socket = INVALID_SOCKET;
  ModelIndex model_index;  ///< the project's models in memory, for /api/models' unfiltered pages
  EventRunCache event_runs;  ///< --logdir's event files, read once per change
  ProjectorCache projector;  ///< --logdir's projector embeddings, read once per change
  TryModels try_models{options.hub_uri, options.project};  ///< POST /v1/models/<id>:predict

  // Opens the hub once, so that a wrong hub fails now, not at the first request. With --logdir
  // a missing hub is no error: its runs (Curves, Projector) need none, as TensorBoard needs
  // none; the hub's views then answer that there is no hub.
  void check_hub() {
    try {
      hubs.with_hub([](Hub&) { return 0; });
    } catch (const Error& e) {
      if (options.logdir.empty() || e.kind() != ErrorKind::kNotFound) throw;
      log_warning(e.message() + "; showing --logdir's runs only (Curves, Projector)");
    }
  }

  // Runs body(&hub), or body(nullptr) when the ui has --logdir and there is no hub (yet): the
  // Curves view's logdir runs need none.
  template <typename F>
  auto with_hub_if_any(F body) {
    if (!options.logdir.empty()) {
      try {
        hubs.with_hub([](Hub&) { return 0; });
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kNotFound) throw;
        return body(nullptr);
      }
    }
    return hubs.with_hub([&](Hub& hub) { return body(&hub); });
  }

  explicit Impl(UiOptions o) : options(std::move(o)), hubs(options.hub_uri, options.project, options.allow_cancel) {
    check_hub();
    if (!options.serve_url.empty()) check_serve_url(options.serve_url);
    const auto threads = static_cast<std::size_t>(std::max(4, options.num_threads));
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.set_tcp_nodelay(true);
    // No SO_REUSEPORT (httplib's default): a second ui on the same port must fail to bind.
    server.set_socket_options([this](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      listen_socket = sock;  // the last one httplib tries is the one it binds
    });
    server.set_default_headers({{"X-Content-Type-Options", "nosniff"},
                                {"Content-Security-Policy", kContentSecurityPolicy},
                                {"Referrer-Policy", "no-referrer"}});
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      without_brotli(const_cast<httplib::Request&>(req));  // httplib's Request is not const: only its handlers' view
      if (host_allowed(req.get_header_value("Host"))) return httplib::Server::HandlerResponse::Unhandled;
      reply_json(res, {{"error", "Host '" + req.get_header_value("Host") + "' is not this dashboard's address; open http://" +
                                     options.host + ":" + std::to_string(port) + "/"}},
                 403);
      return httplib::Server::HandlerResponse::Handled;
    });
    routes();
  }

  // Bound to loopback, only loopback names may be asked for: a page of another site whose name
  // was made to resolve to 127.0.0.1 (DNS rebinding) sends its own name as Host. Bound to
  // another address (--host 0.0.0.0), people reach it under names we cannot know.
  bool host_allowed(const std::string& host_header) const {
    if (!is_loopback(options.host)) return true;
    const std::string suffix = ":" + std::to_string(port);
    for (const std::string& name : {std::string("127.0.0.1"), std::string("localhost"), std::string("[::1]"), options.host})
      if (host_header == name + suffix) return true;
    return false;
  }

  // index.html with this start's cancel token in its <meta name="tensorhub-cancel-token">
  // (empty without --allow-cancel: the page then shows no cancel buttons).
  std::string index_html() const {
    const EmbeddedFile* f = find_embedded_file("/index.html");
    std::string page(reinterpret_cast<const char*>(f->bytes.data()), f->bytes.size());
    const std::string empty = R"(<meta name="tensorhub-cancel-token" content="">)";
    if (const auto at = page.find(empty); at != std::string::npos && options.allow_cancel)
      page.replace(at, empty.size(), R"(<meta name="tensorhub-cancel-token" content=")" + cancel_token + "\">");
    return page;
  }

  // POST /api/tasks/<id>/cancel: the one change the dashboard makes, behind --allow-cancel and
  // the token.
  Json cancel_task(const httplib::Request& req, std::int64_t id, httplib::Response& res) {
    if (!options.allow_cancel) {
      res.status = 403;
      return {{"error", "cancelling is off: start tensorhub ui with --allow-cancel"}};
    }
    if (req.get_header_value("X-Tensorhub-Token") != cancel_token) {
      res.status = 403;
      return {{"error", "missing or wrong X-Tensorhub-Token: reload the dashboard (the token changes at each start)"}};
    }
    return hubs.with_hub([&](Hub& hub) {
      TaskQueue queue(hub);
      const Task task = queue.get_task(id);  // NotFound: 404
      if (task.status != TaskStatus::kPending && task.status != TaskStatus::kRunning)
        throw FailedPrecondition("task " + std::to_string(id) + " is " + to_string(task.status) +
                                 "; only pending or running tasks can be cancelled");
      queue.cancel_tasks({{"id", id}});
      return Json{{"id", id}, {"status", to_string(queue.get_task(id).status)}};
    });
  }

  // Runs `body`, turning a tensorhub Error into {"error": ...} with its kind's HTTP code.
  template <typename F>
  void guarded(httplib::Response& res, F body) {
    try {
      body();
    } catch (const Error& e) {
      reply_json(res, {{"error", e.message()}}, http_status(e.kind()));
    } catch (const std::exception& e) {
      reply_json(res, {{"error", e.what()}}, 500);
    }
  }

  // /api/tasks?since=V&wait=S: answers at once unless `since` is the current version, then
  // when the version changes or S seconds pass (the page asks again with the new version).
  Json wait_for_tasks(const std::string& since, double wait_s) {
    return hubs.with_hub([&](Hub& hub) {
      TaskQueue queue(hub);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
      for (;;) {
        Json tasks = tasks_json(hub);
        if (since.empty() || tasks["version"] != since || stopping || std::chrono::steady_clock::now() >= deadline)
          return tasks;
        queue.wait_for_change(0.2);
      }
    });
  }

  // The Curves view's endpoints (curves_api.h).
  void curves_routes() {
    server.Get("/api/runs", [this](const httplib::Request&, httplib::Response& res) {
      guarded(res, [&] { reply_json(res, with_hub_if_any([&](Hub* hub) { return runs_json(hub, options.logdir, event_runs); })); });
    });
    server.Get("/api/scalars", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const auto p = [&](const char* k) { return req.get_param_value(k); };
        const SeriesQuery q = parse_series_query(p("source"), p("run"), p("tag"), p("x"), p("width"), p("reduce"), p("smoothing"));
        const auto points = with_hub_if_any([&](Hub* hub) { return load_series(hub, options.logdir, event_runs, q.source, q.run, q.tag); });
        reply_json(res, scalars_json(points, q));
      });
    });
    server.Get("/api/scalars.csv", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const auto p = [&](const char* k) { return req.get_param_value(k); };
        const SeriesQuery q = parse_series_query(p("source"), p("run"), p("tag"), "", "", "", "");
        const auto points = with_hub_if_any([&](Hub* hub) { return load_series(hub, options.logdir, event_runs, q.source, q.run, q.tag); });
        std::string name = q.run + "-" + q.tag + ".csv";
        for (char& c : name)
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
        res.set_header("Content-Disposition", "attachment; filename=\"" + name + "\"");
        res.set_content(scalars_csv(points), "text/csv; charset=utf-8");
      });
    });
    server.Get("/api/histograms", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        if (req.get_param_value("run").empty() || req.get_param_value("tag").empty())
          throw InvalidArgument("run and tag are required (see /api/runs)");
        reply_json(res, histograms_json(options.logdir, event_runs, req.get_param_value("run"), req.get_param_value("tag")));
      });
    });
  }

  // The Projector view's endpoints (projector_api.h): ?run= a projector run, ?tensor= an
  // embedding's tensor_name (default: the first).
  void projector_routes() {
    server.Get("/api/projector", [this](const httplib::Request&, httplib::Response& res) {
      guarded(res, [&] { reply_json(res, projector_runs_json(options.logdir)); });
    });
    server.Get(R"(/api/projector/(embedding|tensor|sprite))", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const std::string run = req.get_param_value("run"), what = req.matches[1];
        if (run.empty()) throw InvalidArgument("run is required (see /api/projector)");
        const auto embeddings = projector.get(options.logdir, run);
        const LoadedEmbedding& e = find_embedding(*embeddings, req.get_param_value("tensor"));
        res.set_header("Cache-Control", "no-store");
        if (what == "embedding") {
          reply_json(res, projector_embedding_json(run, *embeddings, e));
        } else if (what == "tensor") {
          res.set_content(projector_tensor_bytes(e), "application/octet-stream");
        } else {
          const auto bytes = read_file_bytes(projector_sprite_path(options.logdir, run, e));
          res.set_content(reinterpret_cast<const char*>(bytes.data()), bytes.size(), "image/png");
        }
      });
    });
  }

  // /api/searches/<name>?since=V&wait=S: as /api/tasks, answers at once unless `since` is
  // the search's current version, then when it changes (its tasks: the queue's wait/notify;
  // its epoch reports: read again every 0.5 s) or S seconds pass.
  Json wait_for_search(const std::string& name, const std::string& since, double wait_s) {
    return hubs.with_hub([&](Hub& hub) {
      TaskQueue queue(hub);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
      for (;;) {
        Json search = search_json(hub, name);
        if (since.empty() || search["version"] != since || stopping || std::chrono::steady_clock::now() >= deadline)
          return search;
        queue.wait_for_change(0.5);
      }
    });
  }

  // The Searches and Hyperparameters views' endpoints (search_api.h).
  void search_routes() {
    server.Get("/api/searches", [this](const httplib::Request&, httplib::Response& res) {
      guarded(res, [&] { reply_json(res, hubs.with_hub([](Hub& hub) { return searches_json(hub); })); });
    });
    // The rest of the path: a search's name may hold "/" (its %2F is decoded before routing).
    server.Get(R"(/api/searches/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const double wait_s = wait_seconds(req);
        reply_json(res, wait_for_search(req.matches[1], req.get_param_value("since"), wait_s));
      });
    });
    server.Get("/api/hparams", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        reply_json(res, hubs.with_hub([&](Hub& hub) { return hparams_json(hub, req.get_param_value("search")); }));
      });
    });
  }

  // In the order httplib tries them: the first route that matches answers.
  void routes() {
    project_and_task_routes();
    model_routes();
    predict_route();
    curves_routes();
    projector_routes();
    search_routes();
    fallback_routes();
  }

  void project_and_task_routes() {
    server.Get("/api/projects", [this](const httplib::Request&, httplib::Response& res) {
      guarded(res, [&] { reply_json(res, hubs.with_hub([](Hub& hub) { return projects_json(hub); })); });
    });
    server.Get("/api/tasks", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        reply_json(res, wait_for_tasks(req.get_param_value("since"), wait_seconds(req)));
      });
    });
    // A task's detail: what each attempt used beside its epoch reports (task_usage_api.h).
    server.Get(R"(/api/tasks/(\d{1,18})/usage)", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const std::int64_t id = std::stoll(req.matches[1]);
        reply_json(res, hubs.with_hub([&](Hub& hub) { return task_usage_json(hub, id); }));
      });
    });
    server.Post(R"(/api/tasks/(\d{1,18})/cancel)", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        Json body = cancel_task(req, std::stoll(req.matches[1]), res);
        reply_json(res, body, res.status == -1 ? 200 : res.status);
      });
    });
  }

  void model_routes() {
    server.Get("/api/models", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const ModelQuery q = parse_model_query(req.get_param_value("filter"), req.get_param_value("sort"),
                                               req.get_param_value("offset"), req.get_param_value("limit"));
        reply_json(res, hubs.with_hub([&](Hub& hub) { return models_json(hub, q, &model_index); }));
      });
    });
    server.Get(R"(/api/models/(\d{1,18}))", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const std::int64_t id = std::stoll(req.matches[1]);
        reply_json(res, hubs.with_hub([&](Hub& hub) { return model_json(hub, id); }));
      });
    });
    // The Graph view (graph_api.h): layers and totals, and one layer's weight histograms.
    server.Get(R"(/api/models/(\d{1,18})/graph)", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const std::int64_t id = std::stoll(req.matches[1]);
        reply_json(res, hubs.with_hub([&](Hub& hub) { return graph_json(hub, id, options.logdir); }));
      });
    });
    server.Get(R"(/api/models/(\d{1,18})/layers/([A-Za-z0-9_.-]{1,200})/histograms)",
               [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const std::int64_t id = std::stoll(req.matches[1]);
        const std::string layer = req.matches[2];
        reply_json(res, hubs.with_hub([&](Hub& hub) {
          return layer_histograms_json(hub, id, layer, options.logdir, event_runs);
        }));
      });
    });
    server.Get(R"(/api/models/(\d{1,18})/(model\.json|weights\.safetensors))",
               [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const std::int64_t id = std::stoll(req.matches[1]);
        const std::string part = req.matches[2];
        const auto bytes = hubs.with_hub([&](Hub& hub) { return model_part(hub, id, part); });
        const bool json = part == "model.json";
        res.set_header("Content-Disposition", "attachment; filename=\"model-" + std::to_string(id) +
                                                  (json ? ".json" : ".safetensors") + "\"");
        res.set_content(reinterpret_cast<const char*>(bytes.data()), bytes.size(),
                        json ? "application/json" : "application/octet-stream");
      });
    });
  }

  void predict_route() {
    // The try-a-model page's predict calls: TF Serving's predict API for the project's models
    // by id. A content reader takes the body whatever its Content-Type (`curl -d` sends a form
    // type, which httplib would otherwise refuse over 8 KiB), as tensorhub serve does.
    server.Post(R"(/v1/models/([^/:]+):predict)", [this](const httplib::Request& req, httplib::Response& res,
                                                         const httplib::ContentReader& reader) {
      std::string body;
      // No Content-Length nor Transfer-Encoding: no body (RFC 9112 section 6.3), not a wait for
      // one until httplib's read timeout.
      const bool has_body = req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
      const bool read = !has_body || reader([&](const char* data, std::size_t n) {
        body.append(data, n);
        return body.size() <= kMaxPredictBody;
      });
      guarded(res, [&] {
        if (!read) throw InvalidArgument("the predict body is larger than 16 MiB, or could not be read");
        const ForwardedReply answer = hubs.with_hub([&](Hub& hub) {
          if (!options.serve_url.empty()) return forward_predict(hub, options.serve_url, req.matches[1], body);
          return ForwardedReply{200, try_models.predict(hub, req.matches[1], body)};
        });
        res.status = answer.status;
        res.set_header("Cache-Control", "no-store");
        res.set_content(answer.body, "application/json");
      });
    });
  }

  // Unknown API paths, httplib's own error replies, and the page's embedded files.
  void fallback_routes() {
    server.Get("/api/.*", [](const httplib::Request& req, httplib::Response& res) {
      reply_json(res, {{"error", "no API endpoint " + req.path + " (see README: /api/projects, /api/tasks, /api/tasks/<id>/usage, "
                                 "/api/models, /api/models/<id>, /api/models/<id>/graph, /api/models/<id>/layers/<name>/histograms, /api/runs, /api/scalars, /api/scalars.csv, /api/histograms, /api/projector, "
                                 "/api/searches, /api/searches/<name>, /api/hparams)"}},
                 404);
    });
    // Replies httplib makes itself (no route for a POST, a POST without Content-Length) would
    // have an empty body: README promises {"error": ...} for every failed request.
    server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      reply_json(res, {{"error", error_text(req, res.status)}}, res.status);
    });
    server.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/" || req.path == "/index.html") {
        res.set_header("Cache-Control", "no-store");  // it holds this start's token
        res.set_content(index_html(), "text/html; charset=utf-8");
        return;
      }
      const EmbeddedFile* f = find_embedded_file(req.path);
      if (!f) {
        reply_json(res, {{"error", error_text(req, 404)}}, 404);
        return;
      }
      res.set_content(reinterpret_cast<const char*>(f->bytes.data()), f->bytes.size(), std::string(f->content_type).c_str());
    });
  }
};

UiServer::UiServer(UiOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

UiServer::~UiServer() = default;

int UiServer::bind() {
  const auto& o = impl_->options;
  const int port = o.port == 0 ? impl_->server.bind_to_any_port(o.host)
                               : (impl_->server.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port <= 0) throw Unavailable(bind_failure(o.host, o.port, "--host", "--port"));
  // cpp-httplib 0.11's compiled-in listen backlog is 5: a page opening a dozen requests at once
  // with other clients would have handshakes dropped and retried 0.2-1 s later (the REST
  // server's fix, rest_server.cpp). listen() again sets it; the kernel caps it at somaxconn.
  if (::listen(impl_->listen_socket, 4096) != 0)
    throw Unavailable("cannot listen on " + o.host + ":" + std::to_string(port) + ": " + std::strerror(errno));
  impl_->port = port;
  return port;
}

void UiServer::run() { impl_->server.listen_after_bind(); }

void UiServer::stop() {
  impl_->stopping = true;
  impl_->server.stop();
}

}  // namespace tensorhub
