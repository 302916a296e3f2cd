// The filter language's meaning and non-finite numbers, run against every backend in
// backend_params(): one filter selects the same documents on SQLite and PostgreSQL, the ones
// MongoDB would select.
//
// The conformance table below was worked out by hand from MongoDB's manual: "Comparison Query
// Operators" and "Type Bracketing" (inequalities match only the operand's type class; numbers
// of every kind compare together; an array matches if any element does), "Query for Null or
// Missing Fields" ({f: null} matches null and missing), "Comparison/Sort Order" (null < numbers
// < strings < objects < arrays < booleans; strings by bytes), and MongoDB's matcher for NaN
// (NaN equals NaN, so $eq/$gte/$lte NaN match it; $gt/$lt never match it nor with it).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

using testing::BackendParam;
using testing::TestDatabase;

// A collection as a module above the store keeps one (tune/'s trials): filters and sorts work
// the same on every collection.
constexpr Collection kNotes{"notes"};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Json number_double(const char* text) { return {{"$numberDouble", text}}; }

class FilterTest : public testing::BackendTest {
 protected:
  void set_up() override { hub_ = std::make_unique<Hub>(db_->uri(), "test"); }

  // Saves documents {"name": <letter>, "v": <value>} (no "v" for a null Json pointer).
  void save(const std::vector<std::pair<std::string, const Json*>>& docs) {
    for (const auto& [name, value] : docs) {
      Json tags = {{"name", name}};
      if (value) tags["v"] = *value;
      id_of_[hub_->save_document(kNotes, tags)] = name;
    }
  }

  // The letters of the documents `filter` selects, in id order.
  std::string find(const Json& filter) {
    std::string out;
    for (const auto& d : hub_->find_documents(kNotes, filter)) out += id_of_.at(d.id);
    return out;
  }

  std::string order(const SortSpec& sort) {
    std::string out;
    for (const auto& d : hub_->find_documents(kNotes, {}, sort)) out += id_of_.at(d.id);
    return out;
  }

  std::unique_ptr<Hub> hub_;
  std::map<std::int64_t, std::string> id_of_;
};

// Documents A..O, one value of "v" each (H has none).
class ConformanceTest : public FilterTest {
 protected:
  void SetUp() override {
    FilterTest::SetUp();
    if (IsSkipped()) return;
    const Json values[] = {1,    2.5,  "1",  "abc", true, false, nullptr, Json::array({1, 3}), Json::array({"abc", nullptr}),
                           kNaN, kInf, -kInf, Json{{"x", 1}}, Json(std::int64_t{9007199254740993})};
    const std::string names = "ABCDEFGIJKLMNO";  // H is missing: no "v" at all
    std::vector<std::pair<std::string, const Json*>> docs;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] == 'I') docs.emplace_back("H", nullptr);
      docs.emplace_back(std::string(1, names[i]), &values[i]);
    }
    save(docs);
  }
};

