// `tensorhub ui`'s Overview of every project, Searches and Hyperparameters endpoints over real
// HTTP, on SQLite and PostgreSQL: a real tensorhub process on a hub seeded with two real
// searches run by the Tuner (tests/ui/seed_searches.cpp, the browser tests' seed), checked
// against the values the seed computed and printed.
#include <httplib.h>

#include <array>
#include <cmath>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/tune/oracle.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/tune/pareto.h"
#include "tensorhub/tune/tuner.h"
#include "ui/seed.h"

namespace tensorhub::testing {
namespace {

// `tensorhub ui --port 0 --hub URI --project P`; the port read from its first line.
class Ui {
 public:
  Ui(const std::string& uri, const std::string& project)
      : pid_(spawn({kTensorhub, "ui", "--hub", uri, "--project", project, "--port", "0"}, log())) {
    port_ = port_from_log(log(), R"(tensorhub ui: http://127\.0\.0\.1:(\d+)/)");
  }
  ~Ui() {
    kill(pid_, SIGTERM);
    wait_exit(pid_);
  }
  // GET path: the body as JSON, with the status checked.
  Json get(const std::string& path, int expect_status = 200) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(90, 0);
    const auto res = c.Get(path.c_str());
    if (!res) {
      ADD_FAILURE() << "no answer to GET " << path;
      return nullptr;
    }
    EXPECT_EQ(res->status, expect_status) << path << ": " << res->body;
    return Json::parse(res->body);
  }

 private:
  std::string log() const { return (dir_ / "ui.log").string(); }
  TempDir dir_;
  pid_t pid_;
  int port_ = 0;
};

class UiSearchesTest : public BackendTest {
 protected:
  void set_up() override {
    hub_ = std::make_unique<Hub>(db_->uri(), "p");
    facts_ = seed_searches(*hub_, dir_.path());
  }
  const Json& facts() const { return facts_; }
  std::unique_ptr<Hub> hub_;
  TempDir dir_;
  Json facts_;
};

const Json& trial_with_id(const Json& trials, const std::string& id) {
  for (const auto& t : trials)
    if (t["trial_id"] == id) return t;
  ADD_FAILURE() << "no trial " << id;
  static const Json none = Json::object();
  return none;
}

TEST_P(UiSearchesTest, ProjectsListsEveryProjectTheServedOneFirst) {
  Hub alpha(db_->uri(), "alpha");
  alpha.save_model({{"layers", Json::array()}}, {}, "mlp", {{"test_accuracy", 0.5}});
  alpha.save_dataset({{"x", Tensor::from<float>(DType::kF32, {1}, {1})}}, "ds");
  Hub zeta(db_->uri(), "Zeta");
  TaskSpec spec;
  spec.task_name = "t";
  spec.command = "true";
  TaskQueue(zeta).create_task(spec);
  Ui ui(db_->uri(), facts()["tune_project"]);
  const Json projects = ui.get("/api/projects")["projects"];
  ASSERT_EQ(projects.size(), 3u) << projects.dump();  // "p" holds nothing: it is no project
  EXPECT_EQ(projects[0]["name"], "tune");
  EXPECT_EQ(projects[0]["served"], true);
  EXPECT_EQ(projects[0]["searches"], 2);
  EXPECT_EQ(projects[0]["models"], 0);
  EXPECT_EQ(projects[1]["name"], "Zeta");  // then by name, bytewise
  EXPECT_EQ(projects[1]["served"], false);
  EXPECT_EQ(projects[1]["tasks"], Json({{"pending", 1}, {"running", 0}, {"finished", 0}, {"failed", 0}, {"cancelled", 0},
                                        {"total", 1}}));
  EXPECT_EQ(projects[2]["name"], "alpha");
  EXPECT_EQ(projects[2]["models"], 1);
  EXPECT_EQ(projects[2]["datasets"], 1);
  EXPECT_EQ(projects[2]["searches"], 0);
}

TEST_P(UiSearchesTest, SearchesListsBothWithTheirBest) {
  Ui ui(db_->uri(), facts()["tune_project"]);
  const Json list = ui.get("/api/searches")["searches"];
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["name"], "hb-mlp");
  EXPECT_EQ(list[0]["oracle"], "hyperband");
  EXPECT_EQ(list[0]["objective"], "val_accuracy:max");
  EXPECT_EQ(list[0]["done"], true);
  EXPECT_EQ(list[0]["trials"], facts()["hb_trials"]);
  EXPECT_EQ(list[0]["best"]["trial_id"], facts()["hb_best_trial"]);
  EXPECT_EQ(list[0]["best"]["score"], facts()["hb_best_score"]);
  EXPECT_EQ(list[1]["name"], "asha-live");
  EXPECT_EQ(list[1]["done"], false);
  EXPECT_EQ(list[1]["statuses"], Json({{"completed", 3}, {"running", 2}}));
}

