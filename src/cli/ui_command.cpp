// tensorhub ui: the web dashboard of a hub's project (include/tensorhub/ui/ui_server.h).
#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <memory>
#include <thread>

#include "commands.h"
#include "tensorhub/core/http_flags.h"
#include "tensorhub/store/uri.h"
#include "tensorhub/ui/try_api.h"
#include "tensorhub/ui/ui_server.h"

namespace tensorhub {
namespace {

struct UiArgs {
  HubFlags hub;
  std::string host = "127.0.0.1";
  int port = 6006;
  bool allow_cancel = false;
  std::string serve_url;
  std::string logdir;
  bool insecure_no_auth = false;
  std::string tls_cert, tls_key;
  HttpFlags http;
};

}  // namespace

void add_ui_command(CLI::App& app) {
  auto args = std::make_shared<UiArgs>();
  auto* cmd = app.add_subcommand("ui", torch_command_description("ui"));
  add_hub_options(*cmd, args->hub);
  cmd->add_option("--port", args->port, "port to listen on (0: any free port, printed at start)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--host", args->host, "address to bind; 0.0.0.0 shows the dashboard to other machines")
      ->capture_default_str();
  cmd->add_option("--serve_url", args->serve_url,
                  "run the try-a-model page's predictions on this tensorhub serve (http://HOST:PORT of its REST "
                  "API, serving the hub's models: --hub_model NAME) instead of loading the models in the ui");
  cmd->add_flag("--allow-cancel", args->allow_cancel,
                "let the page cancel pending and running tasks (the only change it can make; each start "
                "hands the page a new token, so no other site can)");
  cmd->add_option("--logdir", args->logdir,
                  "a directory of TensorBoard event files (its sub-directories are runs): their scalars, "
                  "histograms and hparams sessions are shown as curves")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--insecure-no-auth", args->insecure_no_auth,
                "serve without logins even on a non-loopback --host or a hub with users (anyone who reaches the "
                "port reads the hub)");
  cmd->add_option("--tls-cert", args->tls_cert, "PEM certificate (chain) file: serve HTTPS (with --tls-key)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", args->tls_key, "PEM private key file of --tls-cert")->check(CLI::ExistingFile);
  add_http_flags(*cmd, args->http);
  cmd->callback([args] {
    check_hub_options(args->hub);
    if (!args->serve_url.empty()) {
      try {
        check_serve_url(args->serve_url);  // a usage error (exit 2), before the hub is opened
      } catch (const Error& e) {
        throw UsageError(e.message());
      }
    }
    UiOptions options;
    options.hub_uri = args->hub.hub;
    options.project = args->hub.project;
    options.host = args->host;
    options.port = args->port;
    options.allow_cancel = args->allow_cancel;
    options.serve_url = args->serve_url;
    options.logdir = args->logdir;
    options.insecure_no_auth = args->insecure_no_auth;
    if (args->tls_cert.empty() != args->tls_key.empty()) throw UsageError("--tls-cert and --tls-key go together");
    options.tls_cert = args->tls_cert;
    options.tls_key = args->tls_key;
    apply(args->http, options.http);
    // Block SIGTERM / SIGINT before any thread starts so that only sigwait below sees them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    UiServer server(options);
    const int port = server.bind();
    std::cout << "tensorhub ui: " << (options.tls_cert.empty() ? "http" : "https") << "://" << args->host << ":" << port
              << "/ (project " << options.project << ", hub " << mask_passwords(options.hub_uri) << ")" << std::endl;
    std::cout << (server.logins()              ? "logins: on (the hub's users, `tensorhub user list`)"
                  : options.insecure_no_auth ? "logins: off (--insecure-no-auth)"
                                             : "logins: off (the hub has no users; they turn on with the first `tensorhub user add`)")
              << std::endl;
    std::thread serving([&] { server.run(); });
    int sig = 0;
    sigwait(&set, &sig);
    // Stop accepting, close idle and slow connections, let requests being answered finish
    // within the grace period (parked long polls are answered at once).
    server.stop(args->http.grace_ms());
    serving.join();
  });
}

}  // namespace tensorhub
