// The Curves view's API: the reduction and TensorBoard's smoothing as functions, then
// /api/runs, /api/scalars, /api/scalars.csv and /api/histograms of a real `tensorhub ui
// --logdir` process over HTTP, on a SQLite hub with epoch reports and training logs and a log
// directory written by EventFileWriter.
#include <httplib.h>

#include <cmath>
#include <limits>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "process_util.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/summary/event_file_writer.h"
#include "tensorhub/train/callbacks.h"
#include "tensorhub/train/model.h"
#include "../src/ui/curves_api.h"

namespace tensorhub::testing {
namespace {

namespace fs = std::filesystem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- the functions ---------------------------------------------------------------------------------

TEST(CurvesReduction, EveryBucketKeepsItsMinimumMaximumFirstAndLast) {
  const int n = 10000, buckets = 100;
  std::vector<double> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = i;
    y[i] = std::sin(i * 0.37) + (i % 17) * 0.01;
  }
  y[4321] = 1000;  // one spike
  y[7777] = -1000;
  const auto kept = reduce_series(x, y, buckets);
  EXPECT_LE(kept.size(), 4u * buckets);
  EXPECT_GE(kept.size(), 2u * buckets);
  // Bucket k holds x in [k * 100, (k + 1) * 100): its extremes are among the kept points.
  for (int k = 0; k < buckets; ++k) {
    double lo = kInf, hi = -kInf, klo = kInf, khi = -kInf;
    for (int i = k * 100; i < (k + 1) * 100; ++i) lo = std::min(lo, y[i]), hi = std::max(hi, y[i]);
    bool first = false, last = false;
    for (std::size_t i : kept)
      if (x[i] >= k * 100 && x[i] < (k + 1) * 100) {
        klo = std::min(klo, y[i]);
        khi = std::max(khi, y[i]);
        first = first || static_cast<int>(i) == k * 100;
        last = last || static_cast<int>(i) == (k + 1) * 100 - 1;
      }
    EXPECT_EQ(klo, lo) << "bucket " << k;
    EXPECT_EQ(khi, hi) << "bucket " << k;
    EXPECT_TRUE(first && last) << "bucket " << k;
  }
  EXPECT_NE(std::find(kept.begin(), kept.end(), 4321u), kept.end());
  EXPECT_NE(std::find(kept.begin(), kept.end(), 7777u), kept.end());
  EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end()));
}

TEST(CurvesReduction, ShortSeriesAreKeptWholeAndNonFiniteValuesNeverKept) {
  const std::vector<double> x = {0, 1, 2, 3, 4};
  const std::vector<double> y = {1, kNaN, kInf, -kInf, 2};
  EXPECT_EQ(reduce_series(x, y, 10), (std::vector<std::size_t>{0, 4}));
}

// TensorBoard's debiased EMA by hand, w = 0.5: 1 -> 0.5 / 0.5 = 1; 2 -> 1.25 / 0.75;
// NaN shown as NaN and skipped; 4 -> (0.625 + 2) / 0.875 = 3.
TEST(CurvesSmoothing, IsTensorBoardsDebiasedMovingAverage) {
  const auto s = tensorboard_smoothing({1, 2, kNaN, 4}, 0.5);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_DOUBLE_EQ(s[0], 1);
  EXPECT_DOUBLE_EQ(s[1], 1.25 / 0.75);
  EXPECT_TRUE(std::isnan(s[2]));
  EXPECT_DOUBLE_EQ(s[3], 3);
  EXPECT_EQ(tensorboard_smoothing({2, 2, 2}, 0.9), (std::vector<double>{2, 2, 2}));  // constant: unchanged
  EXPECT_EQ(tensorboard_smoothing({1, 5, 3}, 0), (std::vector<double>{1, 5, 3}));
}

