// Traffic split between versions from a --model_config_file (tensorhub's traffic_split beside
// TF Serving's version_labels), through a real `tensorhub serve` process over REST (httplib)
// and gRPC (tests/grpc_split_client.py, Python's grpcio): unversioned requests split by weight
// within statistical bounds, a key (X-Request-Id, x-request-id metadata, --routing_key_field)
// always on the version the documented placement gives, the answering version named in each
// answer, and per-version counts in the Prometheus metrics equal to what the clients saw.
// Also the config's parse errors, the metrics' text and the body field's extraction.
#include <gtest/gtest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "process_util.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/serve/json_tensor.h"
#include "tensorhub/serve/metrics.h"
#include "tensorhub/serve/model_config.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;
using nlohmann::json;

const std::string kSource = TENSORHUB_SOURCE_DIR;
const std::string kHalfPlusTwo = kSource + "/examples/serving/half_plus_two";

int count_of(const std::string& haystack, const std::string& text) {
  int n = 0;
  for (auto at = haystack.find(text); at != std::string::npos; at = haystack.find(text, at + 1)) ++n;
  return n;
}

// The documented placement (ModelManager::resolve_version): the key's SHA-256, its first 8
// bytes over 2^64, on the weights' line in label-name order: canary (10) first, then stable.
std::int64_t placed(const std::string& key) {
  const double point = static_cast<double>(std::stoull(sha256_hex(key).substr(0, 16), nullptr, 16)) * 0x1p-64;
  return point < 0.1 ? 2 : 1;
}

const char* kSplitConfig = R"(model_config_list {
  config {
    name: "split"
    base_path: "%BASE%"
    model_version_policy { all {} }
    version_labels { key: "stable" value: 1 }
    version_labels { key: "canary" value: 2 }
    traffic_split { key: "stable" value: 90 }
    traffic_split { key: "canary" value: 10 }
  }
}
)";

class TrafficSplitServe : public ::testing::Test {
 protected:
  TempDir dir;
  std::string log = (dir.path() / "server.log").string();
  int grpc_port = free_port();
  int rest_port = free_port();
  pid_t server = -1;

  void SetUp() override {
    for (const std::string v : {"1", "2"}) {  // two copies of half_plus_two: the header tells them apart
      std::filesystem::create_directories(dir.path() / "split" / v);
      std::filesystem::copy_file(kHalfPlusTwo + "/00000123/model.json", dir.path() / "split" / v / "model.json");
    }
    std::string text = kSplitConfig;
    text.replace(text.find("%BASE%"), 6, (dir.path() / "split").string());
    std::ofstream(dir.path() / "models.config") << text;
    server = spawn({kTensorhub, "serve", "--model_config_file", (dir.path() / "models.config").string(), "--port",
                    std::to_string(grpc_port), "--rest_api_port", std::to_string(rest_port), "--routing_key_field",
                    "user_id"},
                   log);
  }
  void TearDown() override {
    if (server > 0) {
      kill(server, SIGTERM);
      EXPECT_EQ(wait_exit(server), 0) << read_text(log);
    }
  }
};

// The version a REST predict says answered it (X-Tensorhub-Model-Version), -1 for no answer.
std::int64_t answered_by(httplib::Client& c, const std::string& path, const std::string& body,
                         const httplib::Headers& headers = {}) {
  const auto r = c.Post(path.c_str(), headers, body, "application/json");
  if (!r || r->status != 200 || r->body != R"({"predictions":[2.5]})") return -1;
  if (!r->has_header("X-Tensorhub-Model-Version")) return -1;
  return std::stoll(r->get_header_value("X-Tensorhub-Model-Version"));
}

