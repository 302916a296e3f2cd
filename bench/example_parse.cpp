// Parsing and batching tf.train.Example records: Fashion-MNIST as TFRecord files, ours
// (ExampleParser::parse + decode_raw) against a Python peer (bench/peers/example_parse.py:
// python3-protobuf's generated Example and numpy), records per second, same files, same run.
//
// The records are written first, as TensorFlow users write MNIST-like data: the 60,000
// training images of Debian's Fashion-MNIST (the IDX files, read raw) as Examples holding
// "image" (the 784 pixel bytes, one bytes_list value) and "label" (one int64), in --shards
// uncompressed TFRecord files under a temporary directory. Both sides then read the files into
// memory (untimed) and time, for --rounds rounds, parsing every record and batching by
// --batch-size into uint8 [B, 784] images and int64 [B] labels:
//  - ours: ExampleParser{image: FixedLenFeature([], string), label: FixedLenFeature([],
//    int64)}.parse(batch) (tf.io.parse_example), then decode_raw(image, U8) (tf.io.decode_raw);
//    one thread, as the peer; a round repeats the pass to last about 0.3 s (the peer's pass
//    takes about that long), and a round's time is divided by its passes;
//  - peer: Example.FromString per record, the image bytes joined into np.frombuffer and the
//    labels into np.array.
// Both compute a checksum (sum of every pixel and label) in an untimed pass; they must agree.
// Also printed, ours only: writing the files, parsing record by record (parse_single), and
// reading the files back (CRC-checked) + parsing.
//
// Usage: bench_example_parse [--data DIR] [--batch-size B] [--rounds R] [--shards S]
//                            [--peer SCRIPT] [--python PATH] [--no-peer]
// Prints a line per side, the ratio ours / peer of the median rounds (goal: 20x), and a JSON
// summary as the last line.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tensorhub/data/example.h"
#include "tensorhub/data/idx.h"
#include "tensorhub/data/tfrecord.h"

