// `tensorhub ui`'s replies to requests no endpoint answers: {"error": ...} bodies as README
// promises, also where cpp-httplib answers by itself (found empty by a fresh-user review).
#include <gtest/gtest.h>

#include "tensorhub/store/hub.h"
#include "ui_process.h"

namespace tensorhub::testing {
namespace {

// The JSON body of a raw reply (after the blank line), or null if there is none.
Json body_of(const std::string& reply) {
  const auto at = reply.find("\r\n\r\n");
  if (at == std::string::npos || at + 4 == reply.size()) return nullptr;
  return Json::parse(reply.substr(at + 4));
}

TEST(UiErrors, PostWithoutContentLengthIsExplained) {
  SqliteHubPaths h;
  Hub hub(h.uri, "p");
  UiProcess ui(h, "p", {"--allow-cancel"});
  // What `curl -X POST http://.../api/tasks/1/cancel` sends: no body, no Content-Length.
  const std::string reply = ui.raw("POST /api/tasks/1/cancel HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(ui.port()) +
                                   "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Type: application/json"), std::string::npos) << reply;
  EXPECT_EQ(body_of(reply), Json({{"error", "malformed request: POST /api/tasks/1/cancel has no Content-Length header "
                                            "(with curl, add -d '')"}}));
}

// `curl -X POST .../v1/models/1:predict`: no body, answered at once as an empty document (not
// after waiting for a body until the read timeout, then blaming its size).
TEST(UiErrors, PredictWithoutABodyIsAnEmptyDocument) {
  SqliteHubPaths h;
  Hub hub(h.uri, "p");
  UiProcess ui(h, "p", {});
  const std::string reply = ui.raw("POST /v1/models/1:predict HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(ui.port()) +
                                   "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 4", 0), 0u) << reply;
  EXPECT_EQ(reply.find("larger than 16 MiB"), std::string::npos) << reply;
}

TEST(UiErrors, CancelWithoutTokenSaysSo) {
  SqliteHubPaths h;
  Hub hub(h.uri, "p");
  UiProcess ui(h, "p", {"--allow-cancel"});
  auto c = ui.client();
  const auto res = c.Post("/api/tasks/1/cancel", "", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_EQ(Json::parse(res->body)["error"],
            "missing or wrong X-Tensorhub-Token: reload the dashboard (the token changes at each start)");
}

TEST(UiErrors, UnknownPathsAnswerJson404) {
  SqliteHubPaths h;
  Hub hub(h.uri, "p");
  UiProcess ui(h, "p");
  auto c = ui.client();
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/api/nothing"}, {"POST", "/nothing"}, {"GET", "/nothing.js"}, {"DELETE", "/api/tasks"}}) {
    httplib::Request req;
    req.method = method;
    req.path = path;
    if (method == "POST") req.body = "{}";
    const auto res = c.send(req);
    ASSERT_TRUE(res) << method << " " << path;
    EXPECT_EQ(res->status, 404) << method << " " << path;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json") << method << " " << path;
    EXPECT_EQ(Json::parse(res->body)["error"], "no such page or endpoint: " + method + " " + path +
                                                   " (see README's \"The web dashboard\" for the API)");
  }
}

}  // namespace
}  // namespace tensorhub::testing
