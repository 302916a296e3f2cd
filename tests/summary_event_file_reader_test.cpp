// Event file reader tests: files written by our EventFileWriter (the TensorBoard callback's
// writer) read back; a TF2-style tensor scalar built from the wire format by hand; TensorBoard's
// purge after a SessionLog START; a file cut inside its last record and a corrupt one; the
// distribution view's percentiles of a histogram computed by hand.
// No TensorFlow-written event file is among the project's fixtures (tests/data and the TFRecord
// fixtures hold none), so none is read here.
#include "tensorhub/summary/event_file_reader.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "tensorhub/core/error.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/summary/event_file_writer.h"
#include "tensorhub/tf/event.pb.h"
#include "test_util.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::TempDir;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

fs::path only_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  EXPECT_EQ(files.size(), 1u) << dir;
  return files.at(0);
}

TEST(EventFileReader, ReadsScalarsWithNonFiniteValuesHistogramsAndTheHParamsSession) {
  TempDir dir;
  {
    EventFileWriter w(dir / "run");
    w.add_scalar("loss", 0.1, 0);  // stored as a float: 0.1f
    w.add_scalar("loss", kNaN, 1);
    w.add_scalar("loss", kInf, 2);
    w.add_scalar("loss", -kInf, 3);
    w.add_scalar("accuracy", 0.5, 3);
    const std::vector<float> values = {1.0f, 2.0f, 2.0f};
    w.add_histogram("dense.weight", values, 7);
    w.add_hparams_session_start({{"units", 16}, {"optimizer", "adam"}, {"dropout", true}}, "g1");
    w.add_hparams_session_end(SessionStatus::kFailure);
    w.close();
  }
  const RunEvents run = read_run_events(dir / "run");
  ASSERT_EQ(run.scalars.size(), 2u);
  const auto& loss = run.scalars.at("loss");
  ASSERT_EQ(loss.size(), 4u);
  EXPECT_EQ(loss[0].step, 0);
  EXPECT_EQ(loss[0].value, static_cast<double>(0.1f));
  EXPECT_GT(loss[0].wall_time, 1.7e9);
  EXPECT_TRUE(std::isnan(loss[1].value));
  EXPECT_EQ(loss[2].value, kInf);
  EXPECT_EQ(loss[3].value, -kInf);
  EXPECT_EQ(run.scalars.at("accuracy").at(0).value, 0.5);

  ASSERT_EQ(run.histograms.at("dense.weight").size(), 1u);
  const HistogramEvent& h = run.histograms.at("dense.weight")[0];
  EXPECT_EQ(h.step, 7);
  EXPECT_EQ(h.histogram.num, 3);
  EXPECT_EQ(h.histogram.min, 1);
  EXPECT_EQ(h.histogram.max, 2);
  EXPECT_EQ(h.histogram.sum, 5);
  EXPECT_EQ(h.histogram.sum_squares, 9);
  EXPECT_EQ(h.histogram.bucket_limit, make_histogram(std::vector<float>{1, 2, 2}).bucket_limit);

  ASSERT_TRUE(run.session.has_value());
  EXPECT_EQ(run.session->group_name, "g1");
  EXPECT_EQ(run.session->hparams.at("units"), HParamValue(16));
  EXPECT_EQ(run.session->hparams.at("optimizer"), HParamValue("adam"));
  EXPECT_EQ(run.session->hparams.at("dropout"), HParamValue(true));
  EXPECT_EQ(run.session->status, SessionStatus::kFailure);
  EXPECT_GE(run.session->end_time_secs, run.session->start_time_secs);
  EXPECT_FALSE(run.has_experiment);
}

TEST(EventFileReader, ASessionWithoutEndIsRunning) {
  TempDir dir;
  EventFileWriter w(dir.path());
  w.add_hparams_config({HParam{.name = "units"}}, {HParamMetric{.tag = "epoch_loss", .group = "train"}});
  w.add_hparams_session_start({{"units", 8}});
  w.close();
  const RunEvents run = read_run_events(dir.path());
  EXPECT_TRUE(run.has_experiment);
  ASSERT_TRUE(run.session.has_value());
  EXPECT_EQ(run.session->status, SessionStatus::kRunning);
  EXPECT_EQ(run.session->end_time_secs, 0);
}

