// The main job from TFRecord: Debian's Fashion-MNIST converted to GZIP TFRecord shards of
// tf.train.Examples (image bytes + label), imported into the hub as sharded datasets
// (fashion_mnist_train: 50,000 records in --train-shards files; fashion_mnist_validation and
// fashion_mnist_test: 10,000 each), and the seed MLP (mlp_config(800, 800, 1e-4), batch 256)
// trained from the streaming pipeline
//   from_hub(shards, blob cache) -> map(parse) -> shuffle(10000, seed) -> batch(256)
//   -> prefetch(AUTOTUNE)
// and, with the same seed, from the in-memory tensors (load_mnist_dataset's 50,000 / 10,000 /
// 10,000 split: the same records); both evaluated on the test set. Exits 1 when the two test
// accuracies differ by more than --tolerance points (default 0.5).
//
//   build/bin/train_from_tfrecord --epochs 5 [--data DIR] [--out DIR] [--hub URI] [--keep]
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "fashion_mnist_records.h"
#include "tensorhub/core/error.h"
#include "tensorhub/data/hub_dataset.h"
#include "tensorhub/data/hub_source.h"
#include "tensorhub/data/idx.h"
#include "tensorhub/store/blob_cache.h"
#include "tensorhub/store/dataset_shards.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/model.h"

using namespace tensorhub;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The train, validation and test shards under `dir`: the first 50,000 training images in
// `train_shards` files, the other 10,000 in one, the 10,000 test images in one.
struct Shards {
  std::vector<fs::path> train, validation, test;
};

Shards convert(const fs::path& data, const fs::path& dir, int train_shards) {
  auto idx = [&](const char* name) { return read_idx(data / (std::string(name) + ".gz")); };
  const Tensor images = idx("train-images-idx3-ubyte"), labels = idx("train-labels-idx1-ubyte");
  const Tensor test_images = idx("t10k-images-idx3-ubyte"), test_labels = idx("t10k-labels-idx1-ubyte");
  const auto gz = TFRecordCompression::kGzip;
  Shards s;
  s.train = examples::write_example_shards(dir, "train", images, labels, 0, 50000, train_shards, gz);
  s.validation = examples::write_example_shards(dir, "validation", images, labels, 50000, 60000, 1, gz);
  s.test = examples::write_example_shards(dir, "test", test_images, test_labels, 0, 10000, 1, gz);
  return s;
}

// Saves `files` as sharded dataset `name` (counting their records) and returns it as stored.
ShardedDataset import_shards(Hub& hub, const std::string& name, const std::vector<fs::path>& files) {
  ShardedDatasetSpec spec;
  spec.compression = "GZIP";
  spec.features = feature_specs_to_json(examples::fashion_mnist_features());
  for (const auto& f : files) {
    TFRecordReader reader(f, TFRecordCompression::kGzip);
    std::string record;
    std::int64_t n = 0;
    while (reader.read(record)) ++n;
    spec.files.push_back({f, n});
  }
  hub.delete_datasets({{"dataset_name", name}});
  save_sharded_dataset(hub, name, spec);
  return *find_sharded_dataset(hub, name);
}

Dataset pipeline(Hub& hub, const ShardedDataset& shards, std::optional<std::uint64_t> shuffle_seed) {
  Dataset ds = from_hub(hub.uri(), shards, hub.blob_cache()).map(examples::parse_fashion_mnist());
  if (shuffle_seed) ds = ds.shuffle(10000, *shuffle_seed);
  return ds.batch(256).prefetch(Dataset::kAutotune);
}

}  // namespace

int main(int argc, char** argv) {
  reexec_for_fast_blas(argv);
  std::string data = default_mnist_dir().string(), out;
  int epochs = 5, train_shards = 5, threads = 0;
  std::uint64_t seed = 1;
  double tolerance = 0.5;
  bool keep = false;
  CLI::App app{"Fashion-MNIST as GZIP TFRecord shards; the seed MLP trained from them and from tensors"};
  app.add_option("--data", data, "MNIST-format directory")->capture_default_str();
  app.add_option("--out", out, "directory for the shards (default: a temporary one, removed unless --keep)");
  std::string hub_uri;
  app.add_option("--hub", hub_uri, "hub to import into (default: sqlite://<out>/hub.db)");
  app.add_option("--epochs", epochs, "training epochs")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--train-shards", train_shards, "files for the 50,000 training records")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--seed", seed, "fit's seed and the shuffle's (same for both runs)")->capture_default_str();
  app.add_option("--tolerance", tolerance, "allowed test-accuracy difference, in points")->capture_default_str();
  app.add_option("--threads", threads, "libtorch threads (0: the cores)")->capture_default_str();
  app.add_flag("--keep", keep, "keep the shards");
  CLI11_PARSE(app, argc, argv);

  try {
    set_num_threads(threads);
    const bool temporary = out.empty();
    if (temporary) out = (fs::temp_directory_path() / ("fashion-mnist-tfrecord-" + std::to_string(::getpid()))).string();
    fs::create_directories(out);
    auto t0 = std::chrono::steady_clock::now();
    const Shards shards = convert(data, out, train_shards);
    std::uintmax_t bytes = 0;
    for (const auto* set : {&shards.train, &shards.validation, &shards.test})
      for (const auto& f : *set) bytes += fs::file_size(f);
    std::printf("wrote %zu GZIP TFRecord files (%.1f MB) under %s in %.1f s\n",
                shards.train.size() + 2, static_cast<double>(bytes) / 1e6, out.c_str(), seconds_since(t0));

    if (hub_uri.empty()) hub_uri = "sqlite://" + (fs::absolute(out) / "hub.db").string();
    Hub hub(hub_uri, "tfrecord");
    BlobCacheOptions cache_options;
    cache_options.directory = fs::path(out) / "blob-cache";
    hub.set_blob_cache(std::make_shared<BlobCache>(cache_options));
    t0 = std::chrono::steady_clock::now();
    const ShardedDataset train = import_shards(hub, "fashion_mnist_train", shards.train);
    const ShardedDataset validation_shards = import_shards(hub, "fashion_mnist_validation", shards.validation);
    const ShardedDataset test = import_shards(hub, "fashion_mnist_test", shards.test);
    std::printf("imported them into %s as fashion_mnist_train (%lld records in %zu shards), _validation, _test "
                "in %.1f s\n",
                hub.display_uri().c_str(), static_cast<long long>(train.records), train.shards.size(),
                seconds_since(t0));

    FitOptions fit;
    fit.epochs = epochs;
    fit.batch_size = 256;
    fit.seed = seed;
    fit.verbose = 2;

    std::printf("-- from the hub's TFRecord shards, streamed\n");
    std::fflush(stdout);
    Model streamed = Model::from_config(mlp_config(800, 800, 1e-4));
    t0 = std::chrono::steady_clock::now();
    const Dataset validation = pipeline(hub, validation_shards, std::nullopt);
    streamed.fit(pipeline(hub, train, seed), fit, &validation);
    const double streamed_s = seconds_since(t0);
    const Evaluation a = streamed.evaluate(pipeline(hub, test, std::nullopt));

    std::printf("-- from in-memory tensors\n");
    std::fflush(stdout);
    const MnistSplits t = load_mnist_dataset(data, 50000);
    Model in_memory = Model::from_config(mlp_config(800, 800, 1e-4));
    t0 = std::chrono::steady_clock::now();
    in_memory.fit(t.X_train, t.y_train, fit, &t.X_val, &t.y_val);
    const double in_memory_s = seconds_since(t0);
    const Evaluation b = in_memory.evaluate(t.X_test, t.y_test);

    const double diff = 100 * std::abs(a.accuracy - b.accuracy);
    std::printf("test_accuracy from the streamed shards %.4f (fit %.1f s), from tensors %.4f (fit %.1f s): %.2f points apart "
                "(tolerance %.2f)\n",
                a.accuracy, streamed_s, b.accuracy, in_memory_s, diff, tolerance);
    hub.set_blob_cache(nullptr);
    if (temporary && !keep) fs::remove_all(out);
    return diff <= tolerance ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "train_from_tfrecord: " << e.what() << std::endl;
    return 1;
  }
}
