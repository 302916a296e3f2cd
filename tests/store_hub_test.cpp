// The hub suite, written once and run against every backend in backend_params().
// Values asserted here were worked out by hand from the data each test saves.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <thread>
#include <vector>

#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/core/log.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/sql.h"

namespace tensorhub {
namespace {

using testing::BackendParam;
using testing::SqliteTestDatabase;
using testing::TestDatabase;
using Ids = std::vector<std::int64_t>;

// Collections of modules above the store (as tune/'s trials and queue/'s epoch reports): the
// store keeps any collection by its name.
constexpr Collection kNotes{"notes"};
constexpr Collection kOtherNotes{"other_notes"};

constexpr const char* kTensorsPart = "tensors.safetensors";

NamedTensors small_tensors(float seed) {
  NamedTensors t;
  t["X_train"] = Tensor::from<float>(DType::kF32, {2, 2}, {seed, seed + 1, seed + 2, seed + 3});
  t["y_train"] = Tensor::from<std::int64_t>(DType::kI64, {2}, {static_cast<std::int64_t>(seed), 7});
  return t;
}

void expect_tensors_equal(const NamedTensors& actual, const NamedTensors& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, t] : expected) {
    ASSERT_TRUE(actual.count(name)) << "missing tensor " << name;
    const Tensor& a = actual.at(name);
    EXPECT_EQ(a.dtype, t.dtype) << name;
    EXPECT_EQ(a.shape, t.shape) << name;
    EXPECT_TRUE(a.data == t.data) << name << ": bytes differ";
  }
}

Ids ids_of(const std::vector<Document>& docs) {
  Ids out;
  for (const auto& d : docs) out.push_back(d.id);
  return out;
}

Ids sorted(Ids ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}


class HubTest : public testing::BackendTest {
 protected:
  Hub open(const std::string& project = "test") { return Hub(db_->uri(), project); }
};

// ---- datasets -------------------------------------------------------------------------------

TEST_P(HubTest, DatasetRoundTripIsBitExactWithTags) {
  Hub hub = open();
  NamedTensors tensors;
  const float nan_payload = [] {
    std::uint32_t bits = 0xffc0beefu;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }();
  tensors["X_train"] = Tensor::from<float>(DType::kF32, {2, 3},
                                           {-0.0f, 1e-45f, nan_payload, 3.4e38f, -1.5f, 0.1f});
  tensors["y_train"] = Tensor::from<std::int64_t>(DType::kI64, {3}, {INT64_MIN, 0, INT64_MAX});
  tensors["pixels"] = Tensor::from<std::uint8_t>(DType::kU8, {4}, {0, 1, 254, 255});
  tensors["weights"] = Tensor::from<double>(DType::kF64, {}, {2.718281828459045});
  tensors["none"] = Tensor::from<float>(DType::kF32, {0}, {});
  const Json tags = {{"description", "it's \"quoted\""}, {"n_train", 3}, {"meta", {{"source", "hand"}}}};

  const std::int64_t id = hub.save_dataset(tensors, "mnist", tags);
  EXPECT_GT(id, 0);
  auto rec = hub.find_top_dataset("mnist");
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->document.id, id);
  EXPECT_EQ(rec->document.project_name, "test");
  EXPECT_GT(rec->document.time, 1'600'000'000'000'000);  // microseconds, after 2020
  Json expected_tags = tags;
  expected_tags["dataset_name"] = "mnist";
  EXPECT_EQ(rec->document.tags, expected_tags);
  ASSERT_EQ(rec->document.parts.size(), 1u);
  // The part is content-addressed: its id is the SHA-256 of the safetensors bytes.
  EXPECT_EQ(rec->document.parts.at(kTensorsPart), sha256_hex(to_safetensors(tensors)));
  expect_tensors_equal(rec->tensors, tensors);

  EXPECT_FALSE(hub.find_top_dataset("fashion").has_value());
  EXPECT_FALSE(hub.find_top_dataset("mnist", {{"n_train", 4}}).has_value());
  EXPECT_TRUE(hub.find_top_dataset("mnist", {{"meta.source", "hand"}}).has_value());
}

TEST_P(HubTest, FindTopDatasetNewestFirstUnlessSorted) {
  Hub hub = open();
  const auto old_id = hub.save_dataset(small_tensors(1), "ds", {{"version", 1}});
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const auto new_id = hub.save_dataset(small_tensors(2), "ds", {{"version", 2}});
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  hub.save_dataset(small_tensors(3), "other", {{"version", 3}});

  auto top = hub.find_top_dataset("ds");
  ASSERT_TRUE(top);
  EXPECT_EQ(top->document.id, new_id);
  expect_tensors_equal(top->tensors, small_tensors(2));

  top = hub.find_top_dataset("ds", {}, {{"version", 1}});
  ASSERT_TRUE(top);
  EXPECT_EQ(top->document.id, old_id);
  expect_tensors_equal(top->tensors, small_tensors(1));

  EXPECT_EQ(hub.find_datasets().size(), 3u);
  EXPECT_EQ(ids_of(hub.find_datasets({{"dataset_name", "ds"}}, {{"time", 1}})), (Ids{old_id, new_id}));
}

TEST_P(HubTest, DatasetTagsMustBeAnObject) {
  Hub hub = open();
  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub.save_dataset(small_tensors(1), "ds", Json::array({1})); },
               "array tags");
  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub.save_dataset(small_tensors(1), "ds", Json("x")); },
               "string tags");
  EXPECT_TRUE(hub.find_datasets().empty());
  EXPECT_EQ(hub.count_blobs(), 0);
}

// ---- models ---------------------------------------------------------------------------------

