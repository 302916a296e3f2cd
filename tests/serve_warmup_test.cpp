// Model warmup as TF Serving does it (include/tensorhub/serve/warmup.h): warmup files written by
// an independent tool, tests/warmup_requests.py (Python's protobuf + TFRecord framing with
// python3-crc32c, as a TF Serving user writes them), replayed by the ModelManager on the real
// half_plus_two model before the version is AVAILABLE. In process: a servable that holds a
// warmup request shows the version LOADING until every record has run, and the metrics then
// count them (apart from request_count); malformed files fail the load with TF Serving's
// errors (unparsable record, damaged TFRecord, log types it cannot run, a request the model
// refuses); TF Serving's limit of 1,000 records; a hub model's warmup part. Then a real
// `tensorhub serve` process warms up a version directory and reports it over REST.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <condition_variable>
#include <fstream>
#include <thread>

#include "process_util.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/serve/hub_source.h"
#include "tensorhub/serve/metrics.h"
#include "tensorhub/serve/model_manager.h"
#include "tensorhub/serve/warmup.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;
namespace fs = std::filesystem;

const std::string kSource = TENSORHUB_SOURCE_DIR;
const std::string kHalfPlusTwoJson = kSource + "/examples/serving/half_plus_two/00000123/model.json";

// Writes the warmup file `out` with tests/warmup_requests.py (see its usage for `records`);
// `extra`: more of its flags. Returns the number of records it wrote.
int write_warmup_file(const fs::path& out, const std::string& records, const std::string& extra = "") {
  const std::string printed =
      run_command("/usr/bin/python3 " + kSource + "/tests/warmup_requests.py --proto_dir " + kSource +
                  "/proto --out " + out.string() + " --records '" + records + "' " + extra);
  return std::stoi(printed);
}

std::vector<std::byte> file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* b = reinterpret_cast<const std::byte*>(s.data());
  return {b, b + s.size()};
}

