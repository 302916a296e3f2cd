// `tensorhub dataset import --tfrecord`, `dataset export` and `dataset head` as processes, on
// every backend, with the TensorFlow-written files of tests/fixtures/tfrecord (their README and
// toy.csv give the values): shards stored and exported byte for byte, records printed parsed,
// tensor datasets exported as Examples, and bad input refused with nothing half-imported.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/process.h"
#include "tensorhub/data/example.h"
#include "tensorhub/data/hub_dataset.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/dataset_shards.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;
namespace fs = std::filesystem;

const fs::path kFixtures = TENSORHUB_TFRECORD_FIXTURES;
const fs::path kToy0 = kFixtures / "toy.nocompress-tfe-tfrecord-00000-of-00002";
const fs::path kToy1 = kFixtures / "toy.nocompress-tfe-tfrecord-00001-of-00002";
const fs::path kSentences = kFixtures / "sentences.tfe-tfrecord";  // GZIP

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

class DatasetTfrecordTest : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override {
    db_ = GetParam().make();
    if (!db_) GTEST_SKIP() << kNoPostgres;
    fs::create_directories(dir_ / "in");
    fs::copy_file(kToy0, dir_ / "in" / kToy0.filename());
    fs::copy_file(kToy1, dir_ / "in" / kToy1.filename());
  }

  // Runs `tensorhub dataset <args> --hub URI --project p`; returns the exit code (output in log_).
  int run(std::vector<std::string> args) {
    args.insert(args.begin(), {kTensorhub, "dataset"});
    args.insert(args.end(), {"--hub", db_->uri(), "--project", "p"});
    fs::remove(log_);
    return wait_exit(spawn(args, log_));
  }
  std::string out() const { return read_text(log_); }

  // No dataset (and no blob) in the hub, whether or not the failed command created it.
  void expect_nothing_imported() {
    Hub hub(db_->uri(), "p");
    EXPECT_TRUE(hub.find_datasets().empty());
    EXPECT_EQ(hub.count_blobs(), 0);
  }

  std::unique_ptr<TestDatabase> db_;
  TempDir dir_;
  std::string log_ = (dir_ / "out.log").string();
  std::string cache_ = (dir_ / "cache").string();
};

TEST_P(DatasetTfrecordTest, ImportsFilesAsShardsAndExportsThemByteForByte) {
  write_file(dir_ / "features.json", R"({"Num_1": {"type": "FixedLenFeature", "dtype": "float32"},
                                         "Cat_1": {"type": "FixedLenFeature", "dtype": "string"}})");
  ASSERT_EQ(run({"import", "--tfrecord", (dir_ / "in").string() + "/*", "--name", "toy", "--features",
                 (dir_ / "features.json").string()}),
            0)
      << out();
  EXPECT_NE(out().find("saved dataset toy (id 1) in project p: 2 shards, 4 records, 711 B (NONE)"), std::string::npos)
      << out();
  {
    Hub hub(db_->uri(), "p");
    const auto ds = find_sharded_dataset(hub, "toy");
    ASSERT_TRUE(ds);
    EXPECT_EQ(ds->records, 4);
    EXPECT_EQ(ds->shards.at(0).records, 3);
    EXPECT_EQ(ds->features["Cat_1"]["dtype"], "string");
  }
  ASSERT_EQ(run({"export", "--name", "toy", "--tfrecord", (dir_ / "out").string()}), 0) << out();
  EXPECT_EQ(file_text(dir_ / "out" / kToy0.filename()), file_text(kToy0));
  EXPECT_EQ(file_text(dir_ / "out" / kToy1.filename()), file_text(kToy1));
  EXPECT_EQ(Json::parse(file_text(dir_ / "out" / "features.json"))["Num_1"]["dtype"], "float32");
  // A --tfrecord path that is a file: a clear error naming the option, not a filesystem exception.
  write_file(dir_ / "afile", "x");
  ASSERT_EQ(run({"export", "--name", "toy", "--tfrecord", (dir_ / "afile").string()}), 1) << out();
  EXPECT_NE(out().find("--tfrecord " + (dir_ / "afile").string() + ": cannot make it a directory"), std::string::npos)
      << out();
  EXPECT_EQ(out().find("unexpected error"), std::string::npos) << out();
}