TEST(CurvesQuery, BadParametersAreNamed) {
  auto bad = [](auto fn, const std::string& part) {
    expect_error(fn, ErrorKind::kInvalidArgument, {part});
  };
  bad([] { parse_series_query("nope", "r", "t", "", "", "", ""); }, "source");
  bad([] { parse_series_query("logdir", "", "t", "", "", "", ""); }, "run");
  bad([] { parse_series_query("logdir", "r", "t", "epoch", "", "", ""); }, "x must be");
  bad([] { parse_series_query("logdir", "r", "t", "", "0", "", ""); }, "width");
  bad([] { parse_series_query("logdir", "r", "t", "", "", "", "1"); }, "smoothing");
  const auto q = parse_series_query("epochs", "3", "loss", "relative", "640", "0", "0.6");
  EXPECT_EQ(q.x, SeriesX::kRelative);
  EXPECT_EQ(q.width, 640);
  EXPECT_FALSE(q.reduce);
  EXPECT_EQ(q.smoothing, 0.6);
}

// ---- over HTTP ---------------------------------------------------------------------------------------

constexpr int kPoints = 20000;
constexpr int kSpikeStep = 12345, kNanStep = 100, kInfStep = 200, kNegInfStep = 300;

double big_value(int step) {
  if (step == kSpikeStep) return 100;
  if (step == kNanStep) return kNaN;
  if (step == kInfStep) return kInf;
  if (step == kNegInfStep) return -kInf;
  return 1 + 0.5 * std::sin(step * 0.01);
}

// A hub with one task's epoch reports (2 attempts: only the second is its curve) and training
// logs; a log directory with a 20,000-point run "big" and a histogram run "nested/h".
struct CurvesHub : SqliteHubFiles {
  std::int64_t task;
  fs::path logdir = dir / "logs";
  CurvesHub() {
    TaskSpec s;
    s.task_name = "train";
    s.command = "true";
    task = queue.create_task(s);
    save_epoch_report(hub, task, 1, 0, {{"loss", 9.0}});  // a first attempt's, dropped
    for (int e = 0; e < 6; ++e) save_epoch_report(hub, task, 2, e, {{"loss", 1.0 / (e + 1)}, {"accuracy", 0.1 * e}});
    for (int e = 0; e < 3; ++e) hub.save_training_log({{"task_id", task}, {"epoch", e}, {"loss", 3.0 - e}});
    EventFileWriter w(logdir / "big");
    for (int i = 0; i < kPoints; ++i) w.add_scalar("loss", big_value(i), i);
    w.close();
    EventFileWriter h(logdir / "nested" / "h");
    for (int step = 0; step < 3; ++step) {
      std::vector<float> values;
      for (int i = 1; i <= 100; ++i) values.push_back(static_cast<float>(i + step * 10));
      h.add_histogram("w", values, step);
    }
    h.close();
  }
};

class UiCurves : public ::testing::Test {
 protected:
  void SetUp() override {
    pid_ = spawn({kTensorhub, "ui", "--hub", h_.uri, "--project", "p", "--port", "0", "--logdir", h_.logdir.string()},
                 h_.log);
    port_ = port_from_log(h_.log, R"(tensorhub ui: http://127\.0\.0\.1:(\d+)/)");
    ASSERT_NE(port_, 0);
  }
  void TearDown() override {
    kill(pid_, SIGTERM);
    wait_exit(pid_);
  }
  httplib::Result get_raw(const std::string& path) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c.Get(path.c_str());
  }
  Json get(const std::string& path, int status = 200) {
    auto res = get_raw(path);
    if (!res) ADD_FAILURE() << "no answer to " << path;
    if (!res) return nullptr;
    EXPECT_EQ(res->status, status) << path << ": " << res->body;
    return Json::parse(res->body);
  }
  static Json run_named(const Json& runs, const std::string& source, const std::string& run) {
    for (const auto& r : runs["runs"])
      if (r["source"] == source && r["run"] == run) return r;
    ADD_FAILURE() << "no run " << source << "/" << run << " in " << runs.dump();
    return Json::object();
  }
  std::string big(const std::string& extra = "") { return "/api/scalars?source=logdir&run=big&tag=loss" + extra; }

  CurvesHub h_;
  pid_t pid_ = 0;
  int port_ = 0;
};

