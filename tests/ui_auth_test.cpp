// `tensorhub ui` with logins (store/users.h, src/ui/auth.h), over real HTTP on both backends:
// a real tensorhub process on a hub whose users `tensorhub user add` made. Without a session a
// request is 401; a viewer reads but cannot cancel or move an alias (403), an editor can; a
// POST by cookie without the session's CSRF token is refused; a deleted user is refused at
// once; wrong tokens are rate limited (429, then even a right one); a dashboard for other
// machines without users refuses to start; --tls-cert serves HTTPS with Secure cookies.
// The same in Chromium: tests/ui/auth.test.mjs.
#include <httplib.h>

#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/model_aliases.h"

namespace tensorhub::testing {
namespace {

class UiAuthTest : public BackendTest {
 protected:
  void set_up() override {
    uri = db_->uri();
    hub = std::make_unique<Hub>(uri, "p");
    queue = std::make_unique<TaskQueue>(*hub);
    TaskSpec s;
    s.task_name = "t";
    s.command = "true";
    task = queue->create_task(s);
    model = hub->save_model(Json::object(), {}, "mlp");
    viewer_token = add_user("vera", "viewer");
    editor_token = add_user("ed", "editor");
  }
  void TearDown() override {
    if (ui_pid > 0) {
      kill(ui_pid, SIGTERM);
      wait_exit(ui_pid);
    }
  }

  // `tensorhub user add NAME --role ROLE --json`: the token it printed once.
  std::string add_user(const std::string& name, const std::string& role) {
    const auto out = (dir / ("user-" + name + ".json")).string();
    EXPECT_EQ(wait_exit(spawn({kTensorhub, "user", "add", name, "--role", role, "--json", "--hub", uri}, out)), 0)
        << read_text(out);
    const Json added = Json::parse(read_text(out));
    EXPECT_EQ(added["role"], role);
    return added["token"];
  }

  void start_ui(const std::vector<std::string>& extra = {}, const std::string& scheme = "http") {
    std::vector<std::string> args = {kTensorhub, "ui", "--hub", uri, "--project", "p", "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    ui_pid = spawn(args, log);
    port = port_from_log(log, "tensorhub ui: " + scheme + R"(://127\.0\.0\.1:(\d+)/)");
  }

  httplib::Client client() {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c;
  }

  // POST /api/login with `token`: the session cookie's value ("" when refused) and the answer.
  std::pair<std::string, httplib::Result> login(const std::string& token) {
    auto r = client().Post("/api/login", Json{{"token", token}}.dump(), "application/json");
    std::string cookie;
    if (r && r->status == 200) {
      const std::regex session("tensorhub_session=([0-9a-f]{64})");
      std::smatch m;
      const std::string set_cookie = r->get_header_value("Set-Cookie");
      if (std::regex_search(set_cookie, m, session)) cookie = m[1];
    }
    return {cookie, std::move(r)};
  }

  static httplib::Headers with_cookie(const std::string& cookie, const std::string& csrf = "") {
    httplib::Headers h = {{"Cookie", "tensorhub_session=" + cookie}};
    if (!csrf.empty()) h.emplace("X-CSRF-Token", csrf);
    return h;
  }

  std::string uri;
  std::unique_ptr<Hub> hub;
  std::unique_ptr<TaskQueue> queue;
  std::int64_t task = 0, model = 0;
  std::string viewer_token, editor_token;
  TempDir dir;
  std::string log = (dir / "ui.log").string();
  pid_t ui_pid = 0;
  int port = 0;
};

TEST_P(UiAuthTest, WithoutASessionEveryApiRequestIs401AndThePageStillLoads) {
  start_ui();
  EXPECT_NE(read_text(log).find("logins: on"), std::string::npos) << read_text(log);
  for (const char* path : {"/api/tasks", "/api/models", "/api/projects", "/api/models/1"}) {
    const auto r = client().Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path << " " << r->body;
    EXPECT_EQ(Json::parse(r->body)["login"], true) << r->body;
  }
  const auto session = client().Get("/api/session");
  EXPECT_EQ(session->status, 401);
  const auto page = client().Get("/");  // the page (with its login form): no data in it
  EXPECT_EQ(page->status, 200);
  // A cookie nobody was given is no session.
  const auto forged = client().Get("/api/tasks", with_cookie(std::string(64, 'a')));
  EXPECT_EQ(forged->status, 401);
}

TEST_P(UiAuthTest, AViewerReadsButCannotCancelOrMoveAnAliasAndAnEditorCan) {
  start_ui();
  const auto [wrong_cookie, wrong] = login("thu_" + std::string(64, '0'));
  EXPECT_EQ(wrong->status, 401) << wrong->body;

  const auto [viewer, v] = login(viewer_token);
  ASSERT_EQ(v->status, 200) << v->body;
  const std::string set_cookie = v->get_header_value("Set-Cookie");
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos) << set_cookie;
  EXPECT_NE(set_cookie.find("SameSite=Strict"), std::string::npos) << set_cookie;
  EXPECT_NE(set_cookie.find("Path=/"), std::string::npos) << set_cookie;
  EXPECT_EQ(set_cookie.find("Secure"), std::string::npos) << "plain HTTP: no Secure (the browser would drop it)";
  const Json vs = Json::parse(v->body);
  EXPECT_EQ(vs["user"], "vera");
  EXPECT_EQ(vs["role"], "viewer");
  const std::string viewer_csrf = vs["csrf_token"];
  EXPECT_EQ(viewer_csrf.size(), 64u);

