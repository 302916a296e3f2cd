// EventFileWriter tests: the file is read back with the TFRecord reader (every CRC checked,
// and the framing checked again independently by Python's crc32c), every Event decoded with
// protobuf; the file_version event, scalars, a histogram computed by hand, and the hparams
// plugin's three summaries.
#include "tensorhub/summary/event_file_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <fstream>
#include <functional>
#include <regex>
#include <thread>

#include "tensorhub/core/clock.h"
#include "tensorhub/core/error.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/hparams/plugin_data.pb.h"
#include "tensorhub/summary/histogram.h"
#include "tensorhub/tf/event.pb.h"
#include "tensorhub/tf/graph.pb.h"
#include "test_util.h"

namespace tensorhub {
namespace {

namespace hpb = ::tensorhub::hparams;

std::vector<tf::Event> read_events(const std::filesystem::path& path) {
  std::vector<tf::Event> events;
  for (const std::string& record : read_tfrecord_file(path)) {
    tf::Event e;
    EXPECT_TRUE(e.ParseFromString(record)) << "record " << events.size() << " of " << path;
    events.push_back(std::move(e));
  }
  return events;
}

std::vector<std::filesystem::path> files_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

using testing::expect_error;  // tests/test_util.h

double now_s() { return static_cast<double>(now_micros()) / 1e6; }

// Parses the hparams plugin content of a value written by EventFileWriter.
hpb::HParamsPluginData plugin_data(const tf::Event& e, const std::string& tag) {
  EXPECT_EQ(e.step(), 0);
  EXPECT_EQ(e.what_case(), tf::Event::kSummary);
  EXPECT_EQ(e.summary().value_size(), 1);
  const tf::Summary::Value& v = e.summary().value(0);
  EXPECT_EQ(v.tag(), tag);
  EXPECT_EQ(v.value_case(), tf::Summary::Value::VALUE_NOT_SET);
  EXPECT_EQ(v.metadata().plugin_data().plugin_name(), "hparams");
  hpb::HParamsPluginData d;
  EXPECT_TRUE(d.ParseFromString(v.metadata().plugin_data().content()));
  EXPECT_EQ(d.version(), 0);
  return d;
}

TEST(EventFileWriter, NameAndFileVersionEvent) {
  testing::TempDir dir;
  const auto logdir = dir / "runs" / "a";  // created with its parent
  const auto t0 = static_cast<long long>(std::time(nullptr));
  const double w0 = now_s();
  EventFileWriter writer(logdir);
  const double w1 = now_s();
  const auto t1 = static_cast<long long>(std::time(nullptr));

  const auto files = files_in(logdir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], writer.path());
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  std::smatch m;
  const std::string name = files[0].filename().string();
  ASSERT_TRUE(std::regex_match(name, m, std::regex(R"(events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+))")))
      << name;
  EXPECT_GE(std::stoll(m[1]), t0);
  EXPECT_LE(std::stoll(m[1]), t1);
  EXPECT_EQ(m[2], std::string(host));
  EXPECT_EQ(std::stoll(m[3]), static_cast<long long>(getpid()));

  // The file_version event is flushed at construction: readable before close().
  const auto events = read_events(writer.path());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].what_case(), tf::Event::kFileVersion);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[0].step(), 0);
  EXPECT_GE(events[0].wall_time(), w0 - 1e-6);
  EXPECT_LE(events[0].wall_time(), w1 + 1e-6);
}

TEST(EventFileWriter, UnwritableLogdirIsUnavailable) {
  testing::TempDir dir;
  std::ofstream(dir / "a-file") << "x";
  const auto bad = dir / "a-file" / "logs";  // a path through a regular file
  expect_error([&] { EventFileWriter w(bad); }, ErrorKind::kUnavailable, {bad.string()});
  if (geteuid() != 0) {  // root ignores permission bits
    std::filesystem::create_directory(dir / "ro");
    std::filesystem::permissions(dir / "ro", std::filesystem::perms::owner_read |
                                                 std::filesystem::perms::owner_exec);
    expect_error([&] { EventFileWriter w(dir / "ro"); }, ErrorKind::kUnavailable,
                         {(dir / "ro").string(), "Permission denied"});
  }
}

