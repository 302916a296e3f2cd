#include "tensorhub/data/hub_dataset.h"

#include <optional>
#include <utility>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

// `message` with every occurrence of `from` replaced by `to`.
std::string replace_all(std::string message, const std::string& from, const std::string& to) {
  for (std::size_t pos = 0; !from.empty() && (pos = message.find(from, pos)) != std::string::npos; pos += to.size())
    message.replace(pos, from.size(), to);
  return message;
}

// The shard as error messages name it: "dataset 'fmnist' shard-00001 (train-1.tfrecord)".
std::string shard_name(const ShardedDataset& dataset, const DatasetShard& shard) {
  const std::string name = dataset.document.tags.value("dataset_name", std::string("?"));
  return "dataset '" + name + "' " + shard.part + " (" + shard.file + ")";
}

CachedBlob fetch(Hub& hub, const DatasetShard& shard, BlobCache* cache) {
  return cache ? cache->open(hub, shard.sha256) : fetch_blob_to_temp_file(hub, shard.sha256);
}

}  // namespace

// ---- Feature specs as JSON (a dataset's "features", a features file) -----------------------

namespace {

// `list`'s values as T, each accepted by (x.*is)(); throws bad(want) at the first that is not.
template <typename T, typename Bad>
FeatureValues json_values(const Json& list, bool (Json::*is)() const noexcept, const char* want, const Bad& bad) {
  std::vector<T> v;
  for (const auto& x : list) {
    if (!(x.*is)()) throw bad(want);
    v.push_back(x.get<T>());
  }
  return v;
}

FeatureValues default_from_json(const std::string& name, const Json& j, FeatureDType dtype) {
  const Json list = j.is_array() ? j : Json::array({j});
  auto bad = [&](const char* want) {
    return InvalidArgument("features file: feature '" + name + "': default_value must be " + want + ", got " +
                           j.dump());
  };
  switch (dtype) {
    case FeatureDType::kFloat32:
      return json_values<float>(list, &Json::is_number, "a number or a list of numbers", bad);
    case FeatureDType::kInt64:
      return json_values<std::int64_t>(list, &Json::is_number_integer, "an integer or a list of integers", bad);
    case FeatureDType::kString:
      return json_values<std::string>(list, &Json::is_string, "a string or a list of strings", bad);
  }
  return {};
}

Json values_to_json(const FeatureValues& v) {
  switch (v.index()) {
    case 1: return Json(std::get<1>(v));
    case 2: return Json(std::get<2>(v));
    case 3: return Json(std::get<3>(v));
    default: return Json();
  }
}

}  // namespace

FeatureSpecs feature_specs_from_json(const Json& json) {
  if (!json.is_object()) {
    throw InvalidArgument("features file: expected a JSON object of feature specs by name, got " +
                          std::string(json.type_name()));
  }
  FeatureSpecs specs;
  for (const auto& item : json.items()) {
    const std::string& name = item.key();  // not a structured binding: lambdas capture it (clang 14)
    const Json& j = item.value();
    auto bad = [&](const std::string& why) { return InvalidArgument("features file: feature '" + name + "': " + why); };
    if (!j.is_object()) throw bad("expected an object with \"type\" and \"dtype\"");
    for (const auto& [key, value] : j.items()) {
      if (key != "type" && key != "dtype" && key != "shape" && key != "default_value" && key != "allow_missing") {
        throw bad("unknown key '" + key + "' (known: type, dtype, shape, default_value, allow_missing)");
      }
    }
    if (!j.contains("type") || !j["type"].is_string()) {
      throw bad("\"type\" must be \"FixedLenFeature\", \"VarLenFeature\" or \"FixedLenSequenceFeature\"");
    }
    if (!j.contains("dtype") || !j["dtype"].is_string()) throw bad("\"dtype\" must be a string: float32, int64 or string");
    FeatureDType dtype;
    try {
      dtype = parse_feature_dtype(j["dtype"].get<std::string>());
    } catch (const Error& e) {
      throw bad(e.message());
    }
    std::vector<std::int64_t> shape;
    if (j.contains("shape")) {
      if (!j["shape"].is_array()) throw bad("\"shape\" must be a list of integers");
      for (const auto& d : j["shape"]) {
        if (!d.is_number_integer()) throw bad("\"shape\" must be a list of integers");
        shape.push_back(d.get<std::int64_t>());
      }
    }
    FeatureValues def;
    if (j.contains("default_value") && !j["default_value"].is_null()) def = default_from_json(name, j["default_value"], dtype);
    const std::string type = j["type"].get<std::string>();
    if (type == "FixedLenFeature") {
      specs[name] = FixedLenFeature{shape, dtype, def};
    } else if (type == "VarLenFeature") {
      specs[name] = VarLenFeature{dtype};
    } else if (type == "FixedLenSequenceFeature") {
      bool allow_missing = false;
      if (j.contains("allow_missing")) {
        if (!j["allow_missing"].is_boolean()) throw bad("\"allow_missing\" must be true or false");
        allow_missing = j["allow_missing"].get<bool>();
      }
      specs[name] = FixedLenSequenceFeature{shape, dtype, allow_missing, def};
    } else {
      throw bad("unknown type '" + type + "' (known: FixedLenFeature, VarLenFeature, FixedLenSequenceFeature)");
    }
  }
  return specs;
}