TEST_F(UiCurves, RunsListsEpochReportsTrainingLogsAndLogdirRuns) {
  const Json runs = get("/api/runs");
  EXPECT_EQ(runs["logdir"], h_.logdir.string());
  const Json e = run_named(runs, "epochs", std::to_string(h_.task));
  EXPECT_EQ(e["name"], "task " + std::to_string(h_.task) + ": train");
  EXPECT_EQ(e["tags"], Json({"accuracy", "loss"}));
  EXPECT_EQ(e["points"], 6);
  EXPECT_EQ(e["status"], "pending");
  EXPECT_EQ(run_named(runs, "logs", "task_id=" + std::to_string(h_.task))["tags"], Json({"loss"}));
  const Json b = run_named(runs, "logdir", "big");
  EXPECT_EQ(b["tags"], Json({"loss"}));
  EXPECT_EQ(b["points"], kPoints);
  EXPECT_EQ(run_named(runs, "logdir", "nested/h")["histograms"], Json({"w"}));
}

TEST_F(UiCurves, ReductionKeepsTheSpikeAndMarksNonFiniteValuesOutsideTheNumbers) {
  const Json s = get(big("&width=500"));
  EXPECT_EQ(s["count"], kPoints);
  EXPECT_EQ(s["reduced"], true);
  const auto n = s["xs"].size();
  EXPECT_LE(n, 2000u);
  EXPECT_EQ(s["ys"].size(), n);
  EXPECT_EQ(s["steps"].size(), n);
  double max = -kInf, min = kInf;
  bool spike = false;
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(s["ys"][i].is_number()) << "point " << i << " is " << s["ys"][i];  // NaN would be null
    max = std::max(max, s["ys"][i].get<double>());
    min = std::min(min, s["ys"][i].get<double>());
    spike = spike || s["steps"][i] == kSpikeStep;
  }
  EXPECT_EQ(max, 100);
  EXPECT_TRUE(spike);
  EXPECT_EQ(s["max"], 100);
  EXPECT_EQ(min, s["min"].get<double>());
  EXPECT_EQ(s["marks"], Json::parse(R"([{"x": 100, "step": 100, "value": "NaN"}, {"x": 200, "step": 200, "value": "Infinity"},
                                        {"x": 300, "step": 300, "value": "-Infinity"}])"));
  // reduce=0: every finite point.
  const Json all = get(big("&reduce=0"));
  EXPECT_EQ(all["reduced"], false);
  EXPECT_EQ(all["xs"].size(), static_cast<std::size_t>(kPoints - 3));
}

TEST_F(UiCurves, CsvHoldsEveryPointOfTheSeries) {
  auto res = get_raw("/api/scalars.csv?source=logdir&run=big&tag=loss");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/csv; charset=utf-8");
  EXPECT_EQ(res->get_header_value("Content-Disposition"), "attachment; filename=\"big-loss.csv\"");
  std::istringstream in(res->body);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "step,wall_time,value");
  int rows = 0;
  while (std::getline(in, line)) {
    const auto a = line.find(','), b = line.rfind(',');
    const int step = std::stoi(line.substr(0, a));
    ASSERT_EQ(step, rows) << line;
    const std::string value = line.substr(b + 1);
    const double want = big_value(step);
    if (std::isnan(want)) EXPECT_EQ(value, "nan");
    else if (std::isinf(want)) EXPECT_EQ(value, want > 0 ? "inf" : "-inf");
    else EXPECT_EQ(std::stod(value), static_cast<double>(static_cast<float>(want))) << line;
    ++rows;
  }
  EXPECT_EQ(rows, kPoints);
}

TEST_F(UiCurves, EpochReportsOfTheLatestAttemptWithTensorBoardsSmoothing) {
  const Json s = get("/api/scalars?source=epochs&run=" + std::to_string(h_.task) + "&tag=loss&smoothing=0.6");
  EXPECT_EQ(s["count"], 6);
  EXPECT_EQ(s["steps"], Json({0, 1, 2, 3, 4, 5}));
  double last = 0;
  for (int e = 0; e < 6; ++e) {
    const double v = 1.0 / (e + 1);
    EXPECT_EQ(s["ys"][e], v);
    last = last * 0.6 + 0.4 * v;
    EXPECT_NEAR(s["smoothed"][e].get<double>(), last / (1 - std::pow(0.6, e + 1)), 1e-12) << "epoch " << e;
  }
  const Json rel = get("/api/scalars?source=epochs&run=" + std::to_string(h_.task) + "&tag=loss&x=relative");
  EXPECT_EQ(rel["xs"][0], 0);
  EXPECT_GE(rel["xs"][5].get<double>(), 0);
  const Json logs = get("/api/scalars?source=logs&run=task_id%3D" + std::to_string(h_.task) + "&tag=loss");
  EXPECT_EQ(logs["ys"], Json({3.0, 2.0, 1.0}));
}