TEST_P(ConformanceTest, FiltersSelectWhatMongoDbSelects) {
  // filter (as JSON text, as the command line takes it) -> documents
  const std::vector<std::pair<std::string, std::string>> table = {
      // equality: numbers of any kind together, never strings or booleans; arrays by element
      {R"({"v": 1})", "AI"},
      {R"({"v": {"$eq": 1.0}})", "AI"},
      {R"({"v": "1"})", "C"},
      {R"({"v": "abc"})", "DJ"},
      {R"({"v": true})", "E"},
      {R"({"v": 9007199254740992.0})", ""},  // O is 2^53 + 1: compared exactly
      {R"({"v.x": 1})", "N"},
      // type bracketing of inequalities
      {R"({"v": {"$gt": 1}})", "BILO"},
      {R"({"v": {"$gte": 1}})", "ABILO"},
      {R"({"v": {"$lt": 2.5}})", "AIM"},
      {R"({"v": {"$lte": -1e308}})", "M"},
      {R"({"v": {"$gte": 0}})", "ABILO"},
      {R"({"v": {"$gte": "a"}})", "DJ"},
      {R"({"v": {"$lt": "a"}})", "C"},
      {R"({"v": {"$gt": false}})", "E"},
      {R"({"v": {"$lt": true}})", "F"},
      {R"({"v": {"$gt": 9007199254740992.0}})", "LO"},
      // each operator may be met by another element of an array
      {R"({"v": {"$gt": 2, "$lt": 2}})", "I"},
      // null and missing
      {R"({"v": null})", "GHJ"},
      {R"({"v": {"$gte": null}})", "GHJ"},
      {R"({"v": {"$gt": null}})", ""},
      {R"({"v": {"$ne": null}})", "ABCDEFIKLMNO"},
      {R"({"v": {"$exists": true}})", "ABCDEFGIJKLMNO"},
      {R"({"v": {"$exists": false}})", "H"},
      {R"({"v.x": {"$exists": true}})", "N"},
      // negations match every other type and missing fields
      {R"({"v": {"$ne": 1}})", "BCDEFGHJKLMNO"},
      {R"({"v": {"$in": [2.5, "abc", null]}})", "BDGHJ"},
      {R"({"v": {"$in": [{"$numberDouble": "NaN"}, true]}})", "EK"},
      {R"({"v": {"$in": []}})", ""},
      {R"({"v": {"$nin": [1, null]}})", "BCDEFKLMNO"},
      {R"({"v": {"$nin": []}})", "ABCDEFGHIJKLMNO"},
      {R"({"v": {"$not": {"$gt": 1}}})", "ACDEFGHJKMN"},
      // non-finite numbers are numbers
      {R"({"v": {"$numberDouble": "NaN"}})", "K"},
      {R"({"v": {"$gte": {"$numberDouble": "NaN"}}})", "K"},
      {R"({"v": {"$gt": {"$numberDouble": "NaN"}}})", ""},
      {R"({"v": {"$lt": {"$numberDouble": "NaN"}}})", ""},
      {R"({"v": {"$numberDouble": "Infinity"}})", "L"},
      {R"({"v": {"$gt": 1e308}})", "L"},
      {R"({"v": {"$lt": {"$numberDouble": "Infinity"}}})", "ABIMO"},
      {R"({"v": {"$gt": {"$numberDouble": "-Infinity"}}})", "ABILO"},
      // logical operators
      {R"({"$or": [{"v": 1}, {"v": "1"}]})", "ACI"},
      {R"({"$and": [{"v": {"$gte": 1}}, {"v": {"$lte": 2}}]})", "AI"},
      {R"({"$nor": [{"v": {"$exists": false}}, {"v": null}]})", "ABCDEFIKLMNO"},
      {R"({"$or": [{"name": "A"}, {"v": {"$lt": -1}}], "name": {"$ne": "A"}})", "M"},
      // columns are typed too
      {R"({"id": {"$gte": "a"}})", ""},
      {R"({"id": {"$in": ["1", null]}})", ""},
      {R"({"project_name": {"$gt": 5}})", ""},
      {R"({"project_name": {"$gte": "a"}})", "ABCDEFGHIJKLMNO"},
  };
  for (const auto& [filter, expected] : table) EXPECT_EQ(find(Json::parse(filter)), expected) << filter;
  // A NaN double in a filter built in C++ means the same as its Extended JSON form.
  EXPECT_EQ(find({{"v", kNaN}}), "K");
  EXPECT_EQ(find({{"v", {{"$lte", -kInf}}}}), "M");
}

TEST_P(ConformanceTest, SortFollowsMongoDbsTypeOrder) {
  // null and missing (ties by id), NaN, -Inf, numbers, +Inf, strings by bytes, objects, then
  // arrays (tensorhub sorts them as a whole: header's "left out"), booleans.
  EXPECT_EQ(order({{"v", 1}}), "GHKMABOLCDNIJFE");
  EXPECT_EQ(order({{"v", -1}}), "EFIJNDCLOBAMKGH");
  // A second key breaks ties.
  EXPECT_EQ(order({{"v", 1}, {"name", -1}}), "HGKMABOLCDNJIFE");
}