TEST_F(TrafficSplitServe, RestAndGrpcSplitByWeightStickyPerKeyAndCountedPerVersion) {
  httplib::Client rest("127.0.0.1", rest_port);
  rest.set_read_timeout(30, 0);
  ASSERT_TRUE(eventually([&] {
    const auto r = rest.Get("/v1/models/split");
    return r && r->status == 200 && count_of(r->body, "AVAILABLE") == 2;
  }, 60000ms)) << read_text(log);
  const std::string body = R"({"instances": [1.0]})";
  std::map<std::int64_t, int> seen;  // every OK answer by version, both APIs: the metrics must agree

  // 10,000 unversioned requests without a key: stable's count is Binomial(10000, 0.9), sd 30.
  constexpr int kRequests = 10000;
  for (int i = 0; i < kRequests; ++i) ++seen[answered_by(rest, "/v1/models/split:predict", body)];
  ASSERT_EQ(seen.count(-1), 0u) << read_text(log);
  const double sd = std::sqrt(kRequests * 0.9 * 0.1);
  std::cout << "REST, 10000 unkeyed requests 90/10: version 1 (stable) " << seen[1] << ", version 2 (canary) "
            << seen[2] << " (bound 9000 +- " << 4.5 * sd << ", 4.5 sd)" << std::endl;
  EXPECT_NEAR(seen[1], 9000, 4.5 * sd);

  // 300 X-Request-Id keys, 3 requests each: one version each, the one the placement gives.
  int keys_on_canary = 0;
  for (int k = 0; k < 300; ++k) {
    const std::string key = "rest-" + std::to_string(k);
    for (int r = 0; r < 3; ++r) {
      const auto v = answered_by(rest, "/v1/models/split:predict", body, {{"X-Request-Id", key}});
      ASSERT_EQ(v, placed(key)) << key;
      ++seen[v];
    }
    keys_on_canary += placed(key) == 2;
  }
  EXPECT_GT(keys_on_canary, 0);  // both sides were exercised (expected 30 of 300)
  EXPECT_LT(keys_on_canary, 300);

  // --routing_key_field user_id: the body's member wins over the header; a number is its JSON text.
  for (int k = 0; k < 100; ++k) {
    const std::string user = "user-" + std::to_string(k);
    const auto v = answered_by(rest, "/v1/models/split:predict",
                               R"({"instances": [1.0], "user_id": ")" + user + "\"}", {{"X-Request-Id", "not-this"}});
    ASSERT_EQ(v, placed(user)) << user;
    ++seen[v];
    const auto n = answered_by(rest, "/v1/models/split:predict",
                               R"({"instances": [1.0], "user_id": )" + std::to_string(k) + "}");
    ASSERT_EQ(n, placed(std::to_string(k))) << k;
    ++seen[n];
  }
  // A request naming its version or label is not split, and says who answered.
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(answered_by(rest, "/v1/models/split/labels/canary:predict", body), 2);
    ASSERT_EQ(answered_by(rest, "/v1/models/split/versions/1:predict", body), 1);
    ++seen[2], ++seen[1];
  }

  // gRPC: the same split, model_spec naming the version; x-request-id keys placed as REST's.
  const std::string out = (dir.path() / "client.log").string();
  const pid_t client = spawn({"/usr/bin/python3", kSource + "/tests/grpc_split_client.py", "--proto_dir",
                              kSource + "/proto", "--grpc", "127.0.0.1:" + std::to_string(grpc_port), "--model",
                              "split", "--requests", "2000", "--keys", "100"},
                             out);
  ASSERT_EQ(wait_exit(client), 0) << read_text(out) << read_text(log);
  const std::string text = read_text(out);
  const json counts = json::parse(text.substr(text.rfind("{\"unkeyed\"")));
  const int grpc_stable = counts["unkeyed"].value("1", 0), grpc_canary = counts["unkeyed"].value("2", 0);
  ASSERT_EQ(grpc_stable + grpc_canary, 2000) << text;
  const double grpc_sd = std::sqrt(2000 * 0.9 * 0.1);
  std::cout << "gRPC, 2000 unkeyed requests 90/10: version 1 " << grpc_stable << ", version 2 " << grpc_canary
            << " (bound 1800 +- " << 4.5 * grpc_sd << ")" << std::endl;
  EXPECT_NEAR(grpc_stable, 1800, 4.5 * grpc_sd);
  seen[1] += grpc_stable, seen[2] += grpc_canary;
  for (const auto& [key, versions] : counts["keyed"].items()) {
    for (const auto& v : versions) EXPECT_EQ(v.get<std::int64_t>(), placed(key)) << key;
    seen[placed(key)] += 3;
  }

  // Versions a client makes up are 404 and add no series: the label set stays the loaded versions.
  for (int v = 1000; v < 1020; ++v) {
    const auto r = rest.Post(("/v1/models/split/versions/" + std::to_string(v) + ":predict").c_str(), body,
                             "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << r->body;
    EXPECT_FALSE(r->has_header("X-Tensorhub-Model-Version"));
  }

  // The metrics count per version exactly what the clients were answered, REST and gRPC together.
  const auto scrape = rest.Get("/monitoring/prometheus/metrics");
  ASSERT_TRUE(scrape);
  for (const auto& [version, n] : seen) {
    const std::string line = ":tensorhub:serving:version_request_count{model_name=\"split\",version=\"" +
                             std::to_string(version) + "\",status=\"OK\"} " + std::to_string(n) + "\n";
    EXPECT_NE(scrape->body.find(line), std::string::npos) << line << scrape->body;
  }
  EXPECT_NE(scrape->body.find(R"(:tensorhub:serving:version_request_latency_count{model_name="split",version="2",)"
                              R"(API="Predict",entrypoint="GRPC"})"),
            std::string::npos)
      << scrape->body;
  EXPECT_EQ(scrape->body.find("version=\"10"), std::string::npos) << scrape->body;
}