TEST_P(UiSearchesTest, AHyperbandSearchsBracketsAndBestSoFar) {
  Ui ui(db_->uri(), facts()["tune_project"]);
  const Json s = ui.get("/api/searches/hb-mlp");
  EXPECT_EQ(s["metric"], "val_accuracy");
  EXPECT_EQ(s["maximize"], true);
  EXPECT_EQ(s["parameters"], Json({"lr", "units", "optimizer"}));
  // The tuner's schedule for max_epochs 9, factor 3 (hyperband_schedule, checked against Keras
  // Tuner's numbers in tune_hyperband_test): every round of every bracket, with its trials.
  std::vector<std::array<int, 4>> shape, expected;  // bracket, round, epochs, trials
  for (const auto& b : s["brackets"])
    for (const auto& r : b["rounds"])
      shape.push_back({b["bracket"].get<int>(), r["round"].get<int>(), r["epochs"].get<int>(),
                       static_cast<int>(r["trials"].size())});
  int trials = 0;
  for (const auto& r : hyperband_schedule(9, 3)) {
    expected.push_back({r.bracket, r.round, r.epochs, r.trials});
    trials += r.trials;
  }
  EXPECT_EQ(shape, expected);
  ASSERT_EQ(s["trials"].size(), static_cast<std::size_t>(trials));
  EXPECT_EQ(facts()["hb_trials"], trials);
  EXPECT_EQ(s["brackets"][0]["bracket"], 2);
  // Every trial's score is the seed's; a promoted trial names its parent.
  for (const auto& t : s["trials"]) {
    EXPECT_EQ(t["score"], facts()["hb_scores"][t["trial_id"].get<std::string>()]) << t.dump();
    EXPECT_EQ(t["status"], "completed");
    EXPECT_EQ(t["task_status"], "finished");
    if (t["round"] != 0) {
      EXPECT_TRUE(t["parent_trial"].is_string()) << t.dump();
    }
  }
  // Best so far: one point per trial in the order they ended, the running maximum of the scores.
  const Json& points = s["best_so_far"];
  ASSERT_EQ(points.size(), s["trials"].size());
  double best = -1, last_time = 0;
  for (const auto& p : points) {
    best = std::max(best, facts()["hb_scores"][p["trial_id"].get<std::string>()].get<double>());
    EXPECT_EQ(p["best"], best) << p.dump();
    EXPECT_GE(p["time_s"].get<double>(), last_time);
    last_time = p["time_s"];
  }
  EXPECT_EQ(best, facts()["hb_best_score"]);
  EXPECT_EQ(s["best"]["task_id"], facts()["hb_best_task"]);
  // Nothing changed: the long poll answers with the same version (wait=0: at once).
  EXPECT_EQ(ui.get("/api/searches/hb-mlp?since=" + s["version"].get<std::string>() + "&wait=0")["version"], s["version"]);
  EXPECT_TRUE(ui.get("/api/searches/nope", 404)["error"].get<std::string>().find("no search named 'nope'") !=
              std::string::npos);
}

