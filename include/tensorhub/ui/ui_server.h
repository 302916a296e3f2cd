// UiServer: `tensorhub ui`, the web dashboard. Serves the single-page application embedded in
// the binary at build time (ui/*.html, *.js, *.css and uPlot; no network needed) and the JSON
// API of dashboard_api.h over HttpServer (core/http_server.h), the event-driven engine the
// model server uses: one event loop holds every connection (an open tab or a slow client costs
// a socket, not a thread), with the engine's deadlines, limits and connection cap:
//
//   GET /                      the page (index.html); other files by name (/app.js, ...)
//   GET /api/projects          projects_json
//   GET /api/tasks[?since=V&wait=S]
//                              tasks_json; with `since` equal to the current version, waits up
//                              to S seconds (default 25, at most 60) for a change (the queue's
//                              wait_for_change: PostgreSQL's NOTIFY wakes it at once, SQLite
//                              is looked at every 200 ms) and answers as soon as one is seen
//   GET /api/models[?filter=&sort=&offset=&limit=]   models_json
//   GET /api/models/<id>       model_json
//   GET /api/models/<id>/graph graph_json (graph_api.h): the Graph view's layers and totals
//   GET /api/models/<id>/layers/<name>/histograms   layer_histograms_json: a layer's weights
//   GET /api/runs              runs_json (curves_api.h): what the Curves view can plot
//   GET /api/scalars?source=&run=&tag=[&x=step|wall|relative&width=PX&smoothing=W&reduce=0]
//                              scalars_json: a series reduced to a few points per pixel
//   GET /api/scalars.csv?source=&run=&tag=   scalars_csv: the whole series, unreduced
//   GET /api/histograms?run=&tag=            histograms_json: a logdir run's distributions
//   GET /api/projector                       projector_runs_json (projector_api.h): --logdir's
//                              projector configs
//   GET /api/projector/{embedding,tensor,sprite}?run=&tensor=   one embedding's labels and
//                              sizes (JSON), its values (little-endian float32), its sprite (PNG)
//   GET /api/searches, /api/searches/<name>[?since=V&wait=S], /api/hparams[?search=]
//                              search_api.h; a search's since/wait as /api/tasks's
//   POST /api/tasks/<id>/cancel  cancels a pending or running task: only with
//                              UiOptions::allow_cancel, and only with the header
//                              X-Tensorhub-Token: <the token of this start>, which the page
//                              receives in index.html's <meta name="tensorhub-cancel-token">.
//                              Another site can neither read the page (same-origin policy) nor
//                              send the header without a CORS preflight, which is never allowed.
//   GET /api/session           {"auth": false, "cancel": B} without logins; with them the caller's
//                              {"auth": true, "user", "role", "csrf_token"} or 401
//   POST /api/login {"token"}  a session cookie and {"user", "role", "csrf_token"}; 401 for a
//                              wrong token, 429 (Retry-After) past the limit (auth.h)
//   POST /api/logout           forgets the session
//   POST /api/models/<id>/alias {"alias", "reason"}  points the alias of the model's name at it
//                              (editors, with logins only; the history names the user)
//   POST /v1/models/<id>:predict  TF Serving's predict API (the JSON of `tensorhub serve`) for
//                              the project's model <id>, loaded on first use (try_api.h): what
//                              the try-a-model page calls, on the page's own origin; with
//                              UiOptions::serve_url, passed on to that tensorhub serve.
// Errors are {"error": "..."} with the HTTP code of the error's kind (400, 404, 503, 500; 403
// for a refused cancel), also for unknown paths, a cancel POST without Content-Length, and the
// engine's own refusals (a malformed or oversized request head, 413 for a body over 16 MiB,
// 503 over the connection cap; a head or body late past its deadline is closed unanswered). Cancelling a task and (with logins) moving an alias are the only changes ever made to the hub. Binds 127.0.0.1 unless
// told otherwise; bound to a loopback address it answers only requests whose Host is
// that address, localhost or 127.0.0.1 (so a site whose name is made to resolve to 127.0.0.1,
// DNS rebinding, is refused).
//
// Logins (src/ui/auth.h): when the hub has users (`tensorhub user add`) and no
// --insecure-no-auth, every /api/ and predict request needs a session cookie or a Bearer token
// (401 otherwise), POSTs by cookie the session's X-CSRF-Token, cancels and alias moves an
// editor (403); cancels then need neither --allow-cancel nor the start's token. Decided at
// start. A non-loopback host without users refuses to start (FailedPrecondition) unless
// --insecure-no-auth. Pages are sent with a Content-Security-Policy allowing only the
// server's own scripts. Answers of 1 KiB or more of a text type are gzip-compressed for
// clients that accept gzip (never Brotli).
//
// Where the work runs: the page and the embedded files are answered from memory on the loop;
// every /api/ and predict request runs on a pool of `num_threads` workers, each with a Hub of
// its own (kept in a pool), since a hub query or a file read must never stall the loop. A long
// poll (/api/tasks or /api/searches/<name> with since= and wait=) that has to wait is parked
// (long_polls.h): one watcher thread answers every parked poll when its version changes or its
// wait ends, so a thousand open Tasks tabs cost a thousand sockets, not a thousand threads.
//
// Thread safety: bind() and run() from one thread; stop() from any thread.
#pragma once

