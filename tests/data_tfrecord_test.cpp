// TFRecord tests: the real TensorFlow-written fixtures (tests/fixtures/tfrecord, decoded as
// tf.train.Example and compared with toy.csv), writer output byte-identical to a reference
// made by Python (struct + python3-crc32c), GZIP/ZLIB output checked with Python's gzip/zlib,
// Python-compressed files read back, and corrupt/truncated files rejected with DataLoss
// naming the file and the record offset.
#include "tensorhub/data/tfrecord.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tensorhub/core/crc32c.h"
#include "tensorhub/core/error.h"
#include "tensorhub/tf/example.pb.h"
#include "test_util.h"

namespace tensorhub {
namespace {

const std::filesystem::path kFixtures = TENSORHUB_TFRECORD_FIXTURES;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << p;
}

// Runs a Python program (Debian's /usr/bin/python3, which has python3-crc32c) with `args`.
std::string python(const testing::TempDir& dir, const std::string& program, const std::string& args) {
  const auto script = dir / "script.py";
  std::ofstream(script) << program;
  return testing::run_command("/usr/bin/python3 " + script.string() + " " + args + " 2>&1");
}

using testing::expect_error;  // tests/test_util.h

// --- Real TensorFlow-written files --------------------------------------------------------

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

// Checks `f` against CSV cell `cell` of column `column`, by the encoding the fixtures' README
// describes (checked there by decoding the records).
void expect_feature(const tf::Feature& f, const std::string& column, const std::string& cell) {
  SCOPED_TRACE(column + " = '" + cell + "'");
  if (cell.empty() || cell == "NA") {
    EXPECT_EQ(f.kind_case(), tf::Feature::KIND_NOT_SET);
    return;
  }
  if (column == "Num_1" || column == "Num_2" || column == "Cat_3") {
    ASSERT_EQ(f.kind_case(), tf::Feature::kFloatList);
    ASSERT_EQ(f.float_list().value_size(), 1);
    EXPECT_EQ(f.float_list().value(0), std::stof(cell));
  } else if (column == "Bool_1" || column == "Bool_2") {
    ASSERT_EQ(f.kind_case(), tf::Feature::kInt64List);
    ASSERT_EQ(f.int64_list().value_size(), 1);
    EXPECT_EQ(f.int64_list().value(0), std::stoll(cell));
  } else if (column == "Cat_1" || column == "Cat_2") {
    ASSERT_EQ(f.kind_case(), tf::Feature::kBytesList);
    ASSERT_EQ(f.bytes_list().value_size(), 1);
    EXPECT_EQ(f.bytes_list().value(0), cell);
  } else {  // Cat_set_*: tokens split on spaces, lower-cased
    ASSERT_EQ(f.kind_case(), tf::Feature::kBytesList);
    std::vector<std::string> want;
    for (auto tok : split(cell, ' ')) {
      for (auto& c : tok) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      want.push_back(tok);
    }
    EXPECT_EQ(std::vector<std::string>(f.bytes_list().value().begin(), f.bytes_list().value().end()),
              want);
  }
}

TEST(TFRecordFixtures, ToyExamplesMatchCsv) {
  ASSERT_TRUE(std::filesystem::exists(kFixtures)) << kFixtures << " (tests/fixtures/tfrecord, see its README)";
  const auto a = kFixtures / "toy.nocompress-tfe-tfrecord-00000-of-00002";
  const auto b = kFixtures / "toy.nocompress-tfe-tfrecord-00001-of-00002";
  std::vector<std::string> records = read_tfrecord_file(a);
  ASSERT_EQ(records.size(), 3u);
  const auto more = read_tfrecord_file(b);
  ASSERT_EQ(more.size(), 1u);
  records.push_back(more[0]);

  std::istringstream csv(slurp(kFixtures / "toy.csv"));
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  const auto columns = split(line, ',');
  ASSERT_EQ(columns.size(), 9u);
  for (std::size_t row = 0; row < records.size(); ++row) {
    SCOPED_TRACE("CSV row " + std::to_string(row + 1));
    ASSERT_TRUE(std::getline(csv, line));
    const auto cells = split(line, ',');
    ASSERT_EQ(cells.size(), columns.size());
    tf::Example example;
    ASSERT_TRUE(example.ParseFromString(records[row]));
    const auto& features = example.features().feature();
    EXPECT_EQ(features.size(), columns.size());
    for (std::size_t c = 0; c < columns.size(); ++c) {
      auto it = features.find(columns[c]);
      ASSERT_NE(it, features.end()) << columns[c];
      expect_feature(it->second, columns[c], cells[c]);
    }
  }
  EXPECT_FALSE(std::getline(csv, line) && !line.empty()) << "more CSV rows than records";
}

TEST(TFRecordFixtures, OffsetsCoverTheWholeFile) {
  const auto path = kFixtures / "toy.nocompress-tfe-tfrecord-00000-of-00002";
  TFRecordReader reader(path);
  std::string record;
  std::uint64_t expected_offset = 0;
  int n = 0;
  while (reader.read(record)) {
    expected_offset += 16 + record.size();
    EXPECT_EQ(reader.offset(), expected_offset);
    ++n;
  }
  EXPECT_EQ(n, 3);
  EXPECT_EQ(reader.offset(), std::filesystem::file_size(path));
  EXPECT_FALSE(reader.read(record));  // stays at the end
  // The first record of the other shard is 0xa8 = 168 bytes (its header, read by eye).
  EXPECT_EQ(read_tfrecord_file(kFixtures / "toy.nocompress-tfe-tfrecord-00001-of-00002")[0].size(),
            168u);
}

TEST(TFRecordFixtures, GzipSentences) {
  const auto path = kFixtures / "sentences.tfe-tfrecord";
  const auto records = read_tfrecord_file(path, TFRecordCompression::kGzip);
  ASSERT_EQ(records.size(), 2u);
  const char* want[] = {"Hello world", "Bonjour le monde"};
  for (std::size_t i = 0; i < 2; ++i) {
    tf::Example example;
    ASSERT_TRUE(example.ParseFromString(records[i]));
    ASSERT_EQ(example.features().feature().size(), 1);
    const tf::Feature& f = example.features().feature().at("f1");
    ASSERT_EQ(f.kind_case(), tf::Feature::kBytesList);
    ASSERT_EQ(f.bytes_list().value_size(), 1);
    EXPECT_EQ(f.bytes_list().value(0), want[i]);
  }
  // Read without decompression, the gzip header is not a valid record header.
  expect_error([&] { read_tfrecord_file(path); }, ErrorKind::kDataLoss,
                        {path.string(), "offset 0", "length"});
  // And ZLIB is a different wrapper.
  expect_error([&] { read_tfrecord_file(path, TFRecordCompression::kZlib); },
                        ErrorKind::kDataLoss, {path.string(), "ZLIB"});
}

TEST(TFRecordFixtures, OurWriterReproducesTensorFlowFileBytes) {
  testing::TempDir dir;
  const auto path = kFixtures / "toy.nocompress-tfe-tfrecord-00000-of-00002";
  write_tfrecord_file(dir / "copy", read_tfrecord_file(path));
  EXPECT_EQ(slurp(dir / "copy"), slurp(path));
}

// --- Writer against an independent reference --------------------------------------------

// The same records as python_records below.
std::vector<std::string> reference_records() {
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  std::string big;
  for (int i = 0; i < 300000; ++i) big.push_back(static_cast<char>((i * 7 + 3) % 251));
  return {"", "a", "hello world", all_bytes + all_bytes + all_bytes + all_bytes, big};
}

const char* kPythonReference = R"PY(
import struct, sys, crc32c, gzip, zlib

def masked(data):
    c = crc32c.crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xffffffff) + 0xa282ead8) & 0xffffffff

