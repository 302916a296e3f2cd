// ModelManager in process, with a fake source and a fake clock: version policies (latest N,
// all, specific), labels, loading before unloading, retries of failed loads and of broken
// sources with exponential backoff, one log line per change of state, and why a model with
// nothing loaded has nothing. Then the two real sources: FileSystemSource on real
// directories and HubSource on a real SQLite hub.
#include <gtest/gtest.h>

#include <fstream>

#include "tensorhub/serve/file_system_source.h"
#include "tensorhub/serve/hub_source.h"
#include "tensorhub/serve/model_manager.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/model.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::error_message_of;
using testing::TempDir;
using namespace std::chrono_literals;

// A servable that only knows its version.
class FakeServable final : public Servable {
 public:
  explicit FakeServable(std::int64_t version) : version_(version) { signatures_[kDefaultSignature] = {}; }
  const std::map<std::string, Signature>& signatures() const override { return signatures_; }
  NamedTensors predict(const std::string&, const NamedTensors&) const override { return {}; }
  std::string source() const override { return "fake version " + std::to_string(version_); }
  std::int64_t version() const { return version_; }

 private:
  std::int64_t version_;
  std::map<std::string, Signature> signatures_;
};

// What the fake source lists, which loads fail, and whether listing fails; counts calls.
struct FakeWorld {
  std::set<std::int64_t> versions;
  std::set<std::int64_t> failing;      // their loaders throw DataLoss
  std::optional<std::string> broken;   // list_versions throws Unavailable with this
  int listings = 0;
  std::map<std::int64_t, int> loads;
  std::vector<std::pair<std::string, double>> traffic;  // traffic_split(), read when the model is added
};

class FakeSource final : public Source {
 public:
  explicit FakeSource(std::shared_ptr<FakeWorld> world) : world_(std::move(world)) {}
  std::map<std::int64_t, Loader> list_versions() override {
    ++world_->listings;
    if (world_->broken) throw Unavailable(*world_->broken);
    std::map<std::int64_t, Loader> out;
    for (auto v : world_->versions)
      out[v] = [world = world_, v]() -> std::shared_ptr<const Servable> {
        ++world->loads[v];
        if (world->failing.count(v)) throw DataLoss("version " + std::to_string(v) + " is half copied");
        return std::make_shared<FakeServable>(v);
      };
    return out;
  }
  std::string describe() const override { return "the fake source"; }
  std::vector<std::pair<std::string, double>> traffic_split() const override { return world_->traffic; }
  std::string empty_message() const override { return "the fake source lists nothing"; }

 private:
  std::shared_ptr<FakeWorld> world_;
};

VersionPolicy latest(int n) {
  VersionPolicy p;
  p.latest = n;
  return p;
}
VersionPolicy all_versions() {
  VersionPolicy p;
  p.kind = VersionPolicy::kAll;
  return p;
}
VersionPolicy specific(std::set<std::int64_t> versions) {
  VersionPolicy p;
  p.kind = VersionPolicy::kSpecific;
  p.versions = std::move(versions);
  return p;
}
HubModelQuery query(const std::string& uri, const std::string& project, const std::string& model_name,
                    SortSpec sort = {}) {
  HubModelQuery q;
  q.hub_uri = uri;
  q.project = project;
  q.model_name = model_name;
  q.sort = std::move(sort);
  return q;
}

