// Sharded hub datasets (store/dataset_shards.h) read back record by record (HubShardReader), on
// every backend, with the TensorFlow-written files of tests/fixtures/tfrecord: the layout in
// the document, the records exactly as TensorFlow wrote them, all-or-nothing saves, and
// corrupt shards refused; and feature specs as JSON.
#include <gtest/gtest.h>

#include <filesystem>

#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/data/hub_dataset.h"
#include "tensorhub/store/dataset_shards.h"

namespace tensorhub {
namespace {

using testing::TempDir;

const std::filesystem::path kFixtures = TENSORHUB_TFRECORD_FIXTURES;
const std::filesystem::path kToy0 = kFixtures / "toy.nocompress-tfe-tfrecord-00000-of-00002";
const std::filesystem::path kToy1 = kFixtures / "toy.nocompress-tfe-tfrecord-00001-of-00002";
const std::filesystem::path kSentences = kFixtures / "sentences.tfe-tfrecord";  // GZIP

// Every record of one shard through a HubShardReader.
std::vector<std::string> read_shard(Hub& hub, const ShardedDataset& ds, std::size_t i, BlobCache* cache) {
  HubShardReader reader(hub, ds, ds.shards.at(i), cache);
  std::vector<std::string> out;
  std::string record;
  while (reader.read(record)) out.push_back(record);
  return out;
}

class HubDatasetTest : public testing::BackendTest {
 protected:
  void set_up() override { hub_ = std::make_unique<Hub>(db_->uri(), "p"); }

  std::int64_t save_toy(const Json& tags = Json::object()) {
    ShardedDatasetSpec spec;
    spec.features = {{"Num_1", {{"type", "FixedLenFeature"}, {"dtype", "float32"}}}};
    spec.files = {{kToy0, 3}, {kToy1, 1}};
    return save_sharded_dataset(*hub_, "toy", spec, tags);
  }