TEST_P(UiSearchesTest, AnAshaSearchsRungsAndItsTrialWithNoMetricYet) {
  Ui ui(db_->uri(), facts()["tune_project"]);
  const Json s = ui.get("/api/searches/asha-live");
  EXPECT_EQ(s["done"], false);
  const Json& running = trial_with_id(s["trials"], facts()["asha_running_trial"]);
  EXPECT_EQ(running["task_id"], facts()["asha_running_task"]);
  EXPECT_EQ(running["status"], "running");
  EXPECT_EQ(running["task_status"], "running");
  EXPECT_TRUE(running["score"].is_null());
  // ASHA's rungs are bracket 0's rounds: three trials and the running one at rung 0 (1 epoch),
  // the best of the three promoted to rung 1 (3 epochs), its task pending.
  ASSERT_EQ(s["brackets"].size(), 1u);
  const Json& rungs = s["brackets"][0]["rounds"];
  ASSERT_EQ(rungs.size(), 2u);
  EXPECT_EQ(rungs[0]["epochs"], 1);
  EXPECT_EQ(rungs[0]["trials"].size(), 4u);
  EXPECT_EQ(rungs[1]["epochs"], 3);
  ASSERT_EQ(rungs[1]["trials"].size(), 1u);
  const Json& promoted = trial_with_id(s["trials"], rungs[1]["trials"][0]);
  EXPECT_EQ(promoted["task_id"], facts()["asha_pending_task"]);
  EXPECT_EQ(promoted["task_status"], "pending");
  std::string best_parent;
  double best = -1;
  for (const auto& [id, score] : facts()["asha_scores"].items())
    if (score.get<double>() > best) best = score, best_parent = id;
  EXPECT_EQ(promoted["parent_trial"], best_parent);
  EXPECT_EQ(s["best_so_far"].size(), 3u);
}

TEST_P(UiSearchesTest, ASearchsLongPollAnswersWhenATrialsTaskChanges) {
  Ui ui(db_->uri(), facts()["tune_project"]);
  const Json before = ui.get("/api/searches/asha-live");
  Json after;
  std::thread poll([&] { after = ui.get("/api/searches/asha-live?wait=30&since=" + before["version"].get<std::string>()); });
  std::this_thread::sleep_for(500ms);  // the poll waits: nothing changed yet
  Hub tune(db_->uri(), facts()["tune_project"]);
  TaskQueue(tune).cancel_tasks({{"id", facts()["asha_running_task"]}});
  poll.join();
  ASSERT_TRUE(after.is_object());
  EXPECT_NE(after["version"], before["version"]);
  EXPECT_EQ(trial_with_id(after["trials"], facts()["asha_running_trial"])["task_status"], "cancelled");
  EXPECT_NE(ui.get("/api/searches/asha-live?wait=99", 400)["error"].get<std::string>().find("0..60"), std::string::npos);
}

TEST_P(UiSearchesTest, ARunningTrialShowsItsLastEpochAsItTrains) {
  Ui ui(db_->uri(), facts()["tune_project"]);
  const Json before = ui.get("/api/searches/asha-live");
  EXPECT_TRUE(trial_with_id(before["trials"], facts()["asha_running_trial"])["last_epoch"].is_null());
  Json after;
  std::thread poll([&] { after = ui.get("/api/searches/asha-live?wait=30&since=" + before["version"].get<std::string>()); });
  Hub tune(db_->uri(), facts()["tune_project"]);
  const std::int64_t task = facts()["asha_running_task"];
  const int attempt = TaskQueue(tune).get_task(task).attempt;
  save_epoch_report(tune, task, attempt, 0, {{"val_accuracy", 0.41}});
  save_epoch_report(tune, task, attempt + 1, 1, {{"val_accuracy", 0.99}});  // another attempt's: ignored
  poll.join();  // a new report is a change: the long poll answers
  ASSERT_TRUE(after.is_object());
  EXPECT_EQ(trial_with_id(after["trials"], facts()["asha_running_trial"])["last_epoch"],
            Json({{"epoch", 0}, {"logs", {{"val_accuracy", 0.41}}}}));
  for (const auto& t : after["trials"]) {  // finished trials show none
    if (t["task_status"] != "running") {
      EXPECT_TRUE(t["last_epoch"].is_null()) << t.dump();
    }
  }
}