TEST_F(UiCurves, HistogramsAreDistributionsOverSteps) {
  const Json d = get("/api/histograms?run=nested/h&tag=w");
  EXPECT_EQ(d["steps"], Json({0, 1, 2}));
  ASSERT_EQ(d["percentiles"].size(), 3u);
  for (int step = 0; step < 3; ++step) {
    const Json& p = d["percentiles"][step];
    ASSERT_EQ(p.size(), 9u);
    EXPECT_EQ(p[0], 1 + step * 10);   // bp 0: the minimum
    EXPECT_EQ(p[8], 100 + step * 10);  // bp 10000: the maximum
    for (int i = 1; i < 9; ++i) EXPECT_LE(p[i - 1].get<double>(), p[i].get<double>());
    // The median of 1..100 (+10 per step) lies within TensorBoard's ~10% buckets of 50.5.
    EXPECT_NEAR(p[4].get<double>(), 50.5 + step * 10, 0.1 * (50.5 + step * 10));
  }
}

// A fit with the TensorBoard callback (train/ and validation/ scalars, weight histograms each
// epoch, an hparams session) into a run of --logdir, read back through the API.
TEST_F(UiCurves, TheTensorBoardCallbacksRunsAreShown) {
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  for (int i = 0; i < 32; ++i) {
    const float a = static_cast<float>(i % 8) / 4 - 1, b = static_cast<float>(i / 8) / 2 - 1;
    xs.insert(xs.end(), {a, b});
    ys.push_back(a + b > 0 ? 1 : 0);
  }
  const Tensor x = Tensor::from<float>(DType::kF32, {32, 2}, xs);
  const Tensor y = Tensor::from<std::int64_t>(DType::kI64, {32}, ys);
  Model model = Model::from_config({{"input_shape", {2}},
                                    {"layers", {{{"type", "Dense"}, {"units", 4}, {"activation", "relu"}},
                                                {{"type", "Dense"}, {"units", 2}}}},
                                    {"loss", "sparse_categorical_crossentropy"},
                                    {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.01}}},
                                    {"seed", 1}});
  TensorBoardOptions to;
  to.log_dir = (h_.logdir / "tb").string();
  to.histogram_freq = 1;
  to.hparams = {{"units", 4}, {"optimizer", "adam"}};
  FitOptions fit;
  fit.epochs = 3;
  fit.batch_size = 8;
  fit.seed = 2;
  fit.verbose = 0;
  fit.callbacks = {std::make_shared<TensorBoard>(to)};
  const History history = model.fit(x, y, fit, &x, &y);

  const Json runs = get("/api/runs");
  const Json train = run_named(runs, "logdir", "tb/train");
  EXPECT_EQ(train["tags"], Json({"epoch_accuracy", "epoch_learning_rate", "epoch_loss"}));
  EXPECT_EQ(train["histograms"], Json({"dense.bias", "dense.weight", "dense_1.bias", "dense_1.weight"}));
  EXPECT_EQ(run_named(runs, "logdir", "tb/validation")["tags"], Json({"epoch_accuracy", "epoch_loss"}));
  const Json session = run_named(runs, "logdir", "tb")["hparams"];
  EXPECT_EQ(session["hparams"], Json({{"optimizer", "adam"}, {"units", 4.0}}));
  EXPECT_EQ(session["status"], "success");

  const Json loss = get("/api/scalars?source=logdir&run=tb/train&tag=epoch_loss");
  ASSERT_EQ(loss["ys"].size(), 3u);
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(loss["steps"][e], e);
    EXPECT_EQ(loss["ys"][e].get<double>(), static_cast<double>(static_cast<float>(history.epochs[e].at("loss")))) << e;
  }
  const Json w = get("/api/histograms?run=tb/train&tag=dense.weight");
  EXPECT_EQ(w["steps"], Json({0, 1, 2}));
  EXPECT_EQ(w["num"], Json({8.0, 8.0, 8.0}));  // a 2 x 4 kernel
}