def frame(rec):
    length = struct.pack('<Q', len(rec))
    return length + struct.pack('<I', masked(length)) + rec + struct.pack('<I', masked(rec))

records = [b'', b'a', b'hello world', bytes(range(256)) * 4,
           bytes((i * 7 + 3) % 251 for i in range(300000))]
ref = b''.join(frame(r) for r in records)
mode = sys.argv[1]
if mode == 'write':
    open(sys.argv[2], 'wb').write(ref)
    open(sys.argv[3], 'wb').write(gzip.compress(ref))
    # Two gzip members, as `cat a.gz b.gz` makes.
    open(sys.argv[4], 'wb').write(gzip.compress(ref[:28]) + gzip.compress(ref[28:]))
    open(sys.argv[5], 'wb').write(zlib.compress(ref, 9))
    print('ok')
elif mode == 'check':
    plain, gz, zl = (open(p, 'rb').read() for p in sys.argv[2:5])
    print('plain', plain == ref)
    print('gzip', gzip.decompress(gz) == ref, gz[:2] == b'\x1f\x8b')
    print('zlib', zlib.decompress(zl) == ref, zl[0] == 0x78)
)PY";

TEST(TFRecordWriter, ByteIdenticalToPythonReference) {
  testing::TempDir dir;
  const auto records = reference_records();
  write_tfrecord_file(dir / "plain", records);
  write_tfrecord_file(dir / "gz", records, {.compression = TFRecordCompression::kGzip});
  write_tfrecord_file(dir / "zl", records, {.compression = TFRecordCompression::kZlib, .compression_level = 9});
  const std::string out = python(dir, kPythonReference,
                                 "check " + (dir / "plain").string() + " " + (dir / "gz").string() +
                                     " " + (dir / "zl").string());
  EXPECT_EQ(out, "plain True\ngzip True True\nzlib True True\n");
}