// half_plus_two (y = 0.5 x + 2, with regress and classify signatures) that counts its
// predicts, and holds the `hold_at`-th one until release() (0: none).
class CountingServable final : public Servable {
 public:
  explicit CountingServable(int hold_at = 0) : inner_(load_servable(fs::path(kHalfPlusTwoJson).parent_path())), hold_at_(hold_at) {}
  const std::map<std::string, Signature>& signatures() const override { return inner_->signatures(); }
  std::string source() const override { return inner_->source(); }
  NamedTensors predict(const std::string& signature, const NamedTensors& inputs) const override {
    {
      MutexLock lock(mutex_);
      const int n = ++calls_;
      cv_.notify_all();
      if (n == hold_at_)
        while (!released_) mutex_.wait(cv_);
    }
    return inner_->predict(signature, inputs);
  }
  int calls() const {
    MutexLock lock(mutex_);
    return calls_;
  }
  // Waits (up to 30 s) until the held predict has started; false if it never does.
  bool wait_held() const {
    MutexLock lock(mutex_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (calls_ < hold_at_)
      if (mutex_.wait_until(cv_, deadline) == std::cv_status::timeout) return false;
    return true;
  }
  void release() {
    {
      MutexLock lock(mutex_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::shared_ptr<Servable> inner_;
  int hold_at_;
  mutable Mutex mutex_;
  mutable std::condition_variable cv_;
  mutable int calls_ TENSORHUB_GUARDED_BY(mutex_) = 0;
  bool released_ TENSORHUB_GUARDED_BY(mutex_) = false;
};

// Lists version 1, loaded as `servable`, with the warmup file `file` of version directory `dir`.
class WarmupSource final : public Source {
 public:
  WarmupSource(std::shared_ptr<CountingServable> servable, fs::path dir)
      : servable_(std::move(servable)), dir_(std::move(dir)) {}
  std::map<std::int64_t, Loader> list_versions() override {
    return {{1, [s = servable_]() -> std::shared_ptr<const Servable> { return s; }}};
  }
  std::string describe() const override { return "the warmup test's source"; }
  std::string empty_message() const override { return "nothing"; }
  std::optional<WarmupRequests> warmup_requests(std::int64_t) override { return warmup_requests_of(dir_); }

 private:
  std::shared_ptr<CountingServable> servable_;
  fs::path dir_;
};

class Warmup : public ::testing::Test {
 protected:
  TempDir tmp;
  fs::path version_dir = tmp.path() / "half_plus_two" / "1";
  fs::path file = version_dir / kWarmupFile;
  std::vector<std::string> logs;

  // A manager serving "m" from a WarmupSource of `servable`, its log lines in `logs`.
  std::unique_ptr<ModelManager> manager_of(std::shared_ptr<CountingServable> servable) {
    ManagerOptions o;
    o.log = [this](const std::string& line) { logs.push_back(line); };
    auto m = std::make_unique<ModelManager>(o);
    m->add_model("m", std::make_unique<WarmupSource>(std::move(servable), version_dir));
    return m;
  }
  std::string log_text() const {
    std::string out;
    for (const auto& l : logs) out += l + "\n";
    return out;
  }
  // The records_read line of this test's version directory and `status`.
  std::string records_line(const std::string& status, std::int64_t n) const {
    return ":tensorflow:serving:model_warmup_records_read{model_path=\"" + prometheus_label(version_dir.string()) +
           "\",status=\"" + prometheus_label(status) + "\"} " + std::to_string(n) + "\n";
  }
};

TEST_F(Warmup, AVersionIsNotAvailableBeforeEveryRecordIsReplayed) {
  // 3 predicts, a regress of 2 examples and a classify: 5 predicts of the model.
  ASSERT_EQ(write_warmup_file(file, "predict*3,regress,classify"), 5);
  auto servable = std::make_shared<CountingServable>(4);  // holds the regress
  auto manager = manager_of(servable);
  std::thread poll([&] { manager->poll(); });
  ASSERT_TRUE(servable->wait_held());
  // Mid-warmup: LOADING, nothing served, no warmup counted yet.
  const auto during = manager->status("m");
  ASSERT_EQ(during.size(), 1u);
  EXPECT_EQ(during[0].state, ServableState::kLoading);
  const std::string why = error_message_of(ErrorKind::kUnavailable, [&] { manager->get("m"); }, "get while warming up");
  EXPECT_NE(why.find("version 1 is LOADING"), std::string::npos) << why;
  EXPECT_EQ(model_warmup_metrics_text().find(prometheus_label(version_dir.string())), std::string::npos);
  servable->release();
  poll.join();

  EXPECT_EQ(manager->status("m")[0].state, ServableState::kAvailable);
  EXPECT_EQ(servable->calls(), 5);
  const std::string metrics = ServingMetrics().text();  // a server's page shows the warmup metrics
  EXPECT_NE(metrics.find(records_line("OK", 5)), std::string::npos) << metrics;
  const std::string latency_count = ":tensorflow:serving:model_warmup_latency_count{model_path=\"" +
                                    prometheus_label(version_dir.string()) + "\",status=\"OK\"} 1\n";
  EXPECT_NE(metrics.find(latency_count), std::string::npos) << metrics;
  // TF Serving's buckets: Exponential(10, 1.8, 33), 10 us up to 10 * 1.8^32 (about 20 minutes).
  EXPECT_NE(metrics.find("le=\"10\"}"), std::string::npos);
  EXPECT_NE(metrics.find("le=\"18\"}"), std::string::npos);
  EXPECT_NE(metrics.find("le=\"1.47476e+09\"}"), std::string::npos) << metrics;
  // Warmup requests are no requests: request_count has none.
  EXPECT_EQ(metrics.find(":tensorflow:serving:request_count{"), std::string::npos) << metrics;
  EXPECT_NE(log_text().find("model m version 1 is AVAILABLE after warmup: 5 records of " + file.string() + " in "),
            std::string::npos)
      << log_text();
}

TEST_F(Warmup, AVersionWithoutAWarmupFileLoadsWithoutOne) {
  auto servable = std::make_shared<CountingServable>();
  auto manager = manager_of(servable);
  manager->poll();
  EXPECT_EQ(manager->status("m")[0].state, ServableState::kAvailable);
  EXPECT_EQ(servable->calls(), 0);
  EXPECT_NE(log_text().find("model m version 1 is AVAILABLE\n"), std::string::npos) << log_text();
}

// Each malformed file fails the load as in TF Serving's RunSavedModelWarmup: the version goes
// END with the error (and is retried later), never AVAILABLE.
TEST_F(Warmup, MalformedFilesFailTheLoadAsTfServingDoes) {
  struct Case {
    std::string records, flags;
    std::vector<std::string> error;  // parts of the version's error ("<Kind>: <message>")
    int predicts;                    // model predicts run before it failed
  };
  const std::string f = file.string();
  const std::vector<Case> cases = {
      // TF Serving: InvalidArgument "Failed to parse warmup record: <record> from <path>".
      {"predict,garbage", "",
       {"InvalidArgument: Failed to parse warmup record: record 2 (11 bytes) is not a serialized "
        "tensorflow.serving.PredictionLog, from " + f}, 1},
      // A record's CRC, or a file ending inside a record: the reader's DataLoss, with TF Serving's advice.
      {"predict*2", "--corrupt_crc",
       {"DataLoss: TFRecord file " + f + " (NONE), record at offset ", ": corrupt data of ",
        ". Please verify your warmup data is in TFRecord format."}, 1},
      {"predict*2", "--truncate 3",
       {"DataLoss: TFRecord file " + f + " (NONE), record at offset ", ": truncated data CRC",
        ". Please verify your warmup data is in TFRecord format."}, 1},
      // TF Serving: Unimplemented "Unsupported log_type for warmup: <log_type_case>".
      {"predict,session_run", "", {"FailedPrecondition: Unsupported log_type for warmup: 5"}, 1},
      {"streamed", "", {"FailedPrecondition: Unsupported log_type for warmup: 7"}, 0},
      {"multi", "", {"FailedPrecondition: Unsupported log_type for warmup: 4 (multi_inference_log"}, 0},
      // A request the signature refuses: the Predict API's error, naming the record.
      {"predict,predict_alias", "",
       {"InvalidArgument: input tensor alias not found in signature: z. Inputs expected to be in the set {x}. "
        "(warmup record 2 of " + f + ")"}, 1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.records + " " + c.flags);
    write_warmup_file(file, c.records, c.flags);
    auto servable = std::make_shared<CountingServable>();
    auto manager = manager_of(servable);
    manager->poll();
    const auto s = manager->status("m");
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].state, ServableState::kEnd);
    for (const auto& part : c.error) EXPECT_NE(s[0].error.find(part), std::string::npos) << s[0].error;
    EXPECT_EQ(servable->calls(), c.predicts);
    EXPECT_THROW(manager->get("m"), Error);  // nothing to serve
    EXPECT_NE(log_text().find("warning: model m version 1 failed to load: " + s[0].error), std::string::npos)
        << log_text();
  }
  // Failed warmups are counted under their status (TF Serving's absl::Status::ToString).
  const std::string metrics = model_warmup_metrics_text();
  EXPECT_NE(metrics.find(records_line("FAILED_PRECONDITION: Unsupported log_type for warmup: 7 (warmup record 1 of " + f +
                                      ")",
                                      0)),
            std::string::npos)
      << metrics;
}

TEST_F(Warmup, RecordsWithoutALogTypeAreSkippedAndAnEmptyFileIsNoError) {
  write_warmup_file(file, "none,predict,none");
  auto servable = std::make_shared<CountingServable>();
  auto manager = manager_of(servable);
  manager->poll();
  EXPECT_EQ(manager->status("m")[0].state, ServableState::kAvailable) << manager->status("m")[0].error;
  EXPECT_EQ(servable->calls(), 1);
  EXPECT_NE(log_text().find("AVAILABLE after warmup: 3 records of"), std::string::npos) << log_text();

  std::ofstream(file, std::ios::trunc).close();  // no record at all
  auto empty = std::make_shared<CountingServable>();
  auto second = manager_of(empty);
  second->poll();
  EXPECT_EQ(second->status("m")[0].state, ServableState::kAvailable) << second->status("m")[0].error;
  EXPECT_NE(log_text().find("AVAILABLE after warmup: 0 records of"), std::string::npos) << log_text();
}

// TF Serving's WarmupConsts::kMaxNumRecords: 1,000 records warm up; with 1,001, the last one
// runs and the warmup then fails.
TEST_F(Warmup, AtMostOneThousandRecords) {
  ASSERT_EQ(write_warmup_file(file, "predict*1000"), 1000);
  auto thousand = std::make_shared<CountingServable>();
  auto manager = manager_of(thousand);
  manager->poll();
  EXPECT_EQ(manager->status("m")[0].state, ServableState::kAvailable) << manager->status("m")[0].error;
  EXPECT_EQ(thousand->calls(), 1000);

  ASSERT_EQ(write_warmup_file(file, "predict*1001"), 1001);
  auto more = std::make_shared<CountingServable>();
  auto refused = manager_of(more);
  refused->poll();
  const auto s = refused->status("m")[0];
  EXPECT_EQ(s.state, ServableState::kEnd);
  EXPECT_EQ(s.error, "InvalidArgument: Number of warmup records exceeds the maximum (1000) at " + file.string());
  EXPECT_EQ(more->calls(), 1001);
  const std::string metrics = model_warmup_metrics_text();
  EXPECT_NE(metrics.find(records_line("OK", 1000)), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(records_line("INVALID_ARGUMENT: " + s.error.substr(std::string("InvalidArgument: ").size()),
                                      1001)),
            std::string::npos)
      << metrics;
}

// A hub model's part "assets.extra/tf_serving_warmup_requests" warms it up as the file does.
TEST_F(Warmup, AHubModelWarmsUpFromItsPart) {
  const std::string uri = "sqlite://" + (tmp.path() / "hub.db").string();
  write_warmup_file(file, "predict*2,regress");
  const Json arch = Json::parse(read_text(kHalfPlusTwoJson));
  Hub hub(uri, "default");
  const std::int64_t id = hub.save_model(arch, {}, "half_plus_two", Json::object(), {{kWarmupPart, file_bytes(file)}});
  ManagerOptions o;
  o.log = [this](const std::string& line) { logs.push_back(line); };
  ModelManager manager(o);
  HubModelQuery q;
  q.hub_uri = uri;
  q.model_name = "half_plus_two";
  manager.add_model("half_plus_two", std::make_unique<HubSource>(q));
  manager.poll();
  EXPECT_EQ(manager.status("half_plus_two")[0].state, ServableState::kAvailable) << manager.status("half_plus_two")[0].error;
  const std::string where = "hub model " + std::to_string(id) + " part " + kWarmupPart;
  EXPECT_NE(log_text().find("is AVAILABLE after warmup: 3 records of " + where + " in "), std::string::npos) << log_text();
  EXPECT_NE(model_warmup_metrics_text().find(":tensorflow:serving:model_warmup_records_read{model_path=\"hub model " +
                                             std::to_string(id) + "\",status=\"OK\"} 3\n"),
            std::string::npos)
      << model_warmup_metrics_text();

  // A better model whose part is damaged: it fails to load, naming the part (not the
  // temporary file it was read from), and the first keeps serving.
  write_warmup_file(file, "predict*2", "--corrupt_crc");
  const std::int64_t bad = hub.save_model(arch, {}, "half_plus_two", Json::object(), {{kWarmupPart, file_bytes(file)}});
  manager.poll();
  const auto states = manager.status("half_plus_two");
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].version, bad);
  EXPECT_EQ(states[0].state, ServableState::kEnd);
  EXPECT_NE(states[0].error.find("DataLoss: TFRecord file hub model " + std::to_string(bad) + " part " +
                                 kWarmupPart + " (NONE), record at offset "),
            std::string::npos)
      << states[0].error;
  EXPECT_EQ(states[0].error.find("tensorhub-warmup-"), std::string::npos) << states[0].error;
  EXPECT_EQ(states[1].state, ServableState::kAvailable);
}