  EXPECT_EQ(client().Get("/api/tasks", with_cookie(viewer))->status, 200);
  const auto session = client().Get("/api/session", with_cookie(viewer));
  EXPECT_EQ(Json::parse(session->body)["role"], "viewer");
  const auto cancel = client().Post("/api/tasks/" + std::to_string(task) + "/cancel", with_cookie(viewer, viewer_csrf),
                                    "", "application/json");
  EXPECT_EQ(cancel->status, 403) << cancel->body;
  EXPECT_NE(cancel->body.find("is a viewer"), std::string::npos) << cancel->body;
  const auto move = client().Post("/api/models/" + std::to_string(model) + "/alias", with_cookie(viewer, viewer_csrf),
                                  R"({"alias": "champion"})", "application/json");
  EXPECT_EQ(move->status, 403) << move->body;
  EXPECT_EQ(queue->get_task(task).status, TaskStatus::kPending);
  EXPECT_FALSE(hub->find_model_alias("mlp", "champion"));

  const auto [editor, e] = login(editor_token);
  ASSERT_EQ(e->status, 200) << e->body;
  const std::string editor_csrf = Json::parse(e->body)["csrf_token"];
  // The cookie without the CSRF token, or with another session's, changes nothing.
  for (const std::string& csrf : {std::string(), viewer_csrf}) {
    const auto refused = client().Post("/api/tasks/" + std::to_string(task) + "/cancel", with_cookie(editor, csrf), "",
                                       "application/json");
    EXPECT_EQ(refused->status, 403) << refused->body;
    EXPECT_NE(refused->body.find("X-CSRF-Token"), std::string::npos) << refused->body;
  }
  // Nor from a page of another origin, even with the token.
  httplib::Headers cross = with_cookie(editor, editor_csrf);
  cross.emplace("Origin", "http://127.0.0.1:1");
  EXPECT_EQ(client().Post("/api/tasks/" + std::to_string(task) + "/cancel", cross, "", "application/json")->status, 403);
  EXPECT_EQ(queue->get_task(task).status, TaskStatus::kPending);

  const auto moved = client().Post("/api/models/" + std::to_string(model) + "/alias", with_cookie(editor, editor_csrf),
                                   R"({"alias": "champion", "reason": "from the page"})", "application/json");
  ASSERT_EQ(moved->status, 200) << moved->body;
  const auto alias = hub->find_model_alias("mlp", "champion");
  ASSERT_TRUE(alias);
  EXPECT_EQ(alias->model_id, model);
  const auto history = hub->model_alias_history("mlp", "champion");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].user, "ed");  // the logged-in user, not the server's operating system user
  EXPECT_EQ(history[0].reason, "from the page");

  const auto cancelled = client().Post("/api/tasks/" + std::to_string(task) + "/cancel",
                                       with_cookie(editor, editor_csrf), "", "application/json");
  EXPECT_EQ(cancelled->status, 200) << cancelled->body;
  EXPECT_EQ(queue->get_task(task).status, TaskStatus::kCancelled);