// TensorBoard drops the points a restarted run left at steps >= the START's step.
TEST(EventFileReader, SessionLogStartDropsTheRunsLaterSteps) {
  TempDir dir;
  {
    EventFileWriter w(dir / "run");
    for (int s = 0; s < 5; ++s) w.add_scalar("loss", 10 + s, s);
    w.add_session_log(SessionLogStatus::kStart, 3);
    w.add_scalar("loss", 103, 3);
    w.add_scalar("loss", 104, 4);
    w.close();
  }
  std::vector<std::pair<std::int64_t, double>> got;
  const RunEvents run = read_run_events(dir / "run");
  for (const auto& p : run.scalars.at("loss")) got.emplace_back(p.step, p.value);
  const std::vector<std::pair<std::int64_t, double>> want = {{0, 10}, {1, 11}, {2, 12}, {3, 103}, {4, 104}};
  EXPECT_EQ(got, want);
}

// A run's files are read in name order; the purge crosses files.
TEST(EventFileReader, ARunsFilesAreReadInNameOrder) {
  TempDir dir;
  {
    EventFileWriter a(dir / "run", {.filename_suffix = ".a"});
    a.add_scalar("x", 1, 0);
    a.add_scalar("x", 2, 1);
    a.close();
    EventFileWriter b(dir / "run", {.filename_suffix = ".b"});
    b.add_session_log(SessionLogStatus::kStart, 1);
    b.add_scalar("x", 3, 1);
    b.close();
  }
  const RunEvents run = read_run_events(dir / "run");
  const auto& x = run.scalars.at("x");
  ASSERT_EQ(x.size(), 2u);
  EXPECT_EQ(x[0].value, 1);
  EXPECT_EQ(x[1].value, 3);
}

// TF2's tf.summary.scalar: Summary.Value.tensor (field 8) = TensorProto{dtype DT_FLOAT (1),
// tensor_shape {}, float_val [v]} with metadata plugin "scalars". Built from the wire format.
TEST(EventFileReader, ReadsTf2TensorScalars) {
  TempDir dir;
  fs::create_directories(dir / "run");
  auto tensor_proto = [](std::uint8_t dtype, const void* value, std::size_t size, std::uint8_t field) {
    std::string t;
    t += static_cast<char>(0x08);  // field 1 varint: dtype
    t += static_cast<char>(dtype);
    t += static_cast<char>(0x12);  // field 2: tensor_shape, empty
    t += static_cast<char>(0x00);
    t += static_cast<char>((field << 3) | 2);  // packed float_val / double_val
    t += static_cast<char>(size);
    t.append(static_cast<const char*>(value), size);
    return t;
  };
  const float f = 0.25f;
  const double d = 1.0 / 3.0;
  std::vector<std::string> records;
  int step = 0;
  for (const std::string& tensor : {tensor_proto(1, &f, 4, 5), tensor_proto(2, &d, 8, 6)}) {
    tf::Event e;
    e.set_wall_time(1.7e9 + step);
    e.set_step(step++);
    auto* v = e.mutable_summary()->add_value();
    v->set_tag("epoch_loss");
    v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("scalars");
    v->GetReflection()->MutableUnknownFields(v)->AddLengthDelimited(8, tensor);
    records.push_back(e.SerializeAsString());
  }
  write_tfrecord_file(dir / "run" / "events.out.tfevents.1700000000.host.1.v2", records);
  const RunEvents run = read_run_events(dir / "run");
  const auto& loss = run.scalars.at("epoch_loss");
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_EQ(loss[0].value, 0.25);
  EXPECT_EQ(loss[1].value, d);
  EXPECT_EQ(loss[1].step, 1);
  EXPECT_EQ(loss[1].wall_time, 1.7e9 + 1);
}

// A HistogramProto with more counts than limits (written by hand: nothing of ours writes one)
// is skipped; the well-formed one beside it is read. Readers index bucket_limit by bucket.
TEST(EventFileReader, AHistogramWhoseBucketsAndLimitsDifferInLengthIsSkipped) {
  TempDir dir;
  fs::create_directories(dir / "run");
  std::vector<std::string> records;
  for (int step = 0; step < 2; ++step) {
    tf::Event e;
    e.set_wall_time(1.7e9 + step);
    e.set_step(step);
    auto* h = e.mutable_summary()->add_value();
    h->set_tag("dense.weight");
    h->mutable_histo()->set_min(0);
    h->mutable_histo()->set_max(2);
    h->mutable_histo()->set_num(3);
    h->mutable_histo()->add_bucket_limit(1);
    if (step == 1) h->mutable_histo()->add_bucket_limit(DBL_MAX);
    h->mutable_histo()->add_bucket(1);
    h->mutable_histo()->add_bucket(2);
    records.push_back(e.SerializeAsString());
  }
  write_tfrecord_file(dir / "run" / "events.out.tfevents.1700000000.host.1.v2", records);
  const RunEvents run = read_run_events(dir / "run");
  const auto& hs = run.histograms.at("dense.weight");
  ASSERT_EQ(hs.size(), 1u);
  EXPECT_EQ(hs[0].step, 1);
  EXPECT_EQ(hs[0].histogram.bucket, (std::vector<double>{1, 2}));
}

