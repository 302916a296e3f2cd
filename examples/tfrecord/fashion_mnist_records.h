// Fashion-MNIST as TFRecord files of tf.train.Examples, and the input pipeline that reads them
// back: shared by examples/tfrecord/train_from_tfrecord.cpp and bench/fit_pipeline.cpp.
// Header-only.
//
// Each record is an Example with two features, as TensorFlow users write MNIST-like data:
//   "image": bytes_list with one value, the 784 pixel bytes (row-major, 0..255);
//   "label": int64_list with one value, the class (0..9).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensorhub/data/dataset.h"
#include "tensorhub/data/example.h"
#include "tensorhub/data/tfrecord.h"

namespace tensorhub::examples {

/// The feature specs of the records (for `dataset import --features` and the parser).
inline FeatureSpecs fashion_mnist_features() {
  return {{"image", FixedLenFeature{{}, FeatureDType::kString, {}}},
          {"label", FixedLenFeature{{}, FeatureDType::kInt64, {}}}};
}

/// Writes images[begin, end) (U8 [n, 28, 28] or [n, 784]) and their labels (U8 [n]) as
/// Examples into `shards` files "<prefix>-0000i-of-0000N.tfrecord[.gz]" under `dir`, records
/// split evenly in order; returns the paths in order. Throws what TFRecordWriter throws.
inline std::vector<std::filesystem::path> write_example_shards(const std::filesystem::path& dir,
                                                               const std::string& prefix, const Tensor& images,
                                                               const Tensor& labels, std::int64_t begin,
                                                               std::int64_t end, int shards,
                                                               TFRecordCompression compression) {
  const std::int64_t pixels = images.numel() / images.shape.at(0);
  const std::int64_t n = end - begin;
  std::vector<std::filesystem::path> paths;
  ExampleBuilder builder;
  std::string record;
  for (int s = 0; s < shards; ++s) {
    char name[128];
    std::snprintf(name, sizeof name, "%s-%05d-of-%05d.tfrecord%s", prefix.c_str(), s, shards,
                  compression == TFRecordCompression::kGzip ? ".gz" : "");
    paths.push_back(dir / name);
    TFRecordWriter writer(paths.back(), {.compression = compression});
    for (std::int64_t i = begin + n * s / shards; i < begin + n * (s + 1) / shards; ++i) {
      const auto* p = reinterpret_cast<const char*>(images.as<std::uint8_t>() + i * pixels);
      const std::int64_t label = labels.as<std::uint8_t>()[i];
      builder.add_bytes("image", std::string_view(p, static_cast<std::size_t>(pixels)));
      builder.add_int64s("label", std::span<const std::int64_t>(&label, 1));
      builder.serialize_to(record);
      writer.write(record);
    }
    writer.close();
  }
  return paths;
}

/// A map function from {"record": serialized Example} to {"x": F32 [784] in [0, 1] (x / 255,
/// the division load_mnist_dataset does, so values match bit for bit), "y": I64 scalar}.
inline Dataset::MapFn parse_fashion_mnist() {
  auto parser = std::make_shared<const ExampleParser>(fashion_mnist_features());
  return [parser](NamedTensors element) {
    const Tensor& record = element.at("record");
    const std::string_view bytes(reinterpret_cast<const char*>(record.data.data()), record.data.size());
    ParsedFeatures f = parser->parse_single(bytes);
    const StringTensor& image = std::get<StringTensor>(f.at("image"));
    const std::string_view pixels = image[0];
    Tensor x;
    x.dtype = DType::kF32;
    x.shape = {static_cast<std::int64_t>(pixels.size())};
    x.data.resize(pixels.size() * sizeof(float));
    float* dst = x.as<float>();
    for (std::size_t i = 0; i < pixels.size(); ++i) dst[i] = static_cast<float>(static_cast<std::uint8_t>(pixels[i])) / 255.0f;
    NamedTensors out;
    out.emplace("x", std::move(x));
    out.emplace("y", std::move(std::get<Tensor>(f.at("label"))));
    return out;
  };
}

}  // namespace tensorhub::examples