TEST(EventFileWriter, Scalars) {
  testing::TempDir dir;
  std::filesystem::path path;
  const double w0 = now_s();
  {
    EventFileWriter writer(dir.path());
    path = writer.path();
    writer.add_scalar("loss", 0.5, 1);
    writer.add_scalar("loss", 0.25, 2);
    writer.add_scalar("metrics/accuracy", 0.1, 3);  // not exact in float
    writer.add_scalar("big step", -7.0, 1ll << 40);
    writer.close();
    writer.close();  // idempotent
    expect_error([&] { writer.add_scalar("loss", 1, 4); }, ErrorKind::kFailedPrecondition,
                         {path.string(), "closed"});
  }
  const double w1 = now_s();
  const auto events = read_events(path);
  ASSERT_EQ(events.size(), 5u);
  struct Want {
    const char* tag;
    float value;
    std::int64_t step;
  } want[] = {{"loss", 0.5f, 1}, {"loss", 0.25f, 2}, {"metrics/accuracy", 0.1f, 3}, {"big step", -7.0f, 1ll << 40}};
  for (std::size_t i = 0; i < 4; ++i) {
    const tf::Event& e = events[i + 1];
    SCOPED_TRACE(want[i].tag);
    EXPECT_EQ(e.step(), want[i].step);
    EXPECT_GE(e.wall_time(), w0 - 1e-6);
    EXPECT_LE(e.wall_time(), w1 + 1e-6);
    ASSERT_EQ(e.what_case(), tf::Event::kSummary);
    ASSERT_EQ(e.summary().value_size(), 1);
    EXPECT_EQ(e.summary().value(0).tag(), want[i].tag);
    ASSERT_EQ(e.summary().value(0).value_case(), tf::Summary::Value::kSimpleValue);
    EXPECT_EQ(e.summary().value(0).simple_value(), want[i].value);
  }
}

// The Event wire bytes, encoded by hand from event.proto/summary.proto field numbers
// (wall_time = 1 double, step = 2 varint, summary = 5; Summary.value = 1; Value.tag = 1,
// simple_value = 2 float): guards the field numbers of our .proto files.
TEST(EventFileWriter, EventWireFormat) {
  tf::Event e;
  e.set_wall_time(1.5);  // 0x3FF8000000000000
  e.set_step(7);
  auto* v = e.mutable_summary()->add_value();
  v->set_tag("a");
  v->set_simple_value(0.5f);  // 0x3F000000
  const std::string want("\x09\x00\x00\x00\x00\x00\x00\xf8\x3f"  // 1: wall_time
                         "\x10\x07"                              // 2: step
                         "\x2a\x0a"                              // 5: summary, 10 bytes
                         "\x0a\x08"                              //   1: value, 8 bytes
                         "\x0a\x01" "a"                          //     1: tag
                         "\x15\x00\x00\x00\x3f",                 //     2: simple_value
                         23);
  EXPECT_EQ(e.SerializeAsString(), want);
  tf::Event fv;
  fv.set_file_version("brain.Event:2");
  EXPECT_EQ(fv.SerializeAsString(), std::string("\x1a\x0d") + "brain.Event:2");  // 3: file_version
}