// A file being written ends inside a record: the whole records before it are read.
TEST(EventFileReader, AFileCutInsideItsLastRecordIsReadUpToIt) {
  TempDir dir;
  {
    EventFileWriter w(dir / "run");
    w.add_scalar("loss", 1, 0);
    w.add_scalar("loss", 2, 1);
    w.close();
  }
  const fs::path file = only_file(dir / "run");
  fs::resize_file(file, fs::file_size(file) - 5);
  const RunEvents run = read_run_events(dir / "run");
  const auto& loss = run.scalars.at("loss");
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_EQ(loss[0].value, 1);
}

TEST(EventFileReader, ACorruptRecordIsDataLossAndAMissingRunNotFound) {
  TempDir dir;
  {
    EventFileWriter w(dir / "run");
    w.add_scalar("loss", 1, 0);
    w.close();
  }
  const fs::path file = only_file(dir / "run");
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(file)) - 8);  // inside the last record's data
    f.put('\x7f');
  }
  expect_error([&] { read_run_events(dir / "run"); }, ErrorKind::kDataLoss, {file.string()});
  expect_error([&] { read_run_events(dir / "nothing"); }, ErrorKind::kNotFound, {"nothing"});
  expect_error([&] { find_event_runs(dir / "nothing"); }, ErrorKind::kNotFound, {"nothing"});
}

TEST(EventFileReader, FindEventRunsListsEveryDirectoryWithEventFiles) {
  TempDir dir;
  EventFileWriter(dir / "logs").close();
  EventFileWriter(dir / "logs" / "fit" / "train").close();
  EventFileWriter(dir / "logs" / "fit" / "validation").close();
  fs::create_directories(dir / "logs" / "empty");
  std::ofstream(dir / "logs" / "empty" / "notes.txt") << "no events";
  EXPECT_EQ(find_event_runs(dir / "logs"), (std::vector<std::string>{".", "fit/train", "fit/validation"}));
}

// Buckets [0,1) [1,2) [2,3) [3,4] of one value each: TensorBoard's cumulative weights 2500,
// 5000, 7500, 10000; each basis point interpolated in its bucket by hand.
TEST(EventFileReader, HistogramPercentilesAreTensorBoardsDistribution) {
  Histogram h;
  h.min = 0;
  h.max = 4;
  h.num = 4;
  h.bucket_limit = {1, 2, 3, DBL_MAX};
  h.bucket = {1, 1, 1, 1};
  const auto p = histogram_percentiles(h);
  ASSERT_EQ(p.size(), 9u);
  EXPECT_DOUBLE_EQ(p[0], 0);                             // bp 0: the minimum
  EXPECT_DOUBLE_EQ(p[1], 668.0 / 2500);                  // in [0, 1)
  EXPECT_DOUBLE_EQ(p[2], 1587.0 / 2500);
  EXPECT_DOUBLE_EQ(p[3], 1 + (3085.0 - 2500) / 2500);    // in [1, 2)
  EXPECT_DOUBLE_EQ(p[4], 2);                             // bp 5000: right after 2's cumulative 5000
  EXPECT_DOUBLE_EQ(p[5], 2 + (6915.0 - 5000) / 2500);
  EXPECT_DOUBLE_EQ(p[6], 3 + (8413.0 - 7500) / 2500);
  EXPECT_DOUBLE_EQ(p[7], 3 + (9332.0 - 7500) / 2500);
  EXPECT_DOUBLE_EQ(p[8], 4);                             // bp 10000: the maximum
  EXPECT_EQ(histogram_percentiles(Histogram{}), std::vector<double>(9, 0.0));
}

}  // namespace
}  // namespace tensorhub
