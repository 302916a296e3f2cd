// bench_ui_auth: what the dashboard's login check costs per request (src/ui/auth.h: the
// session cookie looked up, the user found in the hub by its token's SHA-256, on every
// request). Two `tensorhub ui` processes on the same SQLite hub, which has a user: one with
// logins, one with --insecure-no-auth (no check), in the same run; GET /api/projects (a hub
// query of its own) over one keep-alive connection each, in alternating rounds so that both
// see the same machine. Prints both medians, the difference (the check's cost) and the ratio.
//
//   bench_ui_auth [--requests 4000] [--rounds 8]
#include <httplib.h>

#include <fstream>
#include <regex>
#include <thread>

#include "bench_util.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/users.h"

namespace tensorhub::bench {
namespace {

// Microseconds of each of `n` GET /api/projects with `headers`, appended to `us`.
void time_requests(httplib::Client& c, const httplib::Headers& headers, int n, std::vector<double>& us) {
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    const auto r = c.Get("/api/projects", headers);
    us.push_back(seconds_since(t0) * 1e6);
    if (!r || r->status != 200) throw std::runtime_error("GET /api/projects failed: " + (r ? r->body : "no answer"));
  }
}

}  // namespace
}  // namespace tensorhub::bench

int main(int argc, char** argv) {
  using namespace tensorhub;
  using namespace tensorhub::bench;
  int requests = 4000, rounds = 8;
  CLI::App app{"The dashboard's login check per request, against none, same run"};
  app.add_option("--requests", requests, "requests per server")->check(at_least_one());
  app.add_option("--rounds", rounds, "alternating rounds the requests are split into")->check(at_least_one());
  parse_or_exit(app, argc, argv);

  const auto dir = std::filesystem::temp_directory_path() / ("tensorhub-bench-ui-auth-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string uri = "sqlite://" + (dir / "hub.db").string();
  std::string token;
  {
    Hub hub(uri, "bench");
    hub.save_model(Json::object(), {}, "mlp", {{"test_accuracy", 0.9}});
    token = add_user(hub, "bench", UserRole::kViewer, "bench").token;
  }
  const std::string bin = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";
  Process with = start({bin, "ui", "--hub", uri, "--project", "bench", "--port", "0"}, dir / "with.log", false);
  Process without = start({bin, "ui", "--hub", uri, "--project", "bench", "--port", "0", "--insecure-no-auth"},
                          dir / "without.log", false);
  httplib::Client auth_client("127.0.0.1", wait_for_ui_port(dir / "with.log"));
  httplib::Client open_client("127.0.0.1", wait_for_ui_port(dir / "without.log"));
  for (httplib::Client* c : {&auth_client, &open_client}) c->set_keep_alive(true);

  const auto login = auth_client.Post("/api/login", Json{{"token", token}}.dump(), "application/json");
  if (!login || login->status != 200) throw std::runtime_error("login failed");
  const std::string cookie = std::regex_replace(login->get_header_value("Set-Cookie"), std::regex(";.*"), "");
  const httplib::Headers session = {{"Cookie", cookie}};

  std::vector<double> auth_us, open_us;
  time_requests(auth_client, session, 100, auth_us);  // warm both: hubs opened, pages cached
  time_requests(open_client, {}, 100, open_us);
  auth_us.clear();
  open_us.clear();
  const int per_round = std::max(1, requests / rounds);
  for (int r = 0; r < rounds; ++r) {
    time_requests(open_client, {}, per_round, open_us);
    time_requests(auth_client, session, per_round, auth_us);
  }
  const double with_auth = median(auth_us), none = median(open_us);
  std::printf("GET /api/projects over one keep-alive connection, %zu requests each, SQLite hub, %d rounds\n",
              auth_us.size(), rounds);
  std::printf("with logins (session cookie, user looked up per request): median %7.1f us\n", with_auth);
  std::printf("no logins (--insecure-no-auth):                           median %7.1f us\n", none);
  std::printf("the check's cost per request: %.1f us\n", with_auth - none);
  print_ratio("with logins / none (median)", with_auth / none, 3, "x");
  with.signal(SIGTERM);
  without.signal(SIGTERM);
  with.wait();
  without.wait();
  std::filesystem::remove_all(dir);
  return 0;
}