class ModelManagerTest : public ::testing::Test {
 protected:
  // A manager with a fake clock (advanced by hand) and its log lines collected. Retries wait
  // 1 s, then 2 s, 4 s, capped at 8 s.
  std::unique_ptr<ModelManager> make_manager() {
    ManagerOptions o;
    o.retry_initial_seconds = 1;
    o.retry_max_seconds = 8;
    o.now = [this] { return now_; };
    o.log = [this](const std::string& line) { logs_.push_back(line); };
    return std::make_unique<ModelManager>(o);
  }
  void add(ModelManager& manager, const std::string& name, VersionPolicy policy = {},
           std::map<std::string, std::int64_t> labels = {}) {
    manager.add_model(name, std::make_unique<FakeSource>(world_), policy, labels);
  }
  void advance(std::chrono::milliseconds d) { now_ += d; }
  // The version of the servable get() returns.
  static std::int64_t served(const ModelManager& m, const std::string& name, std::optional<std::int64_t> v = {},
                             const std::optional<std::string>& label = {}) {
    return dynamic_cast<const FakeServable&>(*m.get(name, v, label)).version();
  }
  // "3:AVAILABLE 2:END", newest first.
  static std::string states(const ModelManager& m, const std::string& name) {
    std::string out;
    for (const auto& s : m.status(name)) {
      if (!out.empty()) out += ' ';
      out += std::to_string(s.version);
      out += ':';
      out += to_string(s.state);
    }
    return out;
  }
  int log_lines_with(const std::string& text) const {
    return static_cast<int>(std::count_if(logs_.begin(), logs_.end(),
                                          [&](const std::string& l) { return l.find(text) != std::string::npos; }));
  }

  std::shared_ptr<FakeWorld> world_ = std::make_shared<FakeWorld>();
  std::chrono::steady_clock::time_point now_{};
  std::vector<std::string> logs_;
};

TEST_F(ModelManagerTest, LatestTwoServesTheTwoNewestAndTheNewestByDefault) {
  auto m = make_manager();
  add(*m, "mlp", latest(2));
  world_->versions = {1, 2, 3};
  m->poll();
  EXPECT_EQ(states(*m, "mlp"), "3:AVAILABLE 2:AVAILABLE");
  EXPECT_EQ(world_->loads[1], 0);
  EXPECT_EQ(served(*m, "mlp"), 3);
  EXPECT_EQ(served(*m, "mlp", 2), 2);
  EXPECT_EQ(m->resolve_version("mlp", {}, {}), 3);
  world_->versions = {1, 2, 3, 4};
  m->poll();
  EXPECT_EQ(states(*m, "mlp"), "4:AVAILABLE 3:AVAILABLE 2:END");
  error_message_of(ErrorKind::kNotFound, [&] { m->get("mlp", 2); }, "an unloaded version");
  error_message_of(ErrorKind::kNotFound, [&] { m->get("mlp", 9); }, "a version that never existed");
  EXPECT_EQ(error_message_of(ErrorKind::kNotFound, [&] { m->status("mlp", 9); }, "status of version 9"),
            "Could not find version 9 of model mlp");
  EXPECT_EQ(error_message_of(ErrorKind::kNotFound, [&] { m->get("nope"); }, "unknown model"),
            "Servable not found for request: Latest(nope)");
}

TEST_F(ModelManagerTest, AllAndSpecificPolicies) {
  auto m = make_manager();
  add(*m, "all", all_versions());
  add(*m, "specific", specific({1, 3}));
  world_->versions = {1, 2};
  m->poll();
  EXPECT_EQ(states(*m, "all"), "2:AVAILABLE 1:AVAILABLE");
  EXPECT_EQ(states(*m, "specific"), "1:AVAILABLE");  // 3 is not there yet, 2 is not wanted
  world_->versions = {1, 2, 3};
  m->poll();
  EXPECT_EQ(states(*m, "specific"), "3:AVAILABLE 1:AVAILABLE");
  EXPECT_EQ(served(*m, "specific"), 3);
  EXPECT_EQ(served(*m, "specific", 1), 1);
  EXPECT_EQ(m->model_names(), (std::vector<std::string>{"all", "specific"}));
}

TEST_F(ModelManagerTest, LabelsNameVersions) {
  auto m = make_manager();
  add(*m, "hpt", all_versions(), {{"stable", 1}, {"canary", 2}});
  world_->versions = {1, 2};
  m->poll();
  EXPECT_EQ(served(*m, "hpt", {}, "stable"), 1);
  EXPECT_EQ(served(*m, "hpt", {}, "canary"), 2);
  EXPECT_EQ(m->resolve_version("hpt", {}, "stable"), 1);
  const auto st = m->status("hpt", {}, "stable");
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].version, 1);
  // TF Serving: an unknown label is the caller's mistake (INVALID_ARGUMENT, HTTP 400).
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument, [&] { m->get("hpt", {}, "nope"); }, "unknown label"),
            "Unrecognized servable version label: nope");
  m->check_labels();  // both labels point at AVAILABLE versions
}