// The GraphDef wire bytes, encoded by hand from graph.proto/node_def.proto/attr_value.proto
// field numbers (GraphDef.node = 1; NodeDef name = 1, op = 2, input = 3, attr = 5, a map entry
// {key = 1, value = 2}; AttrValue.type = 6 varint) and Event.graph_def = 4 (bytes): guards the
// field numbers TensorBoard parses.
TEST(EventFileWriter, GraphDefWireFormat) {
  tf::GraphDef g;
  tf::NodeDef* n = g.add_node();
  n->set_name("a");
  n->set_op("D");
  n->add_input("x");
  (*n->mutable_attr())["t"].set_type(tf::DT_FLOAT);
  const std::string node("\x0a\x01" "a"                  // 1: name
                         "\x12\x01" "D"                  // 2: op
                         "\x1a\x01" "x"                  // 3: input
                         "\x2a\x07"                      // 5: attr entry, 7 bytes
                         "\x0a\x01" "t"                  //   1: key
                         "\x12\x02" "\x30\x01",          //   2: value {6: type = 1}
                         18);
  const std::string want = std::string("\x0a\x12", 2) + node;  // 1: node, 18 bytes
  EXPECT_EQ(g.SerializeAsString(), want);
  tf::AttrValue s;
  s.set_s("Dense");
  EXPECT_EQ(s.SerializeAsString(), std::string("\x12\x05") + "Dense");  // 2: s
  tf::Event e;
  e.set_graph_def(want);
  EXPECT_EQ(e.SerializeAsString(), std::string("\x22\x14", 2) + want);  // 4: graph_def, 20 bytes
}

TEST(EventFileWriter, GraphOfChainedNodes) {
  testing::TempDir dir;
  EventFileWriter writer(dir.path());
  writer.add_graph({{.name = "m/in", .op = "InputLayer", .string_attrs = {{"keras_class", "InputLayer"}},
                     .type_attrs = {{"dtype", 1}}},
                    {.name = "m/dense", .op = "Dense", .input = {"m/in"}},
                    {.name = "m/out", .op = "Dense", .input = {"m/dense"}, .type_attrs = {{"dtype", 9}}}});
  writer.close();
  const auto events = read_events(writer.path());
  ASSERT_EQ(events.size(), 2u);
  ASSERT_EQ(events[1].what_case(), tf::Event::kGraphDef);
  EXPECT_EQ(events[1].step(), 0);
  EXPECT_NEAR(events[1].wall_time(), now_s(), 60);
  tf::GraphDef g;
  ASSERT_TRUE(g.ParseFromString(events[1].graph_def()));
  ASSERT_EQ(g.node_size(), 3);
  EXPECT_FALSE(g.has_versions());
  EXPECT_EQ(g.node(0).name(), "m/in");
  EXPECT_EQ(g.node(0).op(), "InputLayer");
  EXPECT_EQ(g.node(0).input_size(), 0);
  EXPECT_EQ(g.node(0).attr().at("keras_class").s(), "InputLayer");
  EXPECT_EQ(g.node(0).attr().at("dtype").type(), tf::DT_FLOAT);
  EXPECT_EQ(g.node(1).name(), "m/dense");
  ASSERT_EQ(g.node(1).input_size(), 1);
  EXPECT_EQ(g.node(1).input(0), "m/in");
  EXPECT_TRUE(g.node(1).attr().empty());
  EXPECT_EQ(g.node(2).input(0), "m/dense");
  EXPECT_EQ(g.node(2).attr().at("dtype").type(), tf::DT_INT64);
}

TEST(EventFileWriter, GraphErrorsWriteNothing) {
  testing::TempDir dir;
  EventFileWriter writer(dir.path());
  expect_error([&] { writer.add_graph({{.name = "a"}, {.name = ""}}); }, ErrorKind::kInvalidArgument,
               {"empty name"});
  expect_error([&] { writer.add_graph({{.name = "a"}, {.name = "a"}}); }, ErrorKind::kInvalidArgument,
               {"'a'", "unique"});
  expect_error([&] { writer.add_graph({{.name = "a", .input = {"b"}}}); }, ErrorKind::kInvalidArgument,
               {"'a'", "'b'", "no node"});
  writer.close();
  EXPECT_EQ(read_events(writer.path()).size(), 1u);
}

// The numbers of types.proto, as TensorBoard's tensorflow_stub dtypes.as_dtype gives them.
TEST(EventFileWriter, TfDataTypeNames) {
  EXPECT_EQ(tf_data_type("float32"), 1);
  EXPECT_EQ(tf_data_type("float"), 1);
  EXPECT_EQ(tf_data_type("float64"), 2);
  EXPECT_EQ(tf_data_type("int32"), 3);
  EXPECT_EQ(tf_data_type("string"), 7);
  EXPECT_EQ(tf_data_type("int64"), 9);
  EXPECT_EQ(tf_data_type("bool"), 10);
  EXPECT_EQ(tf_data_type("bfloat16"), 14);
  EXPECT_EQ(tf_data_type("float16"), 19);
  EXPECT_EQ(tf_data_type("uint64"), 23);
  EXPECT_EQ(tf_data_type("mixed_float16"), std::nullopt);
  EXPECT_EQ(tf_data_type(""), std::nullopt);
}

TEST(EventFileWriter, FramingCheckedByPython) {
  testing::TempDir dir;
  std::filesystem::path path;
  {
    EventFileWriter writer(dir.path());
    path = writer.path();
    for (int i = 0; i < 50; ++i) writer.add_scalar("x", i, i);
    const float h[] = {1, 2, 3};
    writer.add_histogram("h", h, 3, 0);
  }
  std::ofstream(dir / "check.py")
      << "import struct, sys, crc32c\n"
         "def masked(d):\n"
         "    c = crc32c.crc32c(d)\n"
         "    return ((((c >> 15) | (c << 17)) & 0xffffffff) + 0xa282ead8) & 0xffffffff\n"
         "b = open(sys.argv[1], 'rb').read(); off = 0; n = 0\n"
         "while off < len(b):\n"
         "    (length,) = struct.unpack_from('<Q', b, off)\n"
         "    assert struct.unpack_from('<I', b, off + 8)[0] == masked(b[off:off + 8])\n"
         "    data = b[off + 12:off + 12 + length]\n"
         "    assert struct.unpack_from('<I', b, off + 12 + length)[0] == masked(data)\n"
         "    off += 16 + length; n += 1\n"
         "print(n, off == len(b))\n";
  EXPECT_EQ(testing::run_command("/usr/bin/python3 " + (dir / "check.py").string() + " " + path.string()),
            "52 True\n");
}

TEST(Histogram, DefaultBucketLimits) {
  const auto& limits = default_histogram_bucket_limits();
  ASSERT_EQ(limits.size(), 1551u);  // 774 values 1e-12 * 1.1^k below 1e20, mirrored, 0, +-DBL_MAX
  EXPECT_EQ(limits.front(), -DBL_MAX);
  EXPECT_EQ(limits[775], 0.0);
  EXPECT_EQ(limits[776], 1e-12);
  EXPECT_EQ(limits.back(), DBL_MAX);
  EXPECT_LT(limits[1549], 1e20);
  EXPECT_GE(limits[1549] * 1.1, 1e20);
  EXPECT_TRUE(std::is_sorted(limits.begin(), limits.end()));
  for (std::size_t i = 0; i < limits.size(); ++i) EXPECT_EQ(limits[i], -limits[1550 - i]);
}

// v_k = 1e-12 * 1.1^k by repeated multiplication, as TensorFlow builds its buckets.
double v(int k) {
  double x = 1e-12;
  for (int i = 0; i < k; ++i) x *= 1.1;
  return x;
}

// Worked by hand. ln(1.1) = 0.0953102, ln(1e12) = 27.631021:
//   -1.0: first limit above it is -v_289 (v_289 = e^(289 * 0.0953102 - 27.631) = 0.9172,
//         v_290 = 1.0090), so bucket [-v_290, -v_289)
//    0.0: bucket [0, 1e-12), limit v_0 = 1e-12
//    0.5: v_282 = 0.4706 < 0.5 < v_283 = 0.5177, limit v_283
//    1.0 (twice): limit v_290 = 1.0090
//    2.0: v_297 = 1.9662 < 2 < v_298 = 2.1628, limit v_298
// Empty runs collapse into one zero entry carrying the run's last limit.
TEST(Histogram, HandComputedExampleInEventFile) {
  EXPECT_NEAR(v(289), 0.9172, 1e-4);
  EXPECT_NEAR(v(290), 1.0090, 1e-4);
  EXPECT_NEAR(v(282), 0.4706, 1e-4);
  EXPECT_NEAR(v(283), 0.5177, 1e-4);
  EXPECT_NEAR(v(297), 1.9662, 1e-4);
  EXPECT_NEAR(v(298), 2.1628, 1e-4);

  testing::TempDir dir;
  EventFileWriter writer(dir.path());
  const std::vector<float> values = {1.0f, -1.0f, 2.0f, 0.0f, 0.5f, 1.0f};
  writer.add_histogram("weights", values.data(), values.size(), 42);
  writer.add_histogram("empty", nullptr, 0, 43);
  writer.close();

  const auto events = read_events(writer.path());
  ASSERT_EQ(events.size(), 3u);
  const tf::Event& e = events[1];
  EXPECT_EQ(e.step(), 42);
  ASSERT_EQ(e.summary().value_size(), 1);
  EXPECT_EQ(e.summary().value(0).tag(), "weights");
  ASSERT_EQ(e.summary().value(0).value_case(), tf::Summary::Value::kHisto);
  const tf::HistogramProto& h = e.summary().value(0).histo();
  EXPECT_EQ(h.min(), -1.0);
  EXPECT_EQ(h.max(), 2.0);
  EXPECT_EQ(h.num(), 6.0);
  EXPECT_EQ(h.sum(), 3.5);
  EXPECT_EQ(h.sum_squares(), 7.25);
  const std::vector<double> want_limits = {-v(290), -v(289), 0.0,    1e-12, v(282), v(283),
                                           v(289),  v(290),  v(297), v(298), DBL_MAX};
  const std::vector<double> want_counts = {0, 1, 0, 1, 0, 1, 0, 2, 0, 1, 0};
  EXPECT_EQ(std::vector<double>(h.bucket_limit().begin(), h.bucket_limit().end()), want_limits);
  EXPECT_EQ(std::vector<double>(h.bucket().begin(), h.bucket().end()), want_counts);

  const tf::HistogramProto& empty = events[2].summary().value(0).histo();
  EXPECT_EQ(empty.min(), DBL_MAX);
  EXPECT_EQ(empty.max(), -DBL_MAX);
  EXPECT_EQ(empty.num(), 0.0);
  EXPECT_EQ(std::vector<double>(empty.bucket_limit().begin(), empty.bucket_limit().end()),
            std::vector<double>{DBL_MAX});
  EXPECT_EQ(std::vector<double>(empty.bucket().begin(), empty.bucket().end()), std::vector<double>{0.0});
}

TEST(Histogram, NonFiniteValuesRefused) {
  testing::TempDir dir;
  EventFileWriter writer(dir.path());
  const float bad[] = {1.0f, NAN};
  expect_error([&] { writer.add_histogram("w", bad, 2, 0); }, ErrorKind::kInvalidArgument,
                       {"'w'", "value 1", "NaN"});
  const float inf[] = {INFINITY};
  expect_error([&] { writer.add_histogram("w", inf, 1, 0); }, ErrorKind::kInvalidArgument,
                       {"infinite"});
  expect_error([&] { writer.add_histogram("w", nullptr, 3, 0); },
                       ErrorKind::kInvalidArgument, {"null"});
  writer.close();
  EXPECT_EQ(read_events(writer.path()).size(), 1u);  // nothing written
}

TEST(EventFileWriter, HParamsSummaries) {
  testing::TempDir dir;
  EventFileWriter writer(dir.path());
  const double w0 = now_s();
  writer.add_hparams_config(
      {{.name = "learning_rate", .interval = HParamInterval{1e-4, 1e-1}},
       {.name = "optimizer", .values = {"adam", "sgd"}, .display_name = "Optimizer"},
       {.name = "dropout", .values = {0.1, 0.5}},
       {.name = "batch_norm", .values = {true, false}, .description = "BN after Dense"},
       {.name = "notes"}},
      {{.tag = "loss"},
       {.tag = "epoch_accuracy", .group = "validation", .dataset_type = DatasetType::kValidation}});
  writer.add_hparams_session_start(
      {{"learning_rate", 0.01}, {"optimizer", "adam"}, {"batch_norm", true}, {"layers", 3}}, "group-1");
  writer.add_scalar("loss", 0.3, 10);
  writer.add_hparams_session_end(SessionStatus::kSuccess);
  writer.close();
  const double w1 = now_s();

  const auto events = read_events(writer.path());
  ASSERT_EQ(events.size(), 5u);

  const auto exp_data = plugin_data(events[1], "_hparams_/experiment");
  ASSERT_EQ(exp_data.data_case(), hpb::HParamsPluginData::kExperiment);
  const hpb::Experiment& x = exp_data.experiment();
  EXPECT_GE(x.time_created_secs(), w0 - 1e-6);
  EXPECT_LE(x.time_created_secs(), w1 + 1e-6);
  ASSERT_EQ(x.hparam_infos_size(), 5);
  const auto& lr = x.hparam_infos(0);
  EXPECT_EQ(lr.name(), "learning_rate");
  EXPECT_EQ(lr.type(), hpb::DATA_TYPE_FLOAT64);
  ASSERT_EQ(lr.domain_case(), hpb::HParamInfo::kDomainInterval);
  EXPECT_EQ(lr.domain_interval().min_value(), 1e-4);
  EXPECT_EQ(lr.domain_interval().max_value(), 1e-1);
  const auto& opt = x.hparam_infos(1);
  EXPECT_EQ(opt.display_name(), "Optimizer");
  EXPECT_EQ(opt.type(), hpb::DATA_TYPE_STRING);
  ASSERT_EQ(opt.domain_case(), hpb::HParamInfo::kDomainDiscrete);
  ASSERT_EQ(opt.domain_discrete().values_size(), 2);
  EXPECT_EQ(opt.domain_discrete().values(0).string_value(), "adam");
  EXPECT_EQ(opt.domain_discrete().values(1).string_value(), "sgd");
  const auto& dropout = x.hparam_infos(2);
  EXPECT_EQ(dropout.type(), hpb::DATA_TYPE_FLOAT64);
  ASSERT_EQ(dropout.domain_discrete().values_size(), 2);
  EXPECT_EQ(dropout.domain_discrete().values(1).number_value(), 0.5);
  const auto& bn = x.hparam_infos(3);
  EXPECT_EQ(bn.type(), hpb::DATA_TYPE_BOOL);
  EXPECT_EQ(bn.description(), "BN after Dense");
  EXPECT_TRUE(bn.domain_discrete().values(0).bool_value());
  EXPECT_EQ(bn.domain_discrete().values(1).kind_case(), google::protobuf::Value::kBoolValue);
  EXPECT_EQ(x.hparam_infos(4).type(), hpb::DATA_TYPE_UNSET);
  EXPECT_EQ(x.hparam_infos(4).domain_case(), hpb::HParamInfo::DOMAIN_NOT_SET);
  ASSERT_EQ(x.metric_infos_size(), 2);
  EXPECT_EQ(x.metric_infos(0).name().tag(), "loss");
  EXPECT_EQ(x.metric_infos(0).name().group(), "");
  EXPECT_EQ(x.metric_infos(1).name().tag(), "epoch_accuracy");
  EXPECT_EQ(x.metric_infos(1).name().group(), "validation");
  EXPECT_EQ(x.metric_infos(1).dataset_type(), hpb::DATASET_VALIDATION);

  const auto start = plugin_data(events[2], "_hparams_/session_start_info");
  ASSERT_EQ(start.data_case(), hpb::HParamsPluginData::kSessionStartInfo);
  const auto& s = start.session_start_info();
  EXPECT_EQ(s.group_name(), "group-1");
  EXPECT_GE(s.start_time_secs(), w0 - 1e-6);
  ASSERT_EQ(s.hparams().size(), 4u);
  EXPECT_EQ(s.hparams().at("learning_rate").number_value(), 0.01);
  EXPECT_EQ(s.hparams().at("optimizer").string_value(), "adam");
  EXPECT_EQ(s.hparams().at("batch_norm").kind_case(), google::protobuf::Value::kBoolValue);
  EXPECT_TRUE(s.hparams().at("batch_norm").bool_value());
  EXPECT_EQ(s.hparams().at("layers").number_value(), 3.0);

  EXPECT_EQ(events[3].summary().value(0).simple_value(), 0.3f);

  const auto end = plugin_data(events[4], "_hparams_/session_end_info");
  ASSERT_EQ(end.data_case(), hpb::HParamsPluginData::kSessionEndInfo);
  EXPECT_EQ(end.session_end_info().status(), hpb::STATUS_SUCCESS);
  EXPECT_GE(end.session_end_info().end_time_secs(), s.start_time_secs());
  EXPECT_LE(end.session_end_info().end_time_secs(), w1 + 1e-6);

  // Wire bytes of the end content, by hand from plugin_data.proto: version 0 is not written;
  // session_end_info = field 4 (length-delimited), status = 1 (varint), end_time_secs = 2
  // (double).
  const std::string content = events[4].summary().value(0).metadata().plugin_data().content();
  ASSERT_EQ(content.size(), 13u);
  EXPECT_EQ(content.substr(0, 5), std::string("\x22\x0b\x08\x01\x11", 5));
}

