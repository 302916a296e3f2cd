// TFRecord datasets on the command line: `dataset import --tfrecord` (files as the shards of a
// hub dataset, store/dataset_shards.h), `dataset export --tfrecord DIR` (a hub dataset as
// TFRecord files of tf.train.Examples) and `dataset head` (the first records, parsed).
#include <glob.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dataset_tfrecord.h"
#include "tensorhub/core/error.h"
#include "tensorhub/data/example.h"
#include "tensorhub/data/hub_dataset.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/store/blob_cache.h"
#include "tensorhub/store/dataset_shards.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;

// ---- import ------------------------------------------------------------------------------------

// The regular files matching `pattern` (glob(3)), sorted. Throws NotFound when none does.
std::vector<fs::path> expand_pattern(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<fs::path> out;
  for (std::size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) {
    std::error_code ec;
    if (fs::is_regular_file(g.gl_pathv[i], ec)) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  if (out.empty()) {
    std::error_code ec;
    if (fs::is_directory(pattern, ec)) {  // a directory: its files are what was meant
      std::string dir = pattern;
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      throw NotFound("--tfrecord '" + pattern + "' is a directory; give its files, e.g. '" + dir + "/*' (quoted)");
    }
    throw NotFound("--tfrecord '" + pattern + "' matches no file; give a file or a quoted glob such as 'DIR/*.tfrecord'");
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The features file as JSON, checked as specs. Throws NotFound for a missing file,
// InvalidArgument naming the file (and the feature and key) for anything invalid.
Json load_features(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw NotFound("--features: cannot read '" + file + "' (missing or unreadable)");
  std::stringstream text;
  text << in.rdbuf();
  try {
    Json json = Json::parse(text.str());
    ExampleParser parser(feature_specs_from_json(json));  // checks the specs as TensorFlow does
    return json;
  } catch (const Json::exception& e) {
    throw InvalidArgument("--features " + file + " is not JSON: " + e.what());
  } catch (const Error& e) {
    throw InvalidArgument("--features " + file + ": " + e.message());
  }
}

// The reader's error for a file that failed at its first bytes, with what to do in this
// command's words: the reader's own hint (for API callers: "read it with GZIP or ZLIB
// compression") is replaced, not repeated.
std::string first_bytes_error(std::string message, TFRecordCompression compression) {
  if (const auto at = message.find("; if the file is compressed"); at != std::string::npos) message.erase(at);
  if (compression == TFRecordCompression::kNone)
    return message + "; if the file is compressed, pass --compression GZIP or ZLIB; a file that is not TFRecord "
                     "at all fails this way too: check --tfrecord";
  return message + "; is the file " + std::string(to_string(compression)) +
         "-compressed? Leave --compression out for plain TFRecord files";
}

// Reads every record of `path`, checking its framing (and with `parser`, that it parses as an
// Example under the features). Returns the record count. Errors name the file, the record and
// its byte offset; nothing else is done with the file.
std::int64_t check_file(const fs::path& path, TFRecordCompression compression, const ExampleParser* parser) {
  TFRecordReader reader(path, compression);
  std::string record;
  std::int64_t count = 0;
  for (;;) {
    const std::uint64_t offset = reader.offset();
    try {
      if (!reader.read(record)) return count;
    } catch (const Error& e) {
      throw Error(e.kind(), offset == 0 ? first_bytes_error(e.message(), compression) : e.message());
    }
    if (parser) parser->parse_single(record, {path.string(), count, static_cast<std::int64_t>(offset)});
    ++count;
  }
}

std::string plural(std::int64_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// ---- export ------------------------------------------------------------------------------------

// Writes blob `sha256` to `path` (replacing it) once it is verified: into a temporary file
// next to it, renamed when read_blob_chunks returns. Returns the size in bytes.
std::uint64_t write_blob_file(Hub& hub, const std::string& sha256, const fs::path& path) {
  const fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
  std::uint64_t size = 0;
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    size = hub.read_blob_chunks(sha256, [&](std::span<const std::byte> chunk) {
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(chunk.size()));
      if (!out) throw Unavailable("cannot write " + tmp.string() + " (disk full?)");
    });
    out.close();
    if (!out) throw Unavailable("cannot write " + tmp.string() + " (disk full?)");
    fs::rename(tmp, path);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  return size;
}

void write_json_file(const fs::path& path, const Json& json) {
  std::ofstream out(path);
  out << json.dump(2) << "\n";
  if (!out) throw Unavailable("cannot write " + path.string());
}

// The shards as the files they were imported from (their bytes as stored), plus
// features.json when the dataset has features.
void export_shards(Hub& hub, const ShardedDataset& ds, const fs::path& dir) {
  std::map<std::string, int> seen;  // two shards of one name: the later ones get their part as prefix
  for (const auto& shard : ds.shards) {
    const std::string name = seen[shard.file]++ ? shard.part + "-" + shard.file : shard.file;
    const std::uint64_t bytes = write_blob_file(hub, shard.sha256, dir / name);
    std::cout << "  " << (dir / name).string() << ": " << plural(shard.records, "record") << ", " << format_bytes(bytes)
              << std::endl;
  }
  if (!ds.features.is_null()) write_json_file(dir / "features.json", ds.features);
}

// Tensors grouped into the files a tensor dataset is exported as: by the name's part after
// its last '_' ("X_train" -> "train"), else "data". Each group's tensors share their rows.
std::map<std::string, std::vector<std::string>> tensor_groups(const NamedTensors& tensors) {
  std::map<std::string, std::vector<std::string>> groups;
  for (const auto& [name, t] : tensors) {
    const auto underscore = name.rfind('_');
    groups[underscore == std::string::npos || underscore + 1 == name.size() ? "data" : name.substr(underscore + 1)]
        .push_back(name);
  }
  return groups;
}

// Rows of a group (the first dimension all its tensors share). Throws InvalidArgument naming
// the tensors when they differ or one is a scalar.
std::int64_t group_rows(const NamedTensors& tensors, const std::string& group, const std::vector<std::string>& names) {
  std::int64_t rows = -1;
  for (const auto& name : names) {
    const Tensor& t = tensors.at(name);
    if (t.shape.empty())
      throw InvalidArgument("tensor " + name + " is a scalar: a tensor becomes one feature per row, so it needs a first dimension");
    if (rows >= 0 && t.shape[0] != rows)
      throw InvalidArgument("tensors of group '" + group + "' differ in rows (" + names[0] + " has " +
                            std::to_string(rows) + ", " + name + " has " + std::to_string(t.shape[0]) +
                            "); the tensors named *_" + group + " must share their first dimension");
    rows = t.shape[0];
  }
  return rows;
}

bool is_float(DType d) { return d == DType::kF32 || d == DType::kF64; }

// Row `row` of `t` as one feature: float_list for F32/F64, int64_list for the integer types.
void add_row(ExampleBuilder& b, const std::string& name, const Tensor& t, std::int64_t row) {
  const std::int64_t n = t.shape[0] ? t.numel() / t.shape[0] : 0;
  const std::int64_t begin = row * n;
  if (is_float(t.dtype)) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      v[i] = t.dtype == DType::kF32 ? t.as<float>()[begin + i] : static_cast<float>(t.as<double>()[begin + i]);
    b.add_floats(name, v);
    return;
  }
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t k = begin + i;
    switch (t.dtype) {
      case DType::kI64: v[i] = t.as<std::int64_t>()[k]; break;
      case DType::kI32: v[i] = t.as<std::int32_t>()[k]; break;
      case DType::kI8: v[i] = t.as<std::int8_t>()[k]; break;
      case DType::kU8: v[i] = t.as<std::uint8_t>()[k]; break;
      default: v[i] = t.as<std::uint8_t>()[k] != 0; break;  // kBool
    }
  }
  b.add_int64s(name, v);
}

// Row `row` of a group as a serialized Example, one feature per tensor.
std::string row_example(const NamedTensors& tensors, const std::vector<std::string>& names, std::int64_t row) {
  ExampleBuilder b;
  for (const auto& name : names) add_row(b, name, tensors.at(name), row);
  return b.serialize();
}

// The FixedLenFeatures that read a group's Examples back.
Json group_features(const NamedTensors& tensors, const std::vector<std::string>& names) {
  Json out = Json::object();
  for (const auto& name : names) {
    const Tensor& t = tensors.at(name);
    out[name] = {{"type", "FixedLenFeature"},
                 {"shape", std::vector<std::int64_t>(t.shape.begin() + 1, t.shape.end())},
                 {"dtype", is_float(t.dtype) ? "float32" : "int64"}};
  }
  return out;
}

// A tensor dataset as <group>.tfrecord files of Examples (rows along the first dimension),
// with <group>.features.json beside each.
void export_tensors(const NamedTensors& tensors, const fs::path& dir, TFRecordCompression compression) {
  for (const auto& [group, names] : tensor_groups(tensors)) {
    const std::int64_t rows = group_rows(tensors, group, names);
    const fs::path path = dir / (group + ".tfrecord");
    TFRecordWriter writer(path, {compression});
    for (std::int64_t r = 0; r < rows; ++r) writer.write(row_example(tensors, names, r));
    writer.close();
    write_json_file(dir / (group + ".features.json"), group_features(tensors, names));
    std::cout << "  " << path.string() << ": " << plural(rows, "record") << " of " << names.size() << " feature(s)"
              << std::endl;
  }
}

struct ExportArgs {
  HubFlags hub;
  std::string name, dir, compression;
};

// The newest dataset named `name`; NotFound naming the project when there is none.
Document find_dataset(Hub& hub, const std::string& name) {
  const auto docs = hub.find_datasets({{"dataset_name", name}}, {}, 1);
  if (docs.empty())
    throw NotFound("no dataset named '" + name + "' in project '" + hub.project_name() + "' (see `tensorhub dataset list`)");
  return docs[0];
}

void run_export(const ExportArgs& a) {
  const TFRecordCompression compression = parse_tfrecord_compression(a.compression);
  Hub hub = open_hub(a.hub, OpenMode::kReadOnly);
  const Document doc = find_dataset(hub, a.name);
  std::error_code ec;
  fs::create_directories(a.dir, ec);
  if (ec || !fs::is_directory(a.dir))
    throw InvalidArgument("--tfrecord " + a.dir + ": cannot make it a directory to export into (" +
                          (ec ? ec.message() : std::string("it exists and is not a directory")) + ")");
  std::cout << "exporting dataset " << a.name << " (id " << doc.id << ") to " << a.dir << std::endl;
  if (is_sharded_dataset(doc)) {
    if (!a.compression.empty())
      std::cerr << "note: --compression is ignored for a sharded dataset: its files are written as stored ("
                << doc.tags.value("compression", std::string("NONE")) << ")" << std::endl;
    export_shards(hub, sharded_dataset_of(doc), a.dir);
  } else {
    const auto record = hub.find_top_dataset(a.name, {{"id", doc.id}});
    export_tensors(record->tensors, a.dir, compression);
  }
}

// ---- head --------------------------------------------------------------------------------------

// One record to show: where it came from and its bytes.
struct HeadRecord {
  std::string where;  // "shard-00000 (a.tfrecord) record 0", "train record 0"
  std::string bytes;
};

// Receives the records `dataset head` shows, one at a time (nothing is kept).
using HeadSink = std::function<void(const HeadRecord&)>;

// The first `n` records of the shards, in order, each parsed under the dataset's features
// (when it has them) before it is shown.
void shard_head(Hub& hub, const ShardedDataset& ds, std::int64_t n, BlobCache* cache, const HeadSink& emit) {
  const auto specs = hub_feature_specs(ds);
  const std::optional<ExampleParser> parser = specs ? std::optional<ExampleParser>(ExampleParser(*specs)) : std::nullopt;
  std::int64_t shown = 0;
  std::string record;
  for (const auto& shard : ds.shards) {
    if (shown >= n) break;
    HubShardReader reader(hub, ds, shard, cache);
    for (; shown < n; ++shown) {
      const RecordSource source = reader.source();
      if (!reader.read(record)) break;
      if (parser) parser->parse_single(record, source);  // the schema holds for what is shown
      emit({shard.part + " (" + shard.file + ") record " + std::to_string(source.index), record});
    }
  }
}

// The first `n` rows of each tensor group, as the Examples `dataset export` writes.
void tensor_head(const NamedTensors& tensors, std::int64_t n, const HeadSink& emit) {
  for (const auto& [group, names] : tensor_groups(tensors)) {
    const std::int64_t rows = std::min(n, group_rows(tensors, group, names));
    for (std::int64_t r = 0; r < rows; ++r) emit({group + " record " + std::to_string(r), row_example(tensors, names, r)});
  }
}

std::string base64(std::string_view bytes) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t v = static_cast<std::uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<std::uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<std::uint8_t>(bytes[i + 2]);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? k[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? k[v & 63] : '=';
  }
  return out;
}

