// Model aliases with history (store/model_aliases.h) on both backends: moves, history chains
// under concurrent movers, the refusal to delete an aliased model (by the Hub and by the
// database's foreign key), projects, read-only hubs.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "backend_factory.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

NamedTensors weight(float v) { return {{"dense.bias", Tensor::from<float>(DType::kF32, {1}, {v})}}; }

class ModelAliasTest : public testing::BackendTest {
 protected:
  void set_up() override {
    hub_ = std::make_unique<Hub>(db_->uri(), "p");
    for (int i = 0; i < 3; ++i) ids_.push_back(hub_->save_model(Json::object(), weight(float(i)), "mlp"));
    cnn_ = hub_->save_model(Json::object(), weight(9.0f), "cnn");
  }
  std::unique_ptr<Hub> hub_;
  std::vector<std::int64_t> ids_;
  std::int64_t cnn_ = 0;
};

TEST_P(ModelAliasTest, SetMoveAndDeleteAreRecordedInTheHistory) {
  EXPECT_EQ(hub_->set_model_alias("mlp", "champion", ids_[0], {.reason = "first", .user = "ana"}), std::nullopt);
  EXPECT_EQ(hub_->set_model_alias("mlp", "champion", ids_[1], {.reason = "better on March", .user = "ben"}), ids_[0]);
  // Where it already points: nothing changes, nothing is recorded.
  EXPECT_EQ(hub_->set_model_alias("mlp", "champion", ids_[1], {.reason = "again", .user = "ben"}), ids_[1]);
  EXPECT_EQ(hub_->set_model_alias("mlp", "challenger", ids_[2], {.reason = "", .user = "ana"}), std::nullopt);

  const auto champion = hub_->find_model_alias("mlp", "champion");
  ASSERT_TRUE(champion);
  EXPECT_EQ(champion->model_id, ids_[1]);
  EXPECT_EQ(champion->user, "ben");
  const auto record = hub_->find_model_by_alias("mlp", "champion");
  ASSERT_TRUE(record);
  EXPECT_EQ(record->document.id, ids_[1]);
  EXPECT_EQ(record->weights.at("dense.bias").as<float>()[0], 1.0f);  // model 1's own weights

  const auto all = hub_->find_model_aliases("mlp");
  ASSERT_EQ(all.size(), 2u);  // by alias: challenger, champion
  EXPECT_EQ(all[0].alias, "challenger");
  EXPECT_EQ(all[1].alias, "champion");
  EXPECT_TRUE(hub_->find_model_aliases("cnn").empty());
  EXPECT_FALSE(hub_->find_model_alias("mlp", "staging"));
  EXPECT_FALSE(hub_->find_model_by_alias("mlp", "staging"));

  EXPECT_EQ(hub_->delete_model_alias("mlp", "champion", {.reason = "retired", .user = "cy"}), ids_[1]);
  EXPECT_EQ(hub_->delete_model_alias("mlp", "champion"), std::nullopt);  // gone: nothing recorded

  const auto history = hub_->model_alias_history("mlp", "champion");
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[0].from_id, std::nullopt);
  EXPECT_EQ(history[0].to_id, ids_[0]);
  EXPECT_EQ(history[0].user, "ana");
  EXPECT_EQ(history[0].reason, "first");
  EXPECT_EQ(history[1].from_id, ids_[0]);
  EXPECT_EQ(history[1].to_id, ids_[1]);
  EXPECT_EQ(history[1].reason, "better on March");
  EXPECT_EQ(history[2].from_id, ids_[1]);
  EXPECT_EQ(history[2].to_id, std::nullopt);
  EXPECT_EQ(history[2].user, "cy");
  EXPECT_LE(history[0].time, history[2].time);
  EXPECT_EQ(hub_->model_alias_history("mlp").size(), 4u);  // and challenger's creation
  // The models stay.
  EXPECT_EQ(hub_->find_models({{"model_name", "mlp"}}).size(), 3u);
}

TEST_P(ModelAliasTest, AMoveWithoutAUserRecordsTheProcesssUser) {
  hub_->set_model_alias("mlp", "champion", ids_[0]);
  EXPECT_EQ(hub_->model_alias_history("mlp")[0].user, current_user_name());
  EXPECT_FALSE(current_user_name().empty());
}

TEST_P(ModelAliasTest, AnAliasNamesOnlyAModelOfItsName) {
  testing::expect_error([&] { hub_->set_model_alias("mlp", "champion", cnn_); }, ErrorKind::kNotFound,
                        {"no model " + std::to_string(cnn_) + " named \"mlp\"", "model list"});
  testing::expect_error([&] { hub_->set_model_alias("mlp", "champion", 99999); }, ErrorKind::kNotFound,
                        {"no model 99999"});
  const auto dataset = hub_->save_dataset(weight(1.0f), "mlp");  // a dataset, even with the name
  testing::expect_error([&] { hub_->set_model_alias("mlp", "champion", dataset); }, ErrorKind::kNotFound,
                        {"no model"});
  for (const char* bad : {"", "1st", "a/b", "latest", "has space", "x?"})
    testing::expect_error([&] { hub_->set_model_alias("mlp", bad, ids_[0]); }, ErrorKind::kInvalidArgument,
                          {"alias \"" + std::string(bad) + "\""});
  check_alias_name("champion-2.v_1");  // letters, digits, - . _
  EXPECT_TRUE(hub_->find_model_aliases().empty());
  EXPECT_TRUE(hub_->model_alias_history("mlp").empty());
}

