// `tensorhub ui`'s HTTP server: the embedded page and the /api/ endpoints on HttpServer.
// Routing is ours (exact paths and small parsers); the page and the files answer from memory
// on the event loop, everything that reads the hub or a file runs on the worker pool, and a
// long poll that has to wait is parked in LongPolls.
#include "tensorhub/ui/ui_server.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/core/log.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/core/thread_pool.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/lineage.h"
#include "tensorhub/store/model_aliases.h"
#include "tensorhub/store/users.h"
#include "tensorhub/core/secure_random.h"
#include "assets.h"
#include "auth.h"
#include "curves_api.h"
#include "dashboard_api.h"
#include "graph_api.h"
#include "http_reply.h"
#include "long_polls.h"
#include "projector_api.h"
#include "search_api.h"
#include "task_usage_api.h"
#include "tensorhub/ui/try_api.h"

namespace tensorhub {
namespace {

// Only the server's own files may run or load: a string from the hub that somehow reached
// the page as markup could still not run a script.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

// Request bodies above this are refused with 413 by the engine (a 28x28 image as JSON floats
// is about 10 KiB; the predict body is the only one the dashboard reads).
constexpr std::size_t kMaxBody = std::size_t{16} << 20;

// Hubs for the workers: a Hub is one connection, used by one thread at a time. A hub whose
// request failed is dropped (its connection may be broken); a new one is opened on demand.
class HubPool {
 public:
  /// `writable`: open the hub to be written where this user may (the dashboard's cancel).
  HubPool(std::string uri, std::string project, bool writable)
      : uri_(std::move(uri)), project_(std::move(project)), writable_(writable) {}

  /// Whether hubs opened from now on are opened to be written (the logins decide it: editors
  /// write). Hubs already open are dropped as they come back, so that the next request opens one
  /// the new way.
  void set_writable(bool writable) TENSORHUB_LOCKS_EXCLUDED(mutex_) {
    MutexLock lock(mutex_);
    writable_ = writable;
    ++generation_;
    free_.clear();
  }

  template <typename F>
  auto with_hub(F body) {
    auto [hub, generation] = take();
    auto result = body(*hub);  // on an exception the hub is dropped, not returned
    give_back(std::move(hub), generation);
    return result;
  }

  /// A new connection to the dashboard's hub, never created: the one place the dashboard opens
  /// its hub. Read-only (OpenMode::kReadOnly), so that the dashboard works on a hub its user may
  /// only read; writable where `writable` and the hub allow it (a cancel on a read-only hub
  /// then says at once that it is read-only). Throws what Hub's constructor throws.
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

 private:
  // A hub and the generation (set_writable calls) it was opened in.
  std::pair<std::unique_ptr<Hub>, int> take() TENSORHUB_LOCKS_EXCLUDED(mutex_) {
    int generation = 0;
    {
      MutexLock lock(mutex_);
      generation = generation_;
      if (!free_.empty()) {
        auto hub = std::move(free_.back());
        free_.pop_back();
        return {std::move(hub), generation};
      }
    }
    return {open(), generation};
  }
  void give_back(std::unique_ptr<Hub> hub, int generation) TENSORHUB_LOCKS_EXCLUDED(mutex_) {
    MutexLock lock(mutex_);
    if (generation == generation_) free_.push_back(std::move(hub));
  }

  std::string uri_, project_;
  std::atomic<bool> writable_;
  Mutex mutex_;
  int generation_ TENSORHUB_GUARDED_BY(mutex_) = 0;
  std::vector<std::unique_ptr<Hub>> free_ TENSORHUB_GUARDED_BY(mutex_);
};

// 128 random bits as hex (OpenSSL's CSPRNG): the token a page needs to cancel a task without
// logins, new at each start.
std::string random_token() { return secure_random_hex(16); }

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The path with its %XX escapes decoded (RFC 3986 section 2.1; '+' is no space in a path):
// routes match decoded paths, so that a search named "a/b" (sent as a%2Fb) is one name.
// A '%' not followed by two hex digits stays as it is.
std::string decode_path(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size() && hex_value(path[i + 1]) >= 0 && hex_value(path[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(path[i + 1]) * 16 + hex_value(path[i + 2]));
      i += 2;
    } else {
      out += path[i];
    }
  }
  return out;
}

// A query parameter's decoded value, "" when absent (as the API has always read them).
std::string param(const HttpRequest& req, std::string_view name) { return req.query_param(name).value_or(""); }

// A long poll's ?wait=S: seconds in 0..60, 25 when absent. Throws InvalidArgument.
double wait_seconds(const HttpRequest& req) {
  const auto text = req.query_param("wait");
  if (!text) return 25;
  double wait_s = 0;
  try {
    wait_s = std::stod(*text);
  } catch (const std::exception&) {
    throw InvalidArgument("wait must be a number of seconds, got '" + *text + "'");
  }
  if (!(wait_s >= 0 && wait_s <= 60)) throw InvalidArgument("wait must be in 0..60 seconds");
  return wait_s;
}

// Removes `prefix` from the front of `s`; false (s unchanged) when s does not start with it.
bool take_prefix(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Takes a decimal id of 1 to 18 digits from the front of `s` (an id the API accepts).
std::optional<std::int64_t> take_id(std::string_view& s) {
  std::size_t n = 0;
  while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n]))) ++n;
  if (n == 0 || n > 18) return std::nullopt;
  const std::int64_t id = std::stoll(std::string(s.substr(0, n)));
  s.remove_prefix(n);
  return id;
}