// An unquoted glob reaches us as the shell's list of files: each is a shard, in the order given,
// a file named twice taken once.
TEST_P(DatasetTfrecordTest, ImportsTheShellsListOfFiles) {
  const std::string f0 = (dir_ / "in" / kToy0.filename()).string(), f1 = (dir_ / "in" / kToy1.filename()).string();
  ASSERT_EQ(run({"import", "--tfrecord", f1, f0, f1, "--name", "toy"}), 0) << out();
  EXPECT_NE(out().find("2 shards, 4 records"), std::string::npos) << out();
  Hub hub(db_->uri(), "p");
  const auto ds = find_sharded_dataset(hub, "toy");
  ASSERT_TRUE(ds);
  ASSERT_EQ(ds->shards.size(), 2u);
  EXPECT_EQ(ds->shards.at(0).records, 1);  // toy ...-00001-of-00002 (1 record) first, as given
  EXPECT_EQ(ds->shards.at(1).records, 3);
}

TEST_P(DatasetTfrecordTest, HeadPrintsTheFirstRecordsParsed) {
  ASSERT_EQ(run({"import", "--tfrecord", (dir_ / "in").string() + "/*", "--name", "toy"}), 0) << out();
  ASSERT_EQ(run({"head", "--name", "toy", "-n", "4", "--cache-dir", cache_}), 0) << out();
  const std::string text = out();
  // toy.csv row 2 (record 1 of the first file): 2,2,B,,X Y,X,1,NA,2
  const auto at = text.find("shard-00000 (" + kToy0.filename().string() + ") record 1:");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string rec1 = text.substr(at, text.find("record 2:") - at);
  for (const char* line : {"  Num_1: float [2.0]", "  Cat_1: bytes [\"B\"]", "  Cat_2: (empty)",
                           "  Cat_set_1: bytes [\"x\", \"y\"]", "  Bool_2: (empty)", "  Cat_3: float [2.0]"})
    EXPECT_NE(rec1.find(line), std::string::npos) << line << "\n" << rec1;
  // Row 4 is the only record of the second file.
  EXPECT_NE(text.find("shard-00001 (" + kToy1.filename().string() + ") record 0:"), std::string::npos) << text;
  EXPECT_NE(text.find("  Cat_1: bytes [\"C\"]"), std::string::npos) << text;
  EXPECT_EQ(text.find("record 3"), std::string::npos) << text;

  ASSERT_EQ(run({"head", "--name", "toy", "-n", "1", "--json", "--cache-dir", cache_}), 0) << out();
  const Json j = Json::parse(out());
  ASSERT_EQ(j.size(), 1u);
  const Json& f = j[0]["example"]["features"]["feature"];
  EXPECT_EQ(f["Num_1"]["floatList"]["value"], Json::array({1.0}));
  EXPECT_EQ(f["Bool_1"]["int64List"]["value"], Json::array({"0"}));  // int64 as strings, protobuf's JSON mapping
  EXPECT_EQ(f["Cat_1"]["bytesList"]["value"], Json::array({"QQ=="}));  // base64 of "A"
  EXPECT_EQ(f["Num_2"], Json::object());                                // an empty Feature
  EXPECT_EQ(fs::exists(fs::path(cache_) / ".lock"), true);               // read through the cache

  // -n 0: nothing to show, said (stdout and stderr share the log here), not silence.
  ASSERT_EQ(run({"head", "--name", "toy", "-n", "0", "--cache-dir", cache_}), 0) << out();
  EXPECT_EQ(out(), "dataset toy: no records to show\n");
}

TEST_P(DatasetTfrecordTest, AGzipFileNeedsItsCompression) {
  ASSERT_EQ(run({"import", "--tfrecord", kSentences.string(), "--name", "s"}), 1);
  EXPECT_NE(out().find("TFRecord file " + kSentences.string() + " (NONE), record at offset 0"), std::string::npos)
      << out();
  EXPECT_NE(out().find("nothing was imported"), std::string::npos) << out();
  expect_nothing_imported();
  ASSERT_EQ(run({"import", "--tfrecord", kSentences.string(), "--name", "s", "--compression", "GZIP"}), 0) << out();
  ASSERT_EQ(run({"head", "--name", "s", "--no-cache"}), 0) << out();
  EXPECT_NE(out().find("  f1: bytes [\"Bonjour le monde\"]"), std::string::npos) << out();
  EXPECT_FALSE(fs::exists(cache_));
}

