// Spec pipelines: the "data" section's tf.data pipelines (spec.h's PipelineSpec), read from
// JSON and built as Datasets (docs/spec-format.md, "Pipelines").
#include <glob.h>

#include <string_view>

#include "tensorhub/core/config_object.h"
#include "tensorhub/core/error.h"
#include "tensorhub/data/dataset.h"
#include "tensorhub/data/example.h"
#include "tensorhub/data/hub_dataset.h"
#include "tensorhub/data/hub_source.h"
#include "tensorhub/store/dataset_shards.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/spec.h"

namespace tensorhub {
namespace {

// tf.io.decode_raw's out_type names.
const std::map<std::string, DType>& raw_dtypes() {
  static const std::map<std::string, DType> names = {{"uint8", DType::kU8},   {"int8", DType::kI8},
                                                     {"int32", DType::kI32},  {"int64", DType::kI64},
                                                     {"float32", DType::kF32}, {"float64", DType::kF64}};
  return names;
}

std::vector<std::string> keys(const std::map<std::string, DType>& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

FeatureDType dtype_of(const FeatureSpec& spec) {
  return std::visit([](const auto& f) { return f.dtype; }, spec);
}

// An integer field, or the string "AUTOTUNE" (-1).
std::int64_t integer_or_autotune(const ConfigObject& s, const std::string& key) {
  if (!s.has(key)) return 0;
  if (s.at(key) == "AUTOTUNE") return -1;
  if (!s.at(key).is_number_integer() || s.at(key).get<std::int64_t>() < 0)
    throw InvalidArgument(s.name(key) + " must be a non-negative integer or \"AUTOTUNE\", got " + s.at(key).dump());
  return s.at(key).get<std::int64_t>();
}

void read_source(const ConfigObject& s, PipelineSpec& p) {
  if (s.has("tfrecord")) {
    const Json& t = s.at("tfrecord");
    if (t.is_string()) p.tfrecord.push_back(t.get<std::string>());
    if (t.is_array())
      for (const Json& f : t)
        if (f.is_string()) p.tfrecord.push_back(f.get<std::string>());
    if (p.tfrecord.empty() || (t.is_array() && p.tfrecord.size() != t.size()))
      throw InvalidArgument(s.name("tfrecord") + " must be a file name or glob pattern, or a non-empty list of them, got " +
                            t.dump());
  }
  p.hub = s.string("hub", "");
  if (p.tfrecord.empty() == p.hub.empty())
    throw InvalidArgument(s.path() + " needs one source: \"tfrecord\" (TFRecord files) or \"hub\" (a hub dataset's name)");
  p.compression = s.string("compression", "");
  if (p.compression != "" && p.compression != "NONE" && p.compression != "GZIP" && p.compression != "ZLIB")
    throw InvalidArgument(s.name("compression") + " is \"" + p.compression + "\"; allowed: NONE, GZIP, ZLIB");
  if (!p.hub.empty() && s.has("compression"))
    throw InvalidArgument(s.name("compression") + " goes with \"tfrecord\"; a hub dataset's shards carry their own");
  p.filter = s.object("filter");
  if (p.hub.empty() && s.has("filter")) throw InvalidArgument(s.name("filter") + " goes with \"hub\"");
}

// Checks the feature specs and that x and y are among them, each decodable to numbers.
void read_features(const ConfigObject& s, PipelineSpec& p) {
  if (!s.has("features")) {
    if (!p.tfrecord.empty())
      throw InvalidArgument(s.name("features") + " is required with \"tfrecord\": the tf.train.Example features to "
                            "parse, e.g. {\"" + p.x + "\": {\"type\": \"FixedLenFeature\", \"dtype\": \"string\"}}");
    return;
  }
  p.features = s.at("features");
  FeatureSpecs specs;
  try {
    specs = feature_specs_from_json(p.features);
    ExampleParser check(specs);
  } catch (const Error& e) {
    throw InvalidArgument(s.name("features") + ": " + e.message());
  }
  for (const std::string& name : {p.x, p.y}) {
    auto it = specs.find(name);
    if (it == specs.end())
      throw InvalidArgument(s.name("features") + " has no feature \"" + name + "\" (named by x or y)");
    if (std::holds_alternative<VarLenFeature>(it->second))
      throw InvalidArgument(s.name("features") + ".\"" + name + "\" is a VarLenFeature (sparse); x and y must be "
                            "dense: FixedLenFeature or FixedLenSequenceFeature");
    const bool bytes = dtype_of(it->second) == FeatureDType::kString;
    if (bytes != p.decode_raw.contains(name))
      throw InvalidArgument(bytes ? s.name("features") + ".\"" + name + "\" holds bytes: name the numbers they hold in "
                                        "decode_raw, e.g. {\"" + name + "\": \"uint8\"}"
                                  : s.name("decode_raw") + ".\"" + name + "\": the feature is not a string feature");
  }
}

void read_decode_raw(const ConfigObject& s, PipelineSpec& p) {
  const Json decode = s.object("decode_raw");
  for (const auto& [name, dtype] : decode.items()) {
    if (!dtype.is_string() || !raw_dtypes().contains(dtype.get<std::string>()))
      throw InvalidArgument(s.name("decode_raw") + ".\"" + name + "\" is " + dtype.dump() +
                            "; allowed: " + join_names(keys(raw_dtypes())));
    if (name != p.x && name != p.y)
      throw InvalidArgument(s.name("decode_raw") + " names \"" + name + "\", which is neither x nor y");
    p.decode_raw[name] = dtype.get<std::string>();
  }
}

void read_transformations(const ConfigObject& s, PipelineSpec& p) {
  p.skip = s.integer("skip", 0, 0);
  p.take = s.integer("take", -1, -1);
  if (s.has("shard")) {
    const ConfigObject sh(s.at("shard"), s.name("shard"), {"num_shards", "index"});
    p.num_shards = sh.integer("num_shards", 1, 1);
    p.shard_index = sh.integer("index", 0, 0, p.num_shards - 1);
  }
  if (s.has("cache")) {
    const Json& c = s.at("cache");
    if (c.is_boolean()) {
      if (c.get<bool>()) p.cache = "";
    } else if (c.is_string()) {
      p.cache = c.get<std::string>();
    } else {
      throw InvalidArgument(s.name("cache") + " must be true (in memory) or a file prefix, got " + c.dump());
    }
  }
  if (s.has("shuffle")) {
    if (s.at("shuffle").is_number_integer()) {
      p.shuffle_buffer = s.integer("shuffle", 0, 1);
    } else {
      const ConfigObject sh(s.at("shuffle"), s.name("shuffle"), {"buffer_size", "seed", "reshuffle_each_iteration"});
      p.shuffle_buffer = sh.integer("buffer_size", 0, 1);
      if (!sh.has("buffer_size")) throw InvalidArgument(sh.name("buffer_size") + " is required (an integer >= 1)");
      if (sh.has("seed")) p.shuffle_seed = static_cast<std::uint64_t>(sh.integer("seed", 0, 0));
      p.reshuffle_each_iteration = sh.boolean("reshuffle_each_iteration", true);
    }
  }
  if (s.has("repeat")) {
    if (s.at("repeat") == true)
      p.repeat = -1;
    else if (s.at("repeat") != false)
      p.repeat = s.integer("repeat", 0, 1);
  }
  if (s.has("batch")) {
    if (s.at("batch").is_number_integer()) {
      p.batch_size = s.integer("batch", 0, 1);
    } else {
      const ConfigObject b(s.at("batch"), s.name("batch"), {"batch_size", "drop_remainder"});
      p.batch_size = b.integer("batch_size", 0, 1);
      p.drop_remainder = b.boolean("drop_remainder", false);
    }
  }
  p.prefetch = integer_or_autotune(s, "prefetch");
  p.num_parallel_calls = integer_or_autotune(s, "num_parallel_calls");
}

// The files of the patterns, each pattern's matches sorted (glob(3)), in the patterns' order.
std::vector<std::filesystem::path> match_files(const std::vector<std::string>& patterns) {
  std::vector<std::filesystem::path> files;
  for (const std::string& pattern : patterns) {
    glob_t g{};
    const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    if (rc == 0)
      for (std::size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
    if (rc == GLOB_NOMATCH) throw InvalidArgument("tfrecord: no file matches \"" + pattern + "\"");
    if (rc != 0) throw Unavailable("tfrecord: cannot list the files of \"" + pattern + "\"");
  }
  return files;
}

// One parsed feature as a dense tensor: numbers as they are, bytes through decode_raw.
Tensor dense_feature(FeatureValue value, const std::string& name, const std::optional<DType>& raw) {
  if (auto* t = std::get_if<Tensor>(&value)) return std::move(*t);
  if (auto* s = std::get_if<StringTensor>(&value)) {
    if (raw) return decode_raw(*s, *raw);
    throw InvalidArgument("feature \"" + name + "\" holds bytes; give its dtype in decode_raw");
  }
  throw InvalidArgument("feature \"" + name + "\" is sparse; x and y must be dense");
}

// A map function: {"record": serialized Example} -> {"x", "y"}, parsing with `all`'s specs of
// x and y (checked by read_features, or by sharded_source for a hub dataset's own specs).
Dataset::MapFn record_parser(const PipelineSpec& p, const FeatureSpecs& all) {
  FeatureSpecs needed{{p.x, all.at(p.x)}, {p.y, all.at(p.y)}};
  auto parser = std::make_shared<const ExampleParser>(std::move(needed));
  auto raw = [&p](const std::string& name) -> std::optional<DType> {
    auto it = p.decode_raw.find(name);
    if (it == p.decode_raw.end()) return std::nullopt;
    return raw_dtypes().at(it->second);
  };
  return [parser, x = p.x, y = p.y, raw_x = raw(p.x), raw_y = raw(p.y)](NamedTensors element) {
    const Tensor& record = element.at("record");
    const std::string_view bytes(reinterpret_cast<const char*>(record.data.data()), record.data.size());
    ParsedFeatures f = parser->parse_single(bytes);
    NamedTensors out;
    out.emplace("y", dense_feature(f.at(y), y, raw_y));  // before x: x == y is allowed
    out.emplace("x", dense_feature(std::move(f.at(x)), x, raw_x));
    return out;
  };
}

// A hub dataset of tensors: element i = {"x": row i of x, "y": row i of y}.
Dataset hub_tensors(const PipelineSpec& p, Hub& hub) {
  auto record = hub.find_top_dataset(p.hub, p.filter);
  if (!record) throw Internal("hub_tensors: dataset \"" + p.hub + "\" vanished");
  NamedTensors xy;
  for (const auto& [key, name] : {std::pair<std::string, std::string>{"x", p.x}, {"y", p.y}}) {
    auto it = record->tensors.find(name);
    if (it == record->tensors.end()) {
      std::vector<std::string> names;
      for (const auto& [k, v] : record->tensors) names.push_back(k);
      throw NotFound("dataset \"" + p.hub + "\" has no tensor \"" + name + "\"; it has: " + join_names(names));
    }
    xy[key] = it->second;
  }
  return Dataset::from_tensor_slices(std::move(xy));
}

// A sharded hub dataset's records, streamed (hub_source.h), and the specs to parse them with:
// the pipeline's own, else the dataset's. Throws InvalidArgument when x or y is not among
// the dataset's features (or it has none), or a bytes feature lacks decode_raw.
Dataset sharded_source(const PipelineSpec& p, Hub& hub, ShardedDataset shards, FeatureSpecs& specs) {
  const std::string where = "hub dataset \"" + p.hub + "\" (id " + std::to_string(shards.document.id) + ")";
  if (!p.features.is_null()) {
    specs = feature_specs_from_json(p.features);
  } else if (auto own = hub_feature_specs(shards)) {
    specs = *own;
  } else {
    throw InvalidArgument(where + " was imported without features: give the pipeline \"features\"");
  }
  for (const std::string& name : {p.x, p.y}) {
    auto it = specs.find(name);
    if (it == specs.end() || std::holds_alternative<VarLenFeature>(it->second))
      throw InvalidArgument(where + " has no dense feature \"" + name + "\" (named by x or y); its features: " +
                            feature_specs_to_json(specs).dump());
    if ((dtype_of(it->second) == FeatureDType::kString) != p.decode_raw.contains(name))
      throw InvalidArgument(where + ": feature \"" + name + "\" " +
                            (p.decode_raw.contains(name) ? "is not bytes: drop it from decode_raw"
                                                         : "holds bytes: name its numbers in decode_raw"));
  }
  return from_hub(hub.uri(), std::move(shards), hub.blob_cache(), p.num_shards, p.shard_index);
}

}  // namespace

PipelineSpec parse_pipeline_spec(const Json& json, const std::string& where) {
  const ConfigObject s(json, where,
                       {"tfrecord", "compression", "hub", "filter", "features", "decode_raw", "x", "y", "skip", "take",
                        "shard", "cache", "shuffle", "repeat", "batch", "prefetch", "num_parallel_calls"});
  PipelineSpec p;
  read_source(s, p);
  p.x = s.string("x", "", true);
  p.y = s.string("y", "", true);
  read_decode_raw(s, p);
  read_features(s, p);
  read_transformations(s, p);
  return p;
}

Dataset make_pipeline(const PipelineSpec& p, Hub& hub, std::int64_t default_batch_size) {
  std::optional<Dataset> source;
  FeatureSpecs specs;  // when the source yields records
  bool shards_split = false;
  if (!p.tfrecord.empty()) {
    source = TFRecordDataset(match_files(p.tfrecord), p.compression);
    specs = feature_specs_from_json(p.features);
  } else {
    const auto docs = hub.find_datasets(with_name(p.filter, "dataset_name", p.hub), {{"time", -1}, {"id", -1}}, 1);
    if (docs.empty())
      throw NotFound("no dataset named \"" + p.hub + "\" matches " + p.filter.dump() + " in project \"" +
                     hub.project_name() + "\"");
    if (is_sharded_dataset(docs[0])) {
      source = sharded_source(p, hub, sharded_dataset_of(docs[0]), specs);
      shards_split = true;  // from_hub read only this worker's shards
    } else {
      source = hub_tensors(p, hub);
    }
  }
  Dataset ds = *source;
  if (p.skip > 0) ds = ds.skip(p.skip);
  if (p.take >= 0) ds = ds.take(p.take);
  if (p.num_shards > 1 && !shards_split) ds = ds.shard(p.num_shards, p.shard_index);
  if (!specs.empty())
    ds = ds.map(record_parser(p, specs), p.num_parallel_calls < 0 ? Dataset::kAutotune : p.num_parallel_calls);
  if (p.cache) ds = ds.cache(*p.cache);
  if (p.shuffle_buffer > 0) ds = ds.shuffle(p.shuffle_buffer, p.shuffle_seed, p.reshuffle_each_iteration);
  if (p.repeat != 0) ds = ds.repeat(p.repeat);
  ds = ds.batch(p.batch_size > 0 ? p.batch_size : default_batch_size, p.drop_remainder);
  if (p.prefetch != 0) ds = ds.prefetch(p.prefetch < 0 ? Dataset::kAutotune : p.prefetch);
  return ds;
}

}  // namespace tensorhub
