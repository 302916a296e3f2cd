// Serving what a hub model's aliases name (HubSource with aliases, `tensorhub serve --hub_alias`)
// on both backends: a moved alias is served from the next poll, its old version answering
// until the new one is AVAILABLE (and after a failed load); every alias is a version label;
// requests without a version are split by weight, sticky per request id.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "backend_factory.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/serve/hub_source.h"
#include "tensorhub/serve/model_manager.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::error_message_of;

// TF Serving's half_plus_two as model.json layers (no weights): y = scale x + offset.
Json rescaling(double scale, double offset) {
  return {{"input_shape", Json::array()},
          {"loss", nullptr},
          {"layers", {{{"type", "Rescaling"}, {"scale", scale}, {"offset", offset}}}},
          {"signature", {{"inputs", "x"}, {"outputs", "y"}}}};
}

float answer_of(const ModelManager& manager, std::optional<std::string> label = {}) {
  const auto out = manager.get("m", {}, label)->predict(kDefaultSignature, {{"x", Tensor::from<float>(DType::kF32, {1}, {2.0f})}});
  return out.at("y").as<float>()[0];
}

class HubAliasServeTest : public testing::BackendTest {
 protected:
  void set_up() override {
    writer_ = std::make_unique<Hub>(db_->uri(), "p");
    a_ = writer_->save_model(rescaling(1, 0), {}, "mlp");    // 2 -> 2
    b_ = writer_->save_model(rescaling(0.5, 2), {}, "mlp");  // 2 -> 3
  }
  // A manager serving model "mlp" of the hub as "m" through `aliases`, as serve --hub_alias.
  std::unique_ptr<ModelManager> serve(std::vector<std::pair<std::string, double>> aliases) {
    ManagerOptions o;
    o.log = [this](const std::string& line) { logs_.push_back(line); };
    auto manager = std::make_unique<ModelManager>(o);
    HubModelQuery q;
    q.hub_uri = db_->uri();
    q.project = "p";
    q.model_name = "mlp";
    q.aliases = std::move(aliases);
    VersionPolicy all;
    all.kind = VersionPolicy::kAll;
    manager->add_model("m", std::make_unique<HubSource>(q), all);
    manager->poll();
    return manager;
  }
  std::unique_ptr<Hub> writer_;
  std::int64_t a_ = 0, b_ = 0;
  std::vector<std::string> logs_;
};

TEST_P(HubAliasServeTest, AMovedAliasIsServedFromTheNextPoll) {
  writer_->set_model_alias("mlp", "champion", a_);
  const auto manager = serve({{"champion", 1}});
  EXPECT_EQ(manager->resolve_version("m", {}, {}), a_);
  EXPECT_EQ(answer_of(*manager), 2.0f);
  EXPECT_EQ(answer_of(*manager, "champion"), 2.0f);

  writer_->set_model_alias("mlp", "champion", b_);
  EXPECT_EQ(answer_of(*manager), 2.0f);  // until the next poll
  manager->poll();
  EXPECT_EQ(manager->resolve_version("m", {}, {}), b_);
  EXPECT_EQ(answer_of(*manager), 3.0f);
  EXPECT_EQ(answer_of(*manager, "champion"), 3.0f);
  // a is named by no alias any more: unloaded.
  error_message_of(ErrorKind::kNotFound, [&] { manager->get("m", a_); }, "the old version");

  // Every alias of the model is a label, including ones the split does not use.
  writer_->set_model_alias("mlp", "challenger", a_);
  manager->poll();
  EXPECT_EQ(answer_of(*manager, "challenger"), 2.0f);
  EXPECT_EQ(answer_of(*manager), 3.0f);  // unversioned requests still go to the champion
  error_message_of(ErrorKind::kInvalidArgument, [&] { manager->get("m", {}, std::string("staging")); }, "no such label");
}

TEST_P(HubAliasServeTest, TheOldVersionAnswersWhenTheNewOneFailsToLoad) {
  writer_->set_model_alias("mlp", "champion", a_);
  const auto manager = serve({{"champion", 1}});
  Json broken = rescaling(1, 0);
  broken["layers"][0]["type"] = "NoSuchLayer";
  const auto bad = writer_->save_model(broken, {}, "mlp");
  writer_->set_model_alias("mlp", "champion", bad);
  manager->poll();
  EXPECT_EQ(manager->resolve_version("m", {}, std::string("champion")), a_);
  EXPECT_EQ(answer_of(*manager), 2.0f);
  const auto states = manager->status("m", bad);
  ASSERT_EQ(states.size(), 1u);
  EXPECT_NE(states[0].error.find("NoSuchLayer"), std::string::npos) << states[0].error;
  // Fixed: the alias moves to a model that loads, and the failed one is left.
  writer_->set_model_alias("mlp", "champion", b_);
  manager->poll();
  EXPECT_EQ(answer_of(*manager), 3.0f);
}