TEST_P(FilterTest, MalformedFiltersNameTheOperator) {
  const std::vector<std::pair<Json, std::string>> cases = {
      {Json::parse(R"({"v": {"$regex": "a"}})"), "unknown operator \"$regex\""},
      {Json::parse(R"({"v": {"$gt": 1, "x": 2}})"), "operator \"$gt\" and plain key \"x\""},
      {Json::parse(R"({"$where": "1"})"), "unknown top-level operator \"$where\""},
      {Json::parse(R"({"$or": {"v": 1}})"), "$or needs a non-empty array"},
      {Json::parse(R"({"v": {"$in": 3}})"), "$in needs an array"},
      {Json::parse(R"({"v": {"$nin": [[1]]}})"), "$nin cannot compare with [1]"},
      {Json::parse(R"({"v": {"$not": 1}})"), "$not needs an object of operators"},
      {Json::parse(R"({"v": {"$exists": "yes"}})"), "$exists needs true or false"},
      {Json::parse(R"({"v": {"$numberDouble": "1.5"}})"), "unknown operator \"$numberDouble\""},
      {Json::parse(R"({"v": [1, 2]})"), "$eq cannot compare with [1,2]"},
  };
  for (const auto& [filter, part] : cases) {
    const std::string message =
        testing::error_message_of(ErrorKind::kInvalidArgument, [&] { hub_->find_documents(kNotes, filter); }, filter.dump());
    EXPECT_NE(message.find(part), std::string::npos) << filter.dump() << ": " << message;
  }
}

// ---- non-finite numbers are data ----------------------------------------------------------

void expect_non_finite(const Json& j, const std::string& what) {
  ASSERT_TRUE(j.is_object()) << what << ": " << j.dump();
  EXPECT_TRUE(j.at("nan").is_number_float() && std::isnan(j.at("nan").get<double>())) << what << ": " << j.dump();
  EXPECT_EQ(j.at("inf"), kInf) << what;
  EXPECT_EQ(j.at("neg_inf"), -kInf) << what;
  EXPECT_EQ(j.at("finite"), 0.25) << what;
  ASSERT_TRUE(j.at("nested").is_array()) << what;
  EXPECT_TRUE(std::isnan(j.at("nested").at(1).get<double>())) << what;
}

Json non_finite_fields() {
  return {{"nan", kNaN}, {"inf", kInf}, {"neg_inf", -kInf}, {"finite", 0.25}, {"nested", {1.0, kNaN}}};
}

TEST_P(FilterTest, NonFiniteNumbersRoundTripThroughEveryCollection) {
  const Json fields = non_finite_fields();
  hub_->save_model({{"layers", Json::array()}}, {}, "m", fields);
  expect_non_finite(hub_->find_models().at(0).tags, "model tags");
  hub_->save_dataset({}, "d", fields);
  expect_non_finite(hub_->find_top_dataset("d")->document.tags, "dataset tags");
  hub_->save_training_log(fields);
  expect_non_finite(hub_->find_training_logs().at(0).tags, "training log");
  hub_->save_validation_log(fields);
  expect_non_finite(hub_->find_validation_logs().at(0).tags, "validation log");
  hub_->save_document(kNotes, {{"kind", "epoch"}, {"task_id", 1}, {"epoch", 0}, {"logs", fields}});
  expect_non_finite(hub_->find_documents(kNotes, {{"kind", "epoch"}}).at(0).tags.at("logs"), "epoch report");
  // A caller's own {"$numberDouble": "NaN"} reads back as NaN, as in MongoDB.
  hub_->save_document(kNotes, {{"kind", "given"}, {"nan", number_double("NaN")}});
  EXPECT_TRUE(std::isnan(hub_->find_documents(kNotes, {{"kind", "given"}}).at(0).tags.at("nan").get<double>()));
}