TEST(EventFileWriter, HParamsConfigErrors) {
  testing::TempDir dir;
  EventFileWriter writer(dir.path());
  expect_error([&] { writer.add_hparams_config({{.name = "x", .values = {1, "a"}}}, {}); },
                       ErrorKind::kInvalidArgument, {"'x'", "mixes"});
  expect_error(
      [&] { writer.add_hparams_config({{.name = "x", .values = {1}, .interval = HParamInterval{0, 1}}}, {}); },
      ErrorKind::kInvalidArgument, {"'x'", "both"});
  expect_error(
      [&] { writer.add_hparams_config({{.name = "x", .interval = HParamInterval{2, 1}}}, {}); },
      ErrorKind::kInvalidArgument, {"'x'", "min_value"});
  expect_error([&] { writer.add_hparams_config({{.name = ""}}, {}); },
                       ErrorKind::kInvalidArgument, {"empty name"});
  writer.close();
  EXPECT_EQ(read_events(writer.path()).size(), 1u);
}

TEST(EventFileWriter, HParamValueKinds) {
  EXPECT_TRUE(HParamValue("adam").is_string());  // a literal is a string, not a bool
  EXPECT_TRUE(HParamValue(std::string("x")).is_string());
  EXPECT_TRUE(HParamValue(true).is_bool());
  EXPECT_TRUE(HParamValue(3).is_number());
  EXPECT_TRUE(HParamValue(3u).is_number());
  EXPECT_TRUE(HParamValue(std::int64_t{1} << 40).is_number());
  EXPECT_EQ(HParamValue(0.5f).number(), 0.5);
}

TEST(EventFileWriter, FlushControlsVisibility) {
  testing::TempDir dir;
  EventFileWriter writer(dir.path());  // flush_secs 120: events stay buffered
  writer.add_scalar("a", 1, 1);
  EXPECT_EQ(read_events(writer.path()).size(), 1u);
  writer.flush();
  EXPECT_EQ(read_events(writer.path()).size(), 2u);

  testing::TempDir dir2;
  EventFileWriter eager(dir2.path(), {.flush_secs = 0});
  eager.add_scalar("a", 1, 1);
  eager.add_scalar("a", 2, 2);
  EXPECT_EQ(read_events(eager.path()).size(), 3u);
}

TEST(EventFileWriter, SessionLogEventsCarryTheirStepAndAreFlushed) {
  testing::TempDir dir;
  EventFileWriter writer(dir.path());  // flush_secs 120: only add_session_log flushes
  const double w0 = now_s();
  writer.add_scalar("loss", 0.5, 4);
  writer.add_session_log(SessionLogStatus::kStart, 5);
  const double w1 = now_s();
  // Visible before close(): TensorBoard must see the restart as soon as training resumes.
  auto events = read_events(writer.path());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].what_case(), tf::Event::kSessionLog);
  EXPECT_EQ(events[2].step(), 5);
  EXPECT_EQ(events[2].session_log().status(), tf::SessionLog::START);
  EXPECT_GE(events[2].wall_time(), w0 - 1e-6);
  EXPECT_LE(events[2].wall_time(), w1 + 1e-6);

  // The record's bytes after wall_time (field 1, fixed64: tag 0x09 and 8 bytes), encoded by
  // hand from tensorflow/core/util/event.proto: step = field 2 varint (0x10 0x05),
  // session_log = field 7 length-delimited (0x3a, 2 bytes), SessionLog.status = field 1
  // varint, START = 1 (0x08 0x01).
  const auto records = read_tfrecord_file(writer.path());
  ASSERT_EQ(records[2].size(), 9u + 6u);
  EXPECT_EQ(records[2][0], '\x09');
  EXPECT_EQ(records[2].substr(9), std::string("\x10\x05\x3a\x02\x08\x01", 6));

  writer.add_session_log(SessionLogStatus::kCheckpoint, 1ll << 40, "saved", "ckpt/model-7");
  writer.add_session_log(SessionLogStatus::kStop, 0);
  writer.close();
  events = read_events(writer.path());
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[3].step(), 1ll << 40);
  EXPECT_EQ(events[3].session_log().status(), tf::SessionLog::CHECKPOINT);
  EXPECT_EQ(events[3].session_log().msg(), "saved");
  EXPECT_EQ(events[3].session_log().checkpoint_path(), "ckpt/model-7");
  EXPECT_EQ(events[4].session_log().status(), tf::SessionLog::STOP);
  EXPECT_EQ(events[4].step(), 0);
  expect_error([&] { writer.add_session_log(SessionLogStatus::kStart, 1); }, ErrorKind::kFailedPrecondition,
               {writer.path().string(), "closed"});
}

TEST(EventFileWriter, TwoWritersSameSecondGetTwoFiles) {
  testing::TempDir dir;
  EventFileWriter a(dir.path());
  EventFileWriter b(dir.path());
  EventFileWriter c(dir.path(), {.filename_suffix = ".v2"});
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(files_in(dir.path()).size(), 3u);
  EXPECT_TRUE(c.path().string().ends_with(".v2") || c.path().string().find(".v2.") != std::string::npos);
  a.add_scalar("a", 1, 1);
  b.add_scalar("b", 2, 1);
  a.close();
  b.close();
  EXPECT_EQ(read_events(a.path())[1].summary().value(0).tag(), "a");
  EXPECT_EQ(read_events(b.path())[1].summary().value(0).tag(), "b");
}

TEST(EventFileWriter, ConcurrentWriters) {
  testing::TempDir dir;
  EventFileWriter writer(dir.path(), {.flush_secs = 0.001});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&writer, t] {
      const std::string tag = "thread" + std::to_string(t);
      for (int i = 0; i < 200; ++i) {
        writer.add_scalar(tag, i * 0.5, i);
        if (i % 50 == 0) {
          const float h[] = {static_cast<float>(i)};
          writer.add_histogram(tag + "/h", h, 1, i);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  writer.close();
  const auto events = read_events(writer.path());
  ASSERT_EQ(events.size(), 1u + 4 * 200 + 4 * 4);
  std::map<std::string, std::int64_t> next_step;
  for (std::size_t i = 1; i < events.size(); ++i) {
    const auto& v = events[i].summary().value(0);
    if (v.value_case() != tf::Summary::Value::kSimpleValue) continue;
    EXPECT_EQ(events[i].step(), next_step[v.tag()]++) << v.tag();  // per-thread order kept
    EXPECT_EQ(v.simple_value(), static_cast<float>(events[i].step() * 0.5));
  }
  EXPECT_EQ(next_step.size(), 4u);
}

}  // namespace
}  // namespace tensorhub