// A label on a version that is not loaded is refused as TF Serving refuses such a config,
// naming the model, the label and the version; asked for anyway, it says which label it was.
TEST_F(ModelManagerTest, ALabelOnAVersionNotLoadedIsRefused) {
  auto m = make_manager();
  add(*m, "hpt", specific({1}), {{"stable", 1}, {"canary", 2}});
  world_->versions = {1, 2};
  m->poll();
  EXPECT_EQ(error_message_of(ErrorKind::kFailedPrecondition, [&] { m->check_labels(); }, "canary on version 2"),
            "Request to assign label to version 2 of model hpt, which is not currently available for inference "
            "(version_labels { key: 'canary' value: 2 })");
  EXPECT_EQ(error_message_of(ErrorKind::kNotFound, [&] { m->get("hpt", {}, "canary"); }, "get through canary"),
            "Servable not found for request: Specific(hpt, 2): label canary of model hpt points at version 2, "
            "which is not loaded");
  EXPECT_EQ(served(*m, "hpt", {}, "stable"), 1);
  // A model whose source cannot be read is reported on its own, not as a label problem.
  auto broken = make_manager();
  add(*broken, "hpt", {}, {{"stable", 1}});
  world_->broken = "the disk is gone";
  broken->poll();
  broken->check_labels();
}

// A split's label whose version cannot answer (allowed onto a version not loaded, or failing
// to load) gets no share while another label's version can; once it loads, it gets its share.
TEST_F(ModelManagerTest, ASplitSkipsLabelsWhoseVersionIsNotAvailable) {
  auto m = make_manager();
  world_->traffic = {{"canary", 50}, {"stable", 50}};
  add(*m, "hpt", all_versions(), {{"stable", 1}, {"canary", 2}});
  world_->versions = {1, 2};
  world_->failing = {2};
  m->poll();
  for (int i = 0; i < 200; ++i) ASSERT_EQ(m->resolve_version("hpt", {}, {}), 1) << i;
  ASSERT_EQ(m->resolve_version("hpt", {}, {}, "key-1"), 1);
  world_->failing.clear();
  advance(std::chrono::minutes(5));  // past the failed load's backoff
  m->poll();
  ASSERT_EQ(served(*m, "hpt", {}, "canary"), 2);
  int to_canary = 0;
  for (int i = 0; i < 200; ++i) to_canary += m->resolve_version("hpt", {}, {}) == 2;
  EXPECT_GT(to_canary, 50);  // Binomial(200, 0.5): mean 100, sd 7.1
  EXPECT_LT(to_canary, 150);
}

TEST_F(ModelManagerTest, BadModelsAreRefused) {
  auto m = make_manager();
  add(*m, "a");
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { add(*m, "a"); }, "twice").find("configured twice"),
            std::string::npos);
  error_message_of(ErrorKind::kInvalidArgument, [&] { add(*m, ""); }, "empty name");
  error_message_of(ErrorKind::kInvalidArgument, [&] { m->add_model("b", nullptr); }, "null source");
}

