// tensorhub serve: TensorFlow Serving's REST and gRPC APIs for model directories or a hub query.
#include <signal.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "commands.h"
#include "logging.h"
#include <spdlog/spdlog.h>
#include "tensorhub/core/error.h"
#include "tensorhub/core/http_flags.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/serve/file_system_source.h"
#include "tensorhub/serve/grpc_server.h"
#include "tensorhub/serve/hub_source.h"
#include "tensorhub/serve/model_config.h"
#include "tensorhub/serve/rest_server.h"
#include "tensorhub/store/backend.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/model.h"

namespace tensorhub {
namespace {

struct ServeArgs {
  ServerOptions server;
  int grpc_port = 8500;  ///< --port; 0: no gRPC
  std::string log_level = "info";
  std::string model_name;
  std::string model_base_path;
  std::string model_config_file;
  double poll_seconds = 1;
  bool enable_batching = false;
  bool allow_version_labels_for_unavailable_models = false;
  std::string batching_parameters_file;
  std::string hub;      ///< empty: TENSORHUB_URI, else default_hub_uri() (only with --hub_model)
  std::string project;  ///< set from TENSORHUB_PROJECT, else "default"
  std::string hub_model;
  std::string hub_filter;
  std::string hub_sort = "time:-1";
  std::string hub_alias;  ///< "champion" or "champion=90,challenger=10"
  std::int64_t max_body_mb = 64;
  HttpFlags http;  ///< --shutdown_grace_s, --http_* (core/http_flags.h)
};

// The file an option names, whole; its errors name the option (e.g. "--model_config_file
// /nope: cannot open /nope").
std::string read_text(const std::string& path, const char* option) {
  try {
    const auto bytes = read_file_bytes(path);
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  } catch (const Error& e) {
    throw Error(e.kind(), std::string(option) + " " + path + ": " + e.message());
  }
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// --hub_sort as --sort, its errors named --hub_sort (exit 2).
SortSpec parse_hub_sort(const std::string& text) {
  try {
    return parse_sort(text);
  } catch (const Error& e) {
    throw UsageError("--hub_sort: " + e.message());
  }
}

// Tries the hub query once before serving: a filter or sort the hub refuses (an unknown
// operator such as $regex, a bad field name) is the command line's fault (exit 2), not a source
// to retry; a sort key no model of that name has is warned about. A hub that cannot be opened
// now is left to the source, which reports or retries it.
void check_hub_query(const HubModelQuery& q) {
  std::optional<Hub> hub;
  try {
    hub.emplace(q.hub_uri, q.project, OpenMode::kReadOnly);
  } catch (const Error&) {
    return;
  }
  Json filter = q.filter;
  filter["model_name"] = q.model_name;
  const auto refused = [&](const SortSpec& sort) -> std::optional<std::string> {
    try {
      hub->find_models(filter, sort, 1);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kInvalidArgument) return e.message();
    }
    return std::nullopt;
  };
  if (auto why = refused({})) throw UsageError("--hub_filter: " + *why);
  if (auto why = refused(q.sort)) throw UsageError("--hub_sort: " + *why);
  warn_unknown_sort_keys(q.sort, [&](const std::string& key) {
    return !hub->find_models({{"model_name", q.model_name}, {key, {{"$exists", true}}}}, {}, 1).empty();
  }, "model named \"" + q.model_name + "\"");
}

// Why `name` cannot be served, or "" when it can: TF Serving's REST routes take a model name
// up to the first '/' (/v1/models/<name>[/versions/<v>]), so a name holding one could never
// be asked for over REST, only over gRPC; it is refused where it is configured instead.
std::string bad_model_name(const std::string& name) {
  if (name.find('/') == std::string::npos) return "";
  return "model name \"" + name + "\" contains '/', which REST paths (/v1/models/<name>:predict) cannot hold: " +
         "choose a name without it";
}

// The served models of a model_config_list (--model_config_file, HandleReloadConfigRequest).
// Throws InvalidArgument for a name holding '/' (bad_model_name).
std::vector<ServedModel> served_models(const std::vector<ModelConfig>& configs) {
  std::vector<ServedModel> out;
  for (const auto& m : configs) {
    if (auto why = bad_model_name(m.name); !why.empty()) throw InvalidArgument("model_config_list: " + why);
    out.push_back({m.name, std::make_unique<FileSystemSource>(m.base_path, m.traffic), m.policy, m.labels});
  }
  return out;
}

// One source per served model: --model_config_file, --hub_model (from --hub, else
// TENSORHUB_URI, else the default hub), or --model_base_path; exactly one of the three.
void add_models(const ServeArgs& args, ModelManager& manager) {
  const int sources = !args.model_config_file.empty() + !args.hub_model.empty() + !args.model_base_path.empty();
  if (sources > 1)
    throw UsageError("give only one of --model_config_file, --hub_model and --model_base_path");
  if (auto why = bad_model_name(args.model_name); !why.empty()) throw UsageError("--model_name: " + why);
  if (!args.model_config_file.empty()) {
    const auto configs = parse_model_config_file(read_text(args.model_config_file, "--model_config_file"));
    for (const auto& m : configs)
      if (auto why = bad_model_name(m.name); !why.empty())
        throw InvalidArgument("--model_config_file " + args.model_config_file + ": " + why);
    for (auto& m : served_models(configs))
      manager.add_model(m.name, std::move(m.source), std::move(m.policy), std::move(m.labels));
  } else if (!args.hub_model.empty()) {
    HubModelQuery q;
    q.hub_uri = args.hub.empty() ? env_or("TENSORHUB_URI", default_hub_uri()) : args.hub;
    q.project = args.project;
    q.model_name = args.hub_model;
    q.filter = args.hub_filter.empty() ? Json::object() : parse_json_object(args.hub_filter, "--hub_filter");
    q.sort = parse_hub_sort(args.hub_sort);
    check_hub_query(q);
    if (auto why = bad_model_name(args.hub_model); !why.empty() && args.model_name.empty())
      throw UsageError("--hub_model: " + why + " (or serve it under --model_name)");
    VersionPolicy policy;  // the query's one best model
    if (!args.hub_alias.empty()) {
      if (!args.hub_filter.empty()) throw UsageError("give --hub_alias or --hub_filter, not both");
      try {
        q.aliases = parse_alias_weights(args.hub_alias);
      } catch (const Error& e) {
        throw UsageError(e.message());
      }
      policy.kind = VersionPolicy::kAll;  // every version an alias names
    }
    manager.add_model(args.model_name.empty() ? args.hub_model : args.model_name,
                      std::make_unique<HubSource>(std::move(q)), policy);
  } else if (!args.hub.empty()) {
    throw UsageError("--hub needs --hub_model, the hub model_name to serve");
  } else if (!args.model_base_path.empty()) {
    manager.add_model(args.model_name.empty() ? "default" : args.model_name,
                      std::make_unique<FileSystemSource>(std::filesystem::absolute(args.model_base_path).string()));
  } else {
    throw UsageError("give --model_base_path (with --model_name), --model_config_file, or --hub_model (with --hub)");
  }
}

// After the first poll (which logs no broken source): a server whose every source is broken
// would serve nothing, ever, without a word; refuse to start instead, saying why once. Some
// broken sources only warn, once, and are retried.
void report_broken_sources(const ModelManager& manager) {
  const auto broken = manager.broken_sources();
  if (broken.empty()) return;
  if (broken.size() < manager.model_names().size()) {
    for (const auto& p : broken)
      spdlog::warn("model {}: cannot read its source, {}: {}; retrying with backoff", p.model, p.source, p.error);
    return;
  }
  std::string text = "no model can be served, every source failed:";
  for (const auto& p : broken) text += "\n  model " + p.model + ": " + p.source + ": " + p.error;
  throw Unavailable(text);
}

// The gRPC server of `serve` on the same manager, batcher and metrics as REST, started; null
// with --port 0, or when the default port is taken (an explicit --port in use throws).
std::unique_ptr<GrpcServer> start_grpc(const ServeArgs& args, bool explicit_port, ModelManager& manager) {
  if (args.grpc_port == 0) return nullptr;
  std::unique_ptr<GrpcServer> grpc;
  GrpcServerOptions g;
  g.host = args.server.host;
  g.port = args.grpc_port;
  g.max_message_bytes = args.server.max_body_bytes;
  g.batcher = args.server.batcher;
  g.metrics = args.server.metrics;
  // TF Serving's ReloadConfig: swap the models, then refuse labels on versions not loaded.
  g.reload_config = [&manager, allow = args.allow_version_labels_for_unavailable_models](
                        const std::vector<ModelConfig>& configs) {
    manager.replace_models(served_models(configs), allow);
  };
  grpc = std::make_unique<GrpcServer>(manager, std::move(g));
  try {
    grpc->start();
  } catch (const Error& e) {
    // An explicit --port must be served; the default one may be taken by another server
    // on this machine (several `tensorhub serve` at once), which costs only the gRPC API.
    if (explicit_port) throw;
    spdlog::warn("{}; serving the REST API only", e.message());
    grpc.reset();
  }
  return grpc;
}

// serve's flags, TF Serving's names (the CLI11 option of --port is returned: whether it was
// given decides whether a port in use is an error).
CLI::Option* add_serve_options(CLI::App& cmd, ServeArgs& a) {
  auto* port_option = cmd.add_option("--port", a.grpc_port,
                                      "gRPC port: TF Serving's PredictionService and ModelService (0: no gRPC API; "
                                      "the default 8500 in use only warns and serves REST alone)")
                          ->check(CLI::Range(0, 65535))
                          ->capture_default_str();
  cmd.add_option("--rest_api_port", a.server.port, "HTTP port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd.add_option("--rest_api_host", a.server.host, "address to bind (0.0.0.0 serves other machines)")
      ->capture_default_str();
  cmd.add_option("--rest_api_num_threads", a.server.num_threads,
                  "worker threads running REST predict, classify, regress and metadata (a batched request holds one "
                  "while it waits for its batch); connections take none (0: max(64, 8 x cores))")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd.add_option("--model_name", a.model_name, "name to serve the model under")->capture_default_str();
  cmd.add_option("--model_base_path", a.model_base_path, "directory of numbered version directories");
  cmd.add_option("--model_config_file", a.model_config_file,
                  "TF Serving ModelServerConfig text proto (several models, version policies, labels; tensorhub's "
                  "traffic_split { key: LABEL value: WEIGHT } beside version_labels splits unversioned requests "
                  "between labels by weight, as --hub_alias)");
  cmd.add_option("--file_system_poll_wait_seconds", a.poll_seconds,
                  "seconds between scans for new versions (0: load once); a failed load or an unreadable source is "
                  "retried at the next scan, then with backoff up to 30 s")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd.add_flag("--enable_batching", a.enable_batching, "merge concurrent requests into batches");
  cmd.add_flag("--allow_version_labels_for_unavailable_models", a.allow_version_labels_for_unavailable_models,
                "let version_labels point at versions not loaded at start (else the config is refused, as TF "
                "Serving does)");
  cmd.add_option("--batching_parameters_file", a.batching_parameters_file,
                  "TF Serving BatchingParameters text proto (max_batch_size, batch_timeout_micros, ...)");
  a.project = env_or("TENSORHUB_PROJECT", "default");
  cmd.add_option("--hub_model", a.hub_model,
                  "serve the best hub model of this model_name, e.g. mlp (from --hub, else env TENSORHUB_URI, else "
                  "sqlite:///<cwd>/tensorhub.db; the hub must exist: serving never creates one)");
  cmd.add_option("--hub", a.hub, "hub URI to serve --hub_model from (env TENSORHUB_URI; used only with --hub_model)");
  cmd.add_option("--project", a.project, "hub project (env TENSORHUB_PROJECT)")->capture_default_str();
  cmd.add_option("--hub_filter", a.hub_filter, R"(JSON filter on the hub's models, e.g. '{"epochs": 20}')");
  cmd.add_option("--hub_sort", a.hub_sort, "which model is best, e.g. test_accuracy:-1")->capture_default_str();
  cmd.add_option("--hub_alias", a.hub_alias,
                  "serve what --hub_model's aliases name instead of the best model: champion, or weighted "
                  "champion=90,challenger=10 (requests without a version or label are split by weight, sticky "
                  "per X-Request-Id header / gRPC x-request-id metadata; each answer names its version in the "
                  "X-Tensorhub-Model-Version header). Every alias of the model is also a version label "
                  "(/v1/models/NAME/labels/ALIAS); a moved alias is served from the next poll, its old version "
                  "answering until the new one is AVAILABLE");
  cmd.add_option("--routing_key_field", a.server.routing_key_field,
                  "a top-level member of REST predict/classify/regress bodies (e.g. user_id) whose value keeps a "
                  "client on one side of a weighted split, before the X-Request-Id header (gRPC: x-request-id "
                  "metadata only)");
  cmd.add_option("--rest_api_timeout_in_ms", a.server.rest_api_timeout_in_ms,
                  "a predict request not answered within this many ms (batch queue included) gets 504 "
                  "DEADLINE_EXCEEDED (0: no deadline, at most 86400000: a day)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{86'400'000}))
      ->capture_default_str();
  cmd.add_option("--max_body_mb", a.max_body_mb, "largest request body accepted, MiB, of any Content-Type")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20))
      ->capture_default_str();
  add_http_flags(cmd, a.http);
  add_log_level_option(cmd, a.log_level);
  return port_option;
}

// Runs `serve` until SIGTERM or SIGINT, then drains both APIs.
void run_serve(ServeArgs& a, bool explicit_grpc_port) {
  if (a.grpc_port != 0 && a.grpc_port == a.server.port)
    throw UsageError("--rest_api_port cannot be same as --port (" + std::to_string(a.grpc_port) +
                     "): gRPC and REST need a port each");  // TF Serving's words
  // SIGTERM / SIGINT: stop accepting, let in-flight requests finish, then exit. Blocked
  // first, before any thread starts (gRPC's, the model manager's), so that every thread
  // inherits the mask and the signal waits for sigwait below, even one sent while the
  // models load; a thread that did not block it would take it and kill the process.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  setup_logging(a.log_level);
  ManagerOptions manager_options;
  manager_options.log = info_log();
  // A failed load or a broken source is retried at the next poll first, then backs off.
  if (a.poll_seconds > 0) manager_options.retry_initial_seconds = a.poll_seconds;
  ModelManager manager(manager_options);
  add_models(a, manager);
  if (!a.enable_batching && !a.batching_parameters_file.empty())
    spdlog::warn("--batching_parameters_file is ignored without --enable_batching");
  if (a.enable_batching)
    a.server.batching = a.batching_parameters_file.empty()
                          ? BatchingParameters{}
                          : parse_batching_parameters(read_text(a.batching_parameters_file, "--batching_parameters_file"));
  a.server.max_body_bytes = static_cast<std::size_t>(a.max_body_mb) << 20;
  apply(a.http, a.server.http);

  // Requests run in parallel on per-core model replicas: one intra-op thread each, so
  // that concurrent requests do not oversubscribe the cores.
  set_num_threads(1);
  // One batcher and one set of metrics for both APIs: their requests batch together and
  // /monitoring/prometheus/metrics shows gRPC's calls beside REST's.
  if (a.server.batching) a.server.batcher = std::make_shared<Batcher>(*a.server.batching);
  a.server.metrics = std::make_shared<ServingMetrics>();
  RestServer server(manager, a.server);
  const int port = server.bind();  // first: a port in use fails before any model loads
  std::unique_ptr<GrpcServer> grpc = start_grpc(a, explicit_grpc_port, manager);
  manager.start_polling(a.poll_seconds);
  report_broken_sources(manager);
  if (!a.allow_version_labels_for_unavailable_models) manager.check_labels();
  std::string models;
  for (const auto& n : manager.model_names()) models += " /v1/models/" + n;
  spdlog::info("tensorhub serve: REST API on http://{}:{}, models:{}", a.server.host, port, models);
  if (grpc) spdlog::info("tensorhub serve: gRPC API on {}:{}", a.server.host, a.grpc_port);

  std::thread serving([&] { server.run(); });
  int sig = 0;
  sigwait(&set, &sig);
  const int grace_ms = a.http.grace_ms();
  spdlog::info("tensorhub serve: {}, draining requests (at most {} s, --shutdown_grace_s)",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", a.http.shutdown_grace_s);
  // Both APIs drain at once, so that the process is gone within one grace period.
  server.stop(grace_ms);
  if (grpc) grpc->stop(grace_ms);
  serving.join();
  manager.stop_polling();
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", torch_command_description("serve"));
  CLI::Option* port_option = add_serve_options(*cmd, *args);
  cmd->callback([args, port_option]() { run_serve(*args, port_option->count() > 0); });
}

}  // namespace tensorhub