// A Feature in protobuf's JSON mapping (what MessageToJson prints for a tf.train.Example):
// {"floatList": {"value": [..]}}, {"int64List": {"value": ["1"]}} (int64 as strings),
// {"bytesList": {"value": ["<base64>"]}}, {} for an empty Feature.
Json feature_json(const FeatureValues& values) {
  Json out = Json::object();
  if (const auto* f = std::get_if<std::vector<float>>(&values)) out["floatList"]["value"] = *f;
  if (const auto* i = std::get_if<std::vector<std::int64_t>>(&values)) {
    Json list = Json::array();
    for (std::int64_t v : *i) list.push_back(std::to_string(v));
    out["int64List"]["value"] = list;
  }
  if (const auto* b = std::get_if<std::vector<std::string>>(&values)) {
    Json list = Json::array();
    for (const auto& v : *b) list.push_back(base64(v));
    out["bytesList"]["value"] = list;
  }
  return out;
}

// A bytes value for people: quoted when printable ASCII, else its length.
std::string bytes_text(const std::string& v) {
  const bool printable = std::all_of(v.begin(), v.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  return printable ? Json(v).dump() : "<" + std::to_string(v.size()) + " bytes>";
}

constexpr std::size_t kShown = 8;  // values per feature `dataset head` prints

// "float [1, 2.5]", "int64 [0]", "bytes [\"A\"]", "(empty)"; at most kShown values, then the count.
std::string feature_text(const FeatureValues& values) {
  auto list = [](const auto& v, const char* kind, auto&& fmt) {
    std::string s = std::string(kind) + " [";
    for (std::size_t i = 0; i < std::min(v.size(), kShown); ++i) s += (i ? ", " : "") + fmt(v[i]);
    if (v.size() > kShown) s += ", ... (" + std::to_string(v.size()) + " values)";
    return s + "]";
  };
  if (const auto* f = std::get_if<std::vector<float>>(&values))
    return list(*f, "float", [](float x) { return Json(x).dump(); });
  if (const auto* i = std::get_if<std::vector<std::int64_t>>(&values))
    return list(*i, "int64", [](std::int64_t x) { return std::to_string(x); });
  if (const auto* b = std::get_if<std::vector<std::string>>(&values)) return list(*b, "bytes", bytes_text);
  return "(empty)";
}

// Prints records as they come: text, or one JSON array (each element printed when its record
// arrives, so memory stays at a record however many are shown).
class HeadPrinter {
 public:
  explicit HeadPrinter(bool json) : json_(json) {}
  void operator()(const HeadRecord& r) {
    const auto features = read_example(r.bytes, {r.where, -1, -1});
    if (!json_) {
      ++count_;
      std::cout << r.where << ":\n";
      for (const auto& [name, values] : features) std::cout << "  " << name << ": " << feature_text(values) << "\n";
      return;
    }
    Json fs = Json::object();
    for (const auto& [name, values] : features) fs[name] = feature_json(values);
    const Json element = {{"record", r.where}, {"example", {{"features", {{"feature", fs}}}}}};
    std::cout << (count_++ ? ",\n" : "[\n") << element.dump(2);
  }
  // Closes the JSON array ("[]" when no record came); as text, says on stderr that none came
  // (stdout stays empty for scripts), rather than printing nothing at all.
  void finish(const std::string& name) {
    if (json_) std::cout << (count_ ? "\n]" : "[]") << std::endl;
    else if (count_ == 0) std::cerr << "dataset " << name << ": no records to show" << std::endl;
    std::cout << std::flush;
  }

 private:
  bool json_;
  std::int64_t count_ = 0;
};

struct HeadArgs {
  HubFlags hub;
  std::string name, cache_dir;
  std::int64_t n = 5;
  bool json = false, no_cache = false;
};

void run_head(const HeadArgs& a) {
  if (a.n < 0) throw UsageError("-n must be >= 0, got " + std::to_string(a.n));
  Hub hub = open_hub(a.hub, OpenMode::kReadOnly);
  const Document doc = find_dataset(hub, a.name);
  HeadPrinter printer(a.json);
  if (!is_sharded_dataset(doc)) {
    const auto record = hub.find_top_dataset(a.name, {{"id", doc.id}});
    tensor_head(record->tensors, a.n, std::ref(printer));
    printer.finish(a.name);
    return;
  }
  std::unique_ptr<BlobCache> cache;
  if (!a.no_cache) cache = std::make_unique<BlobCache>(BlobCacheOptions{a.cache_dir, BlobCacheOptions{}.max_bytes, true});
  shard_head(hub, sharded_dataset_of(doc), a.n, cache.get(), std::ref(printer));
  printer.finish(a.name);
}

}  // namespace

