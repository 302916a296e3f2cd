// Peak resident memory of the `tensorhub` processes that import, export and read a hub dataset
// larger than memory should matter: ~2 GiB of TFRecord files (tf.train.Examples of random
// "image" bytes and a label) are generated, imported with `dataset import --tfrecord`, written
// back with `dataset export` (checked byte for byte against the originals) and read record by
// record through the blob cache with `dataset head -n <all>`, on SQLite and on PostgreSQL.
// Each command runs under /usr/bin/time -v; its "Maximum resident set size" is the figure.
// Goal (issue 12): import under 300 MB resident. Not a peer comparison: it prints MB and s.
//
//   bench_hub_dataset_memory --gib 2 --shards 16                # SQLite, and PostgreSQL when
//   TENSORHUB_TEST_POSTGRES_URI=postgresql://... bench_...     # an admin URI is given
#include <libpq-fe.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <regex>

#include "bench_util.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/data/example.h"
#include "tensorhub/data/tfrecord.h"

namespace tensorhub::bench {
namespace {

namespace fs = std::filesystem;

const std::string kTensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";

struct Options {
  double gib = 2.0;
  int shards = 16;
  int record_bytes = 3072;  // a 32 x 32 x 3 image
  std::string postgres;     // admin URI; default $TENSORHUB_TEST_POSTGRES_URI
  std::string work_dir;     // default: a new directory under $TMPDIR
  bool keep = false;
};

// What one command cost.
struct Measure {
  double seconds = 0;
  double peak_mb = 0;  // maximum resident set size, MB (10^6 bytes)
};

// Writes `opt.shards` files of Examples {"image": record_bytes random bytes, "label": i % 10}
// totalling about opt.gib GiB; returns the record count.
std::int64_t generate(const Options& opt, const fs::path& dir) {
  const auto total = static_cast<std::uint64_t>(opt.gib * (1ull << 30));
  const std::uint64_t per_shard = total / static_cast<std::uint64_t>(opt.shards);
  std::mt19937_64 random(12);
  std::string image(static_cast<std::size_t>(opt.record_bytes), '\0');
  std::int64_t records = 0;
  for (int s = 0; s < opt.shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "part-%05d-of-%05d.tfrecord", s, opt.shards);
    TFRecordWriter writer(dir / name);
    for (std::uint64_t written = 0; written < per_shard; ++records) {
      for (std::size_t i = 0; i < image.size(); i += 8) {
        const std::uint64_t v = random();
        std::memcpy(&image[i], &v, std::min<std::size_t>(8, image.size() - i));
      }
      const std::int64_t label = records % 10;
      ExampleBuilder b;
      b.add_bytes("image", image).add_int64s("label", std::span(&label, 1));
      const std::string rec = b.serialize();
      writer.write(rec);
      written += rec.size() + 16;
    }
    writer.close();
  }
  return records;
}

// Runs `args` under /usr/bin/time -v with stdout to /dev/null; throws with the log on failure.
Measure measure(const std::vector<std::string>& args, const fs::path& log) {
  std::string cmd = "/usr/bin/time -v";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " > /dev/null 2> '" + log.string() + "'";
  const auto t0 = Clock::now();
  const int rc = std::system(cmd.c_str());
  Measure m{seconds_since(t0), 0};
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  if (rc != 0) throw std::runtime_error("failed: " + cmd + "\n" + text);
  std::smatch match;
  if (!std::regex_search(text, match, std::regex(R"(Maximum resident set size \(kbytes\): (\d+))")))
    throw std::runtime_error("no maximum resident set size in " + log.string());
  m.peak_mb = std::stod(match[1]) * 1024 / 1e6;
  return m;
}

std::string sha256_of_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  Sha256 hash;
  std::vector<char> buffer(1 << 20);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0)
    hash.update(std::span(reinterpret_cast<const std::byte*>(buffer.data()), static_cast<std::size_t>(in.gcount())));
  return hash.hex_digest();
}

// Throws unless every generated file was exported with the same bytes.
void check_export(const fs::path& in, const fs::path& out) {
  for (const auto& e : fs::directory_iterator(in))
    if (sha256_of_file(e.path()) != sha256_of_file(out / e.path().filename()))
      throw std::runtime_error("exported " + (out / e.path().filename()).string() + " differs from " + e.path().string());
}