TEST(TrafficSplitConfig, ParsedByLabelNameWithClearErrors) {
  std::string text = kSplitConfig;
  text.replace(text.find("%BASE%"), 6, "/models/split");
  const auto configs = parse_model_config_file(text);
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].traffic, (std::vector<std::pair<std::string, double>>{{"canary", 10}, {"stable", 90}}));
  EXPECT_TRUE(parse_model_config_file("model_config_list { config { name: 'a' base_path: '/a' } }")[0].traffic.empty());
  expect_error(
      [] {
        parse_model_config_file("model_config_list { config { name: 'a' base_path: '/a' "
                                "version_labels { key: 'stable' value: 1 } traffic_split { key: 'canry' value: 5 } } }");
      },
      ErrorKind::kInvalidArgument,
      {"model a: traffic_split { key: \"canry\" }", "not one of its version_labels (stable)",
       "add version_labels { key: \"canry\""});
  expect_error(
      [] {
        parse_model_config_file("model_config_list { config { name: 'a' base_path: '/a' "
                                "version_labels { key: 'stable' value: 1 } traffic_split { key: 'stable' value: 0 } } }");
      },
      ErrorKind::kInvalidArgument, {"traffic_split { key: \"stable\" } has weight 0", "positive number"});
  expect_error(
      [] {
        parse_model_config_file("model_config_list { config { name: 'a' base_path: '/a' "
                                "version_labels { key: 'x' value: 1 } version_labels { key: 'y' value: 2 } "
                                "traffic_split { key: 'x' value: 1e308 } traffic_split { key: 'y' value: 1e308 } } }");
      },
      ErrorKind::kInvalidArgument, {"model a: traffic_split's weights add up past the largest double"});
}

TEST(TrafficSplitMetrics, PerVersionSeriesOnlyForResolvedRequests) {
  ServingMetrics m;
  m.record("split", "predict", "OK", 0.0002, "REST", 2);     // 200 us
  m.record("split", "predict", "OK", 0.003, "REST", 2);      // 3000 us
  m.record("split", "Predict", "INVALID_ARGUMENT", 0.0001, "GRPC", 1);
  m.record("", "predict", "NOT_FOUND", 0.0001, "REST");      // resolved to no version
  const std::string t = m.text();
  EXPECT_NE(t.find(":tensorhub:serving:version_request_count{model_name=\"split\",version=\"2\",status=\"OK\"} 2\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find(":tensorhub:serving:version_request_count{model_name=\"split\",version=\"1\",status=\"INVALID_ARGUMENT\"} 1\n"),
            std::string::npos)
      << t;
  const std::string v2 = R"(model_name="split",version="2",API="predict",entrypoint="REST")";
  EXPECT_NE(t.find(":tensorhub:serving:version_request_latency_bucket{" + v2 + ",le=\"250\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find(":tensorhub:serving:version_request_latency_bucket{" + v2 + ",le=\"5000\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find(":tensorhub:serving:version_request_latency_sum{" + v2 + "} 3200\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("version=\"0\""), std::string::npos) << t;
  // TF Serving's own series are unchanged: four requests, no version label.
  EXPECT_NE(t.find(":tensorflow:serving:request_count{model_name=\"split\",status=\"OK\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find(":tensorflow:serving:request_count{model_name=\"\",status=\"NOT_FOUND\"} 1\n"), std::string::npos) << t;
}

TEST(TrafficSplitRoutingKey, TheBodysMemberAsText) {
  EXPECT_EQ(request_field_text(R"({"instances": [1], "user_id": "u-7"})", "user_id"), "u-7");
  EXPECT_EQ(request_field_text(R"({"instances": [1], "user_id": 17})", "user_id"), "17");
  EXPECT_EQ(request_field_text(R"({"user_id": {"org": "a", "n": 2}})", "user_id"), R"({"org":"a","n":2})");
  EXPECT_EQ(request_field_text(R"({"instances": [1]})", "user_id"), "");
  EXPECT_EQ(request_field_text(R"([1, 2])", "user_id"), "");
  EXPECT_EQ(request_field_text(R"({"user_id": "u-7")", "user_id"), "");  // truncated: the predict parse says so
  EXPECT_EQ(request_field_text("", "user_id"), "");
}

}  // namespace
}  // namespace tensorhub