TEST(TFRecordReader, ReadsPythonWrittenFiles) {
  testing::TempDir dir;
  const auto ref = dir / "ref", gz = dir / "ref.gz", gz2 = dir / "ref2.gz", zl = dir / "ref.zz";
  ASSERT_EQ(python(dir, kPythonReference,
                   "write " + ref.string() + " " + gz.string() + " " + gz2.string() + " " + zl.string()),
            "ok\n");
  const auto records = reference_records();
  EXPECT_EQ(read_tfrecord_file(ref), records);
  EXPECT_EQ(read_tfrecord_file(gz, TFRecordCompression::kGzip), records);
  EXPECT_EQ(read_tfrecord_file(gz2, TFRecordCompression::kGzip), records);
  EXPECT_EQ(read_tfrecord_file(zl, TFRecordCompression::kZlib), records);
}

TEST(TFRecordWriter, RoundTripAllCompressionsAndLevels) {
  testing::TempDir dir;
  std::vector<std::string> records;
  for (int i = 0; i < 2000; ++i) records.push_back(std::string(static_cast<std::size_t>(i % 97), static_cast<char>('a' + i % 26)));
  records.push_back(std::string(3 << 20, 'z'));  // larger than every internal buffer
  for (auto c : {TFRecordCompression::kNone, TFRecordCompression::kGzip, TFRecordCompression::kZlib}) {
    for (int level : {-1, 0, 1, 9}) {
      const auto p = dir / ("f" + std::string(to_string(c)) + std::to_string(level));
      TFRecordWriter w(p, {.compression = c, .compression_level = level});
      for (const auto& r : records) w.write(r);
      EXPECT_EQ(w.records_written(), records.size());
      w.close();
      w.close();  // idempotent
      EXPECT_THROW(w.write("x"), Error);
      EXPECT_EQ(read_tfrecord_file(p, c), records) << to_string(c) << " level " << level;
    }
  }
}

TEST(TFRecordWriter, FlushMakesGzipRecordsDecodable) {
  testing::TempDir dir;
  TFRecordWriter w(dir / "live.gz", {.compression = TFRecordCompression::kGzip});
  w.write("first");
  w.write("second");
  w.flush();
  // Python decodes the sync-flushed, unfinished stream.
  const std::string out = python(dir,
                                 "import sys, zlib\n"
                                 "d = zlib.decompressobj(31).decompress(open(sys.argv[1], 'rb').read())\n"
                                 "print(len(d), d[12:17], d[33:39])\n",
                                 (dir / "live.gz").string());
  EXPECT_EQ(out, "43 b'first' b'second'\n");
  // Our reader gets both records, then reports the unfinished stream.
  TFRecordReader r(dir / "live.gz", TFRecordCompression::kGzip);
  EXPECT_EQ(r.next(), "first");
  EXPECT_EQ(r.next(), "second");
  expect_error([&] { r.next(); }, ErrorKind::kDataLoss, {"live.gz", "offset 43", "trailer"});
  w.close();
  EXPECT_EQ(read_tfrecord_file(dir / "live.gz", TFRecordCompression::kGzip),
            (std::vector<std::string>{"first", "second"}));
}

// --- Corruption --------------------------------------------------------------------------

class TFRecordCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    write_tfrecord_file(path_, {"alpha", "bravo-charlie"});
    bytes_ = slurp(path_);
    ASSERT_EQ(bytes_.size(), 16u + 5 + 16 + 13);
  }
  // Writes `b` to the test file and reads it back whole.
  void read_modified(const std::string& b) {
    spit(path_, b);
    read_tfrecord_file(path_);
  }
  testing::TempDir dir_;
  std::filesystem::path path_ = dir_ / "records.tfrecord";
  std::string bytes_;
};

TEST_F(TFRecordCorruption, LengthByte) {
  std::string b = bytes_;
  b[21 + 2] ^= 0x01;  // second record's length
  expect_error([&] { read_modified(b); }, ErrorKind::kDataLoss,
                        {path_.string(), "offset 21", "corrupt length"});
}

TEST_F(TFRecordCorruption, LengthCrcByte) {
  std::string b = bytes_;
  b[9] ^= 0x80;
  expect_error([&] { read_modified(b); }, ErrorKind::kDataLoss,
                        {path_.string(), "offset 0", "corrupt length"});
}

TEST_F(TFRecordCorruption, DataByte) {
  std::string b = bytes_;
  b[21 + 12 + 4] ^= 0x20;
  expect_error([&] { read_modified(b); }, ErrorKind::kDataLoss,
                        {path_.string(), "offset 21", "corrupt data"});
}