#include <memory>
#include <string>

#include "tensorhub/core/http_server.h"

namespace tensorhub {

struct UiOptions {
  std::string hub_uri;               ///< the hub to show (opened OpenMode::kExisting: never created)
  std::string project = "default";   ///< the project shown
  std::string host = "127.0.0.1";    ///< bind address; "0.0.0.0" to serve other machines
  int port = 6006;                   ///< 0 picks a free port (bind() returns it)
  int num_threads = 32;              ///< workers running /api/ requests (a parked long poll holds none)
  bool allow_cancel = false;         ///< --allow-cancel: POST /api/tasks/<id>/cancel is served
  /// --serve_url http://host:port: predictions of the try-a-model page run on that `tensorhub
  /// serve` (forward_predict, try_api.h) instead of in the ui; empty: the ui loads the models.
  std::string serve_url;
  std::string logdir;                ///< --logdir: TensorBoard event files shown as curves (curves_api.h)
  /// --insecure-no-auth: no logins even when the hub has users or the address is not loopback.
  bool insecure_no_auth = false;
  /// --tls-cert / --tls-key: PEM files of the certificate (chain) and its private key; HTTPS
  /// instead of HTTP, session cookies then Secure. Both or neither.
  std::string tls_cert, tls_key;
  /// Failed logins allowed per client address within login_window_s (auth.h); beyond, 429.
  int login_burst = 10;
  int login_window_s = 60;
  /// The engine's deadlines, limits and connection cap (core/http_flags.h's apply() fills them
  /// from --http_* flags). Its host, port, flag names, body limit (16 MiB), error bodies and
  /// default headers are the dashboard's own: UiServer sets them from the fields above.
  HttpServer::Options http;
};

class UiServer {
 public:
  /// Opens the hub once to check it: throws NotFound when there is no hub at the URI,
  /// Unavailable when it cannot be reached, InvalidArgument for a malformed URI or serve_url.
  explicit UiServer(UiOptions options);
  ~UiServer();
  UiServer(const UiServer&) = delete;
  UiServer& operator=(const UiServer&) = delete;

  /// Binds the listening socket; returns the port (useful with port 0). Throws Unavailable
  /// naming the cause (address in use, not an address of this machine) and the flag to change.
  int bind();
  /// Serves until stop() and its grace period are over. REQUIRES: bind() succeeded.
  void run();
  /// Whether the dashboard asks for logins: the hub had users at start, or has had some since
  /// (looked at at most once a second, by requests), and no --insecure-no-auth. Once on, stays on.
  bool logins() const;
  /// Stops accepting connections, answers every parked long poll with the current answer,
  /// closes idle and slow connections at once, and lets in-flight requests finish for at most
  /// `grace_ms` milliseconds (--shutdown_grace_s); run() then returns. Idempotent; from any
  /// thread (not a signal handler).
  void stop(int grace_ms = 10000);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorhub
