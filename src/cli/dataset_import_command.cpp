// tensorhub dataset import: an MNIST-format directory of IDX files (MNIST, Fashion-MNIST) into
// a hub dataset with the tensors dispatch_tasks saves (X_train, y_train, X_val, y_val, X_test,
// y_test), so spec tasks and `tensorhub tune --spec` can train on it without user code; or,
// with --tfrecord, TFRecord files as the shards of a dataset (dataset_tfrecord_commands.cpp).
//
// File names and format: Yann LeCun's MNIST page ("FILE FORMATS FOR THE MNIST DATABASE");
// tensorhub/data/idx.h reads them, plain or gzip-compressed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "dataset_tfrecord.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/data/idx.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;

struct ImportArgs {
  HubFlags hub;
  std::string idx_dir;  // empty: Debian's dataset-fashion-mnist directory
  std::string name;
  std::int64_t validation = 10000;
  bool scale = true;
  std::string tags;
  TfrecordImportArgs tfrecord;  // --tfrecord: TFRecord files instead of IDX
};

// The four files of an MNIST-format directory, in the order they are read.
const std::vector<std::string> kIdxStems = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

// --idx, or Debian's directory when it exists. Throws NotFound naming the directory.
fs::path resolve_dir(const std::string& idx_dir) {
  std::error_code ec;
  if (idx_dir.empty()) {
    const fs::path dir = default_mnist_dir();
    if (!fs::is_directory(dir, ec))
      throw NotFound("no --idx DIR given and Debian's Fashion-MNIST directory " + dir.string() +
                     " does not exist; install dataset-fashion-mnist or give --idx DIR (an MNIST-format directory)");
    return dir;
  }
  if (!fs::is_directory(idx_dir, ec))
    throw NotFound("--idx: directory '" + idx_dir + "' does not exist (or is not a directory)");
  return idx_dir;
}

// Each stem as a plain file, else with ".gz" (as load_mnist_dataset looks). Throws
// NotFound listing every file that is missing and the names it looked for.
std::vector<fs::path> find_idx_files(const fs::path& dir) {
  std::vector<fs::path> found;
  std::string missing;
  for (const auto& stem : kIdxStems) {
    std::error_code ec;
    if (fs::exists(dir / stem, ec)) found.push_back(dir / stem);
    else if (fs::exists(dir / (stem + ".gz"), ec)) found.push_back(dir / (stem + ".gz"));
    else missing += (missing.empty() ? "" : ", ") + stem + "[.gz]";
  }
  if (!missing.empty())
    throw NotFound("--idx " + dir.string() + ": cannot find " + missing +
                   "; an MNIST-format directory holds train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                   "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each plain or with .gz");
  return found;
}

// Reads one file with a progress line on stderr: "loading 1/4 <path> ... [60000, 28, 28] in 0.35 s".
Tensor load_with_progress(const fs::path& path, std::size_t index) {
  std::cerr << "loading " << index + 1 << "/" << kIdxStems.size() << " " << path.string() << " ..." << std::flush;
  const auto start = std::chrono::steady_clock::now();
  try {
    Tensor t = read_idx(path);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::cerr << " " << shape_to_string(t.shape) << " in " << std::fixed << std::setprecision(2) << took.count() << " s"
              << std::defaultfloat << std::endl;
    return t;
  } catch (...) {
    std::cerr << " failed" << std::endl;
    throw;
  }
}


// Images [begin, end) of U8 [n, rows, cols] as [end - begin, rows * cols]: F32 x / 255 (a true
// division, the values load_mnist_dataset and so dispatch_tasks store) or U8 as they are.
Tensor image_rows(const Tensor& x, std::int64_t begin, std::int64_t end, bool scale) {
  const std::int64_t row = x.shape[1] * x.shape[2];
  const std::int64_t count = (end - begin) * row;
  const auto* src = reinterpret_cast<const std::uint8_t*>(x.data.data()) + begin * row;
  Tensor out;
  out.dtype = scale ? DType::kF32 : DType::kU8;
  out.shape = {end - begin, row};
  out.data.resize(static_cast<std::size_t>(count) * dtype_size(out.dtype));
  if (scale) {
    float* dst = out.as<float>();
    for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i]) / 255.0f;
  } else {
    std::copy(src, src + count, out.as<std::uint8_t>());
  }
  return out;
}

// Labels [begin, end) of U8 [n] as I64 class indices (what sparse_categorical_crossentropy takes).
Tensor label_rows(const Tensor& y, std::int64_t begin, std::int64_t end) {
  const auto* src = reinterpret_cast<const std::uint8_t*>(y.data.data()) + begin;
  Tensor out;
  out.dtype = DType::kI64;
  out.shape = {end - begin};
  out.data.resize(static_cast<std::size_t>(end - begin) * sizeof(std::int64_t));
  std::int64_t* dst = out.as<std::int64_t>();
  for (std::int64_t i = 0; i < end - begin; ++i) dst[i] = src[i];
  return out;
}

Json parse_tags(const std::string& text) {
  return text.empty() ? Json::object() : parse_json_object(text, "--tags");
}

// Loads, checks, splits and saves; prints the dataset id and the shape of each tensor.
void run_import(const ImportArgs& a) {
  check_hub_options(a.hub);  // a wrong --hub or empty project is a wrong command line (exit 2)
  if (a.name.empty()) throw UsageError("--name must not be empty");
  if (a.validation < 0)
    throw UsageError("--validation must be >= 0 (0: no X_val / y_val), got " + std::to_string(a.validation));
  Json tags = parse_tags(a.tags);  // checked before the minutes spent reading
  if (!a.tfrecord.patterns.empty()) return run_tfrecord_import(a.hub, a.name, tags, a.tfrecord);
  const fs::path dir = resolve_dir(a.idx_dir);
  const auto paths = find_idx_files(dir);

  std::vector<Tensor> raw;
  for (std::size_t i = 0; i < paths.size(); ++i) raw.push_back(load_with_progress(paths[i], i));
  check_idx_pair(raw[0], paths[0], raw[1], paths[1]);
  check_idx_pair(raw[2], paths[2], raw[3], paths[3]);
  if (raw[0].shape[1] != raw[2].shape[1] || raw[0].shape[2] != raw[2].shape[2])
    throw InvalidArgument("training images " + paths[0].string() + " are " + std::to_string(raw[0].shape[1]) + "x" +
                          std::to_string(raw[0].shape[2]) + " but test images " + paths[2].string() + " are " +
                          std::to_string(raw[2].shape[1]) + "x" + std::to_string(raw[2].shape[2]));
  const std::int64_t n = raw[0].shape[0];
  if (a.validation > n)
    throw InvalidArgument("--validation " + std::to_string(a.validation) + " is more than the " + std::to_string(n) +
                          " training images in " + paths[0].string() + "; allowed: 0 to " + std::to_string(n));

  // The validation images are the last ones, as dispatch_tasks (and TensorLayer's
  // load_mnist_dataset) split 50,000 / 10,000.
  const std::int64_t n_train = n - a.validation;
  NamedTensors tensors;
  tensors["X_train"] = image_rows(raw[0], 0, n_train, a.scale);
  tensors["y_train"] = label_rows(raw[1], 0, n_train);
  if (a.validation > 0) {
    tensors["X_val"] = image_rows(raw[0], n_train, n, a.scale);
    tensors["y_val"] = label_rows(raw[1], n_train, n);
  }
  tensors["X_test"] = image_rows(raw[2], 0, raw[2].shape[0], a.scale);
  tensors["y_test"] = label_rows(raw[3], 0, raw[3].shape[0]);
  const Json image_shape = {raw[0].shape[1], raw[0].shape[2]};
  raw.clear();

  if (!tags.contains("description"))
    tags["description"] = "MNIST-format images from " + dir.string() + ": " + std::to_string(n_train) + " train / " +
                          std::to_string(a.validation) + " validation / " + std::to_string(tensors["X_test"].shape[0]) +
                          " test, " + std::to_string(tensors["X_train"].shape[1]) +
                          (a.scale ? " floats in [0, 1]" : " bytes in [0, 255]");
  if (!tags.contains("source")) tags["source"] = dir.string();
  // The rows are flattened images: their shape lets `tensorhub embed` draw a sprite.
  if (!tags.contains("image_shape")) tags["image_shape"] = image_shape;

  Hub hub(a.hub.hub, a.hub.project);
  const std::int64_t id = hub.save_dataset(tensors, a.name, tags);
  std::cout << "saved dataset " << a.name << " (id " << id << ") in project " << a.hub.project << std::endl;
  for (const char* key : {"X_train", "y_train", "X_val", "y_val", "X_test", "y_test"}) {
    const auto it = tensors.find(key);
    if (it == tensors.end()) continue;
    std::cout << "  " << key << " " << dtype_name(it->second.dtype) << " " << shape_to_string(it->second.shape) << std::endl;
  }
}

}  // namespace

void add_dataset_import_command(CLI::App& dataset) {
  auto* cmd = dataset.add_subcommand(
      "import", "import an MNIST-format directory (IDX files) as a dataset: X_train, y_train, X_val, y_val, X_test, "
                "y_test; or TFRecord files (--tfrecord) as the shards of a dataset");
  auto a = std::make_shared<ImportArgs>();
  add_hub_options(*cmd, a->hub);
  cmd->add_option("--idx", a->idx_dir,
                  "MNIST-format directory: train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-... "
                  "(default: " + default_mnist_dir().string() + ", Debian's dataset-fashion-mnist)");
  cmd->add_option("--name", a->name, "dataset name (the spec's data.dataset)")->required();
  auto* validation = cmd->add_option("--validation", a->validation,
                                     "training images (the last ones) that become X_val / y_val; 0: none")
                         ->capture_default_str();
  auto* scale = cmd->add_flag("--scale,!--no-scale", a->scale,
                              "X_* as float32 x / 255 in [0, 1] (default), or with --no-scale as uint8 [0, 255]");
  cmd->add_option("--tags", a->tags, R"(extra tags, a JSON object, e.g. '{"version": 2}')");
  auto* tfrecord = cmd->add_option("--tfrecord", a->tfrecord.patterns,
                                   "TFRecord files instead, each stored as one shard: files or quoted globs, "
                                   "e.g. 'data/*.tfrecord' (unquoted, the shell's list works too); each is read and "
                                   "checked before anything is saved");
  // The IDX import's options mean nothing for TFRecord shards: refused, not silently ignored.
  tfrecord->excludes("--idx")->excludes(validation)->excludes(scale);
  cmd->add_option("--compression", a->tfrecord.compression, "the TFRecord files' compression: NONE (default), GZIP or ZLIB")
      ->needs(tfrecord);
  cmd->add_option("--features", a->tfrecord.features,
                  "a features JSON file (tf.io feature specs, see docs): every record must parse under it; "
                  "stored as the dataset's schema")
      ->needs(tfrecord);
  cmd->callback([a] { run_import(*a); });
}

}  // namespace tensorhub