TEST_F(TFRecordCorruption, DataCrcByte) {
  std::string b = bytes_;
  b[17] ^= 0x01;  // first record's data CRC
  expect_error([&] { read_modified(b); }, ErrorKind::kDataLoss,
                        {path_.string(), "offset 0", "corrupt data"});
}

TEST_F(TFRecordCorruption, TruncatedAtEveryLength) {
  // Every proper prefix that does not end on a record boundary is DataLoss naming the
  // offset of the record it cuts; prefixes on a boundary are clean.
  for (std::size_t n = 0; n < bytes_.size(); ++n) {
    SCOPED_TRACE("prefix of " + std::to_string(n) + " bytes");
    spit(path_, bytes_.substr(0, n));
    if (n == 0 || n == 21) {
      EXPECT_EQ(read_tfrecord_file(path_).size(), n == 0 ? 0u : 1u);
      continue;
    }
    const std::string at = n < 21 ? "offset 0" : "offset 21";
    expect_error([&] { read_tfrecord_file(path_); }, ErrorKind::kDataLoss,
                          {path_.string(), at, "truncated"});
  }
}

TEST_F(TFRecordCorruption, LyingLengthDoesNotAllocateIt) {
  // A header claiming 2^40 bytes with a valid CRC, then 10 bytes: truncated, and no 1 TiB
  // allocation attempted (that would throw std::bad_alloc, not DataLoss).
  std::string b(12, '\0');
  const std::uint64_t len = 1ull << 40;
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(len >> (8 * i));
  const std::uint32_t crc = masked_crc32c(std::string_view(b.data(), 8));
  for (int i = 0; i < 4; ++i) b[8 + i] = static_cast<char>(crc >> (8 * i));
  b += "0123456789";
  expect_error([&] { read_modified(b); }, ErrorKind::kDataLoss,
                        {path_.string(), "offset 0", "truncated data (10 of 1099511627776"});
}

TEST_F(TFRecordCorruption, GzipTruncatedAndCorrupt) {
  const auto gz = dir_ / "records.gz";
  write_tfrecord_file(gz, {"alpha", "bravo-charlie"}, {.compression = TFRecordCompression::kGzip});
  const std::string full = slurp(gz);
  spit(gz, full.substr(0, full.size() - 4));  // drop part of the gzip trailer
  expect_error([&] { read_tfrecord_file(gz, TFRecordCompression::kGzip); },
                        ErrorKind::kDataLoss, {gz.string(), "GZIP"});
  std::string bad = full;
  bad[full.size() - 6] ^= 0x55;  // CRC-32 in the gzip trailer
  spit(gz, bad);
  expect_error([&] { read_tfrecord_file(gz, TFRecordCompression::kGzip); },
                        ErrorKind::kDataLoss, {gz.string(), "corrupt GZIP stream"});
  spit(gz, full + "garbage");  // bytes after the stream that are no gzip member
  expect_error([&] { read_tfrecord_file(gz, TFRecordCompression::kGzip); },
                        ErrorKind::kDataLoss, {gz.string(), "corrupt GZIP stream"});
}

// --- Files and names ---------------------------------------------------------------------

TEST(TFRecordFiles, MissingAndUnwritable) {
  testing::TempDir dir;
  expect_error([&] { TFRecordReader r(dir / "nope.tfrecord"); }, ErrorKind::kNotFound,
                        {(dir / "nope.tfrecord").string()});
  expect_error([&] { TFRecordWriter w(dir / "no-dir" / "x.tfrecord"); },
                        ErrorKind::kUnavailable, {(dir / "no-dir" / "x.tfrecord").string()});
  expect_error(
      [&] { TFRecordWriter w(dir / "x", {.compression = TFRecordCompression::kGzip, .compression_level = 10}); },
      ErrorKind::kInvalidArgument, {"compression_level", "10"});
  spit(dir / "empty", "");
  EXPECT_TRUE(read_tfrecord_file(dir / "empty").empty());
  EXPECT_TRUE(read_tfrecord_file(dir / "empty", TFRecordCompression::kGzip).empty());
}

TEST(TFRecordFiles, CompressionNames) {
  EXPECT_EQ(parse_tfrecord_compression(""), TFRecordCompression::kNone);
  EXPECT_EQ(parse_tfrecord_compression("NONE"), TFRecordCompression::kNone);
  EXPECT_EQ(parse_tfrecord_compression("GZIP"), TFRecordCompression::kGzip);
  EXPECT_EQ(parse_tfrecord_compression("zlib"), TFRecordCompression::kZlib);
  expect_error([] { parse_tfrecord_compression("BZIP2"); }, ErrorKind::kInvalidArgument,
                        {"BZIP2", "GZIP", "ZLIB"});
  EXPECT_EQ(to_string(TFRecordCompression::kGzip), "GZIP");
}

}  // namespace
}  // namespace tensorhub