// The `cp -r` deploy: version 2 appears before its files. Version 1 keeps serving, 2 is END
// with the error, and the next poll (one poll interval later) loads it and unloads 1.
TEST_F(ModelManagerTest, AFailedLoadIsRetriedOnTheNextPollWhileTheOldVersionServes) {
  auto m = make_manager();
  add(*m, "mlp");
  world_->versions = {1};
  m->poll();
  world_->versions = {1, 2};
  world_->failing = {2};
  m->poll();
  EXPECT_EQ(states(*m, "mlp"), "2:END 1:AVAILABLE");
  EXPECT_EQ(m->status("mlp", 2)[0].error, "DataLoss: version 2 is half copied");
  EXPECT_EQ(served(*m, "mlp"), 1);
  world_->failing.clear();  // the copy finished
  m->poll();                // the same instant: still waiting for its retry time
  EXPECT_EQ(world_->loads[2], 1);
  advance(1s);
  m->poll();
  EXPECT_EQ(world_->loads[2], 2);
  EXPECT_EQ(states(*m, "mlp"), "2:AVAILABLE 1:END");
  EXPECT_EQ(m->status("mlp", 2)[0].error, "");
  EXPECT_EQ(served(*m, "mlp"), 2);
  EXPECT_EQ(log_lines_with("version 2 is AVAILABLE (after 1 failed attempt)"), 1);
}

TEST_F(ModelManagerTest, AVersionThatKeepsFailingBacksOffAndIsLoggedOnce) {
  auto m = make_manager();
  add(*m, "mlp");
  world_->versions = {1};
  world_->failing = {1};
  // Retries wait 1, 2, 4, 8, 8 s: polled every second for 24 s, 6 loads in all.
  for (int second = 0; second <= 23; ++second) {
    m->poll();
    advance(1s);
  }
  EXPECT_EQ(world_->loads[1], 6);  // at 0, 1, 3, 7, 15, 23 s
  EXPECT_EQ(log_lines_with("version 1 failed to load: DataLoss: version 1 is half copied"), 1);
  EXPECT_EQ(states(*m, "mlp"), "1:END");
  // With nothing loaded, a request says why: TF Serving's NOT_FOUND, since no load is under way.
  const std::string why = error_message_of(ErrorKind::kNotFound, [&] { m->get("mlp"); }, "nothing loaded");
  EXPECT_NE(why.find("version 1 is END: DataLoss: version 1 is half copied"), std::string::npos) << why;
}

TEST_F(ModelManagerTest, AVersionWantedAgainIsLoadedAgain) {
  auto m = make_manager();
  add(*m, "mlp");
  world_->versions = {1};
  m->poll();
  world_->versions = {1, 2};
  m->poll();
  EXPECT_EQ(states(*m, "mlp"), "2:AVAILABLE 1:END");
  world_->versions = {1};  // version 2 withdrawn: 1 is the latest again
  m->poll();
  EXPECT_EQ(states(*m, "mlp"), "2:END 1:AVAILABLE");
  EXPECT_EQ(served(*m, "mlp"), 1);
}

// TF Serving's AvailabilityPreservingPolicy: with no version wanted any more (every directory
// removed), the loaded ones are unloaded at once; a version still wanted that fails to load
// does not unload the one serving.
TEST_F(ModelManagerTest, VersionsNoLongerListedAreUnloadedEvenWithNothingInTheirPlace) {
  auto m = make_manager();
  add(*m, "mlp", latest(2));
  world_->versions = {1, 2};
  m->poll();
  EXPECT_EQ(states(*m, "mlp"), "2:AVAILABLE 1:AVAILABLE");
  world_->versions = {};
  m->poll();
  EXPECT_EQ(states(*m, "mlp"), "2:END 1:END");
  EXPECT_EQ(error_message_of(ErrorKind::kNotFound, [&] { m->get("mlp"); }, "nothing listed"),
            "Servable not found for request: Latest(mlp): no version is loaded: the fake source lists nothing");
  EXPECT_EQ(log_lines_with("model mlp has nothing to serve: the fake source lists nothing; its loaded versions are "
                           "unloaded, as TF Serving unloads removed versions"),
            1);
  EXPECT_EQ(log_lines_with("unloaded"), 3);  // that line and one per version

  world_->versions = {3};
  world_->failing = {3};
  m->poll();
  world_->versions = {4};  // 3 withdrawn, 4 failing too: nothing AVAILABLE, nothing else to unload
  world_->failing = {4};
  m->poll();
  EXPECT_EQ(states(*m, "mlp"), "4:END 3:END 2:END 1:END");
}