// A misspelled sort key matches no model's tag, so every model ties: the newest must come
// first (a user who typos "test_acuracy" gets the latest model, not the first one ever saved).
TEST_P(HubTest, TiesAndMissingSortKeysComeNewestFirst) {
  Hub hub = open();
  const Json arch{{"layers", Json::array({{{"type", "Dense"}, {"units", 1}}})}, {"input_shape", {1}}};
  NamedTensors w;
  w["dense.weight"] = Tensor::from<float>(DType::kF32, {1, 1}, {1.0f});
  const auto first = hub.save_model(arch, w, "mlp", {{"test_accuracy", 0.9}});
  const auto second = hub.save_model(arch, w, "mlp", {{"test_accuracy", 0.8}});
  const auto third = hub.save_model(arch, w, "mlp", {{"test_accuracy", 0.9}});
  std::vector<std::string> warnings;
  set_log_sink([&](LogLevel level, const std::string& m) { if (level == LogLevel::kWarning) warnings.push_back(m); });
  EXPECT_EQ(hub.find_top_model("mlp", {}, {{"test_acuracy", -1}})->document.id, third);
  set_log_sink({});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("no tag \"test_acuracy\""), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("test_accuracy"), std::string::npos) << "lists the tags it has: " << warnings[0];
  EXPECT_EQ(hub.find_top_model("mlp", {}, {{"test_accuracy", -1}})->document.id, third);  // tie with `first`
  EXPECT_EQ(ids_of(hub.find_models({}, {{"test_accuracy", -1}})), (Ids{third, first, second}));
  EXPECT_EQ(ids_of(hub.find_models({}, {{"test_accuracy", 1}})), (Ids{second, third, first}));
  // An explicit "time" or "id" key is the caller's to order by.
  EXPECT_EQ(ids_of(hub.find_models({}, {{"id", 1}})), (Ids{first, second, third}));
  // A dotted key names a nested tag, which the sort reads: no warning for one that is there.
  hub.save_model(arch, w, "nested", {{"cfg", {{"lr", 0.1}}}});
  set_log_sink([&](LogLevel level, const std::string& m) { if (level == LogLevel::kWarning) warnings.push_back(m); });
  EXPECT_TRUE(hub.find_top_model("nested", {}, {{"cfg.lr", -1}}).has_value());
  set_log_sink({});
  EXPECT_EQ(warnings.size(), 1u) << warnings.back();
}

TEST_P(HubTest, FindTopModelPicksBestAndReturnsArchitectureAndWeights) {
  Hub hub = open();
  auto arch = [](int units) {
    return Json{{"layers", {{{"type", "Dense"}, {"units", units}, {"activation", "relu"}},
                            {{"type", "Dropout"}, {"rate", 0.2}}}},
                {"input_shape", {784}},
                {"dtype", "float32"}};
  };
  auto weights = [](float v) {
    NamedTensors w;
    w["dense/kernel"] = Tensor::from<float>(DType::kF32, {2, 2}, {v, -v, v / 2, 0.25f});
    w["dense/bias"] = Tensor::from<float>(DType::kF32, {2}, {v, 1.0f});
    return w;
  };
  const auto a = hub.save_model(arch(100), weights(0.70f), "mlp", {{"test_accuracy", 0.70}, {"name", "100"}});
  const auto b = hub.save_model(arch(800), weights(0.91f), "mlp", {{"test_accuracy", 0.91}, {"name", "800"}});
  const auto c = hub.save_model(arch(400), weights(0.85f), "mlp", {{"test_accuracy", 0.85}, {"name", "400"}});
  const auto d = hub.save_model(arch(50), weights(0.50f), "mlp", {{"name", "untested"}});
  hub.save_model(arch(9), weights(0.99f), "cnn", {{"test_accuracy", 0.99}});

  auto best = hub.find_top_model("mlp", {}, {{"test_accuracy", -1}});
  ASSERT_TRUE(best);
  EXPECT_EQ(best->document.id, b);
  EXPECT_EQ(best->document.tags["name"], "800");
  EXPECT_EQ(best->document.tags["model_name"], "mlp");
  EXPECT_EQ(best->architecture, arch(800));
  expect_tensors_equal(best->weights, weights(0.91f));

  auto worst = hub.find_top_model("mlp", {}, {{"test_accuracy", 1}});
  ASSERT_TRUE(worst);
  EXPECT_EQ(worst->document.id, d);  // no test_accuracy sorts below any value
  EXPECT_EQ(worst->architecture, arch(50));

  auto filtered = hub.find_top_model("mlp", {{"test_accuracy", {{"$lt", 0.9}}}}, {{"test_accuracy", -1}});
  ASSERT_TRUE(filtered);
  EXPECT_EQ(filtered->document.id, c);
  expect_tensors_equal(filtered->weights, weights(0.85f));

  EXPECT_FALSE(hub.find_top_model("rnn").has_value());
  EXPECT_EQ(ids_of(hub.find_models({{"model_name", "mlp"}}, {{"test_accuracy", -1}})), (Ids{b, c, a, d}));

  // load_model on a document from find_models gives the same parts.
  const auto docs = hub.find_models({{"name", "100"}});
  ASSERT_EQ(docs.size(), 1u);
  const auto loaded = hub.load_model(docs[0]);
  EXPECT_EQ(loaded.architecture, arch(100));
  expect_tensors_equal(loaded.weights, weights(0.70f));

  EXPECT_EQ(hub.delete_models({{"model_name", "cnn"}}), 1);
  EXPECT_EQ(hub.find_models().size(), 4u);
}

// ---- filters and sorts ----------------------------------------------------------------------

class HubQueryTest : public HubTest {
 protected:
  void SetUp() override {
    HubTest::SetUp();
    if (IsSkipped()) return;
    hub_ = std::make_unique<Hub>(open());
    d1_ = hub_->save_dataset(small_tensors(1), "ds",
                             {{"acc", 0.5}, {"n", 1}, {"name", "a"}, {"flag", true}, {"cfg", {{"lr", 0.1}, {"opt", "sgd"}}}});
    d2_ = hub_->save_dataset(small_tensors(2), "ds",
                             {{"acc", 0.8}, {"n", 2}, {"name", "b"}, {"flag", false}, {"cfg", {{"lr", 0.01}, {"opt", "adam"}}}});
    d3_ = hub_->save_dataset(small_tensors(3), "ds",
                             {{"acc", 0.9}, {"n", 3}, {"name", "c"}, {"cfg", {{"lr", 0.001}, {"opt", "adam"}}}});
    d4_ = hub_->save_dataset(small_tensors(4), "ds", {{"name", "d"}});
  }
  Ids find(const Json& filter) { return sorted(ids_of(hub_->find_datasets(filter))); }
  Ids order(const SortSpec& sort) { return ids_of(hub_->find_datasets({}, sort)); }

  std::unique_ptr<Hub> hub_;
  std::int64_t d1_ = 0, d2_ = 0, d3_ = 0, d4_ = 0;
};

TEST_P(HubQueryTest, EveryFilterOperator) {
  const Ids all{d1_, d2_, d3_, d4_};
  EXPECT_EQ(find(Json::object()), all);
  EXPECT_EQ(find(nullptr), all);
  EXPECT_EQ(find({{"dataset_name", "ds"}}), all);
  // bare value and $eq
  EXPECT_EQ(find({{"name", "b"}}), (Ids{d2_}));
  EXPECT_EQ(find({{"acc", {{"$eq", 0.8}}}}), (Ids{d2_}));
  EXPECT_EQ(find({{"n", 2}}), (Ids{d2_}));
  EXPECT_EQ(find({{"n", 2.0}}), (Ids{d2_}));  // numbers compare by value, int or float
  EXPECT_EQ(find({{"name", "zz"}}), Ids{});
  // $ne matches documents lacking the field, as in MongoDB
  EXPECT_EQ(find({{"acc", {{"$ne", 0.8}}}}), (Ids{d1_, d3_, d4_}));
  EXPECT_EQ(find({{"name", {{"$ne", "a"}}}}), (Ids{d2_, d3_, d4_}));
  // ordering operators never match a missing field
  EXPECT_EQ(find({{"acc", {{"$gt", 0.5}}}}), (Ids{d2_, d3_}));
  EXPECT_EQ(find({{"acc", {{"$gte", 0.8}}}}), (Ids{d2_, d3_}));
  EXPECT_EQ(find({{"acc", {{"$gte", 0.5}}}}), (Ids{d1_, d2_, d3_}));
  EXPECT_EQ(find({{"acc", {{"$lt", 0.8}}}}), (Ids{d1_}));
  EXPECT_EQ(find({{"acc", {{"$lte", 0.8}}}}), (Ids{d1_, d2_}));
  EXPECT_EQ(find({{"acc", {{"$gt", 0.5}, {"$lt", 0.9}}}}), (Ids{d2_}));
  EXPECT_EQ(find({{"n", {{"$gte", 2}}}}), (Ids{d2_, d3_}));
  EXPECT_EQ(find({{"name", {{"$gt", "b"}}}}), (Ids{d3_, d4_}));
  // $in
  EXPECT_EQ(find({{"name", {{"$in", {"a", "c", "zz"}}}}}), (Ids{d1_, d3_}));
  EXPECT_EQ(find({{"n", {{"$in", {2, 3}}}}}), (Ids{d2_, d3_}));
  EXPECT_EQ(find({{"name", {{"$in", Json::array()}}}}), Ids{});
  // $exists
  EXPECT_EQ(find({{"acc", {{"$exists", true}}}}), (Ids{d1_, d2_, d3_}));
  EXPECT_EQ(find({{"acc", {{"$exists", false}}}}), (Ids{d4_}));
  EXPECT_EQ(find({{"flag", {{"$exists", true}}}}), (Ids{d1_, d2_}));
  // booleans
  EXPECT_EQ(find({{"flag", true}}), (Ids{d1_}));
  EXPECT_EQ(find({{"flag", false}}), (Ids{d2_}));
  // nested dotted fields
  EXPECT_EQ(find({{"cfg.opt", "adam"}}), (Ids{d2_, d3_}));
  EXPECT_EQ(find({{"cfg.lr", {{"$lt", 0.05}}}}), (Ids{d2_, d3_}));
  EXPECT_EQ(find({{"cfg.lr", {{"$gte", 0.1}}}}), (Ids{d1_}));
  EXPECT_EQ(find({{"cfg.missing", {{"$exists", false}}}}), (Ids{d1_, d2_, d3_, d4_}));
  // several fields are ANDed
  EXPECT_EQ(find({{"cfg.opt", "adam"}, {"acc", {{"$gte", 0.9}}}}), (Ids{d3_}));
  EXPECT_EQ(find({{"cfg.opt", "sgd"}, {"acc", {{"$gte", 0.9}}}}), Ids{});
  // document columns
  EXPECT_EQ(find({{"id", d2_}}), (Ids{d2_}));
  EXPECT_EQ(find({{"id", {{"$in", {d1_, d3_}}}}}), (Ids{d1_, d3_}));
  EXPECT_EQ(find({{"id", {{"$gt", d2_}}}}), (Ids{d3_, d4_}));
  EXPECT_EQ(find({{"time", {{"$gt", 0}}}}), (Ids{d1_, d2_, d3_, d4_}));
  EXPECT_EQ(find({{"project_name", "test"}}), (Ids{d1_, d2_, d3_, d4_}));
}

TEST_P(HubQueryTest, SortAscendingDescendingWithMissingFields) {
  // Missing fields sort as smaller than any value.
  EXPECT_EQ(order({{"acc", 1}}), (Ids{d4_, d1_, d2_, d3_}));
  EXPECT_EQ(order({{"acc", -1}}), (Ids{d3_, d2_, d1_, d4_}));
  EXPECT_EQ(order({{"name", -1}}), (Ids{d4_, d3_, d2_, d1_}));
  EXPECT_EQ(order({{"cfg.lr", 1}}), (Ids{d4_, d3_, d2_, d1_}));
  // Several keys: cfg.opt ascending (missing, "adam", "adam", "sgd"), ties by acc descending.
  EXPECT_EQ(order({{"cfg.opt", 1}, {"acc", -1}}), (Ids{d4_, d3_, d2_, d1_}));
  EXPECT_EQ(order({{"cfg.opt", -1}, {"acc", 1}}), (Ids{d1_, d2_, d3_, d4_}));
  EXPECT_EQ(order({{"id", -1}}), (Ids{d4_, d3_, d2_, d1_}));
  // limit applies after sorting
  EXPECT_EQ(ids_of(hub_->find_datasets({}, {{"acc", -1}}, 2)), (Ids{d3_, d2_}));
  EXPECT_EQ(ids_of(hub_->find_datasets({{"cfg.opt", "adam"}}, {{"acc", 1}}, 1)), (Ids{d2_}));
  // find_top_dataset honours the sort
  auto top = hub_->find_top_dataset("ds", {}, {{"acc", 1}});
  ASSERT_TRUE(top);
  EXPECT_EQ(top->document.id, d4_);
  expect_tensors_equal(top->tensors, small_tensors(4));
}