TEST_P(FilterTest, NonFiniteNumbersRoundTripThroughTasks) {
  TaskQueue queue(*hub_);
  TaskSpec spec;
  spec.task_name = "t";
  spec.command = "true";
  spec.hyper_parameters = {{"lr", kInf}};
  spec.tags = non_finite_fields();
  spec.train_spec = nullptr;
  queue.create_task(spec);
  auto task = queue.claim("t", "runner", 60, ClaimOrder::kOldestFirst);
  ASSERT_TRUE(task);
  EXPECT_EQ(task->spec.hyper_parameters.at("lr"), kInf);
  expect_non_finite(task->spec.tags, "task tags");
  ASSERT_TRUE(queue.complete(*task, non_finite_fields(), ""));
  const auto found = queue.find_tasks({{"result.nan", number_double("NaN")}});
  ASSERT_EQ(found.size(), 1u);
  expect_non_finite(found[0].result, "task result");
  EXPECT_EQ(queue.find_tasks({{"result.inf", {{"$gt", 1e308}}}}).size(), 1u);
  EXPECT_EQ(queue.find_tasks({{"result.nan", {{"$gt", 0}}}}).size(), 0u);
  // --json output (Task::to_json) keeps them in a form JSON parsers read.
  const std::string text = found[0].to_json().dump();
  EXPECT_NE(text.find(R"("nan":{"$numberDouble":"NaN"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("neg_inf":{"$numberDouble":"-Infinity"})"), std::string::npos) << text;
  expect_non_finite(decode_non_finite(Json::parse(text)).at("result"), "task JSON");
}

TEST_P(FilterTest, DocumentJsonKeepsNonFiniteNumbers) {
  hub_->save_training_log(non_finite_fields());
  const std::string text = hub_->find_training_logs().at(0).to_json().dump();
  EXPECT_NE(text.find(R"("nan":{"$numberDouble":"NaN"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("inf":{"$numberDouble":"Infinity"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("nested":[1.0,{"$numberDouble":"NaN"}])"), std::string::npos) << text;
  EXPECT_EQ(text.find("null"), std::string::npos) << text;
  expect_non_finite(decode_non_finite(Json::parse(text)), "document JSON");
}

TEST_P(FilterTest, TopModelByAMetricIsNeverADivergedOne) {
  const NamedTensors none;
  const auto diverged = hub_->save_model({{"layers", Json::array()}}, none, "m", {{"accuracy", kNaN}, {"loss", kNaN}});
  const auto fair = hub_->save_model({{"layers", Json::array()}}, none, "m", {{"accuracy", 0.7}, {"loss", 0.4}});
  const auto poor = hub_->save_model({{"layers", Json::array()}}, none, "m", {{"accuracy", 0.5}, {"loss", kInf}});
  const auto silent = hub_->save_model({{"layers", Json::array()}}, none, "m", Json::object());
  auto top = hub_->find_top_model("m", {}, {{"accuracy", -1}});
  ASSERT_TRUE(top);
  EXPECT_EQ(top->document.id, fair);
  // Lowest loss first: finite before +Inf; NaN sorts below every number, missing below NaN.
  std::vector<std::int64_t> ids;
  for (const auto& d : hub_->find_models({}, {{"loss", 1}})) ids.push_back(d.id);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{silent, diverged, fair, poor}));
  ids.clear();
  for (const auto& d : hub_->find_models({}, {{"accuracy", -1}})) ids.push_back(d.id);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{fair, poor, diverged, silent}));
  // A diverged model is not one that never reported.
  EXPECT_EQ(hub_->find_models({{"loss", nullptr}}).size(), 1u);
  EXPECT_EQ(hub_->find_models({{"loss", number_double("NaN")}}).at(0).id, diverged);
}

INSTANTIATE_TEST_SUITE_P(Backends, ConformanceTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);
INSTANTIATE_TEST_SUITE_P(Backends, FilterTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
