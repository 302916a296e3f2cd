// libFuzzer target for the IDX reader (data/idx.h, read_idx), plain or gzip-compressed (the
// reader goes by the gzip magic bytes): any bytes as a file. Reading either throws
// tensorhub::Error or yields a U8 tensor whose data is exactly its elements and, for a plain
// file, the file's bytes after its header (4 + 4 * rank bytes).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_util.h"
#include "tensorhub/data/idx.h"

using namespace tensorhub;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = fuzz::input_file(data, size, "-idx3-ubyte");
  Tensor t;
  try {
    t = read_idx(path);
  } catch (const Error&) {
    return 0;
  } catch (const std::exception& e) {
    fuzz::fail(std::string("a non-tensorhub exception escaped: ") + e.what());
  }
  if (t.dtype != DType::kU8 || t.shape.empty() || t.numel() < 0 ||
      static_cast<std::size_t>(t.numel()) != t.data.size())
    fuzz::fail("the tensor's shape, dtype and data disagree");
  const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  if (!gzip) {
    const std::size_t header = 4 + 4 * t.shape.size();
    if (header + t.data.size() != size ||
        (!t.data.empty() && std::memcmp(t.data.data(), data + header, t.data.size()) != 0))
      fuzz::fail("the tensor is not the file's bytes after its header");
  }
  return 0;
}
