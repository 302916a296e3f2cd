// libFuzzer target for the TFRecord reader (data/tfrecord.h): the first byte picks the
// compression (none, GZIP, ZLIB), the rest is the file. Reading either throws
// tensorhub::Error or yields records; for an uncompressed file the records then account for
// every byte (16 bytes of framing each), and writing them again gives the same file.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/data/tfrecord.h"

using namespace tensorhub;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const TFRecordCompression compression[] = {TFRecordCompression::kNone,
                                                   TFRecordCompression::kGzip,
                                                   TFRecordCompression::kZlib};
  const auto kind = compression[data[0] % 3];
  const auto path = fuzz::input_file(data + 1, size - 1, ".tfrecord");
  std::vector<std::string> records;
  try {
    TFRecordReader reader(path, kind);
    std::string record;
    while (reader.read(record)) records.push_back(record);
  } catch (const Error&) {
    return 0;
  } catch (const std::exception& e) {
    fuzz::fail(std::string("a non-tensorhub exception escaped: ") + e.what());
  }
  if (kind != TFRecordCompression::kNone) return 0;
  std::size_t total = 0;
  for (const auto& r : records) total += r.size() + 16;
  if (total != size - 1) fuzz::fail("the records do not account for every byte of the file");
  const auto copy = path.string() + ".copy";
  write_tfrecord_file(copy, records);
  const auto again = read_file_bytes(copy);
  if (again.size() != size - 1 || (size > 1 && std::memcmp(again.data(), data + 1, size - 1) != 0))
    fuzz::fail("writing the records read gives another file");
  return 0;
}