TEST_P(DatasetTfrecordTest, APlainFileReadAsGzipIsRefused) {
  ASSERT_EQ(run({"import", "--tfrecord", kToy0.string(), "--name", "t", "--compression", "GZIP"}), 1);
  EXPECT_NE(out().find("(GZIP), record at offset 0"), std::string::npos) << out();
  EXPECT_NE(out().find("; is the file GZIP-compressed? Leave --compression out for plain TFRecord files"), std::string::npos)
      << out();
  expect_nothing_imported();
}

TEST_P(DatasetTfrecordTest, ACorruptFileAmongGoodOnesImportsNothing) {
  std::string bytes = file_text(kToy1);
  bytes[40] ^= 0x10;  // inside the only record's data: its data CRC fails
  write_file(dir_ / "in" / "zz-corrupt.tfrecord", bytes);
  ASSERT_EQ(run({"import", "--tfrecord", (dir_ / "in").string() + "/*", "--name", "toy"}), 1);
  EXPECT_NE(out().find("TFRecord file " + (dir_ / "in" / "zz-corrupt.tfrecord").string()), std::string::npos) << out();
  EXPECT_NE(out().find("offset 0"), std::string::npos) << out();
  expect_nothing_imported();
}

TEST_P(DatasetTfrecordTest, ATruncatedFileNamesItsOffset) {
  write_file(dir_ / "in" / "zz-short.tfrecord", file_text(kToy0).substr(0, 300));
  ASSERT_EQ(run({"import", "--tfrecord", (dir_ / "in").string() + "/*", "--name", "toy"}), 1);
  // Records of toy file 0 are 153 and 159 bytes long with 16 bytes of framing each: the
  // second starts at 169 and ends past byte 300.
  EXPECT_NE(out().find("zz-short.tfrecord (NONE), record at offset 169: truncated"), std::string::npos) << out();
  expect_nothing_imported();
}

TEST_P(DatasetTfrecordTest, ANonTfrecordFileOrBadFeaturesAreClearErrors) {
  ASSERT_EQ(run({"import", "--tfrecord", (kFixtures / "toy.csv").string(), "--name", "t"}), 1);
  EXPECT_NE(out().find("toy.csv (NONE), record at offset 0: corrupt length"), std::string::npos) << out();
  EXPECT_NE(out().find("not TFRecord at all"), std::string::npos) << out();
  // What to do is said once, in the command's words (not the reader's API hint as well).
  EXPECT_NE(out().find("; if the file is compressed, pass --compression GZIP or ZLIB;"), std::string::npos) << out();
  EXPECT_EQ(out().find("GZIP or ZLIB"), out().rfind("GZIP or ZLIB")) << out();
  // A file shorter than a record header gets the same hint after the reader's error.
  write_file(dir_ / "short.tfrecord", "0123456789");
  ASSERT_EQ(run({"import", "--tfrecord", (dir_ / "short.tfrecord").string(), "--name", "t"}), 1);
  EXPECT_NE(out().find("truncated header (10 of 12 bytes before end of file); if the file is compressed, pass "
                       "--compression GZIP or ZLIB"),
            std::string::npos)
      << out();
  write_file(dir_ / "f.json", R"({"Num_1": {"type": "FixedLenFeature", "dtype": "float16"}})");
  ASSERT_EQ(run({"import", "--tfrecord", kToy0.string(), "--name", "t", "--features", (dir_ / "f.json").string()}), 1);
  EXPECT_NE(out().find("feature 'Num_1': unknown feature dtype 'float16'"), std::string::npos) << out();
  // A record that breaks the schema names the feature, the record and the file.
  write_file(dir_ / "g.json", R"({"Cat_1": {"type": "FixedLenFeature", "dtype": "int64"}})");
  ASSERT_EQ(run({"import", "--tfrecord", kToy0.string(), "--name", "t", "--features", (dir_ / "g.json").string()}), 1);
  EXPECT_NE(out().find("feature 'Cat_1' of record 0 of " + kToy0.string()), std::string::npos) << out();
  EXPECT_NE(out().find("data types don't match"), std::string::npos) << out();
  ASSERT_EQ(run({"import", "--tfrecord", (dir_ / "none*").string(), "--name", "t"}), 1);
  EXPECT_NE(out().find("matches no file"), std::string::npos) << out();
  ASSERT_EQ(run({"import", "--tfrecord", dir_.path().string() + "/", "--name", "t"}), 1);  // a directory
  EXPECT_NE(out().find("is a directory; give its files, e.g. '" + dir_.path().string() + "/*' (quoted)"), std::string::npos)
      << out();
  ASSERT_EQ(run({"import", "--tfrecord", kToy0.string(), "--name", "t", "--compression", "LZ4"}), 2);
  // The IDX import's options are refused with --tfrecord, not silently ignored.
  ASSERT_EQ(run({"import", "--tfrecord", kToy0.string(), "--name", "t", "--validation", "5"}), 2);
  EXPECT_NE(out().find("--validation excludes --tfrecord"), std::string::npos) << out();
  ASSERT_EQ(run({"import", "--tfrecord", kToy0.string(), "--name", "t", "--no-scale"}), 2);
  // A reserved tag is refused before any file is looked at (here: a pattern matching none).
  ASSERT_EQ(run({"import", "--tfrecord", (dir_ / "none*").string(), "--name", "t", "--tags", R"({"shards": 1})"}), 2);
  EXPECT_NE(out().find(R"(--tags: dataset tag "shards" is reserved)"), std::string::npos) << out();
  EXPECT_EQ(out().find("matches no file"), std::string::npos) << out();
  expect_nothing_imported();
}