TEST_F(ModelManagerTest, ABrokenSourceBacksOffLogsOnceKeepsServingAndRecovers) {
  auto m = make_manager();
  add(*m, "mlp");
  world_->versions = {1};
  m->poll();
  world_->broken = "connection refused";
  const int before = world_->listings;
  for (int second = 0; second <= 15; ++second) {
    m->poll();
    advance(1s);
    EXPECT_EQ(served(*m, "mlp"), 1);  // loaded versions keep serving
  }
  EXPECT_EQ(world_->listings - before, 5);  // at 0, 1, 3, 7, 15 s
  EXPECT_EQ(log_lines_with("model mlp: cannot read its source, the fake source: Unavailable: connection refused; "
                           "retrying with backoff (its loaded versions keep serving)"),
            1);
  const auto broken = m->broken_sources();
  ASSERT_EQ(broken.size(), 1u);
  EXPECT_EQ(broken[0].model, "mlp");
  EXPECT_EQ(broken[0].source, "the fake source");
  EXPECT_EQ(broken[0].error, "Unavailable: connection refused");

  world_->broken.reset();
  world_->versions = {1, 2};
  advance(8s);
  m->poll();
  EXPECT_EQ(log_lines_with("model mlp: its source can be read again"), 1);
  EXPECT_TRUE(m->broken_sources().empty());
  EXPECT_EQ(states(*m, "mlp"), "2:AVAILABLE 1:END");
  // Backoff starts over: the next failure is retried after 1 s again.
  world_->broken = "connection refused";
  const int again = world_->listings;
  m->poll();
  advance(1s);
  m->poll();
  EXPECT_EQ(world_->listings - again, 2);
  EXPECT_EQ(log_lines_with("cannot read its source"), 2);
}

TEST_F(ModelManagerTest, AModelWithNothingToServeSaysWhyInItsStatus) {
  auto m = make_manager();
  add(*m, "empty");
  m->poll();
  m->poll();
  EXPECT_EQ(error_message_of(ErrorKind::kNotFound, [&] { m->status("empty"); }, "status"),
            "Could not find any versions of model empty: the fake source lists nothing");
  EXPECT_EQ(error_message_of(ErrorKind::kNotFound, [&] { m->get("empty"); }, "get"),
            "Servable not found for request: Latest(empty): no version is loaded: the fake source lists nothing");
  EXPECT_EQ(log_lines_with("model empty has nothing to serve: the fake source lists nothing"), 1);
  EXPECT_TRUE(m->broken_sources().empty());
}

TEST_F(ModelManagerTest, ABrokenSourceWithNothingLoadedIsUnavailable) {
  auto m = make_manager();
  add(*m, "mlp");
  world_->broken = "no such database";
  m->poll();
  EXPECT_EQ(error_message_of(ErrorKind::kUnavailable, [&] { m->status("mlp"); }, "status"),
            "Could not find any versions of model mlp: cannot read its source, the fake source: "
            "Unavailable: no such database (retrying)");
  error_message_of(ErrorKind::kUnavailable, [&] { m->get("mlp"); }, "get");
  EXPECT_EQ(log_lines_with("its loaded versions keep serving"), 0);  // there are none
}

// ---- FileSystemSource on real directories ------------------------------------------------

TEST(FileSystemSourceTest, ListsNumberedDirectoriesAndLoadsThem) {
  TempDir dir;
  const auto base = dir.path() / "hpt";
  for (const char* d : {"1", "00000123", "tmp", "1.5", "-2"}) std::filesystem::create_directories(base / d);
  std::ofstream(base / "7") << "a file, not a version";
  std::filesystem::copy(std::string(TENSORHUB_SOURCE_DIR) + "/examples/serving/half_plus_two/00000123/model.json",
                        base / "00000123" / "model.json");
  FileSystemSource source(base.string());
  auto versions = source.list_versions();
  std::vector<std::int64_t> listed;
  for (const auto& [v, loader] : versions) listed.push_back(v);
  EXPECT_EQ(listed, (std::vector<std::int64_t>{1, 123}));
  EXPECT_EQ(versions.at(123)()->signatures().at(kDefaultSignature).inputs.count("x"), 1u);
  const std::string empty = error_message_of(ErrorKind::kNotFound, [&] { versions.at(1)(); }, "empty version");
  EXPECT_NE(empty.find("no model in " + (base / "1").string()), std::string::npos) << empty;
  EXPECT_EQ(source.describe(), "base path " + base.string());
}