TEST_P(HubAliasServeTest, AMissingAliasIsTheSourcesErrorSayingWhatToDo) {
  writer_->set_model_alias("mlp", "champion", a_);
  const auto manager = serve({{"champion", 90}, {"challenger", 10}});
  const auto broken = manager->broken_sources();
  ASSERT_EQ(broken.size(), 1u);
  EXPECT_NE(broken[0].error.find("has no alias challenger"), std::string::npos) << broken[0].error;
  EXPECT_NE(broken[0].error.find("model alias set mlp"), std::string::npos) << broken[0].error;
}

TEST_P(HubAliasServeTest, UnversionedRequestsAreSplitByWeightAndStickyPerKey) {
  writer_->set_model_alias("mlp", "champion", a_);
  writer_->set_model_alias("mlp", "challenger", b_);
  const auto manager = serve({{"champion", 90}, {"challenger", 10}});
  // 10,000 requests without a key: champion's count is Binomial(10000, 0.9), sd 30.
  constexpr int kRequests = 10000;
  int to_champion = 0;
  for (int i = 0; i < kRequests; ++i) to_champion += manager->resolve_version("m", {}, {}) == a_;
  const double sd = std::sqrt(kRequests * 0.9 * 0.1);
  std::cout << "split of " << kRequests << " unkeyed requests 90/10: champion " << to_champion << ", challenger "
            << kRequests - to_champion << " (bound 9000 +- " << 4.5 * sd << ", 4.5 sd)" << std::endl;
  EXPECT_NEAR(to_champion, 9000, 4.5 * sd);

  // 1,000 keys, 5 requests each: a key always lands on one version; keys spread 90/10.
  int keys_to_champion = 0;
  for (int k = 0; k < 1000; ++k) {
    const std::string key = "req-" + std::to_string(k);
    const auto first = manager->resolve_version("m", {}, {}, key);
    for (int r = 0; r < 4; ++r) ASSERT_EQ(manager->resolve_version("m", {}, {}, key), first) << key;
    keys_to_champion += first == a_;
    // The documented placement: the key's SHA-256, first 8 bytes over 2^64, against 0.9.
    const double point = static_cast<double>(std::stoull(sha256_hex(key).substr(0, 16), nullptr, 16)) * 0x1p-64;
    EXPECT_EQ(first, point < 0.9 ? a_ : b_) << key;
  }
  const double key_sd = std::sqrt(1000 * 0.9 * 0.1);
  std::cout << "1000 request ids: " << keys_to_champion << " on champion (bound 900 +- " << 4.5 * key_sd << ")" << std::endl;
  EXPECT_NEAR(keys_to_champion, 900, 4.5 * key_sd);
  // A request naming a version or label is not split.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(manager->resolve_version("m", {}, std::string("challenger")), b_);
  EXPECT_EQ(manager->resolve_version("m", a_, {}), a_);
}

INSTANTIATE_TEST_SUITE_P(Backends, HubAliasServeTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

TEST(HubAliasWeights, ParsedWithClearErrors) {
  const auto w = parse_alias_weights("champion=90,challenger=10");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], (std::pair<std::string, double>{"champion", 90}));
  EXPECT_EQ(w[1], (std::pair<std::string, double>{"challenger", 10}));
  EXPECT_EQ(parse_alias_weights("champion"), (std::vector<std::pair<std::string, double>>{{"champion", 1}}));
  testing::expect_error([] { parse_alias_weights("champion=ninety"); }, ErrorKind::kInvalidArgument,
                        {"weight of champion is \"ninety\"", "positive number"});
  testing::expect_error([] { parse_alias_weights("champion=0"); }, ErrorKind::kInvalidArgument, {"positive"});
  testing::expect_error([] { parse_alias_weights("champion=-5,challenger=10"); }, ErrorKind::kInvalidArgument,
                        {"positive"});
  testing::expect_error([] { parse_alias_weights("a=1,a=2"); }, ErrorKind::kInvalidArgument, {"a is given twice"});
  testing::expect_error([] { parse_alias_weights("champion,"); }, ErrorKind::kInvalidArgument, {"alias \"\""});
}

}  // namespace
}  // namespace tensorhub