TEST_P(UiSearchesTest, HparamsOfASearchHaveItsSpaceAndObjective) {
  Ui ui(db_->uri(), facts()["tune_project"]);
  const Json h = ui.get("/api/hparams?search=hb-mlp");
  EXPECT_EQ(h["source"], "search");
  EXPECT_EQ(h["objective"], Json({{"name", "val_accuracy"}, {"maximize", true}}));
  EXPECT_EQ(h["columns"], Json::parse(R"([{"name": "lr", "kind": "param", "type": "number"},
      {"name": "units", "kind": "param", "type": "number"}, {"name": "optimizer", "kind": "param", "type": "string"},
      {"name": "tuner/epochs", "kind": "param", "type": "number"},
      {"name": "val_accuracy", "kind": "metric", "type": "number"}])"));
  ASSERT_EQ(h["rows"].size(), facts()["hb_trials"].get<std::size_t>());
  for (const auto& r : h["rows"]) EXPECT_EQ(r["values"]["val_accuracy"], facts()["hb_scores"][r["id"].get<std::string>()]);
  EXPECT_EQ(h["rows"][0]["id"], "0000");  // in trial order

  // The running trial with no metric yet is a row of its own, its objective null.
  const Json a = ui.get("/api/hparams?search=asha-live");
  ASSERT_EQ(a["rows"].size(), 5u);
  bool seen = false;
  for (const auto& r : a["rows"])
    if (r["id"] == facts()["asha_running_trial"]) {
      seen = true;
      EXPECT_TRUE(r["values"]["val_accuracy"].is_null()) << r.dump();
      EXPECT_EQ(r["status"], "running");
      EXPECT_TRUE(r["values"]["lr"].is_number());
    }
  EXPECT_TRUE(seen);
  EXPECT_TRUE(ui.get("/api/hparams?search=nope", 404).contains("error"));
}

TEST_P(UiSearchesTest, HparamsOfEveryTaskWithoutASearch) {
  Ui ui(db_->uri(), facts()["tune_project"]);
  const Json h = ui.get("/api/hparams");
  EXPECT_EQ(h["source"], "tasks");
  ASSERT_EQ(h["rows"].size(), facts()["hb_trials"].get<std::size_t>() + 5);  // and 5 ASHA trials, each a task
  std::vector<std::string> names;
  for (const auto& c : h["columns"]) names.push_back(c["name"]);
  // Sorted parameters (the tuner's keys but tuner/epochs left out), then the results' numbers.
  EXPECT_EQ(names, (std::vector<std::string>{"lr", "optimizer", "tuner/epochs", "units", "val_accuracy"}));
  for (const auto& r : h["rows"]) {
    EXPECT_EQ(r["id"], r["task_id"]);
    if (r["id"] == facts()["asha_running_task"]) {
      EXPECT_FALSE(r["values"].contains("val_accuracy")) << r.dump();
    }
    if (r["status"] == "finished") {
      EXPECT_TRUE(r["values"]["val_accuracy"].is_number()) << r.dump();
    }
  }
}

// `tensorhub tune --name 'g<b>1</b>'`: a name with "/" is one path segment once encoded (%2F),
// which the server decodes before routing; /api/searches/<name> takes the rest of the path.
TEST_P(UiSearchesTest, ASearchWhoseNameHoldsASlashOpens) {
  TunerOptions o;
  o.hub_uri = db_->uri();
  o.project_name = facts()["tune_project"];
  o.search_name = "g<b>1</b>";
  o.oracle = "hyperband";
  o.space = SearchSpace().Int("units", 32, 256, 32);
  o.oracle_options.objective = Objective::parse("val_accuracy:max");
  o.oracle_options.max_epochs = 3;
  o.command = "train --units {units}";
  o.task_name = "slash-trial";
  o.poll_s = 0.01;
  Tuner tuner(o);
  tuner.search([&](const SearchSummary&) { tuner.request_stop(); });  // its first trials queued: enough
  Ui ui(db_->uri(), facts()["tune_project"]);
  const Json s = ui.get("/api/searches/g%3Cb%3E1%3C%2Fb%3E");
  EXPECT_EQ(s["name"], "g<b>1</b>");
  EXPECT_EQ(s["oracle"], "hyperband");
  EXPECT_FALSE(s["trials"].empty());
}