TEST_P(HubQueryTest, InvalidFiltersAndSortsAreRejectedWithoutLosingData) {
  const auto blobs = hub_->count_blobs();
  const std::vector<std::pair<std::string, Json>> bad_filters = {
      {"unknown operator", {{"acc", {{"$regex", "x"}}}}},
      {"operator mixed with field", {{"acc", {{"$gt", 0.1}, {"x", 1}}}}},
      {"bad field name", {{"a; DROP TABLE documents; --", 1}}},
      {"quote in field name", {{"name') OR 1=1 --", 1}}},
      {"empty field segment", {{"cfg..lr", 1}}},
      {"field starting with digit", {{"1abc", 1}}},
      {"array filter", Json::array({1, 2})},
      {"string filter", Json("name = 'a'")},
      {"number filter", Json(3)},
      {"object value", {{"cfg", {{"lr", 0.1}}}}},
      {"$in without array", {{"n", {{"$in", 2}}}}},
      {"$exists without bool", {{"n", {{"$exists", 1}}}}},
      {"array operand", {{"n", {{"$gte", {1, 2}}}}}},
      {"object in $in", {{"n", {{"$in", {1, {{"a", 1}}}}}}}},
      {"$nin without array", {{"n", {{"$nin", "a"}}}}},
      {"$not with a value", {{"n", {{"$not", 3}}}}},
      {"unknown top-level operator", {{"$where", "this.n > 1"}}},
      {"$or without array", {{"$or", {{"n", 1}}}}},
      {"$and with empty array", {{"$and", Json::array()}}},
      {"$nor of non-objects", {{"$nor", {1, 2}}}},
  };
  for (const auto& [label, filter] : bad_filters) {
    testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub_->find_datasets(filter); }, "find " + label);
    testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub_->delete_datasets(filter); }, "delete " + label);
    if (filter.is_object())
      testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub_->find_top_dataset("ds", filter); }, "top " + label);
  }
  const std::vector<std::pair<std::string, SortSpec>> bad_sorts = {
      {"direction 0", {{"acc", 0}}},
      {"direction 2", {{"acc", 2}}},
      {"injected field", {{"acc DESC; DROP TABLE documents", 1}}},
      {"empty field", {{"", 1}}},
  };
  for (const auto& [label, sort] : bad_sorts)
    testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub_->find_datasets({}, sort); }, "sort " + label);

  // Nothing was deleted or damaged.
  EXPECT_EQ(find({}), (Ids{d1_, d2_, d3_, d4_}));
  EXPECT_EQ(hub_->count_blobs(), blobs);
  auto top = hub_->find_top_dataset("ds", {{"name", "c"}});
  ASSERT_TRUE(top);
  expect_tensors_equal(top->tensors, small_tensors(3));
}

// ---- SQL injection through values -----------------------------------------------------------

TEST_P(HubTest, SqlInjectionThroughValuesIsHarmless) {
  const std::string evil_project = "p' OR '1'='1";
  Hub hub = open();
  Hub evil = open(evil_project);
  const std::string evil_name = "x'); DROP TABLE documents; --";
  const auto normal = hub.save_dataset(small_tensors(1), "ds", {{"name", "plain"}});
  const auto injected = hub.save_dataset(small_tensors(2), evil_name, {{"name", evil_name}});
  const auto other = evil.save_dataset(small_tensors(3), "ds", {{"name", "' OR 1=1 --"}});

  EXPECT_EQ(sorted(ids_of(hub.find_datasets({{"name", "' OR '1'='1"}}))), Ids{});
  EXPECT_EQ(ids_of(hub.find_datasets({{"name", "a' OR 1=1 --"}})), Ids{});
  EXPECT_EQ(ids_of(hub.find_datasets({{"name", evil_name}})), (Ids{injected}));
  EXPECT_EQ(ids_of(hub.find_datasets({{"name", {{"$in", {"plain\" OR \"1\"=\"1", "'; DELETE FROM blobs; --"}}}}})),
            Ids{});
  auto rec = hub.find_top_dataset(evil_name);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->document.id, injected);
  expect_tensors_equal(rec->tensors, small_tensors(2));

  EXPECT_EQ(hub.delete_datasets({{"name", "' OR '1'='1"}}), 0);
  EXPECT_EQ(hub.delete_datasets({{"dataset_name", "ds' OR '1'='1"}}), 0);
  EXPECT_EQ(sorted(ids_of(hub.find_datasets())), sorted({normal, injected}));

  // The project name is a value too: the evil project sees only its own document.
  EXPECT_EQ(ids_of(evil.find_datasets()), (Ids{other}));
  EXPECT_EQ(evil.delete_datasets({}), 1);
  EXPECT_EQ(sorted(ids_of(hub.find_datasets())), sorted({normal, injected}));
  EXPECT_EQ(hub.count_blobs(), 2);
}

// ---- projects -------------------------------------------------------------------------------

TEST_P(HubTest, ProjectsAreIsolated) {
  Hub alpha = open("alpha");
  Hub beta = open("beta");
  const auto a_ds = alpha.save_dataset(small_tensors(10), "ds", {{"owner", "alpha"}});
  const auto b_ds = beta.save_dataset(small_tensors(20), "ds", {{"owner", "beta"}});
  alpha.save_model({{"layers", Json::array()}}, small_tensors(30), "mlp", {{"test_accuracy", 0.1}});
  beta.save_model({{"layers", Json::array()}}, small_tensors(40), "mlp", {{"test_accuracy", 0.9}});
  alpha.save_training_log({{"epoch", 1}});

  auto a = alpha.find_top_dataset("ds");
  auto b = beta.find_top_dataset("ds");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->document.id, a_ds);
  EXPECT_EQ(b->document.id, b_ds);
  expect_tensors_equal(a->tensors, small_tensors(10));
  expect_tensors_equal(b->tensors, small_tensors(20));
  EXPECT_EQ(ids_of(alpha.find_datasets()), (Ids{a_ds}));
  EXPECT_EQ(ids_of(beta.find_datasets()), (Ids{b_ds}));
  EXPECT_TRUE(alpha.find_datasets({{"id", b_ds}}).empty());

  auto best_alpha = alpha.find_top_model("mlp", {}, {{"test_accuracy", -1}});
  ASSERT_TRUE(best_alpha);
  EXPECT_EQ(best_alpha->document.tags["test_accuracy"], 0.1);
  expect_tensors_equal(best_alpha->weights, small_tensors(30));
  EXPECT_EQ(alpha.find_training_logs().size(), 1u);
  EXPECT_TRUE(beta.find_training_logs().empty());

  // Deleting everything in alpha leaves beta (and beta's blobs) intact.
  EXPECT_EQ(alpha.delete_datasets({}), 1);
  EXPECT_EQ(alpha.delete_models({}), 1);
  EXPECT_EQ(alpha.delete_training_logs({}), 1);
  b = beta.find_top_dataset("ds");
  ASSERT_TRUE(b);
  expect_tensors_equal(b->tensors, small_tensors(20));
  auto best_beta = beta.find_top_model("mlp");
  ASSERT_TRUE(best_beta);
  expect_tensors_equal(best_beta->weights, small_tensors(40));
  EXPECT_FALSE(alpha.find_top_dataset("ds").has_value());
}