// `tensorhub serve` on a version directory with a warmup file: AVAILABLE only after the
// warmup, which /monitoring/prometheus/metrics shows apart from request_count; a new version
// with a malformed file fails to load while the first keeps serving.
TEST_F(Warmup, TheServerWarmsUpBeforeAVersionIsAvailable) {
  fs::create_directories(version_dir);
  fs::copy_file(kHalfPlusTwoJson, version_dir / "model.json");
  ASSERT_EQ(write_warmup_file(file, "predict*3,regress"), 4);
  const std::string log = (tmp.path() / "server.log").string();
  const pid_t server = spawn({kTensorhub, "serve", "--model_name", "half_plus_two", "--model_base_path",
                              version_dir.parent_path().string(), "--rest_api_host", "127.0.0.1", "--rest_api_port",
                              "0", "--port", "0", "--file_system_poll_wait_seconds", "1"},
                             log);
  const int port = port_from_log(log, R"(REST API on http://127\.0\.0\.1:(\d+))");
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(30, 0);
  ASSERT_TRUE(eventually([&] {
    const auto r = client.Get("/v1/models/half_plus_two");
    return r && r->status == 200 && r->body.find("AVAILABLE") != std::string::npos;
  }, 60000ms)) << read_text(log);
  EXPECT_NE(read_text(log).find("model half_plus_two version 1 is AVAILABLE after warmup: 4 records of " + file.string()),
            std::string::npos)
      << read_text(log);
  const auto metrics = client.Get("/monitoring/prometheus/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find(records_line("OK", 4)), std::string::npos) << metrics->body;
  // The status polls above are the only requests counted: no predict, regress or classify.
  for (const char* api : {"API=\"predict\"", "API=\"regress\"", "API=\"classify\""})
    EXPECT_EQ(metrics->body.find(api), std::string::npos) << api << "\n" << metrics->body;
  const auto predict = client.Post("/v1/models/half_plus_two:predict", R"({"instances": [1.0, 2.0]})", "application/json");
  ASSERT_TRUE(predict);
  EXPECT_EQ(predict->body, R"({"predictions":[2.5,3.0]})");

  // Version 2 with a record that is not a PredictionLog, moved in whole.
  const fs::path staged = tmp.path() / "staged";
  fs::create_directories(staged);
  fs::copy_file(kHalfPlusTwoJson, staged / "model.json");
  write_warmup_file(staged / kWarmupFile, "predict,garbage");
  fs::rename(staged, version_dir.parent_path() / "2");
  EXPECT_TRUE(eventually([&] {
    return read_text(log).find("version 2 failed to load: InvalidArgument: Failed to parse warmup record: record 2") !=
           std::string::npos;
  }, 30000ms)) << read_text(log);
  const auto still = client.Post("/v1/models/half_plus_two:predict", R"({"instances": [4.0]})", "application/json");
  ASSERT_TRUE(still);
  EXPECT_EQ(still->body, R"({"predictions":[4.0]})");
  kill(server, SIGTERM);
  EXPECT_EQ(wait_exit(server), 0) << read_text(log);
}

}  // namespace
}  // namespace tensorhub
