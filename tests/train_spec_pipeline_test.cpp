// Spec pipelines (spec.h's PipelineSpec, docs/spec-format.md "Pipelines"): real spec runs on
// GZIP TFRecord files of tf.train.Examples and on hub datasets of tensors, against a real
// SQLite hub; the subsets take/skip select, and the errors of bad pipeline objects.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/data/dataset.h"
#include "tensorhub/data/example.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/store/blob_cache.h"
#include "tensorhub/store/dataset_shards.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/model.h"
#include "tensorhub/train/spec.h"
#include "test_util.h"
#include "train_test_data.h"

namespace tensorhub {
namespace {

using testing::expect_error;
using testing::TempDir;

Json linear_model() {
  return {{"name", "linear"},
          {"input_shape", {4}},
          {"layers", {{{"type", "Dense"}, {"units", 8}, {"activation", "relu"}}, {{"type", "Dense"}, {"units", 2}}}},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.05}}},
          {"seed", 3}};
}

const Json kFeatures = {{"point", {{"type", "FixedLenFeature"}, {"shape", {4}}, {"dtype", "float32"}}},
                        {"label", {{"type", "FixedLenFeature"}, {"dtype", "int64"}}}};

// 200 separable points as Examples {point: 4 floats, label: int64} in two GZIP files of 100.
struct Records {
  Tensor x, y;
  std::vector<std::string> files;
};
Records write_records(const TempDir& dir) {
  Records r;
  testing::separable(200, 21, r.x, r.y);
  ExampleBuilder b;
  for (int f = 0; f < 2; ++f) {
    r.files.push_back((dir / ("points-" + std::to_string(f) + ".tfrecord.gz")).string());
    TFRecordWriter w(r.files.back(), {.compression = TFRecordCompression::kGzip});
    for (int i = 100 * f; i < 100 * (f + 1); ++i) {
      b.add_floats("point", std::span<const float>(r.x.as<float>() + 4 * i, 4));
      b.add_int64s("label", std::span<const std::int64_t>(r.y.as<std::int64_t>() + i, 1));
      w.write(b.serialize());
    }
    w.close();
  }
  return r;
}

// Rows [begin, end) of a [n, ...] tensor.
Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t end) {
  Tensor out = t;
  out.shape[0] = end - begin;
  const std::size_t row = t.data.size() / static_cast<std::size_t>(t.shape[0]);
  out.data.assign(t.data.begin() + static_cast<std::ptrdiff_t>(row * begin),
                  t.data.begin() + static_cast<std::ptrdiff_t>(row * end));
  return out;
}

TEST(SpecPipeline, TrainsFromGzipTFRecordFilesWithTakeAndSkipSubsets) {
  TempDir dir;
  const Records r = write_records(dir);
  Hub hub{"sqlite://" + (dir / "hub.db").string(), "spec"};
  const std::string pattern = (dir / "points-*.tfrecord.gz").string();
  const Json source = {{"tfrecord", pattern}, {"compression", "GZIP"}, {"features", kFeatures},
                       {"x", "point"},       {"y", "label"}};
  Json train = source, validation = source, test = source;
  train.update({{"take", 150}, {"cache", true}, {"shuffle", {{"buffer_size", 150}, {"seed", 5}}},
                {"batch", 16}, {"prefetch", "AUTOTUNE"}});
  validation.update({{"skip", 150}, {"take", 30}, {"batch", 8}});
  test.update({{"skip", 180}});
  const Json raw = {{"model", linear_model()},
                    {"data", {{"train", train}, {"validation", validation}, {"test", test}}},
                    {"fit", {{"epochs", 4}, {"seed", 7}, {"verbose", 0}, {"batch_size", 64}}}};
  const TrainSpec spec = parse_train_spec(raw, Json::object());
  ASSERT_TRUE(spec.data.train_pipeline);
  EXPECT_EQ(spec.data.train_pipeline->tfrecord, std::vector<std::string>{pattern});
  EXPECT_EQ(spec.data.train_pipeline->take, 150);
  EXPECT_EQ(spec.data.train_pipeline->prefetch, -1);
  EXPECT_EQ(spec.data.test_pipeline->batch_size, 0);  // fit.batch_size then

  const Json results = run_train_spec(spec, hub);
  ASSERT_EQ(results.at("history").size(), 4u);
  EXPECT_EQ(results.at("epochs"), 4);
  EXPECT_GT(results.at("accuracy").get<double>(), 0.9);

  // The saved model, evaluated on records 150..179 and 180..199 of the files (the points as
  // written), gives the run's val_* and test_*: skip and take chose those records.
  const auto saved = hub.find_top_model("linear");
  ASSERT_TRUE(saved);
  const Model model = Model::from_parts(saved->architecture, saved->weights);
  const Evaluation val = model.evaluate(rows(r.x, 150, 180), rows(r.y, 150, 180), 8);
  const Evaluation tst = model.evaluate(rows(r.x, 180, 200), rows(r.y, 180, 200), 64);
  EXPECT_NEAR(results.at("val_loss").get<double>(), val.loss, 1e-6);
  EXPECT_EQ(results.at("val_accuracy").get<double>(), val.accuracy);
  EXPECT_NEAR(results.at("test_loss").get<double>(), tst.loss, 1e-6);
  EXPECT_EQ(results.at("test_accuracy").get<double>(), tst.accuracy);
}