void run_tfrecord_import(const HubFlags& hub_options, const std::string& name, const Json& tags,
                         const TfrecordImportArgs& args) {
  TFRecordCompression compression;
  try {
    compression = parse_tfrecord_compression(args.compression);
  } catch (const Error& e) {
    throw UsageError("--compression: " + e.message());
  }
  try {
    check_sharded_dataset_tags(tags);  // now, not after minutes of reading the files
  } catch (const Error& e) {
    throw UsageError("--tags: " + e.message());
  }
  ShardedDatasetSpec spec;
  spec.compression = std::string(to_string(compression));
  std::optional<ExampleParser> parser;
  if (!args.features.empty()) {
    spec.features = load_features(args.features);
    parser.emplace(feature_specs_from_json(spec.features));
  }
  std::vector<fs::path> paths;
  for (const std::string& pattern : args.patterns)
    for (fs::path& p : expand_pattern(pattern))
      if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(std::move(p));
  for (std::size_t i = 0; i < paths.size(); ++i) {
    std::cerr << "checking " << i + 1 << "/" << paths.size() << " " << paths[i].string() << " ..." << std::flush;
    try {
      spec.files.push_back({paths[i], check_file(paths[i], compression, parser ? &*parser : nullptr)});
    } catch (...) {
      std::cerr << " failed; nothing was imported" << std::endl;
      throw;
    }
    std::cerr << " " << plural(spec.files.back().records, "record") << std::endl;
  }
  Hub hub(hub_options.hub, hub_options.project);
  const std::int64_t id = save_sharded_dataset(hub, name, spec, tags);
  std::int64_t records = 0;
  std::uint64_t bytes = 0;
  for (const auto& f : spec.files) records += f.records, bytes += fs::file_size(f.path);
  std::cout << "saved dataset " << name << " (id " << id << ") in project " << hub_options.project << ": "
            << plural(static_cast<std::int64_t>(spec.files.size()), "shard") << ", " << plural(records, "record") << ", "
            << format_bytes(static_cast<std::int64_t>(bytes)) << " (" << spec.compression << ")" << std::endl;
}