Json feature_specs_to_json(const FeatureSpecs& specs) {
  Json out = Json::object();
  for (const auto& [name, spec] : specs) {
    Json j;
    if (const auto* f = std::get_if<FixedLenFeature>(&spec)) {
      j = {{"type", "FixedLenFeature"}, {"shape", f->shape}, {"dtype", std::string(to_string(f->dtype))}};
      if (f->default_value.index() != 0) j["default_value"] = values_to_json(f->default_value);
    } else if (const auto* v = std::get_if<VarLenFeature>(&spec)) {
      j = {{"type", "VarLenFeature"}, {"dtype", std::string(to_string(v->dtype))}};
    } else {
      const auto& s = std::get<FixedLenSequenceFeature>(spec);
      j = {{"type", "FixedLenSequenceFeature"}, {"shape", s.shape}, {"dtype", std::string(to_string(s.dtype))},
           {"allow_missing", s.allow_missing}};
      if (s.default_value.index() != 0) j["default_value"] = values_to_json(s.default_value);
    }
    out[name] = std::move(j);
  }
  return out;
}

// ---- Sharded datasets -----------------------------------------------------------------------

TFRecordCompression hub_compression(const ShardedDataset& dataset) {
  try {
    return parse_tfrecord_compression(dataset.compression);
  } catch (const Error& e) {
    throw DataLoss("dataset document " + std::to_string(dataset.document.id) + ": " + e.message());
  }
}

std::optional<FeatureSpecs> hub_feature_specs(const ShardedDataset& dataset) {
  if (dataset.features.is_null()) return std::nullopt;
  try {
    return feature_specs_from_json(dataset.features);
  } catch (const Error& e) {
    throw DataLoss("dataset document " + std::to_string(dataset.document.id) + " holds invalid features: " +
                   e.message());
  }
}

struct HubShardReader::Impl {
  DatasetShard shard;
  std::string name;  // shard_name()
  CachedBlob blob;
  std::optional<TFRecordReader> reader;
  std::int64_t index = 0;

  // Runs `fn`, renaming the reader's "/proc/self/fd/N" to the shard in any error.
  template <typename Fn>
  auto named(Fn&& fn) {
    try {
      return fn();
    } catch (const Error& e) {
      throw Error(e.kind(), replace_all(e.message(), blob.path().string(), name));
    }
  }
};

HubShardReader::HubShardReader(Hub& hub, const ShardedDataset& dataset, const DatasetShard& shard,
                               BlobCache* cache)
    : impl_(new Impl{shard, shard_name(dataset, shard), fetch(hub, shard, cache), std::nullopt, 0}) {
  const TFRecordCompression compression = hub_compression(dataset);
  impl_->named([&] { impl_->reader.emplace(impl_->blob.path(), compression); });
}

HubShardReader::~HubShardReader() = default;
HubShardReader::HubShardReader(HubShardReader&&) noexcept = default;
HubShardReader& HubShardReader::operator=(HubShardReader&&) noexcept = default;

bool HubShardReader::read(std::string& record) {
  Impl& m = *impl_;
  if (!m.named([&] { return m.reader->read(record); })) {
    if (m.index != m.shard.records)
      throw DataLoss(m.name + " holds " + std::to_string(m.index) + " records, but its dataset document says " +
                     std::to_string(m.shard.records));
    return false;
  }
  if (++m.index > m.shard.records)
    throw DataLoss(m.name + " holds more than the " + std::to_string(m.shard.records) +
                   " records its dataset document says");
  return true;
}

std::int64_t HubShardReader::index() const noexcept { return impl_->index; }

RecordSource HubShardReader::source() const {
  return {impl_->name, impl_->index, static_cast<std::int64_t>(impl_->reader->offset())};
}

const DatasetShard& HubShardReader::shard() const noexcept { return impl_->shard; }

}  // namespace tensorhub