TEST(SpecPipeline, ShardedHubDatasetStreamsAsTheFilesDo) {
  TempDir dir;
  const Records r = write_records(dir);
  Hub hub{"sqlite://" + (dir / "hub.db").string(), "spec"};
  hub.set_blob_cache(std::make_shared<BlobCache>(BlobCacheOptions{.directory = dir / "cache"}));
  ShardedDatasetSpec shards;
  shards.compression = "GZIP";
  shards.features = kFeatures;  // the dataset's own specs: the pipeline needs none
  for (const auto& f : r.files) shards.files.push_back({f, 100});
  save_sharded_dataset(hub, "points", shards);
  const Json fit = {{"epochs", 2}, {"seed", 7}, {"verbose", 0}, {"batch_size", 16}};
  const Json files = {{"model", linear_model()},
                      {"data",
                       {{"train",
                         {{"tfrecord", r.files},
                          {"compression", "GZIP"},
                          {"features", kFeatures},
                          {"x", "point"},
                          {"y", "label"},
                          {"skip", 20},
                          {"shuffle", {{"buffer_size", 50}, {"seed", 3}}},
                          {"prefetch", 2}}}}},
                      {"fit", fit},
                      {"save_model", false}};
  Json from_hub = files;
  from_hub["data"]["train"] = {{"hub", "points"}, {"x", "point"}, {"y", "label"}, {"skip", 20},
                               {"shuffle", {{"buffer_size", 50}, {"seed", 3}}}, {"prefetch", 2}};
  const Json a = run_train_spec(parse_train_spec(files, Json::object()), hub);
  const Json b = run_train_spec(parse_train_spec(from_hub, Json::object()), hub);
  EXPECT_EQ(a.at("history"), b.at("history"));
  EXPECT_EQ(hub.blob_cache()->stats().fetches, 2);  // each shard crossed once, for two epochs
  // A feature the dataset does not have is named with the dataset's features.
  from_hub["data"]["train"]["x"] = "pixels";
  expect_error([&] { run_train_spec(parse_train_spec(from_hub, Json::object()), hub); }, ErrorKind::kInvalidArgument,
               {"hub dataset \"points\"", "no dense feature \"pixels\"", "\"label\""});
}

TEST(SpecPipeline, HubTensorsPipelineTrainsAsTheTensorSpecDoes) {
  TempDir dir;
  Hub hub{"sqlite://" + (dir / "hub.db").string(), "spec"};
  Tensor x, y, xv, yv;
  testing::separable(96, 4, x, y);
  testing::separable(32, 9, xv, yv);
  hub.save_dataset({{"X_train", x}, {"y_train", y}, {"X_val", xv}, {"y_val", yv}}, "separable");
  const Json fit = {{"epochs", 3}, {"seed", 7}, {"verbose", 0}, {"batch_size", 16}, {"shuffle", false}};
  const Json tensors = {{"model", linear_model()},
                        {"data", {{"dataset", "separable"}, {"validation", {{"x", "X_val"}, {"y", "y_val"}}}}},
                        {"fit", fit},
                        {"save_model", false}};
  const Json pipelines = {
      {"model", linear_model()},
      {"data",
       {{"train", {{"hub", "separable"}, {"x", "X_train"}, {"y", "y_train"}}},
        {"validation", {{"hub", "separable"}, {"x", "X_val"}, {"y", "y_val"}, {"batch", 1024}}}}},
      {"fit", fit},
      {"save_model", false}};
  const Json a = run_train_spec(parse_train_spec(tensors, Json::object()), hub);
  const Json b = run_train_spec(parse_train_spec(pipelines, Json::object()), hub);
  // Same batches in the same order, the same seeds: the same training, number for number.
  EXPECT_EQ(a.at("history"), b.at("history"));
  EXPECT_EQ(a.at("val_accuracy"), b.at("val_accuracy"));
}