void add_dataset_tfrecord_commands(CLI::App& dataset) {
  auto* exp = dataset.add_subcommand(
      "export", "write a dataset as TFRecord files: a sharded dataset's files as stored, a tensor dataset as "
                "<group>.tfrecord files of tf.train.Examples (one feature per tensor, one record per row)");
  auto e = std::make_shared<ExportArgs>();
  add_hub_options(*exp, e->hub);
  exp->add_option("--name", e->name, "dataset name")->required();
  exp->add_option("--tfrecord", e->dir, "directory to write the files to (created when missing)")->required();
  exp->add_option("--compression", e->compression, "NONE (default), GZIP or ZLIB, for a tensor dataset's files");
  exp->callback([e] { run_export(*e); });

  auto* head = dataset.add_subcommand("head", "print a dataset's first records as parsed tf.train.Examples");
  auto h = std::make_shared<HeadArgs>();
  add_hub_options(*head, h->hub);
  head->add_option("--name", h->name, "dataset name")->required();
  head->add_option("-n", h->n, "number of records")->capture_default_str();
  head->add_flag("--json", h->json, "a JSON array: each Example in protobuf's JSON mapping (as MessageToJson prints it)");
  head->add_option("--cache-dir", h->cache_dir, "blob cache directory (default: $TENSORHUB_BLOB_CACHE_DIR, "
                                                "$XDG_CACHE_HOME/tensorhub/blobs or ~/.cache/tensorhub/blobs)");
  head->add_flag("--no-cache", h->no_cache, "fetch the shard into a temporary file instead of the blob cache");
  head->callback([h] { run_head(*h); });
}

}  // namespace tensorhub