TEST_P(DatasetTfrecordTest, ATensorDatasetExportsAsExamplesOneFeaturePerTensor) {
  {
    Hub hub(db_->uri(), "p");
    NamedTensors t;
    t["X_train"] = Tensor::from<float>(DType::kF32, {3, 2}, {0.5f, 1, 2, 3, 4, 5});
    t["y_train"] = Tensor::from<std::int64_t>(DType::kI64, {3}, {7, 8, 9});
    t["X_test"] = Tensor::from<std::uint8_t>(DType::kU8, {1, 2}, {200, 255});
    hub.save_dataset(t, "mnist-ish");
  }
  ASSERT_EQ(run({"export", "--name", "mnist-ish", "--tfrecord", (dir_ / "out").string(), "--compression", "GZIP"}), 0)
      << out();
  const auto train = read_tfrecord_file(dir_ / "out" / "train.tfrecord", TFRecordCompression::kGzip);
  ASSERT_EQ(train.size(), 3u);
  const auto specs = feature_specs_from_json(Json::parse(file_text(dir_ / "out" / "train.features.json")));
  const auto parsed = parse_example(train, specs);
  const Tensor& x = std::get<Tensor>(parsed.at("X_train"));
  EXPECT_EQ(x.shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(std::vector<float>(x.as<float>(), x.as<float>() + 6), (std::vector<float>{0.5f, 1, 2, 3, 4, 5}));
  const Tensor& y = std::get<Tensor>(parsed.at("y_train"));
  EXPECT_EQ(std::vector<std::int64_t>(y.as<std::int64_t>(), y.as<std::int64_t>() + 3), (std::vector<std::int64_t>{7, 8, 9}));
  const auto test = read_tfrecord_file(dir_ / "out" / "test.tfrecord", TFRecordCompression::kGzip);
  ASSERT_EQ(test.size(), 1u);
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(read_example(test[0]).at("X_test")), (std::vector<std::int64_t>{200, 255}));
  // head shows the same Examples.
  ASSERT_EQ(run({"head", "--name", "mnist-ish", "-n", "1"}), 0) << out();
  EXPECT_NE(out().find("train record 0:\n  X_train: float [0.5, 1.0]\n  y_train: int64 [7]"), std::string::npos) << out();
}