void admin_exec(const std::string& admin_uri, const std::string& sql) {
  PGconn* c = PQconnectdb(admin_uri.c_str());
  PGresult* r = PQexec(c, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  const std::string why = PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
  if (!ok) throw std::runtime_error(sql + ": " + why);
}

// The admin URI with its database replaced by `db` (no query string expected).
std::string with_database(const std::string& uri, const std::string& db) {
  const auto slash = uri.find('/', uri.find("://") + 3);
  return uri.substr(0, slash) + "/" + db;
}

void print(const std::string& backend, const std::string& step, const Measure& m, double gib) {
  std::printf("%-10s %-34s %8.1f s %8.1f MB peak RSS  (%.0f MB/s)\n", backend.c_str(), step.c_str(), m.seconds,
              m.peak_mb, gib * (1 << 30) / 1e6 / m.seconds);
  std::fflush(stdout);
}

// Import, export and a full read through the cache on one hub; returns the import's figures.
Measure run_backend(const std::string& backend, const std::string& uri, const fs::path& work, std::int64_t records,
                    double gib) {
  const fs::path in = work / "in", out = work / ("out-" + backend), cache = work / ("cache-" + backend);
  const std::vector<std::string> hub = {"--hub", uri, "--project", "bench"};
  auto with_hub = [&](std::vector<std::string> args) {
    args.insert(args.end(), hub.begin(), hub.end());
    return args;
  };
  const Measure import = measure(with_hub({kTensorhub, "dataset", "import", "--tfrecord", (in / "*.tfrecord").string(),
                                           "--name", "big", "--features", (work / "features.json").string()}),
                                 work / "import.log");
  print(backend, "import --tfrecord (+ features)", import, gib);
  const Measure exp = measure(with_hub({kTensorhub, "dataset", "export", "--name", "big", "--tfrecord", out.string()}),
                              work / "export.log");
  print(backend, "export --tfrecord (read back)", exp, gib);
  check_export(in, out);
  fs::remove_all(out);
  const Measure head = measure(with_hub({kTensorhub, "dataset", "head", "--name", "big", "-n", std::to_string(records),
                                         "--cache-dir", cache.string()}),
                               work / "head.log");
  print(backend, "head -n all (fill cache, parse)", head, gib);
  const Measure again = measure(with_hub({kTensorhub, "dataset", "head", "--name", "big", "-n",
                                          std::to_string(records), "--cache-dir", cache.string()}),
                                work / "head2.log");
  print(backend, "head -n all (cache hits)", again, gib);
  fs::remove_all(cache);
  return import;
}

int run(const Options& opt) {
  const fs::path work = opt.work_dir.empty() ? fs::temp_directory_path() / ("tensorhub-bench-mem-" + std::to_string(getpid()))
                                             : fs::path(opt.work_dir);
  fs::create_directories(work / "in");
  std::ofstream(work / "features.json")
      << R"({"image": {"type": "FixedLenFeature", "dtype": "string"}, "label": {"type": "FixedLenFeature", "dtype": "int64"}})";
  auto t0 = Clock::now();
  const std::int64_t records = generate(opt, work / "in");
  std::uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(work / "in")) bytes += e.file_size();
  const double gib = static_cast<double>(bytes) / (1 << 30);
  std::printf("generated %lld records in %d files, %.2f GiB, in %.1f s (%s)\n", static_cast<long long>(records),
              opt.shards, gib, seconds_since(t0), (work / "in").c_str());
  std::vector<std::pair<std::string, Measure>> imports;
  imports.emplace_back("sqlite", run_backend("sqlite", "sqlite://" + (work / "hub.db").string(), work, records, gib));
  fs::remove(work / "hub.db");
  fs::remove(work / "hub.db-wal");
  if (!opt.postgres.empty()) {
    const std::string db = "th_bench_mem_" + std::to_string(getpid());
    admin_exec(opt.postgres, "CREATE DATABASE " + db);
    try {
      imports.emplace_back("postgresql", run_backend("postgresql", with_database(opt.postgres, db), work, records, gib));
    } catch (...) {
      admin_exec(opt.postgres, "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
      throw;
    }
    admin_exec(opt.postgres, "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
  } else {
    std::printf("postgresql: skipped (no --postgres and no TENSORHUB_TEST_POSTGRES_URI)\n");
  }
  if (!opt.keep) fs::remove_all(work);
  for (const auto& [backend, m] : imports)
    std::printf("import of %.2f GiB on %s: peak RSS %.1f MB (goal: under 300 MB) %s\n", gib, backend.c_str(), m.peak_mb,
                m.peak_mb < 300 ? "ok" : "OVER");
  return 0;
}

}  // namespace
}  // namespace tensorhub::bench

int main(int argc, char** argv) {
  using namespace tensorhub::bench;
  Options opt;
  if (const char* pg = std::getenv("TENSORHUB_TEST_POSTGRES_URI")) opt.postgres = pg;
  CLI::App app("Peak RSS of tensorhub importing, exporting and reading a TFRecord hub dataset of ~2 GiB");
  app.add_option("--gib", opt.gib, "size of the generated TFRecord files together, GiB")->capture_default_str();
  app.add_option("--shards", opt.shards, "number of files")->capture_default_str()->check(at_least_one());
  app.add_option("--record-bytes", opt.record_bytes, "bytes of each record's image feature")->capture_default_str();
  app.add_option("--postgres", opt.postgres, "PostgreSQL admin URI (default $TENSORHUB_TEST_POSTGRES_URI)");
  app.add_option("--work-dir", opt.work_dir, "where the files, hub and exports go (default: under $TMPDIR)");
  app.add_flag("--keep", opt.keep, "keep the work directory");
  parse_or_exit(app, argc, argv);
  try {
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_hub_dataset_memory: %s\n", e.what());
    return 1;
  }
}