TEST_P(HubTest, ListProjectsAndCountDocuments) {
  Hub beta = open("beta");
  EXPECT_TRUE(beta.list_projects().empty());  // an empty hub: not even the open project
  beta.save_model({{"layers", Json::array()}}, small_tensors(1), "mlp", {{"test_accuracy", 0.9}});
  beta.save_model({{"layers", Json::array()}}, small_tensors(2), "mlp", {{"test_accuracy", 0.4}});
  Hub alpha = open("alpha");
  alpha.save_document(kNotes, {{"kind", "search"}});
  Hub zeta = open("Zeta");  // upper case sorts before lower case, bytewise
  zeta.save_testing_log({{"loss", 1}});
  open("never-used");
  EXPECT_EQ(beta.list_projects(), (std::vector<std::string>{"Zeta", "alpha", "beta"}));

  EXPECT_EQ(beta.count_documents(Collection::kModels), 2);
  EXPECT_EQ(beta.count_documents(Collection::kModels, {{"test_accuracy", {{"$gt", 0.5}}}}), 1);
  EXPECT_EQ(beta.count_documents(kNotes), 0);
  EXPECT_EQ(alpha.count_documents(Collection::kModels), 0);  // another project's models
  EXPECT_EQ(alpha.count_documents(kNotes, {{"kind", "search"}}), 1);
  EXPECT_NE(testing::error_message_of(ErrorKind::kInvalidArgument,
                                      [&] { beta.count_documents(Collection::kModels, {{"x", {{"$regex", "a"}}}}); },
                                      "a $regex count")
                .find("$regex"),
            std::string::npos);
}

TEST(Hub, RejectsEmptyProjectAndUnknownUri) {
  SqliteTestDatabase db;
  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { Hub(db.uri(), ""); }, "empty project");
  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { Hub("mysql://localhost/db", "p"); }, "unknown scheme");
  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { Hub("sqlite://", "p"); }, "no path");
  testing::error_message_of(ErrorKind::kUnavailable, [&] { Hub("sqlite:///nonexistent-dir-tensorhub/x/hub.db", "p"); },
               "missing directory");
}

// ---- collections and tables of the modules above the store --------------------------------

TEST_P(HubTest, ModulesKeepCollectionsOfTheirOwn) {
  Hub hub = open();
  const auto s = hub.save_document(kNotes, {{"kind", "search"}, {"search", "s1"}});
  const auto r1 = hub.save_document(kNotes, {{"kind", "epoch"}, {"task_id", 7}, {"epoch", 0}, {"logs", {{"val_loss", 0.5}}}});
  const auto r2 = hub.save_document(kNotes, {{"kind", "epoch"}, {"task_id", 7}, {"epoch", 1}, {"logs", {{"val_loss", 0.4}}}});
  const auto o = hub.save_document(kOtherNotes, {{"kind", "epoch"}, {"task_id", 7}});
  hub.save_training_log({{"kind", "epoch"}});  // another collection: never found as a note

  EXPECT_EQ(ids_of(hub.find_documents(kNotes, Json::object())), (Ids{s, r1, r2}));
  EXPECT_EQ(ids_of(hub.find_documents(kNotes, {{"kind", "epoch"}, {"task_id", 7}}, {{"epoch", -1}})), (Ids{r2, r1}));
  EXPECT_EQ(ids_of(hub.find_documents(kNotes, {{"kind", "epoch"}}, {}, 1)), (Ids{r1}));
  EXPECT_EQ(ids_of(hub.find_documents(kOtherNotes, {{"task_id", 7}})), (Ids{o}));
  const auto docs = hub.find_documents(kNotes, {{"epoch", 1}});
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].tags.at("logs").at("val_loss"), 0.4);

  EXPECT_EQ(hub.delete_documents(kNotes, {{"kind", "epoch"}}), 2);
  EXPECT_EQ(ids_of(hub.find_documents(kNotes, Json::object())), (Ids{s}));
  EXPECT_EQ(hub.count_documents(kOtherNotes), 1);
  EXPECT_EQ(hub.find_training_logs().size(), 1u);
  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub.save_document(kNotes, Json(3)); },
                            "number document tags");
}

TEST_P(HubTest, EnsureSchemaAppliesAModulesStepsOnceAndRefusesANewerVersion) {
  sql::Schema v1{.module = "test_module",
                 .tables = {"test_things"},
                 .sqlite_steps = {"CREATE TABLE test_things (n INTEGER NOT NULL)"},
                 .postgres_steps = {"CREATE TABLE test_things (n BIGINT NOT NULL)"}};
  sql::Schema v2 = v1;
  v2.sqlite_steps.push_back("INSERT INTO test_things (n) VALUES (2)");
  v2.postgres_steps.push_back("INSERT INTO test_things (n) VALUES (2)");
  {
    Hub hub = open();
    hub.sql().ensure_schema(v1);
    hub.sql().ensure_schema(v1);  // once per connection: a second CREATE TABLE would throw
    hub.sql().execute("INSERT INTO test_things (n) VALUES (1)", {}, sql::Access::kWrite);
  }
  Hub hub = open();  // a new connection brings the table from version 1 to 2
  hub.sql().ensure_schema(v2);
  const auto rows = hub.sql().execute("SELECT n FROM test_things ORDER BY n");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows.int64(0, 0), 1);
  EXPECT_EQ(rows.int64(1, 0), 2);
  EXPECT_EQ(hub.sql().execute("SELECT version, tables FROM module_schemas WHERE module = 'test_module'").text(0, 1),
            "test_things");
  Hub older = open();  // a tensorhub that knows only version 1 refuses the newer tables
  const std::string message = testing::error_message_of(
      ErrorKind::kFailedPrecondition, [&] { older.sql().ensure_schema(v1); }, "a newer module schema");
  EXPECT_NE(message.find("test_module tables are at version 2"), std::string::npos) << message;
  EXPECT_NE(message.find("upgrade tensorhub"), std::string::npos) << message;
}