TEST_P(ModelAliasTest, AnAliasedModelIsNotDeletedUnlessForced) {
  hub_->set_model_alias("mlp", "champion", ids_[1]);
  hub_->set_model_alias("mlp", "canary", ids_[1]);
  testing::expect_error([&] { hub_->delete_models({{"model_name", "mlp"}}); }, ErrorKind::kFailedPrecondition,
                        {"mlp@canary -> " + std::to_string(ids_[1]), "mlp@champion -> " + std::to_string(ids_[1]),
                         "--force"});
  EXPECT_EQ(hub_->find_models({{"model_name", "mlp"}}).size(), 3u);  // nothing deleted
  // Through the collection-generic call too.
  testing::expect_error([&] { hub_->delete_documents(Collection::kModels, {{"id", ids_[1]}}); },
                        ErrorKind::kFailedPrecondition, {"mlp@champion"});
  // Models no alias names go as before.
  EXPECT_EQ(hub_->delete_models({{"id", ids_[0]}}), 1);

  EXPECT_EQ(hub_->delete_models({{"id", ids_[1]}}, /*force=*/true), 1);
  EXPECT_TRUE(hub_->find_model_aliases().empty());
  const auto history = hub_->model_alias_history("mlp", "champion");
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[1].to_id, std::nullopt);
  EXPECT_EQ(history[1].reason, "model " + std::to_string(ids_[1]) + " deleted");
}

TEST_P(ModelAliasTest, TheDatabaseItselfRefusesToDeleteAnAliasedModel) {
  hub_->set_model_alias("mlp", "champion", ids_[2]);
  // Straight SQL, as another program (or an older tensorhub) would delete it: the foreign key.
  testing::expect_error(
      [&] { hub_->sql().execute("DELETE FROM documents WHERE id = ?", {ids_[2]}, sql::Access::kWrite); },
      ErrorKind::kFailedPrecondition, {"constraint"});  // "FOREIGN KEY constraint failed" (SQLite), "violates foreign key constraint" (PostgreSQL)
  EXPECT_EQ(hub_->find_models({{"id", ids_[2]}}).size(), 1u);
}

TEST_P(ModelAliasTest, ConcurrentMovesMakeOneChainOfHistory) {
  constexpr int kThreads = 4, kMoves = 40;
  std::atomic<int> changed{0};
  std::vector<std::thread> movers;
  for (int t = 0; t < kThreads; ++t)
    movers.emplace_back([&, t] {
      Hub hub(db_->uri(), "p");  // a connection of its own
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < kMoves; ++i) {
        const std::int64_t to = ids_[rng() % ids_.size()];
        if (hub.set_model_alias("mlp", "champion", to, {.reason = "", .user = "t" + std::to_string(t)}) != to)
          ++changed;
      }
    });
  for (auto& m : movers) m.join();
  const auto history = hub_->model_alias_history("mlp", "champion");
  ASSERT_EQ(static_cast<int>(history.size()), changed.load());
  ASSERT_GE(history.size(), 2u);
  EXPECT_EQ(history[0].from_id, std::nullopt);
  for (std::size_t i = 1; i < history.size(); ++i) {
    EXPECT_EQ(history[i].from_id, history[i - 1].to_id) << "change " << i;
    EXPECT_NE(history[i].from_id, history[i].to_id) << "change " << i;
  }
  EXPECT_EQ(hub_->find_model_alias("mlp", "champion")->model_id, history.back().to_id);
}

TEST_P(ModelAliasTest, AliasesBelongToTheirProject) {
  hub_->set_model_alias("mlp", "champion", ids_[0]);
  Hub other(db_->uri(), "q");
  const auto theirs = other.save_model(Json::object(), weight(5.0f), "mlp");
  EXPECT_TRUE(other.find_model_aliases().empty());
  testing::expect_error([&] { other.set_model_alias("mlp", "champion", ids_[0]); }, ErrorKind::kNotFound,
                        {"project \"q\""});
  other.set_model_alias("mlp", "champion", theirs);
  EXPECT_EQ(hub_->find_model_alias("mlp", "champion")->model_id, ids_[0]);
  EXPECT_EQ(other.find_model_alias("mlp", "champion")->model_id, theirs);
}

INSTANTIATE_TEST_SUITE_P(Backends, ModelAliasTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

TEST(ModelAliasReadOnly, AReadOnlyHubReadsAliasesAndRefusesMoves) {
  testing::TempDir dir;
  const std::string uri = "sqlite://" + (dir.path() / "hub.db").string();
  std::int64_t id = 0;
  {
    Hub hub(uri, "p");
    id = hub.save_model(Json::object(), weight(1.0f), "mlp");
  }
  {
    // No alias was ever set: the registry's tables are not there, and a reader sees none.
    Hub reader(uri, "p", OpenMode::kReadOnly);
    EXPECT_TRUE(reader.find_model_aliases().empty());
    EXPECT_TRUE(reader.model_alias_history("mlp").empty());
    testing::expect_error([&] { reader.set_model_alias("mlp", "champion", id); }, ErrorKind::kFailedPrecondition,
                          {"read-only"});
  }
  Hub(uri, "p").set_model_alias("mlp", "champion", id);
  Hub reader(uri, "p", OpenMode::kReadOnly);
  ASSERT_EQ(reader.find_model_aliases().size(), 1u);
  EXPECT_EQ(reader.find_model_alias("mlp", "champion")->model_id, id);
}

}  // namespace
}  // namespace tensorhub