  std::unique_ptr<Hub> hub_;
  TempDir cache_dir_;
};

TEST_P(HubDatasetTest, TheDocumentDescribesTheShards) {
  const std::int64_t id = save_toy({{"description", "toy.csv as Examples"}});
  const auto ds = find_sharded_dataset(*hub_, "toy");
  ASSERT_TRUE(ds);
  EXPECT_EQ(ds->document.id, id);
  EXPECT_EQ(ds->document.tags["description"], "toy.csv as Examples");
  EXPECT_EQ(ds->format, "tfrecord");
  EXPECT_EQ(ds->compression, "NONE");
  EXPECT_EQ(ds->records, 4);
  ASSERT_EQ(ds->shards.size(), 2u);
  EXPECT_EQ(ds->shards[0].part, "shard-00000");
  EXPECT_EQ(ds->shards[0].file, kToy0.filename().string());
  EXPECT_EQ(ds->shards[0].records, 3);
  EXPECT_EQ(ds->shards[0].bytes, 527u);  // the fixture's size
  EXPECT_EQ(ds->shards[1].part, "shard-00001");
  EXPECT_EQ(ds->shards[1].bytes, 184u);
  EXPECT_EQ(ds->shards[1].sha256, ds->document.parts.at("shard-00001"));
  const auto specs = hub_feature_specs(*ds);
  ASSERT_TRUE(specs);
  EXPECT_EQ(specs->count("Num_1"), 1u);
  EXPECT_EQ(hub_->count_blobs(), 2);
  // A tensor load names what the dataset is instead of failing on a missing part.
  testing::expect_error([&] { hub_->find_top_dataset("toy"); }, ErrorKind::kFailedPrecondition, {"sharded"});
}

TEST_P(HubDatasetTest, ShardsReadBackExactlyAsTensorFlowWroteThem) {
  save_toy();
  const auto ds = find_sharded_dataset(*hub_, "toy");
  BlobCache cache(BlobCacheOptions{cache_dir_.path(), std::uint64_t{1} << 30, true});
  EXPECT_EQ(read_shard(*hub_, *ds, 0, &cache), read_tfrecord_file(kToy0));
  EXPECT_EQ(read_shard(*hub_, *ds, 1, nullptr), read_tfrecord_file(kToy1));  // no cache: a temporary file
  EXPECT_EQ(read_shard(*hub_, *ds, 0, &cache), read_tfrecord_file(kToy0));
  EXPECT_EQ(cache.stats().fetches, 1);
  EXPECT_EQ(cache.stats().hits, 1);
  // Record 1 of shard 0 is toy.csv's row 2: Num_1 = 2.
  const auto rec = parse_single_example(read_shard(*hub_, *ds, 0, nullptr)[1], *hub_feature_specs(*ds));
  EXPECT_EQ(std::get<Tensor>(rec.at("Num_1")).as<float>()[0], 2.0f);
}

TEST_P(HubDatasetTest, AGzipShardIsReadWithItsCompression) {
  ShardedDatasetSpec spec;
  spec.compression = "GZIP";
  spec.files = {{kSentences, 2}};
  save_sharded_dataset(*hub_, "sentences", spec);
  const auto ds = find_sharded_dataset(*hub_, "sentences");
  const auto records = read_shard(*hub_, *ds, 0, nullptr);
  ASSERT_EQ(records.size(), 2u);
  const auto f1 = read_example(records[1]).at("f1");
  EXPECT_EQ(std::get<std::vector<std::string>>(f1), std::vector<std::string>{"Bonjour le monde"});
}

TEST_P(HubDatasetTest, ARecordCountTheShardDoesNotHoldIsDataLoss) {
  ShardedDatasetSpec spec;
  spec.files = {{kToy0, 5}};
  save_sharded_dataset(*hub_, "wrong", spec);
  const auto ds = find_sharded_dataset(*hub_, "wrong");
  testing::expect_error([&] { read_shard(*hub_, *ds, 0, nullptr); }, ErrorKind::kDataLoss,
                        {"dataset 'wrong' shard-00000 (" + kToy0.filename().string() + ")", "holds 3 records", "says 5"});
}

TEST_P(HubDatasetTest, AShardReadWithTheWrongCompressionNamesTheShard) {
  ShardedDatasetSpec spec;
  spec.files = {{kSentences, 2}};  // GZIP bytes declared NONE
  save_sharded_dataset(*hub_, "mislabelled", spec);
  const auto ds = find_sharded_dataset(*hub_, "mislabelled");
  const std::string msg = testing::error_message_of(ErrorKind::kDataLoss, [&] { read_shard(*hub_, *ds, 0, nullptr); },
                                                    "wrong compression");
  EXPECT_NE(msg.find("dataset 'mislabelled' shard-00000 (sentences.tfe-tfrecord)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("/proc/self/fd"), std::string::npos) << msg;
}

TEST_P(HubDatasetTest, NothingIsSavedWhenAFileIsMissingOrATagIsReserved) {
  ShardedDatasetSpec spec;
  spec.files = {{kToy0, 3}, {cache_dir_ / "missing.tfrecord", 1}};
  testing::expect_error([&] { save_sharded_dataset(*hub_, "half", spec); }, ErrorKind::kNotFound, {"missing.tfrecord"});
  spec.files = {{kToy0, 3}};
  testing::expect_error([&] { save_sharded_dataset(*hub_, "half", spec, {{"shards", 1}}); },
                        ErrorKind::kInvalidArgument, {"\"shards\" is reserved"});
  spec.files.clear();
  testing::expect_error([&] { save_sharded_dataset(*hub_, "half", spec); }, ErrorKind::kInvalidArgument, {"no files"});
  EXPECT_TRUE(hub_->find_datasets().empty());
  EXPECT_EQ(hub_->count_blobs(), 0);
}

TEST_P(HubDatasetTest, ATensorDatasetIsNotSharded) {
  NamedTensors t;
  t["x"] = Tensor::from<float>(DType::kF32, {1}, {1});
  hub_->save_dataset(t, "tensors");
  testing::expect_error([&] { find_sharded_dataset(*hub_, "tensors"); }, ErrorKind::kFailedPrecondition,
                        {"holds tensors, not shards"});
  EXPECT_FALSE(find_sharded_dataset(*hub_, "nothing"));
}

// Feature specs as JSON: a dataset's "features", a features file.
TEST(FeatureSpecsJson, ReadAndWrite) {
  const auto j = Json::parse(R"({
    "image": {"type": "FixedLenFeature", "shape": [], "dtype": "string"},
    "label": {"type": "FixedLenFeature", "dtype": "int64", "default_value": 0},
    "tags": {"type": "VarLenFeature", "dtype": "bytes"},
    "frames": {"type": "FixedLenSequenceFeature", "shape": [2], "dtype": "float",
               "allow_missing": true, "default_value": 0.5}})");
  const FeatureSpecs specs = feature_specs_from_json(j);
  ASSERT_EQ(specs.size(), 4u);
  const auto& label = std::get<FixedLenFeature>(specs.at("label"));
  EXPECT_EQ(label.dtype, FeatureDType::kInt64);
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(label.default_value), std::vector<std::int64_t>{0});
  EXPECT_EQ(std::get<VarLenFeature>(specs.at("tags")).dtype, FeatureDType::kString);
  const auto& frames = std::get<FixedLenSequenceFeature>(specs.at("frames"));
  EXPECT_TRUE(frames.allow_missing);
  EXPECT_EQ(frames.shape, std::vector<std::int64_t>{2});
  EXPECT_EQ(std::get<std::vector<float>>(frames.default_value), std::vector<float>{0.5f});
  EXPECT_EQ(feature_specs_to_json(feature_specs_from_json(feature_specs_to_json(specs))), feature_specs_to_json(specs));
  ExampleParser parser(specs);  // valid specs
  EXPECT_EQ(parser.specs().size(), 4u);

  testing::expect_error([] { feature_specs_from_json(Json::parse(R"({"x": {"type": "FixedLenFeature", "dtype": "float16"}})")); },
               ErrorKind::kInvalidArgument, {"feature 'x'", "unknown feature dtype 'float16'", "float32"});
  testing::expect_error([] { feature_specs_from_json(Json::parse(R"({"x": {"type": "RaggedFeature", "dtype": "int64"}})")); },
               ErrorKind::kInvalidArgument, {"feature 'x'", "unknown type 'RaggedFeature'"});
  testing::expect_error([] { feature_specs_from_json(Json::parse(R"({"x": {"type": "VarLenFeature", "dtype": "int64", "shap": []}})")); },
               ErrorKind::kInvalidArgument, {"feature 'x'", "unknown key 'shap'"});
  testing::expect_error([] { feature_specs_from_json(Json::parse(R"({"x": {"type": "FixedLenFeature", "dtype": "int64", "default_value": 1.5}})")); },
               ErrorKind::kInvalidArgument, {"feature 'x'", "default_value must be an integer"});
  testing::expect_error([] { feature_specs_from_json(Json::parse("[1]")); }, ErrorKind::kInvalidArgument, {"JSON object"});
}

INSTANTIATE_TEST_SUITE_P(Backends, HubDatasetTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