TEST_P(HubTest, AnyCollectionByValueAndAnEmptyProject) {
  Hub hub = open();
  Hub other = open("other");
  EXPECT_TRUE(hub.project_empty());
  const auto m = hub.save_model({{"layers", Json::array()}}, small_tensors(1), "m", {{"acc", 0.5}});
  const auto l = hub.save_validation_log({{"loss", 0.3}});
  EXPECT_FALSE(hub.project_empty());
  EXPECT_TRUE(other.project_empty());  // another project's documents are not this one's
  other.save_document(kNotes, {{"kind", "search"}});  // a module's own collection counts too
  EXPECT_FALSE(other.project_empty());

  EXPECT_EQ(ids_of(hub.find_documents(Collection::kModels, {{"acc", 0.5}})), (Ids{m}));
  EXPECT_EQ(ids_of(hub.find_documents(Collection::kValidationLogs, Json::object())), (Ids{l}));
  EXPECT_TRUE(hub.find_documents(Collection::kTrainingLogs, Json::object()).empty());
  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub.find_documents(Collection::kModels, Json(1)); },
                            "number filter");
  EXPECT_EQ(hub.count_blobs(), 2);  // model.json and the weights
  EXPECT_EQ(hub.delete_documents(Collection::kModels, Json::object()), 1);
  EXPECT_EQ(hub.count_blobs(), 0);
  EXPECT_EQ(hub.delete_documents(Collection::kValidationLogs, {{"loss", 0.3}}), 1);
  EXPECT_TRUE(hub.project_empty());
  EXPECT_TRUE(hub.display_uri().starts_with(db_->uri().substr(0, 8))) << hub.display_uri();
}

// ---- logs -----------------------------------------------------------------------------------

TEST_P(HubTest, LogsSaveFindDelete) {
  Hub hub = open();
  const auto t1 = hub.save_training_log({{"epoch", 1}, {"loss", 0.9}, {"acc", 0.5}});
  const auto t2 = hub.save_training_log({{"epoch", 2}, {"loss", 0.4}, {"acc", 0.8}});
  const auto t3 = hub.save_training_log({{"epoch", 3}, {"loss", 0.6}, {"acc", 0.7}});
  const auto v1 = hub.save_validation_log({{"epoch", 1}, {"acc", 0.6}});
  const auto e1 = hub.save_testing_log({{"acc", 0.75}, {"model", "mlp"}});

  // Without a sort, insertion (id) order; each kind is its own collection.
  EXPECT_EQ(ids_of(hub.find_training_logs()), (Ids{t1, t2, t3}));
  EXPECT_EQ(ids_of(hub.find_validation_logs()), (Ids{v1}));
  EXPECT_EQ(ids_of(hub.find_testing_logs()), (Ids{e1}));
  EXPECT_EQ(ids_of(hub.find_training_logs({{"epoch", {{"$gte", 2}}}}, {{"epoch", -1}})), (Ids{t3, t2}));
  EXPECT_EQ(ids_of(hub.find_training_logs({}, {{"loss", 1}})), (Ids{t2, t3, t1}));
  EXPECT_EQ(ids_of(hub.find_validation_logs({{"epoch", 2}})), Ids{});
  const auto logs = hub.find_testing_logs({{"model", "mlp"}});
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].tags, (Json{{"acc", 0.75}, {"model", "mlp"}}));
  EXPECT_TRUE(logs[0].parts.empty());

  EXPECT_EQ(hub.delete_training_logs({{"loss", {{"$gt", 0.5}}}}), 2);
  EXPECT_EQ(ids_of(hub.find_training_logs()), (Ids{t2}));
  EXPECT_EQ(hub.delete_validation_logs({{"epoch", 5}}), 0);
  EXPECT_EQ(hub.delete_validation_logs({}), 1);
  EXPECT_TRUE(hub.find_validation_logs().empty());
  EXPECT_EQ(ids_of(hub.find_testing_logs()), (Ids{e1}));
  EXPECT_EQ(hub.delete_testing_logs(), 1);
  EXPECT_TRUE(hub.find_testing_logs().empty());
  EXPECT_EQ(ids_of(hub.find_training_logs()), (Ids{t2}));

  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub.save_training_log(Json::array({1})); }, "array log");
  testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub.find_training_logs(Json("epoch")); }, "string filter");
  EXPECT_EQ(hub.count_blobs(), 0);
}

// ---- blobs ----------------------------------------------------------------------------------

TEST_P(HubTest, BlobsAreDeduplicatedAndCollected) {
  Hub hub = open();
  EXPECT_EQ(hub.count_blobs(), 0);
  hub.save_dataset(small_tensors(1), "one", {{"k", 1}});
  EXPECT_EQ(hub.count_blobs(), 1);
  hub.save_dataset(small_tensors(1), "two", {{"k", 2}});  // same tensors, other name and tags
  EXPECT_EQ(hub.count_blobs(), 1);
  const auto one = hub.find_datasets({{"dataset_name", "one"}});
  const auto two = hub.find_datasets({{"dataset_name", "two"}});
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(one[0].parts.at(kTensorsPart), two[0].parts.at(kTensorsPart));

  // A model whose weights are byte-identical to the datasets' tensors shares their blob;
  // its model.json is one new blob.
  hub.save_model({{"layers", Json::array()}}, small_tensors(1), "m");
  EXPECT_EQ(hub.count_blobs(), 2);

  // Deleting one referrer keeps the blob; the other still reads exactly.
  EXPECT_EQ(hub.delete_datasets({{"dataset_name", "one"}}), 1);
  EXPECT_EQ(hub.count_blobs(), 2);
  auto rec = hub.find_top_dataset("two");
  ASSERT_TRUE(rec);
  expect_tensors_equal(rec->tensors, small_tensors(1));

  EXPECT_EQ(hub.delete_datasets({{"dataset_name", "two"}}), 1);
  EXPECT_EQ(hub.count_blobs(), 2);  // the model still references it
  auto model = hub.find_top_model("m");
  ASSERT_TRUE(model);
  expect_tensors_equal(model->weights, small_tensors(1));

  EXPECT_EQ(hub.delete_models({}), 1);
  EXPECT_EQ(hub.count_blobs(), 0);
  testing::error_message_of(ErrorKind::kNotFound, [&] { hub.read_blob(one[0].parts.at(kTensorsPart)); },
               "collected blob");
}

