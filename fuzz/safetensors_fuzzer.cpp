// libFuzzer target for the safetensors reader (core/named_tensors.h, from_safetensors): any
// bytes as a file. A parse either throws tensorhub::Error, or returns tensors that hold
// exactly the bytes their shapes and dtypes say, that together tile the byte buffer (the
// reference implementation's rule), and that survive a write and a second read unchanged.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "tensorhub/core/named_tensors.h"

using namespace tensorhub;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* p = reinterpret_cast<const std::byte*>(data);
  const std::vector<std::byte> bytes(p, p + size);
  NamedTensors tensors;
  TensorMetadata metadata;
  try {
    tensors = from_safetensors(bytes, "fuzz input", &metadata);
  } catch (const Error&) {
    return 0;
  } catch (const std::exception& e) {
    fuzz::fail(std::string("a non-tensorhub exception escaped: ") + e.what());
  }
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  std::uint64_t total = 0;
  for (const auto& [name, t] : tensors) {
    if (t.numel() < 0 || static_cast<std::uint64_t>(t.numel()) * dtype_size(t.dtype) != t.data.size())
      fuzz::fail("tensor " + name + " holds a byte count its shape and dtype do not give");
    total += t.data.size();
  }
  if (8 + header_len + total != size) fuzz::fail("the tensors do not cover the byte buffer exactly");
  NamedTensors again;
  TensorMetadata metadata_again;
  try {
    again = from_safetensors(to_safetensors(tensors, metadata), "rewritten", &metadata_again);
  } catch (const std::exception& e) {
    fuzz::fail(std::string("what the reader accepted does not survive a write and a read: ") + e.what());
  }
  if (metadata_again != metadata || again.size() != tensors.size()) fuzz::fail("round trip changed the file");
  for (const auto& [name, t] : tensors) {
    const Tensor& b = again.at(name);
    if (b.dtype != t.dtype || b.shape != t.shape || b.data != t.data) fuzz::fail("round trip changed " + name);
  }
  return 0;
}