  // Log out: the cookie is no session any more.
  client().Post("/api/logout", with_cookie(editor), "", "application/json");
  EXPECT_EQ(client().Get("/api/tasks", with_cookie(editor))->status, 401);
}

TEST_P(UiAuthTest, ABearerTokenWorksWithoutCookieOrCsrfAndADeletedUserIsRefusedAtOnce) {
  start_ui();
  const httplib::Headers bearer = {{"Authorization", "Bearer " + editor_token}};
  EXPECT_EQ(client().Get("/api/tasks", bearer)->status, 200);
  const auto cancelled = client().Post("/api/tasks/" + std::to_string(task) + "/cancel", bearer, "", "application/json");
  EXPECT_EQ(cancelled->status, 200) << cancelled->body;
  EXPECT_EQ(client().Get("/api/tasks", httplib::Headers{{"Authorization", "Bearer thu_wrong"}})->status, 401);

  const auto [viewer, v] = login(viewer_token);
  ASSERT_EQ(v->status, 200);
  EXPECT_EQ(client().Get("/api/tasks", with_cookie(viewer))->status, 200);
  const auto out = (dir / "delete.log").string();
  ASSERT_EQ(wait_exit(spawn({kTensorhub, "user", "delete", "vera", "--hub", uri}, out)), 0) << read_text(out);
  const auto refused = client().Get("/api/tasks", with_cookie(viewer));
  EXPECT_EQ(refused->status, 401) << "the next request after the delete";
  EXPECT_NE(refused->body.find("vera"), std::string::npos) << refused->body;
  EXPECT_EQ(login(viewer_token).second->status, 401);
}

// Started with no users, the dashboard turns logins on within a second or so of the first
// `tensorhub user add`, without a restart, and keeps them on when every user is deleted again.
TEST_P(UiAuthTest, TheFirstUserAddedTurnsLoginsOnAndDeletingEveryUserLeavesThemOn) {
  for (const char* name : {"vera", "ed"}) {
    const auto out = (dir / (std::string("delete-") + name + ".log")).string();
    ASSERT_EQ(wait_exit(spawn({kTensorhub, "user", "delete", name, "--hub", uri}, out)), 0) << read_text(out);
  }
  start_ui();
  EXPECT_NE(read_text(log).find("logins: off"), std::string::npos) << read_text(log);
  EXPECT_EQ(client().Get("/api/tasks")->status, 200);
  EXPECT_EQ(Json::parse(client().Get("/api/session")->body)["auth"], false);

  const std::string token = add_user("newcomer", "editor");
  EXPECT_TRUE(eventually([&] { return client().Get("/api/tasks")->status == 401; }, 10000ms)) << read_text(log);
  EXPECT_NE(read_text(log).find("logins on: the hub has users now"), std::string::npos) << read_text(log);
  const httplib::Headers bearer = {{"Authorization", "Bearer " + token}};
  EXPECT_EQ(client().Get("/api/tasks", bearer)->status, 200);
  // An editor's alias move writes: the hubs opened read-only before are not used for it.
  const auto moved = client().Post("/api/models/" + std::to_string(model) + "/alias", bearer,
                                   R"({"alias": "champion"})", "application/json");
  EXPECT_EQ(moved->status, 200) << moved->body;
  const auto alias = hub->find_model_alias("mlp", "champion");
  ASSERT_TRUE(alias);
  EXPECT_EQ(alias->model_id, model);

  const auto out = (dir / "delete-newcomer.log").string();
  ASSERT_EQ(wait_exit(spawn({kTensorhub, "user", "delete", "newcomer", "--hub", uri}, out)), 0) << read_text(out);
  std::this_thread::sleep_for(2500ms);  // past the next looks at the user count
  EXPECT_EQ(client().Get("/api/tasks")->status, 401) << "logins stay on";
  EXPECT_EQ(client().Get("/api/session")->status, 401);
}