// A layer name as the histograms endpoint takes it: [A-Za-z0-9_.-]{1,200}.
bool is_layer_name(std::string_view s) {
  if (s.empty() || s.size() > 200) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

HttpResponse bytes_response(std::string body, std::string content_type) {
  HttpResponse r;
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  return r;
}

std::string as_string(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Who sent a request, as the auth check found it (auth.h); empty without logins.
struct Caller {
  std::string user;                ///< "" without logins
  std::optional<UserRole> role;    ///< none without logins
  bool by_session = false;         ///< by the session cookie (not a Bearer token)
};

// What a worker runs for one request: its answer, or nullopt when the request was parked (a
// long poll) and is answered later. May throw: the error becomes {"error": ...}.
using Work = std::function<std::optional<HttpResponse>(const HttpResponder&, const Caller&)>;
using RequestPtr = std::shared_ptr<const HttpRequest>;

// An embedded file as served: its bytes, and their gzip stream when worth sending.
struct Asset {
  std::string content_type;
  std::string body;
  std::string gzipped;  ///< "" when not worth compressing
  bool no_store = false;

  HttpResponse for_client(bool gzip) const {
    HttpResponse r;
    r.content_type = content_type;
    if (no_store) r.headers.emplace_back("Cache-Control", "no-store");
    if (gzip && !gzipped.empty()) {
      r.body = gzipped;
      r.headers.emplace_back("Content-Encoding", "gzip");
      r.headers.emplace_back("Vary", "Accept-Encoding");
    } else {
      r.body = body;
    }
    return r;
  }
};

Asset make_asset(std::string content_type, std::string body, bool no_store) {
  Asset a{std::move(content_type), std::move(body), "", no_store};
  HttpResponse probe;
  probe.content_type = a.content_type;
  probe.body = a.body;
  if (worth_gzip(probe)) a.gzipped = gzip_bytes(a.body);
  return a;
}

}  // namespace

struct UiServer::Impl {
  UiOptions options;
  HubPool hubs;
  std::string cancel_token = random_token();
  int port = 0;  ///< the bound port, for the Host check
  /// Logins on: the hub has (or once had, since this start) users and no --insecure-no-auth
  /// (decide_auth at start, logins_on() after). Never turned off again: deleting every user
  /// must not open a shared dashboard.
  std::atomic<bool> auth{false};
  std::atomic<std::int64_t> next_users_check_ns{0};  ///< steady clock: logins_on()'s next look
  Sessions sessions;        ///< logged-in browsers (auth.h)
  LoginLimiter logins{options.login_burst, std::chrono::seconds(options.login_window_s)};
  ModelIndex model_index;  ///< the project's models in memory, for /api/models' unfiltered pages
  EventRunCache event_runs;  ///< --logdir's event files, read once per change
  ProjectorCache projector;  ///< --logdir's projector embeddings, read once per change
  TryModels try_models{options.hub_uri, options.project};  ///< POST /v1/models/<id>:predict
  std::map<std::string, Asset, std::less<>> assets;  ///< by URL path; "/" and "/index.html": the page
  std::atomic<bool> closing{false};  ///< set when destroyed: queued work is skipped
  // Destroyed in ~Impl in this order: the server, then the workers (which may still park a
  // poll), then the watcher.
  std::unique_ptr<LongPolls> polls;
  std::unique_ptr<ThreadPool> workers;
  std::unique_ptr<HttpServer> http;

  explicit Impl(UiOptions o) : options(std::move(o)), hubs(options.hub_uri, options.project, false) {
    auth = decide_auth();
    hubs.set_writable(options.allow_cancel || auth);  // editors cancel tasks and move aliases
    check_hub();
    if (!options.serve_url.empty()) check_serve_url(options.serve_url);
    load_assets();
    polls = std::make_unique<LongPolls>([this] { return hubs.open(); },
                                        [](Hub& hub, const std::string& topic) {
                                          return topic.empty() ? tasks_json(hub) : search_json(hub, topic);
                                        });
    workers = std::make_unique<ThreadPool>(static_cast<std::size_t>(std::max(4, options.num_threads)));
    http = std::make_unique<HttpServer>(server_options(), [this](HttpRequest req, HttpResponder res) {
      handle(std::move(req), std::move(res));
    });
  }

  ~Impl() {
    polls->stop();
    http.reset();  // stops (grace 0) and waits for run() if it still runs
    closing = true;
    workers.reset();  // queued work is skipped (closing), running work finishes
    polls.reset();
  }

  // The engine's options: the deadlines and caps of options.http, the rest the dashboard's.
  HttpServer::Options server_options() const {
    HttpServer::Options o = options.http;
    o.host = options.host;
    o.port = options.port;
    o.host_flag = "--host";
    o.port_flag = "--port";
    o.max_body_bytes = kMaxBody;
    o.too_large_reason = "the request body is larger than the dashboard's limit of 16 MiB";
    o.error_body = nullptr;  // {"error": reason}
    o.tls_cert_file = options.tls_cert;
    o.tls_key_file = options.tls_key;
    o.default_headers = {{"X-Content-Type-Options", "nosniff"},
                         {"Content-Security-Policy", kContentSecurityPolicy},
                         {"Referrer-Policy", "no-referrer"}};
    return o;
  }

  // Logins are on when the hub has users (tensorhub user add), unless --insecure-no-auth. A
  // dashboard for other machines (not bound to loopback) without them would show the hub to
  // anyone who reaches the port: refused unless --insecure-no-auth says so.
  bool decide_auth() {
    if (options.insecure_no_auth) return false;
    std::int64_t users = 0;
    try {
      users = count_users(*hubs.open());  // a hub of its own: the pool's first stays unopened
    } catch (const Error& e) {
      if (options.logdir.empty() || e.kind() != ErrorKind::kNotFound) throw;
    }
    if (users == 0 && !is_loopback(options.host))
      throw FailedPrecondition("tensorhub ui --host " + options.host +
                               " would show the hub to everyone who reaches this machine, and its hub has no users: "
                               "add one (`tensorhub user add NAME --role editor`, which prints the token to log in "
                               "with), or give --insecure-no-auth to serve it without logins");
    return users > 0;
  }

  // Whether this request needs a login. A dashboard started without users turns logins on
  // once its hub has one (`tensorhub user add` while it runs), looking at most once a second,
  // so that sharing it needs no restart; one query a second costs nothing next to the requests.
  bool logins_on() {
    if (auth) return true;
    if (options.insecure_no_auth) return false;
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
    std::int64_t next = next_users_check_ns;
    if (now < next || !next_users_check_ns.compare_exchange_strong(next, now + 1'000'000'000)) return auth;
    try {
      if (hubs.with_hub([](Hub& hub) { return count_users(hub); }) == 0) return false;
    } catch (const Error&) {
      return auth;  // no hub (--logdir alone) or a broken connection: asked again in a second
    }
    hubs.set_writable(true);  // editors write
    auth = true;
    log_info("logins on: the hub has users now (`tensorhub user list`); every request needs a login from here on");
    return true;
  }

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

  // The embedded files, compressed once at start (a few hundred KB: milliseconds), and the
  // page with this start's cancel token in its <meta name="tensorhub-cancel-token"> (empty
  // without --allow-cancel, and with logins, where the page asks /api/session what its user
  // may do).
  void load_assets() {
    for (const EmbeddedFile& f : embedded_files()) {
      const std::string bytes(reinterpret_cast<const char*>(f.bytes.data()), f.bytes.size());
      assets.emplace(std::string(f.path), make_asset(std::string(f.content_type), bytes, false));
    }
    const EmbeddedFile* f = find_embedded_file("/index.html");
    if (!f) return;
    std::string page(reinterpret_cast<const char*>(f->bytes.data()), f->bytes.size());
    const std::string empty = R"(<meta name="tensorhub-cancel-token" content="">)";
    if (const auto at = page.find(empty); at != std::string::npos && options.allow_cancel && !auth)
      page.replace(at, empty.size(), R"(<meta name="tensorhub-cancel-token" content=")" + cancel_token + "\">");
    Asset index = make_asset("text/html; charset=utf-8", page, true);  // no-store: it holds this start's token
    assets["/"] = index;
    assets["/index.html"] = std::move(index);
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

  static HttpResponse not_found(const HttpRequest& req, const std::string& path) {
    return json_response({{"error", "no such page or endpoint: " + req.method + " " + path +
                                        " (see README's \"The web dashboard\" for the API)"}},
                         404);
  }

  // On the loop: the Host check, then the page and files from memory, or the route's work
  // handed to a worker.
  void handle(HttpRequest request, HttpResponder responder) {
    const std::string host = request.header("Host").value_or("");
    if (!host_allowed(host)) {
      responder.send(json_response({{"error", "Host '" + host + "' is not this dashboard's address; open http://" +
                                                  options.host + ":" + std::to_string(port) + "/"}},
                                   403));
      return;
    }
    const std::string path = decode_path(request.path);
    const bool get = request.method == "GET" || request.method == "HEAD";
    const bool gzip = accepts_gzip(request);
    if (get && path.rfind("/api/", 0) != 0) {
      const auto it = assets.find(path);
      responder.send(it == assets.end() ? not_found(request, path) : it->second.for_client(gzip));
      return;
    }
    auto req = std::make_shared<const HttpRequest>(std::move(request));
    Work work = session_route(req, path);
    const bool open_route = static_cast<bool>(work);  // login, logout, session: no login needed
    if (!work) work = get ? get_route(req, path) : req->method == "POST" ? post_route(req, path) : nullptr;
    if (!work) {
      responder.send(get ? json_response({{"error", "no API endpoint " + path + kEndpointList}}, 404) : not_found(*req, path));
      return;
    }
    const bool editor_only = !get && (path.ends_with("/cancel") || path.ends_with("/alias"));
    workers->submit([this, req, work = std::move(work), responder, gzip, open_route, editor_only] {
      if (closing || responder.abandoned()) return;  // nobody to answer: skip the query
      std::optional<HttpResponse> answer;
      try {
        Caller caller;
        if (!open_route && logins_on()) answer = check_caller(*req, editor_only, caller);
        if (!answer) answer = work(responder, caller);
      } catch (...) {
        answer = current_error_response();
      }
      if (!answer) return;  // parked: LongPolls answers
      try {
        gzip_response(*answer, gzip);
      } catch (...) {
        // zlib failed: send it as it is
      }
      responder.send(std::move(*answer));
    });
  }

  // ---- Logins (auth.h) ----

  static HttpResponse refusal(int status, const std::string& why) {
    HttpResponse r = json_response({{"error", why}, {"login", status == 401}}, status);
    return r;
  }

  static HttpResponse too_many(int retry_after_s) {
    HttpResponse r = json_response({{"error", "too many failed logins from this address: try again in " +
                                                  std::to_string(retry_after_s) + " s"}},
                                   429);
    r.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
    return r;
  }

  std::optional<HubUser> user_of_token_hash(const std::string& hash) {
    return hubs.with_hub([&](Hub& hub) { return find_user_by_token_sha256(hub, hash); });
  }

  // Who sent `req`: a Bearer token or a session cookie, the user looked up in the hub now (a
  // deleted user is refused at once). A refusal (401, 403, 429) when it may not do this: a
  // POST by cookie needs the session's CSRF token, cancels and alias moves an editor.
  std::optional<HttpResponse> check_caller(const HttpRequest& req, bool editor_only, Caller& caller) {
    std::optional<Session> session;
    std::string session_id;
    if (const auto token = bearer_token(req)) {  // another scheme: the session cookie decides
      if (const auto wait = logins.retry_after(req.remote)) return too_many(*wait);
      const auto user = user_of_token_hash(token_sha256(*token));
      if (!user) {
        logins.failed(req.remote);
        return refusal(401, "the Authorization token is wrong or was revoked (`tensorhub user list`)");
      }
      caller = {user->name, user->role, false};
    } else {
      session_id = request_cookie(req, kSessionCookie).value_or("");
      session = session_id.empty() ? std::nullopt : sessions.find(session_id);
      if (!session)
        return refusal(401, "log in: this dashboard needs a user's token (`tensorhub user add NAME`); scripts send "
                            "`Authorization: Bearer thu_...`");
      const auto user = user_of_token_hash(session->token_sha256);
      if (!user) {
        sessions.remove(session_id);
        return refusal(401, "user \"" + session->user + "\" was deleted or given a new token: log in again");
      }
      caller = {user->name, user->role, true};
    }
    const bool mutating = req.method != "GET" && req.method != "HEAD";
    if (mutating && caller.by_session) {
      const auto origin = req.header("Origin");
      const std::string scheme = tls() ? "https://" : "http://";
      if (origin && *origin != scheme + req.header("Host").value_or(""))
        return refusal(403, "cross-site request refused: Origin " + *origin + " is not this dashboard");
      if (!constant_time_equal(req.header("X-CSRF-Token").value_or(""), session->csrf_token))
        return refusal(403, "cross-site request refused: missing or wrong X-CSRF-Token (reload the dashboard)");
    }
    if (editor_only && caller.role != UserRole::kEditor)
      return refusal(403, "user \"" + caller.user + "\" is a viewer: cancelling tasks and moving aliases needs an "
                          "editor (`tensorhub user delete " + caller.user + "`, then `user add " + caller.user +
                          " --role editor`)");
    return std::nullopt;
  }

  bool tls() const { return !options.tls_cert.empty(); }

  // POST /api/login {"token"}, POST /api/logout, GET /api/session: the page's login, on any
  // dashboard (without logins /api/session says so).
  Work session_route(const RequestPtr& req, const std::string& path) {
    if (path == "/api/session" && (req->method == "GET" || req->method == "HEAD"))
      return [this, req](const HttpResponder&, const Caller&) { return session_json(*req); };
    if (req->method != "POST") return nullptr;
    if (path == "/api/login") return [this, req](const HttpResponder&, const Caller&) { return login(*req); };
    if (path == "/api/logout")
      return [this, req](const HttpResponder&, const Caller&) {
        if (const auto id = request_cookie(*req, kSessionCookie)) sessions.remove(*id);
        HttpResponse r = json_response({{"logged_out", true}});
        r.headers.emplace_back("Set-Cookie", session_cookie("", 0, tls()));
        return r;
      };
    return nullptr;
  }

  HttpResponse session_json(const HttpRequest& req) {
    if (!logins_on()) return json_response({{"auth", false}, {"cancel", options.allow_cancel}});
    Caller caller;
    if (auto refused = check_caller(req, false, caller)) return *refused;
    Json out = {{"auth", true}, {"user", caller.user}, {"role", to_string(*caller.role)}};
    if (caller.by_session)
      if (const auto s = sessions.find(request_cookie(req, kSessionCookie).value_or(""))) out["csrf_token"] = s->csrf_token;
    return json_response(out);
  }

  HttpResponse login(const HttpRequest& req) {
    if (!logins_on()) return json_response({{"error", "this dashboard has no logins (its hub has no users)"}}, 400);
    if (const auto wait = logins.retry_after(req.remote)) return too_many(*wait);
    const Json body = Json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("token") || !body["token"].is_string())
      return json_response({{"error", R"(malformed login: the body is {"token": "thu_..."})"}}, 400);
    const std::string hash = token_sha256(body["token"].get<std::string>());
    const auto user = user_of_token_hash(hash);
    if (!user) {
      logins.failed(req.remote);
      return refusal(401, "wrong or revoked token");
    }
    const auto [id, session] = sessions.create(user->name, hash);
    HttpResponse r = json_response(
        {{"auth", true}, {"user", user->name}, {"role", to_string(user->role)}, {"csrf_token", session.csrf_token}});
    r.headers.emplace_back("Set-Cookie", session_cookie(id, sessions.lifetime().count(), tls()));
    return r;
  }

  static constexpr const char* kEndpointList =
      " (see README: /api/projects, /api/tasks, /api/tasks/<id>/usage, /api/models, /api/models/<id>, "
      "/api/models/<id>/graph, /api/models/<id>/layers/<name>/histograms, /api/runs, /api/scalars, /api/scalars.csv, "
      "/api/histograms, /api/projector, /api/searches, /api/searches/<name>, /api/hparams)";

  // The GET endpoints under /api/: the work of the one `path` names, or null.
  Work get_route(const RequestPtr& req, const std::string& path) {
    std::string_view p = path;
    if (!take_prefix(p, "/api/")) return nullptr;
    if (Work w = task_route(req, p)) return w;
    if (Work w = model_route(req, p)) return w;
    if (Work w = curves_route(req, p)) return w;
    if (Work w = projector_route(req, p)) return w;
    return search_route(req, p);
  }

  Work task_route(const RequestPtr& req, std::string_view p) {
    if (p == "projects")
      return [this](const HttpResponder&, const Caller&) { return json_response(hubs.with_hub([](Hub& hub) { return projects_json(hub); })); };
    if (p == "tasks") return [this, req](const HttpResponder& r, const Caller&) { return poll(*req, r, ""); };
    // A task's detail: what each attempt used beside its epoch reports (task_usage_api.h).
    if (!take_prefix(p, "tasks/")) return nullptr;
    const auto id = take_id(p);
    if (!id || p != "/usage") return nullptr;
    return [this, id = *id](const HttpResponder&, const Caller&) {
      return json_response(hubs.with_hub([&](Hub& hub) { return task_usage_json(hub, id); }));
    };
  }

  Work model_route(const RequestPtr& req, std::string_view p) {
    if (p == "models")
      return [this, req](const HttpResponder&, const Caller&) {
        const ModelQuery q = parse_model_query(param(*req, "filter"), param(*req, "sort"), param(*req, "offset"),
                                               param(*req, "limit"));
        return json_response(hubs.with_hub([&](Hub& hub) { return models_json(hub, q, &model_index); }));
      };
    if (!take_prefix(p, "models/")) return nullptr;
    const auto id_or_none = take_id(p);
    if (!id_or_none) return nullptr;
    const std::int64_t id = *id_or_none;
    if (p.empty())
      return [this, id](const HttpResponder&, const Caller&) { return json_response(hubs.with_hub([&](Hub& hub) { return model_json(hub, id); })); };
    // The Graph view (graph_api.h): layers and totals, and one layer's weight histograms.
    if (p == "/graph")
      return [this, id](const HttpResponder&, const Caller&) {
        return json_response(hubs.with_hub([&](Hub& hub) { return graph_json(hub, id, options.logdir); }));
      };
    if (p == "/model.json" || p == "/weights.safetensors") return [this, id, part = std::string(p.substr(1))](const HttpResponder&, const Caller&) {
      return model_file(id, part);
    };
    if (!take_prefix(p, "/layers/") || p.size() < 11 || p.substr(p.size() - 11) != "/histograms") return nullptr;
    const std::string layer(p.substr(0, p.size() - 11));
    if (!is_layer_name(layer)) return nullptr;
    return [this, id, layer](const HttpResponder&, const Caller&) {
      return json_response(
          hubs.with_hub([&](Hub& hub) { return layer_histograms_json(hub, id, layer, options.logdir, event_runs); }));
    };
  }

  // GET /api/models/<id>/{model.json,weights.safetensors}: a model's stored part, downloaded.
  HttpResponse model_file(std::int64_t id, const std::string& part) {
    const auto bytes = hubs.with_hub([&](Hub& hub) { return model_part(hub, id, part); });
    const bool json = part == "model.json";
    HttpResponse r = bytes_response(as_string(bytes), json ? "application/json" : "application/octet-stream");
    r.headers.emplace_back("Content-Disposition", "attachment; filename=\"model-" + std::to_string(id) +
                                                      (json ? ".json" : ".safetensors") + "\"");
    return r;
  }

  // The Curves view's endpoints (curves_api.h).
  Work curves_route(const RequestPtr& req, std::string_view p) {
    if (p == "runs")
      return [this](const HttpResponder&, const Caller&) {
        return json_response(with_hub_if_any([&](Hub* hub) { return runs_json(hub, options.logdir, event_runs); }));
      };
    if (p == "scalars" || p == "scalars.csv")
      return [this, req, csv = p == "scalars.csv"](const HttpResponder&, const Caller&) { return scalars(*req, csv); };
    if (p == "histograms")
      return [this, req](const HttpResponder&, const Caller&) {
        if (param(*req, "run").empty() || param(*req, "tag").empty())
          throw InvalidArgument("run and tag are required (see /api/runs)");
        return json_response(histograms_json(options.logdir, event_runs, param(*req, "run"), param(*req, "tag")));
      };
    return nullptr;
  }

  // GET /api/scalars (a series reduced for the chart) and /api/scalars.csv (all of it).
  HttpResponse scalars(const HttpRequest& req, bool csv) {
    const auto p = [&](const char* k) { return param(req, k); };
    const SeriesQuery q = csv ? parse_series_query(p("source"), p("run"), p("tag"), "", "", "", "")
                              : parse_series_query(p("source"), p("run"), p("tag"), p("x"), p("width"), p("reduce"), p("smoothing"));
    const auto points = with_hub_if_any([&](Hub* hub) { return load_series(hub, options.logdir, event_runs, q.source, q.run, q.tag); });
    if (!csv) return json_response(scalars_json(points, q));
    std::string name = q.run + "-" + q.tag + ".csv";
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
    HttpResponse r = bytes_response(scalars_csv(points), "text/csv; charset=utf-8");
    r.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + name + "\"");
    return r;
  }

  // The Projector view's endpoints (projector_api.h): ?run= a projector run, ?tensor= an
  // embedding's tensor_name (default: the first).
  Work projector_route(const RequestPtr& req, std::string_view p) {
    if (p == "projector") return [this](const HttpResponder&, const Caller&) { return json_response(projector_runs_json(options.logdir)); };
    if (!take_prefix(p, "projector/") || (p != "embedding" && p != "tensor" && p != "sprite")) return nullptr;
    return [this, req, what = std::string(p)](const HttpResponder&, const Caller&) {
      const std::string run = param(*req, "run");
      if (run.empty()) throw InvalidArgument("run is required (see /api/projector)");
      const auto embeddings = projector.get(options.logdir, run);
      const LoadedEmbedding& e = find_embedding(*embeddings, param(*req, "tensor"));
      if (what == "embedding") return json_response(projector_embedding_json(run, *embeddings, e));
      HttpResponse r = what == "tensor" ? bytes_response(projector_tensor_bytes(e), "application/octet-stream")
                                        : bytes_response(as_string(read_file_bytes(projector_sprite_path(options.logdir, run, e))),
                                                         "image/png");
      r.headers.emplace_back("Cache-Control", "no-store");
      return r;
    };
  }

  // The Searches and Hyperparameters views' endpoints (search_api.h). A search's name is the
  // rest of the (decoded) path: it may hold "/".
  Work search_route(const RequestPtr& req, std::string_view p) {
    if (p == "searches")
      return [this](const HttpResponder&, const Caller&) { return json_response(hubs.with_hub([](Hub& hub) { return searches_json(hub); })); };
    if (p == "hparams")
      return [this, req](const HttpResponder&, const Caller&) {
        return json_response(hubs.with_hub([&](Hub& hub) { return hparams_json(hub, param(*req, "search")); }));
      };
    if (!take_prefix(p, "searches/") || p.empty()) return nullptr;
    return [this, req, name = std::string(p)](const HttpResponder& r, const Caller&) { return poll(*req, r, name); };
  }

  // /api/tasks (topic "") and /api/searches/<name>?since=V&wait=S: answers at once unless
  // `since` is the current version and S > 0; then parks the request (long_polls.h), which is
  // answered when the version changes or S seconds pass (the page asks again with the new one).
  std::optional<HttpResponse> poll(const HttpRequest& req, const HttpResponder& responder, const std::string& topic) {
    const double wait_s = wait_seconds(req);
    const std::string since = param(req, "since");
    const Json now = hubs.with_hub([&](Hub& hub) { return topic.empty() ? tasks_json(hub) : search_json(hub, topic); });
    if (since.empty() || now.value("version", "") != since || wait_s <= 0) return json_response(now);
    LongPolls::Waiter waiter{topic, since,
                             std::chrono::steady_clock::now() +
                                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(wait_s)),
                             accepts_gzip(req), responder};
    if (!polls->add(std::move(waiter))) return json_response(now);  // stopping: answer as it is
    return std::nullopt;
  }

  // The POST endpoints: a task's cancel, the try-a-model page's predict.
  Work post_route(const RequestPtr& req, const std::string& path) {
    std::string_view p = path;
    if (take_prefix(p, "/api/tasks/")) {
      const auto id = take_id(p);
      if (!id || p != "/cancel") return nullptr;
      return [this, req, id = *id](const HttpResponder&, const Caller&) { return cancel_task(*req, id); };
    }
    if (take_prefix(p, "/api/models/")) {
      const auto id = take_id(p);
      if (!id || p != "/alias") return nullptr;
      return [this, req, id = *id](const HttpResponder&, const Caller& caller) { return move_alias(*req, id, caller); };
    }
    // TF Serving's predict API for the project's models by id: /v1/models/<name>:predict, the
    // name without '/' or ':'. The body is taken whatever its Content-Type (`curl -d` sends a
    // form type), as tensorhub serve does; none at all is an empty document.
    if (!take_prefix(p, "/v1/models/") || p.size() <= 8 || p.substr(p.size() - 8) != ":predict") return nullptr;
    const std::string name(p.substr(0, p.size() - 8));
    if (name.find_first_of("/:") != std::string::npos) return nullptr;
    return [this, req, name](const HttpResponder&, const Caller&) {
      const ForwardedReply answer = hubs.with_hub([&](Hub& hub) {
        if (!options.serve_url.empty()) return forward_predict(hub, options.serve_url, name, req->body);
        return ForwardedReply{200, try_models.predict(hub, name, req->body)};
      });
      HttpResponse r = bytes_response(answer.body, "application/json");
      r.status = answer.status;
      r.headers.emplace_back("Cache-Control", "no-store");
      return r;
    };
  }

  // POST /api/tasks/<id>/cancel: the one change the dashboard makes, behind --allow-cancel and
  // the token.
  HttpResponse cancel_task(const HttpRequest& req, std::int64_t id) {
    if (auth) return do_cancel(id);  // check_caller let an editor through
    // What `curl -X POST` sends: no body and no Content-Length (RFC 9112 section 6.3: then
    // there is none); README promises a reason for every refusal.
    if (!req.header("Content-Length") && !req.header("Transfer-Encoding"))
      return json_response({{"error", "malformed request: POST " + decode_path(req.path) +
                                          " has no Content-Length header (with curl, add -d '')"}},
                           400);
    if (!options.allow_cancel) return json_response({{"error", "cancelling is off: start tensorhub ui with --allow-cancel"}}, 403);
    if (req.header("X-Tensorhub-Token").value_or("") != cancel_token)
      return json_response(
          {{"error", "missing or wrong X-Tensorhub-Token: reload the dashboard (the token changes at each start)"}}, 403);
    return do_cancel(id);
  }

  // POST /api/models/<id>/alias {"alias": "champion", "reason": "..."}: points the alias of this
  // model's name at it, recorded in the history under the logged-in user (model_aliases.h).
  HttpResponse move_alias(const HttpRequest& req, std::int64_t id, const Caller& caller) {
    if (!auth)
      return json_response({{"error", "moving aliases from the dashboard needs logins, so that the history says who: "
                                      "add users (`tensorhub user add NAME --role editor`; logins then turn on); "
                                      "or use `tensorhub model alias set`"}},
                           403);
    const Json body = Json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("alias") || !body["alias"].is_string() ||
        (body.contains("reason") && !body["reason"].is_string()))
      return json_response({{"error", R"(malformed alias move: the body is {"alias": "champion", "reason": "why"})"}}, 400);
    const std::string alias = body["alias"];
    return json_response(hubs.with_hub([&](Hub& hub) {
      const Document model = find_model(hub, id);  // NotFound: 404
      const std::string name = model.tags.value("model_name", "");
      const auto before =
          hub.set_model_alias(name, alias, id, {.reason = body.value("reason", ""), .user = caller.user});
      return Json{{"model_name", name}, {"alias", alias}, {"model_id", id},
                  {"from_id", before ? Json(*before) : Json(nullptr)}};
    }));
  }

  HttpResponse do_cancel(std::int64_t id) {
    return json_response(hubs.with_hub([&](Hub& hub) {
      TaskQueue queue(hub);
      const Task task = queue.get_task(id);  // NotFound: 404
      if (task.status != TaskStatus::kPending && task.status != TaskStatus::kRunning)
        throw FailedPrecondition("task " + std::to_string(id) + " is " + to_string(task.status) +
                                 "; only pending or running tasks can be cancelled");
      queue.cancel_tasks({{"id", id}});
      return Json{{"id", id}, {"status", to_string(queue.get_task(id).status)}};
    }));
  }
};

UiServer::UiServer(UiOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

UiServer::~UiServer() = default;

int UiServer::bind() {
  impl_->port = impl_->http->bind();
  return impl_->port;
}

void UiServer::run() { impl_->http->run(); }

bool UiServer::logins() const { return impl_->auth; }

void UiServer::stop(int grace_ms) {
  impl_->polls->stop();  // parked polls answered now, within the grace
  impl_->http->stop(grace_ms);
}

}  // namespace tensorhub