TEST_P(HubTest, DeletingBothDatasetsRemovesTheSharedBlob) {
  Hub hub = open();
  hub.save_dataset(small_tensors(5), "a");
  hub.save_dataset(small_tensors(5), "b");
  hub.save_dataset(small_tensors(6), "c");
  EXPECT_EQ(hub.count_blobs(), 2);
  EXPECT_EQ(hub.delete_datasets({{"dataset_name", {{"$in", {"a", "b"}}}}}), 2);
  EXPECT_EQ(hub.count_blobs(), 1);
  auto c = hub.find_top_dataset("c");
  ASSERT_TRUE(c);
  expect_tensors_equal(c->tensors, small_tensors(6));
}

// 3.5 MiB of pseudo-random bit patterns (NaNs included) spans four 1 MiB chunks.
NamedTensors large_tensors() {
  constexpr std::size_t kFloats = 3 * 1024 * 1024 / 4 + 512 * 1024 / 4;  // 3.5 MiB
  Tensor t;
  t.dtype = DType::kF32;
  t.shape = {static_cast<std::int64_t>(kFloats / 1024), 1024};
  t.data.resize(kFloats * 4);
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (std::size_t i = 0; i < t.data.size(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t.data[i] = static_cast<std::byte>(x >> 56);
  }
  NamedTensors out;
  out["big"] = std::move(t);
  out["small"] = Tensor::from<float>(DType::kF32, {1}, {1.0f});
  return out;
}

TEST_P(HubTest, BlobLargerThanOneChunkRoundTrips) {
  Hub hub = open();
  const NamedTensors tensors = large_tensors();
  ASSERT_EQ(tensors.at("big").data.size(), 3670016u);
  hub.save_dataset(tensors, "big");
  auto rec = hub.find_top_dataset("big");
  ASSERT_TRUE(rec);
  expect_tensors_equal(rec->tensors, tensors);
  const auto bytes = to_safetensors(tensors);
  EXPECT_EQ(rec->document.parts.at(kTensorsPart), sha256_hex(bytes));
  EXPECT_TRUE(hub.read_blob(sha256_hex(bytes)) == bytes);
}

TEST_P(HubTest, UnknownBlobIsNotFound) {
  Hub hub = open();
  testing::error_message_of(ErrorKind::kNotFound, [&] { hub.read_blob(std::string(64, 'a')); }, "unknown blob");
  testing::error_message_of(ErrorKind::kNotFound, [&] { hub.read_blob("' OR 1=1 --"); }, "injected blob id");
}

INSTANTIATE_TEST_SUITE_P(Backends, HubTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);
INSTANTIATE_TEST_SUITE_P(Backends, HubQueryTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

// ---- concurrency (SQLite: a brand-new file opened by several connections at once) ------------

TEST(SqliteHubConcurrency, ConnectionsCreatingTheSameFreshFileAtOnce) {
  // Several processes may start on a hub file that does not exist yet: each connection
  // creates/migrates the schema and switches to WAL. None may fail or lose a write.
  for (int round = 0; round < 5; ++round) {
    SqliteTestDatabase db;
    constexpr int kThreads = 4;
    std::atomic<bool> go{false};
    std::mutex mu;
    std::vector<std::string> errors;
    std::vector<std::thread> threads;
    for (int w = 0; w < kThreads; ++w) {
      threads.emplace_back([&, w] {
        while (!go.load()) std::this_thread::yield();
        try {
          Hub hub(db.uri(), "p");
          hub.save_dataset(small_tensors(static_cast<float>(w)), "ds", {{"worker", w}});
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mu);
          errors.push_back("worker " + std::to_string(w) + ": " + e.what());
        }
      });
    }
    go = true;
    for (auto& t : threads) t.join();
    for (const auto& e : errors) ADD_FAILURE() << "round " << round << ": " << e;
    Hub hub(db.uri(), "p");
    EXPECT_EQ(hub.find_datasets().size(), static_cast<std::size_t>(kThreads)) << "round " << round;
    for (int w = 0; w < kThreads; ++w) {
      auto rec = hub.find_top_dataset("ds", {{"worker", w}});
      ASSERT_TRUE(rec) << "round " << round << " worker " << w;
      expect_tensors_equal(rec->tensors, small_tensors(static_cast<float>(w)));
    }
  }
}

// ---- on-disk tampering (SQLite: the database is one file we can damage) ----------------------

class SqliteFile {
 public:
  explicit SqliteFile(const std::filesystem::path& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("open " + path.string());
  }
  ~SqliteFile() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error(sql + ": " + why);
    }
  }
  std::int64_t query_int(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) throw std::runtime_error(sql);
    std::int64_t v = -1;
    if (sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
  }

 private:
  sqlite3* db_ = nullptr;
};

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(SqliteHubTamper, FlippedByteOnDiskIsDataLossNamingTheBlob) {
  SqliteTestDatabase db;
  const std::string marker = "TENSORHUB-TAMPER";  // 16 bytes, repeated through the tensor
  std::vector<std::uint8_t> pattern;
  for (int i = 0; i < 512; ++i) pattern.insert(pattern.end(), marker.begin(), marker.end());
  NamedTensors victim;
  victim["payload"] = Tensor::from<std::uint8_t>(DType::kU8, {static_cast<std::int64_t>(pattern.size())}, pattern);
  const std::string victim_sha = sha256_hex(to_safetensors(victim));
  {
    Hub hub(db.uri(), "tamper");
    hub.save_dataset(victim, "victim");
    hub.save_dataset(small_tensors(9), "bystander");
    const auto docs = hub.find_datasets({{"dataset_name", "victim"}});
    ASSERT_EQ(docs.size(), 1u);
    ASSERT_EQ(docs[0].parts.at(kTensorsPart), victim_sha);
  }  // closing the last connection checkpoints the WAL into the main file

  const auto wal = std::filesystem::path(db.path().string() + "-wal");
  std::string content = read_whole_file(db.path());
  if (content.find(marker) == std::string::npos ||
      (std::filesystem::exists(wal) && std::filesystem::file_size(wal) > 0)) {
    SqliteFile(db.path()).exec("PRAGMA wal_checkpoint(TRUNCATE)");
    content = read_whole_file(db.path());
  }
  ASSERT_FALSE(std::filesystem::exists(wal) && std::filesystem::file_size(wal) > 0)
      << "the WAL still holds pages; a flip in the main file could be masked";
  const std::size_t pos = content.find(marker);
  ASSERT_NE(pos, std::string::npos) << "pattern not found in " << db.path();

  {
    std::fstream f(db.path(), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp(static_cast<std::streamoff>(pos + 5));
    const char flipped = static_cast<char>(content[pos + 5] ^ 0x01);
    f.write(&flipped, 1);
    ASSERT_TRUE(f.good());
  }
  ASSERT_NE(read_whole_file(db.path()), content);

  Hub hub(db.uri(), "tamper");
  try {
    auto rec = hub.find_top_dataset("victim");
    ADD_FAILURE() << "find_top_dataset returned data from a corrupted blob";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDataLoss) << e.what();
    EXPECT_NE(e.message().find(victim_sha), std::string::npos) << e.what();
  }
  testing::error_message_of(ErrorKind::kDataLoss, [&] { hub.read_blob(victim_sha); }, "read_blob");
  // The rest of the hub is still readable and exact.
  auto other = hub.find_top_dataset("bystander");
  ASSERT_TRUE(other);
  expect_tensors_equal(other->tensors, small_tensors(9));
}

