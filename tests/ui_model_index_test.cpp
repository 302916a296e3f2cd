// ModelIndex (the leaderboard's in-memory sort) against the store's own sort, on SQLite and
// PostgreSQL: for every sort, the same documents in the same order as Hub::find_models, over
// values of every type; and kept exact when models are added and deleted.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/store/hub.h"
#include "../src/ui/dashboard_api.h"
#include "../src/ui/model_index.h"

namespace tensorhub::testing {
namespace {

using Ids = std::vector<std::int64_t>;

Ids ids_of(const std::vector<Document>& docs) {
  Ids out;
  for (const auto& d : docs) out.push_back(d.id);
  return out;
}

class ModelIndexTest : public BackendTest {
 protected:
  void set_up() override { hub_ = std::make_unique<Hub>(db_->uri(), "p"); }
  std::int64_t save(const Json& tags) { return hub_->save_model({{"layers", Json::array()}}, {}, "m", tags); }
  // The index's first n in `sort` order must be the store's.
  void expect_same_order(ModelIndex& index, const SortSpec& sort, std::int64_t n) {
    const auto [docs, total] = index.first(*hub_, sort, n);
    EXPECT_EQ(ids_of(docs), ids_of(hub_->find_models({}, sort, n))) << "sort " << Json(sort).dump();
    EXPECT_EQ(total, hub_->count_documents(Collection::kModels));
  }
  std::unique_ptr<Hub> hub_;
};

TEST_P(ModelIndexTest, SortsAsTheStoreDoesOverEveryType) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // "m" of every type the store orders (twice some values, so that ties fall back to the id).
  for (const Json& m : {Json(0.5), Json(3), Json(-2), Json(nan), Json(inf), Json(-inf), Json("b"), Json("B"), Json("a"),
                        Json(nullptr), Json(true), Json(false), Json({{"x", 1}}), Json::array({1, 2}), Json(0.5), Json("a")})
    save({{"m", m}, {"cfg", {{"lr", m.is_number() ? m : Json(0.1)}}}, {"name", "n" + std::to_string(m.type_name()[0])}});
  save({{"name", "no m"}});
  save({{"cfg", 3}, {"name", "cfg not an object"}});
  ModelIndex index;
  for (const SortSpec& sort : std::vector<SortSpec>{{{"m", 1}}, {{"m", -1}}, {{"cfg.lr", -1}}, {{"cfg.lr", 1}},
                                                   {{"name", 1}, {"m", -1}}, {{"id", -1}}, {{"time", 1}},
                                                   {} /* Hub's default: newest first */})
    expect_same_order(index, sort, 100);
  expect_same_order(index, {{"m", -1}}, 5);  // a page: the first five only
  EXPECT_EQ(index.first(*hub_, {{"m", -1}}, 0).first.size(), 0u);
  EXPECT_EQ(index.size(), 18u);
}

TEST_P(ModelIndexTest, FollowsModelsAddedAndDeleted) {
  for (int i = 0; i < 5; ++i) save({{"acc", i / 10.0}});
  ModelIndex index;
  expect_same_order(index, {{"acc", -1}}, 10);
  const auto added = save({{"acc", 0.9}});
  EXPECT_EQ(index.first(*hub_, {{"acc", -1}}, 1).first.at(0).id, added);  // appended
  EXPECT_EQ(hub_->delete_models({{"acc", {{"$gte", 0.3}}}}), 3);  // 0.3, 0.4 and 0.9
  expect_same_order(index, {{"acc", -1}}, 10);  // deletions: read again
  EXPECT_EQ(index.size(), 3u);
  Hub other(db_->uri(), "other");  // another project's models are not this one's
  other.save_model({{"layers", Json::array()}}, {}, "m", {{"acc", 1.0}});
  expect_same_order(index, {{"acc", -1}}, 10);
  EXPECT_EQ(index.size(), 3u);
}

TEST_P(ModelIndexTest, RefusesWhatTheStoreRefuses) {
  ModelIndex index;
  expect_error([&] { index.first(*hub_, {{"a;drop", 1}}, 10); }, ErrorKind::kInvalidArgument, {"a;drop", "not allowed"});
  expect_error([&] { index.first(*hub_, {{"a", 2}}, 10); }, ErrorKind::kInvalidArgument, {"must be 1 or -1"});
}

// The leaderboard's rule (MLflow's): the sorted column's NaN, null and missing values last in
// both directions, NaN first; the same from the index (no filter) and from the database (a
// filter), and the store itself keeps MongoDB's order.
TEST_P(ModelIndexTest, TheLeaderboardPutsNaNAndMissingLastInBothDirections) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto l3 = save({{"loss", 0.3}}), n1 = save({{"loss", nan}}), missing = save({{"other", 1}});
  const auto null = save({{"loss", nullptr}}), l1 = save({{"loss", 0.1}}), n2 = save({{"loss", nan}});
  const auto l2 = save({{"loss", 0.2}});
  // Ties (the NaNs, null and missing) newest first, as every sort of the hub.
  const Ids ascending{l1, l2, l3, n2, n1, null, missing}, descending{l3, l2, l1, n2, n1, null, missing};
  ModelIndex index;
  const auto page = [&](const SortSpec& sort, const Json& filter) {
    ModelQuery q;
    q.sort = sort;
    q.filter = filter;
    q.limit = 100;
    Ids out;
    const Json answer = models_json(*hub_, q, &index);
    for (const Json& m : answer["models"]) out.push_back(m["id"].get<std::int64_t>());
    return out;
  };
  EXPECT_EQ(page({{"loss", 1}}, Json::object()), ascending);
  EXPECT_EQ(page({{"loss", -1}}, Json::object()), descending);
  EXPECT_EQ(page({{"loss", 1}}, {{"model_name", "m"}}), ascending);  // through the database
  EXPECT_EQ(page({{"loss", -1}}, {{"model_name", "m"}}), descending);
  // A page cut inside the NaNs, from the database.
  ModelQuery q;
  q.sort = {{"loss", 1}};
  q.filter = {{"model_name", "m"}};
  q.offset = 2;
  q.limit = 2;
  Ids cut;
  const Json answer = models_json(*hub_, q, &index);
  for (const Json& m : answer["models"]) cut.push_back(m["id"].get<std::int64_t>());
  EXPECT_EQ(cut, (Ids{l3, n2}));
  // The store's (MongoDB's) order is unchanged: null and missing, then NaN, lowest.
  EXPECT_EQ(ids_of(hub_->find_models({}, {{"loss", 1}})), (Ids{null, missing, n2, n1, l1, l2, l3}));
}

INSTANTIATE_TEST_SUITE_P(Backends, ModelIndexTest, ::testing::ValuesIn(backend_params()), backend_param_name);

}  // namespace
}  // namespace tensorhub::testing