TEST(FileSystemSourceTest, AMissingBasePathIsUnavailableAndAnEmptyOneListsNothing) {
  TempDir dir;
  FileSystemSource missing((dir.path() / "nope").string());
  const std::string why = error_message_of(ErrorKind::kUnavailable, [&] { missing.list_versions(); }, "missing");
  EXPECT_NE(why.find((dir.path() / "nope").string() + " is not a directory"), std::string::npos) << why;
  FileSystemSource empty(dir.path().string());
  EXPECT_TRUE(empty.list_versions().empty());
  EXPECT_NE(empty.empty_message().find("holds no version directory"), std::string::npos);
}

// ---- HubSource on a real SQLite hub ---------------------------------------------------------

TEST(HubSourceTest, ListsTheBestMatchingModelAndLoadsIt) {
  TempDir dir;
  const std::string uri = "sqlite://" + (dir.path() / "hub.db").string();
  Hub hub(uri, "p");
  const Json config = mlp_config(8, 8);
  const auto model = Model::from_config(config);
  hub.save_model(model.config(), model.weights(), "mlp", {{"test_accuracy", 0.7}});
  const auto best = hub.save_model(model.config(), model.weights(), "mlp", {{"test_accuracy", 0.9}});
  hub.save_model(model.config(), model.weights(), "mlp", {{"test_accuracy", 0.8}});

  HubSource source(query(uri, "p", "mlp", {{"test_accuracy", -1}}));
  auto versions = source.list_versions();
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_EQ(versions.begin()->first, best);
  EXPECT_EQ(versions.begin()->second()->source(), "hub model " + std::to_string(best));

  HubSource typo(query(uri, "p", "mlpp"));
  EXPECT_TRUE(typo.list_versions().empty());
  EXPECT_EQ(typo.empty_message(),
            "hub query {\"model_name\":\"mlpp\"} sorted by time:-1 in project p of " + uri +
                " matched no model: check --hub_model, --hub_filter, --project and --hub (tensorhub model list shows "
                "the models there)");
  HubSource other_project(query(uri, "q", "mlp"));
  EXPECT_TRUE(other_project.list_versions().empty());
}

TEST(HubSourceTest, NeverCreatesAHubAndHidesPasswords) {
  TempDir dir;
  const auto path = dir.path() / "typo.db";
  HubSource source(query("sqlite://" + path.string(), "default", "mlp"));
  const std::string why = error_message_of(ErrorKind::kNotFound, [&] { source.list_versions(); }, "missing file");
  EXPECT_NE(why.find("no hub at sqlite://" + path.string()), std::string::npos) << why;
  EXPECT_FALSE(std::filesystem::exists(path));
  HubSource missing_dir(query("sqlite://" + (dir.path() / "no_dir" / "hub.db").string(), "default", "mlp"));
  error_message_of(ErrorKind::kNotFound, [&] { missing_dir.list_versions(); }, "missing directory");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "no_dir"));

  HubSource pg(query("postgresql://serve:s3cret@127.0.0.1:1/hub", "default", "mlp"));
  EXPECT_EQ(pg.describe().find("s3cret"), std::string::npos) << pg.describe();
  EXPECT_NE(pg.describe().find("postgresql://serve:***@127.0.0.1:1/hub"), std::string::npos) << pg.describe();
  const std::string refused = error_message_of(ErrorKind::kUnavailable, [&] { pg.list_versions(); }, "closed port");
  EXPECT_EQ(refused.find("s3cret"), std::string::npos) << refused;
}

}  // namespace
}  // namespace tensorhub