// A hub with a four-row dataset "plane" and a one-epoch spec that trains on it.
struct TinySpecHub {
  TempDir dir;
  std::string uri = "sqlite://" + (dir / "hub.db").string();
  std::string log = (dir / "processes.log").string();
  std::string sha;  // the dataset's blob
  Json spec = Json::parse(R"({"model": {"name": "tiny", "input_shape": [2], "layers": [{"type": "Dense", "units": 2}]},
                              "data": {"dataset": "plane"}, "fit": {"batch_size": 2, "epochs": 1}, "save_model": false})");

  TinySpecHub() {
    Hub hub(uri, "p");
    NamedTensors t;
    t["X_train"] = Tensor::from<float>(DType::kF32, {4, 2}, {1, 1, -1, -1, 1, 0.5f, -1, -0.5f});
    t["y_train"] = Tensor::from<std::int64_t>(DType::kI64, {4}, {1, 0, 1, 0});
    hub.save_dataset(t, "plane");
    sha = hub.find_datasets()[0].parts.at("tensors.safetensors");
  }
};

// A spec trial (what a runner runs) loads its dataset through the machine's blob cache: the
// second trial on the machine finds the dataset's blob there, verified, and fetches nothing.
TEST(TrainSpecBlobCache, ATrialReadsItsDatasetThroughTheMachineCache) {
  TinySpecHub paths;
  const std::string& sha = paths.sha;
  const fs::path spec = paths.dir.path() / "spec.json";
  write_file(spec, paths.spec.dump());
  const fs::path cache = paths.dir.path() / "cache";
  ProcessOptions options;
  options.output = paths.log;
  options.own_process_group = false;
  options.env = {{"TENSORHUB_BLOB_CACHE_DIR", cache.string()}};
  const std::vector<std::string> args = {kTensorhub, "train-spec", "--spec", spec.string(), "--hub", paths.uri,
                                         "--project", "p"};
  ASSERT_EQ(wait_exit(Process::spawn(args, options).release()), 0) << read_text(paths.log);
  EXPECT_TRUE(fs::is_regular_file(cache / sha)) << read_text(paths.log);
  // A damaged cached copy is not used: the next trial fetches the blob again and trains.
  fs::permissions(cache / sha, fs::perms::owner_write, fs::perm_options::add);
  write_file(cache / sha, "damaged");
  ASSERT_EQ(wait_exit(Process::spawn(args, options).release()), 0) << read_text(paths.log);
  EXPECT_EQ(sha256_hex(file_text(cache / sha)), sha);
  // TENSORHUB_BLOB_CACHE=off reads straight from the hub.
  fs::remove_all(cache);
  options.env["TENSORHUB_BLOB_CACHE"] = "off";
  ASSERT_EQ(wait_exit(Process::spawn(args, options).release()), 0) << read_text(paths.log);
  EXPECT_FALSE(fs::exists(cache));
}

// A runner passes the machine's cache settings on to its trials (and no other TENSORHUB_*
// variable of its own).
TEST(TrainSpecBlobCache, ARunnersTrialsUseTheRunnersCacheDirectory) {
  TinySpecHub h;
  {
    Hub hub(h.uri, "p");
    TaskQueue queue(hub);
    TaskSpec task;
    task.task_name = "spec";
    task.train_spec = h.spec;
    task.max_attempts = 1;
    queue.create_task(task);
  }
  const fs::path cache = h.dir.path() / "runner-cache";
  ProcessOptions options;
  options.output = h.log;
  options.own_process_group = false;
  options.env = {{"TENSORHUB_BLOB_CACHE_DIR", cache.string()}};
  const std::vector<std::string> args = {kTensorhub, "runner",         "--hub", h.uri, "--project", "p", "--task-name",
                                         "spec",     "--exit-when-idle", "0.5",  "--poll", "0.05", "--threads", "1"};
  ASSERT_EQ(wait_exit(Process::spawn(args, options).release()), 0) << read_text(h.log);
  Hub hub(h.uri, "p");
  ASSERT_EQ(TaskQueue(hub).find_tasks({}).at(0).status, TaskStatus::kFinished) << read_text(h.log);
  EXPECT_TRUE(fs::is_regular_file(cache / h.sha)) << read_text(h.log);
}

INSTANTIATE_TEST_SUITE_P(Backends, DatasetTfrecordTest, ::testing::ValuesIn(backend_params()), backend_param_name);

}  // namespace
}  // namespace tensorhub