// A search of two objectives and a PBT search, seeded here by playing the runner (the grid's
// x in 0..4 gives (a, b) = (x, (x - 3)^2): x = 4 is dominated by x = 2): the search API gives
// the objectives, the Pareto front and each trial's values; PBT's trials their lineage.
TEST_P(UiSearchesTest, ASearchOfTwoObjectivesHasItsFrontAndPbtTrialsTheirLineage) {
  Hub hub(db_->uri(), "front");
  TaskQueue queue(hub);
  TunerOptions o;
  o.hub_uri = db_->uri();
  o.project_name = "front";
  o.search_name = "two";
  o.oracle = "grid";
  o.space = SearchSpace().Int("x", 0, 4);
  o.oracle_options.objectives = parse_objectives("a:min,b:min");
  o.oracle_options.objective = o.oracle_options.objectives.front();
  o.command = "train {x}";
  o.max_parallel_trials = 5;
  o.poll_s = 0.01;
  o.log = [](const std::string&) {};
  {
    Tuner tuner(o);
    tuner.search([&](const SearchSummary&) {
      while (auto t = queue.claim("trial", "seed", 60)) {
        const int x = t->spec.hyper_parameters.at("x");
        queue.complete(*t, {{"a", x}, {"b", (x - 3) * (x - 3)}});
      }
    });
  }
  TunerOptions p = o;
  p.search_name = "pbt";
  p.oracle = "pbt";
  p.space = SearchSpace().Float("h", 0, 1);
  p.oracle_options = OracleOptions{};
  p.oracle_options.objective = Objective::parse("q:max");
  p.oracle_options.seed = 3;
  p.oracle_options.population = 4;
  p.oracle_options.max_epochs = 4;
  p.oracle_options.perturbation_interval = 1;
  p.command = "train {h}";
  {
    Tuner tuner(p);
    tuner.search([&](const SearchSummary&) {
      while (auto t = queue.claim("trial", "seed", 60)) {
        const Json& hp = t->spec.hyper_parameters;
        queue.complete(*t, {{"q", hp.at("h").get<double>() * hp.at("tuner/epochs").get<int>()}});
      }
    });
  }
  Ui ui(db_->uri(), "front");
  const Json two = ui.get("/api/searches/two");
  EXPECT_EQ(two["objectives"], Json::parse(R"([{"name": "a", "maximize": false}, {"name": "b", "maximize": false}])"));
  std::vector<int> front_x;
  for (const auto& id : two["pareto_front"]) front_x.push_back(trial_with_id(two["trials"], id)["hyper_parameters"]["x"]);
  EXPECT_EQ(front_x, (std::vector<int>{0, 1, 2, 3}));
  for (const auto& t : two["trials"]) {
    const int x = t["hyper_parameters"]["x"];
    EXPECT_EQ(t["values"], Json::array({x, (x - 3) * (x - 3)}));
  }
  const Json pbt = ui.get("/api/searches/pbt");
  EXPECT_TRUE(pbt["pareto_front"].is_null());
  int exploits = 0;
  for (const auto& t : pbt["trials"]) {
    EXPECT_TRUE(t["member"].is_number()) << t.dump();
    EXPECT_TRUE(t["segment"].is_number()) << t.dump();
    if (t["exploited_trial"].is_null()) continue;
    ++exploits;
    EXPECT_EQ(t["parent_trial"], t["exploited_trial"]);
    EXPECT_NE(t["exploited_member"], t["member"]);
  }
  EXPECT_GE(exploits, 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, UiSearchesTest, ::testing::ValuesIn(backend_params()), backend_param_name);

}  // namespace
}  // namespace tensorhub::testing