// Damage that breaks the safetensors header itself: the reader parses a dataset's chunks as
// they arrive (SafetensorsDecoder), yet the error must be the blob's failed SHA-256, which
// says what happened, not the parse error the damage causes.
TEST(SqliteHubTamper, DamagedHeaderIsReportedAsACorruptBlob) {
  SqliteTestDatabase db;
  NamedTensors tensors;  // 1.2 MB: two chunks, the damage in the first, its hash checked at the second
  tensors["x"] = Tensor::from<float>(DType::kF32, {300000}, std::vector<float>(300000, 1.5f));
  auto bytes = to_safetensors(tensors);
  const std::string sha = sha256_hex(bytes);
  {
    Hub hub(db.uri(), "tamper");
    hub.save_dataset(tensors, "victim");
  }
  ASSERT_EQ(bytes[8], std::byte{'{'});
  bytes[8] = std::byte{'['};  // the header is no longer a JSON object
  EXPECT_NE(testing::error_message_of(ErrorKind::kDataLoss, [&] { from_safetensors(bytes, "damaged"); }, "parse")
                .find("not a JSON object"),
            std::string::npos);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (std::byte b : std::span(bytes).first(1 << 20)) {  // chunk 0
    hex += kHex[std::to_integer<int>(b) >> 4];
    hex += kHex[std::to_integer<int>(b) & 0xf];
  }
  SqliteFile(db.path()).exec("UPDATE blob_chunks SET data = X'" + hex + "' WHERE sha256 = '" + sha + "' AND idx = 0");
  Hub hub(db.uri(), "tamper");
  const std::string message =
      testing::error_message_of(ErrorKind::kDataLoss, [&] { hub.find_top_dataset("victim"); }, "find_top_dataset");
  EXPECT_NE(message.find("blob " + sha + " in"), std::string::npos) << message;
  EXPECT_NE(message.find("is corrupt"), std::string::npos) << message;
}

TEST(SqliteHubTamper, BlobIsStoredInOneMiBChunks) {
  SqliteTestDatabase db;
  const auto tensors = large_tensors();
  const auto bytes = to_safetensors(tensors);
  const std::string sha = sha256_hex(bytes);
  {
    Hub hub(db.uri(), "p");
    hub.save_dataset(tensors, "big");
  }
  SqliteFile f(db.path());
  const std::string where = " WHERE sha256 = '" + sha + "'";
  EXPECT_EQ(f.query_int("SELECT size FROM blobs" + where), static_cast<std::int64_t>(bytes.size()));
  EXPECT_EQ(f.query_int("SELECT chunk_count FROM blobs" + where), 4);
  EXPECT_EQ(f.query_int("SELECT COUNT(*) FROM blob_chunks" + where), 4);
  EXPECT_EQ(f.query_int("SELECT MAX(length(data)) FROM blob_chunks" + where), 1 << 20);
  EXPECT_EQ(f.query_int("SELECT length(data) FROM blob_chunks" + where + " AND idx = 3"),
            static_cast<std::int64_t>(bytes.size()) - 3 * (1 << 20));
}

TEST(SqliteHubTamper, MissingOrShortChunksAreDataLoss) {
  SqliteTestDatabase db;
  const auto tensors = large_tensors();
  const std::string sha = sha256_hex(to_safetensors(tensors));
  {
    Hub hub(db.uri(), "p");
    hub.save_dataset(tensors, "big");
  }
  const std::string where = " WHERE sha256 = '" + sha + "'";
  auto expect_loss = [&](const std::string& label) {
    Hub hub(db.uri(), "p");
    try {
      hub.find_top_dataset("big");
      ADD_FAILURE() << label << ": returned data";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDataLoss) << label << ": " << e.what();
      EXPECT_NE(e.message().find(sha), std::string::npos) << label << ": " << e.what();
    }
  };
  // A chunk cut short by one byte.
  SqliteFile(db.path()).exec("UPDATE blob_chunks SET data = substr(data, 1, length(data) - 1)" + where +
                             " AND idx = 3");
  expect_loss("short last chunk");
  // A chunk in the middle missing.
  SqliteFile(db.path()).exec("DELETE FROM blob_chunks" + where + " AND idx = 1");
  expect_loss("missing chunk");
  // All chunks gone.
  SqliteFile(db.path()).exec("DELETE FROM blob_chunks" + where);
  expect_loss("no chunks");
}

}  // namespace
}  // namespace tensorhub