// A proxy's Basic credentials are not a wrong token: they count no failed login, and a
// session cookie sent with them still decides.
TEST_P(UiAuthTest, AnotherAuthorizationSchemeIsNoFailedLogin) {
  start_ui();
  const httplib::Headers basic = {{"Authorization", "Basic dXNlcjpwYXNz"}};
  for (int i = 0; i < 12; ++i) {  // more than the 10 wrong tokens a minute that lock an address out
    const auto r = client().Get("/api/tasks", basic);
    EXPECT_EQ(r->status, 401) << r->body;
    EXPECT_NE(r->body.find("Authorization: Bearer"), std::string::npos) << r->body;
  }
  EXPECT_EQ(client().Get("/api/tasks", httplib::Headers{{"Authorization", "Bearer " + viewer_token}})->status, 200);
  const auto [viewer, v] = login(viewer_token);
  ASSERT_EQ(v->status, 200);
  httplib::Headers both = with_cookie(viewer);
  both.emplace("Authorization", "Basic dXNlcjpwYXNz");
  EXPECT_EQ(client().Get("/api/tasks", both)->status, 200);
}

TEST_P(UiAuthTest, WrongTokensAreRateLimitedAndThenEvenTheRightOneIsRefused) {
  start_ui();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(login("thu_guess" + std::to_string(i)).second->status, 401) << i;
  const auto limited = login("thu_guess-more").second;
  EXPECT_EQ(limited->status, 429) << limited->body;
  const int retry = std::stoi(limited->get_header_value("Retry-After"));
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 60);
  EXPECT_EQ(login(editor_token).second->status, 429) << "a guesser cannot tell a right token from the limit";
  EXPECT_EQ(client().Get("/api/tasks", httplib::Headers{{"Authorization", "Bearer " + editor_token}})->status, 429);
}

TEST_P(UiAuthTest, TlsServesHttpsWithSecureCookiesAndClosesPlainHttp) {
  const auto cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const auto out = (dir / "openssl.log").string();
  ASSERT_EQ(wait_exit(spawn({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                             "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"},
                            out)),
            0)
      << read_text(out);
  start_ui({"--tls-cert", cert, "--tls-key", key}, "https");
  // curl (OpenSSL's client) trusting exactly this certificate: the handshake, the login, the cookie.
  const auto answer = (dir / "curl.log").string();
  ASSERT_EQ(wait_exit(spawn({"curl", "-sS", "-i", "--cacert", cert, "-X", "POST", "--data",
                             Json{{"token", editor_token}}.dump(),
                             "https://127.0.0.1:" + std::to_string(port) + "/api/login"},
                            answer)),
            0)
      << read_text(answer);
  const std::string reply = read_text(answer);
  EXPECT_NE(reply.find("HTTP/1.1 200"), std::string::npos) << reply;
  EXPECT_NE(reply.find("tensorhub_session="), std::string::npos) << reply;
  EXPECT_NE(reply.find("; Secure"), std::string::npos) << reply;
  // Plain HTTP on the HTTPS port: no answer, the connection closes.
  const auto plain = client().Get("/api/session");
  EXPECT_FALSE(plain && plain->status == 200);
}

TEST_P(UiAuthTest, ForOtherMachinesADashboardWithoutUsersRefusesToStartUnlessTold) {
  TempDir empty;
  const std::string bare = uri.starts_with("sqlite://") ? "sqlite://" + (empty / "bare.db").string() : "";
  if (bare.empty()) GTEST_SKIP() << "one backend suffices: the refusal reads the user count only";
  Hub(bare, "p").save_model(Json::object(), {}, "mlp");
  const auto out = (dir / "refused.log").string();
  EXPECT_EQ(wait_exit(spawn({kTensorhub, "ui", "--hub", bare, "--host", "0.0.0.0", "--port", "0"}, out)), 1);
  EXPECT_NE(read_text(out).find("tensorhub user add NAME --role editor"), std::string::npos) << read_text(out);
  EXPECT_NE(read_text(out).find("--insecure-no-auth"), std::string::npos) << read_text(out);
  ui_pid = spawn({kTensorhub, "ui", "--hub", bare, "--host", "0.0.0.0", "--port", "0", "--insecure-no-auth"}, log);
  port = port_from_log(log, R"(tensorhub ui: http://0\.0\.0\.0:(\d+)/)");
  const auto session = client().Get("/api/session");
  ASSERT_TRUE(session);
  EXPECT_EQ(Json::parse(session->body)["auth"], false);
}

INSTANTIATE_TEST_SUITE_P(Backends, UiAuthTest, ::testing::ValuesIn(backend_params()), backend_param_name);

}  // namespace
}  // namespace tensorhub::testing