namespace {

namespace th = tensorhub;
namespace bench = tensorhub::bench;

// Writes the images and labels as Examples into `shards` files under `dir`; returns the paths.
std::vector<std::string> write_shards(const std::filesystem::path& dir, const th::Tensor& images,
                                      const th::Tensor& labels, int shards) {
  const std::int64_t n = images.shape.at(0);
  const std::int64_t pixels = images.numel() / n;
  std::vector<std::string> paths;
  th::ExampleBuilder builder;
  std::string record;
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "train.tfrecord-%05d-of-%05d", s, shards);
    paths.push_back((dir / name).string());
    th::TFRecordWriter writer(paths.back());
    for (std::int64_t i = n * s / shards; i < n * (s + 1) / shards; ++i) {
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

std::vector<std::string> read_all(const std::vector<std::string>& paths) {
  std::vector<std::string> records;
  for (const auto& p : paths) {
    th::TFRecordReader reader(p);
    std::string r;
    while (reader.read(r)) records.push_back(r);
  }
  return records;
}

struct Batch {
  th::Tensor x;  // U8 [B, 784]
  th::Tensor y;  // I64 [B]
};

Batch parse_batch(const th::ExampleParser& parser, std::span<const std::string> records) {
  auto parsed = parser.parse(records);
  Batch b;
  b.x = th::decode_raw(std::get<th::StringTensor>(parsed.at("image")), th::DType::kU8);
  b.y = std::move(std::get<th::Tensor>(parsed.at("label")));
  return b;
}

// Parses every record in batches of `batch_size`, calling `use` on each batch.
template <typename Use>
void parse_all(const th::ExampleParser& parser, const std::vector<std::string>& records, std::size_t batch_size,
               Use&& use) {
  for (std::size_t i = 0; i < records.size(); i += batch_size) {
    const std::size_t n = std::min(batch_size, records.size() - i);
    use(parse_batch(parser, std::span<const std::string>(records.data() + i, n)));
  }
}

// What our side measures (the file comment says how).
struct Ours {
  std::vector<double> seconds;  // per pass over all records, each the mean of a round
  double records_per_s = 0;     // of the median round
  double single_per_s = 0;      // parse_single record by record
  double end_to_end_per_s = 0;  // reading the files + parse + batch
  std::uint64_t checksum = 0;
};

Ours measure_ours(const std::vector<std::string>& records, const std::vector<std::string>& paths, std::size_t bs,
                  int rounds) {
  const th::ExampleParser parser({{"image", th::FixedLenFeature{{}, th::FeatureDType::kString, {}}},
                                  {"label", th::FixedLenFeature{{}, th::FeatureDType::kInt64, {}}}});
  Ours o;
  parse_all(parser, records, bs, [&](const Batch& b) {
    for (std::int64_t i = 0; i < b.x.numel(); ++i) o.checksum += b.x.as<std::uint8_t>()[i];
    for (std::int64_t i = 0; i < b.y.numel(); ++i) o.checksum += static_cast<std::uint64_t>(b.y.as<std::int64_t>()[i]);
  });
  std::int64_t sink = 0;  // keeps the results alive
  // A pass takes ~15 ms, the peer's ~0.5 s: a round of ours repeats the pass so that it lasts
  // about as long, and a slice lost to another process on these shared cores weighs the same.
  auto t0 = bench::Clock::now();
  parse_all(parser, records, bs, [&](const Batch& b) { sink += b.y.numel(); });
  const int passes = std::max(1, static_cast<int>(0.3 / std::max(1e-6, bench::seconds_since(t0))));
  for (int r = 0; r < rounds; ++r) {
    t0 = bench::Clock::now();
    for (int k = 0; k < passes; ++k) parse_all(parser, records, bs, [&](const Batch& b) { sink += b.y.numel(); });
    o.seconds.push_back(bench::seconds_since(t0) / passes);
  }
  const double n = static_cast<double>(records.size());
  o.records_per_s = n / bench::median(o.seconds);

  // One record at a time (tf.io.parse_single_example in a Dataset.map).
  t0 = bench::Clock::now();
  for (const auto& r : records) {
    const auto one = parser.parse_single(r);
    sink += th::decode_raw(std::get<th::StringTensor>(one.at("image")), th::DType::kU8).numel();
  }
  o.single_per_s = n / bench::seconds_since(t0);

  // Reading the files (CRC-checked) and parsing, once: the end-to-end figure.
  t0 = bench::Clock::now();
  parse_all(parser, read_all(paths), bs, [&](const Batch& b) { sink += b.y.numel(); });
  o.end_to_end_per_s = n / bench::seconds_since(t0);
  if (sink < 0) std::abort();
  return o;
}

// Runs the peer on the same files, prints its line and the ratio, adds them to `summary`.
// Returns false if the peer's checksum or record count differs from ours.
bool compare_with_peer(const bench::PeerOptions& peer, const std::vector<std::string>& paths, int batch_size,
                       int rounds, std::size_t records, const Ours& ours, th::Json& summary) {
  std::vector<std::string> args{"--batch-size", std::to_string(batch_size), "--rounds", std::to_string(rounds),
                                "--files"};
  args.insert(args.end(), paths.begin(), paths.end());
  const th::Json p = bench::run_peer(peer, args);
  const double theirs = p.at("records_per_s").get<double>();
  const auto their_checksum = p.at("checksum").get<std::uint64_t>();
  std::printf("peer  parse+batch %12.0f records/s (python3-protobuf %s, %s backend, numpy)  checksum %llu\n", theirs,
              p.at("protobuf").get<std::string>().c_str(), p.at("implementation").get<std::string>().c_str(),
              static_cast<unsigned long long>(their_checksum));
  bench::print_ratio("example_parse ours / python protobuf+numpy", ours.records_per_s / theirs, 1,
                     "x records/s (goal 20x)");
  summary["peer"] = p;
  summary["ratio"] = ours.records_per_s / theirs;
  if (their_checksum == ours.checksum && p.at("records").get<std::size_t>() == records) return true;
  std::fprintf(stderr, "the peer parsed other values (checksum or record count differs)\n");
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir;
  int batch_size = 128, rounds = 5, shards = 4;
  bench::PeerOptions peer{std::string(TENSORHUB_SOURCE_DIR) + "/bench/peers/example_parse.py"};
  CLI::App app{"Parsing and batching Fashion-MNIST tf.train.Examples, ours against protobuf + numpy",
               "bench_example_parse"};
  bench::add_mnist_option(app, data_dir);
  app.add_option("--batch-size", batch_size, "records per batch")->capture_default_str()->check(bench::at_least_one());
  app.add_option("--rounds", rounds, "timed passes over all records per side (the median counts)")
      ->capture_default_str()
      ->check(bench::at_least_one());
  app.add_option("--shards", shards, "TFRecord files to write")->capture_default_str()->check(bench::at_least_one());
  bench::add_peer_options(app, peer);
  bench::parse_or_exit(app, argc, argv);

  try {
    const auto images = th::read_idx(std::filesystem::path(data_dir) / "train-images-idx3-ubyte.gz");
    const auto labels = th::read_idx(std::filesystem::path(data_dir) / "train-labels-idx1-ubyte.gz");
    char tmpl[] = "/tmp/bench_example_parse-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    const std::filesystem::path dir = tmpl;

    auto t0 = bench::Clock::now();
    const auto paths = write_shards(dir, images, labels, shards);
    const double write_s = bench::seconds_since(t0);
    t0 = bench::Clock::now();
    const auto records = read_all(paths);
    const double read_s = bench::seconds_since(t0);
    double megabytes = 0;
    for (const auto& p : paths) megabytes += static_cast<double>(std::filesystem::file_size(p)) / 1e6;
    std::printf("records %zu in %d files (%.1f MB), batch %d; wrote them in %.2f s, read them in %.3f s\n",
                records.size(), shards, megabytes, batch_size, write_s, read_s);

    const Ours ours = measure_ours(records, paths, static_cast<std::size_t>(batch_size), rounds);
    std::printf("ours  parse+batch %12.0f records/s (median of %d; rounds:", ours.records_per_s, rounds);
    for (double s : ours.seconds) std::printf(" %.3f s", s);
    std::printf(")  checksum %llu\n", static_cast<unsigned long long>(ours.checksum));
    std::printf("ours  parse_single_example + decode_raw, unbatched %12.0f records/s\n", ours.single_per_s);
    std::printf("ours  read+parse+batch from the files %12.0f records/s\n", ours.end_to_end_per_s);

    th::Json summary = {{"bench", "example_parse"}, {"records", records.size()}, {"batch_size", batch_size},
                        {"ours_records_per_s", ours.records_per_s}, {"ours_seconds", ours.seconds},
                        {"ours_read_parse_records_per_s", ours.end_to_end_per_s},
                        {"ours_single_records_per_s", ours.single_per_s}, {"checksum", ours.checksum}};
    const bool same = !peer.run || compare_with_peer(peer, paths, batch_size, rounds, records.size(), ours, summary);
    std::filesystem::remove_all(dir);
    std::cout << summary.dump() << std::endl;
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_example_parse: %s\n", e.what());
    return 1;
  }
}