// A browser asks for "gzip, deflate, br": the answer is gzip (cpp-httplib's Brotli took 13 s for
// this 5 MB answer), and what it holds is the series.
TEST_F(UiCurves, AnswersAreGzipNotBrotli) {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(60, 0);
  c.set_decompress(true);
  const auto res = c.Get(big("&reduce=0").c_str(), {{"Accept-Encoding", "gzip, deflate, br"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Content-Encoding"), "gzip");
  EXPECT_EQ(Json::parse(res->body)["xs"].size(), static_cast<std::size_t>(kPoints - 3));
  const auto js = c.Get("/curves.js", {{"Accept-Encoding", "br"}});
  ASSERT_TRUE(js);
  EXPECT_EQ(js->get_header_value("Content-Encoding"), "");
  EXPECT_NE(js->body.find("views.curves"), std::string::npos);
}

TEST_F(UiCurves, UnknownRunsAndTagsAre404WithAnError) {
  for (const std::string path :
       {"/api/scalars?source=logdir&run=nope&tag=loss", "/api/scalars?source=logdir&run=big&tag=nope",
        "/api/scalars?source=logdir&run=../big&tag=loss", "/api/scalars?source=epochs&run=999999&tag=loss",
        "/api/scalars?source=logs&run=nope&tag=loss", "/api/scalars.csv?source=logdir&run=nope&tag=loss",
        "/api/histograms?run=big&tag=w"}) {
    const Json e = get(path, 404);
    EXPECT_TRUE(e["error"].is_string() && !e["error"].get<std::string>().empty()) << path << ": " << e;
  }
  EXPECT_TRUE(get("/api/scalars?source=logdir&run=big&tag=loss&x=epoch", 400)["error"].is_string());
}

// `tensorhub ui --logdir DIR` where there is no hub (as `tensorboard --logdir DIR` needs none):
// the logdir's runs are served, the hub's views say there is no hub, and no hub is created.
TEST(UiCurvesWithoutHub, LogdirRunsAreServedAndNoHubIsMade) {
  CurvesHub h;
  const fs::path missing = h.dir / "missing.db";
  const pid_t pid = spawn({kTensorhub, "ui", "--hub", "sqlite://" + missing.string(), "--project", "p", "--port", "0",
                           "--logdir", h.logdir.string()},
                          h.log);
  const int port = port_from_log(h.log, R"(tensorhub ui: http://127\.0\.0\.1:(\d+)/)");
  ASSERT_NE(port, 0) << read_text(h.log);
  EXPECT_NE(read_text(h.log).find("showing --logdir's runs only"), std::string::npos) << read_text(h.log);
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  const auto runs = c.Get("/api/runs");
  ASSERT_TRUE(runs);
  ASSERT_EQ(runs->status, 200) << runs->body;
  std::vector<std::string> names;
  const Json listed = Json::parse(runs->body);
  for (const auto& r : listed["runs"]) names.push_back(r["source"].get<std::string>() + ":" + r["run"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"logdir:big", "logdir:nested/h"}));
  const auto big = c.Get("/api/scalars?source=logdir&run=big&tag=loss&reduce=0");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 200);
  EXPECT_EQ(Json::parse(big->body)["xs"].size(), static_cast<std::size_t>(kPoints - 3));
  const auto epochs = c.Get("/api/scalars?source=epochs&run=1&tag=loss");
  ASSERT_TRUE(epochs);
  EXPECT_EQ(epochs->status, 404);
  EXPECT_NE(epochs->body.find("there is no hub"), std::string::npos) << epochs->body;
  const auto models = c.Get("/api/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 404);
  EXPECT_NE(models->body.find("no hub at"), std::string::npos) << models->body;
  kill(pid, SIGTERM);
  wait_exit(pid);
  EXPECT_FALSE(fs::exists(missing));
}

}  // namespace
}  // namespace tensorhub::testing