TEST(SpecPipeline, BytesFeaturesAreDecodedRawAndStepsPerEpochRunsOnARepeatedPass) {
  TempDir dir;
  Hub hub{"sqlite://" + (dir / "hub.db").string(), "spec"};
  // 4-byte "images" as bytes_list values (0..255), labels as int64.
  const std::string file = (dir / "bytes.tfrecord").string();
  std::vector<std::uint8_t> pixels;
  std::vector<std::int64_t> labels;
  {
    TFRecordWriter w(file);
    ExampleBuilder b;
    for (int i = 0; i < 40; ++i) {
      std::string image;
      for (int j = 0; j < 4; ++j) image.push_back(static_cast<char>((i * 53 + j * 97) % 256));
      pixels.insert(pixels.end(), image.begin(), image.end());
      labels.push_back(static_cast<unsigned char>(image[0]) > 127 ? 1 : 0);
      b.add_bytes("image", image);
      b.add_int64s("label", std::span<const std::int64_t>(&labels.back(), 1));
      w.write(b.serialize());
    }
    w.close();
  }
  hub.save_dataset({{"X", Tensor::from<std::uint8_t>(DType::kU8, {40, 4}, pixels)},
                    {"y", Tensor::from<std::int64_t>(DType::kI64, {40}, labels)}},
                   "bytes");
  Json model = linear_model();
  const Json rescaling = {{"type", "Rescaling"}, {"scale", 1.0 / 255}};
  model["layers"].insert(model["layers"].begin(), rescaling);
  const Json fit = {{"epochs", 3}, {"seed", 7}, {"verbose", 0}, {"steps_per_epoch", 4}};
  const Json from_files = {
      {"model", model},
      {"data",
       {{"train",
         {{"tfrecord", {file}},
          {"features",
           {{"image", {{"type", "FixedLenFeature"}, {"dtype", "string"}}},
            {"label", {{"type", "FixedLenFeature"}, {"dtype", "int64"}, {"default_value", 0}}}}},
          {"decode_raw", {{"image", "uint8"}}},
          {"x", "image"},
          {"y", "label"},
          {"repeat", true},
          {"batch", 8}}}}},
      {"fit", fit},
      {"save_model", false}};
  Json from_hub = from_files;
  from_hub["data"]["train"] = {{"hub", "bytes"}, {"x", "X"}, {"y", "y"}, {"repeat", true}, {"batch", 8}};
  const Json a = run_train_spec(parse_train_spec(from_files, Json::object()), hub);
  const Json b = run_train_spec(parse_train_spec(from_hub, Json::object()), hub);
  ASSERT_EQ(a.at("history").size(), 3u);
  EXPECT_EQ(a.at("history"), b.at("history"));  // decode_raw gave the bytes the hub holds
}

TEST(SpecPipeline, BadPipelinesAreRefusedNamingTheField) {
  auto parse = [](const Json& train) {
    parse_train_spec({{"model", linear_model()}, {"data", {{"train", train}}}}, Json::object());
  };
  const Json ok = {{"tfrecord", "a.tfrecord"}, {"features", kFeatures}, {"x", "point"}, {"y", "label"}};
  expect_error([&] { parse({{"x", "point"}, {"y", "label"}}); }, ErrorKind::kInvalidArgument,
               {"spec.data.train needs one source"});
  Json two = ok;
  two["hub"] = "points";
  expect_error([&] { parse(two); }, ErrorKind::kInvalidArgument, {"needs one source"});
  Json no_features = ok;
  no_features.erase("features");
  expect_error([&] { parse(no_features); }, ErrorKind::kInvalidArgument, {"spec.data.train.features is required"});
  Json missing = ok;
  missing["x"] = "pixels";
  expect_error([&] { parse(missing); }, ErrorKind::kInvalidArgument, {"no feature \"pixels\""});
  Json bytes = ok;
  bytes["features"]["point"]["dtype"] = "string";
  bytes["features"]["point"]["shape"] = Json::array();
  expect_error([&] { parse(bytes); }, ErrorKind::kInvalidArgument, {"holds bytes", "decode_raw"});
  bytes["decode_raw"] = {{"point", "uint4"}};
  expect_error([&] { parse(bytes); }, ErrorKind::kInvalidArgument, {"decode_raw.\"point\" is \"uint4\"", "uint8"});
  Json typo = ok;
  typo["shufle"] = 10;
  expect_error([&] { parse(typo); }, ErrorKind::kInvalidArgument, {"unknown field \"shufle\""});
  Json gz = ok;
  gz["compression"] = "gzip";
  expect_error([&] { parse(gz); }, ErrorKind::kInvalidArgument, {"compression is \"gzip\"", "GZIP"});
  expect_error(
      [&] {
        parse_train_spec({{"model", linear_model()}, {"data", {{"dataset", "d"}}}, {"fit", {{"steps_per_epoch", 3}}}},
                         Json::object());
      },
      ErrorKind::kInvalidArgument, {"spec.fit.steps_per_epoch goes with pipelines"});
  // Files are matched when the pipeline is built.
  TempDir dir;
  Hub hub{"sqlite://" + (dir / "hub.db").string(), "spec"};
  Json nothing = ok;
  nothing["tfrecord"] = (dir / "none-*.tfrecord").string();
  expect_error([&] { make_pipeline(parse_pipeline_spec(nothing, "p"), hub, 32); }, ErrorKind::kInvalidArgument,
               {"no file matches", "none-*.tfrecord"});
  expect_error([&] { make_pipeline(parse_pipeline_spec({{"hub", "nope"}, {"x", "a"}, {"y", "b"}}, "p"), hub, 32); },
               ErrorKind::kNotFound, {"no dataset named \"nope\""});
}

}  // namespace
}  // namespace tensorhub
