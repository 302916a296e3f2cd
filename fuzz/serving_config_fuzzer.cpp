// libFuzzer target for TF Serving's config files in protobuf text format (serve/text_proto.h):
// any bytes as a --model_config_file (parse_model_config_file) and as a
// --batching_parameters_file (parse_batching_parameters). Each either throws
// tensorhub::Error or gives a config that keeps its documented ranges.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "tensorhub/serve/batcher.h"
#include "tensorhub/serve/model_config.h"

using namespace tensorhub;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_clean([&] {
    for (const ModelConfig& m : parse_model_config_file(text))
      if (m.policy.kind == VersionPolicy::kLatest && m.policy.latest < 1)
        fuzz::fail("a latest version policy serves fewer than one version");
  });
  fuzz::expect_clean([&] {
    const BatchingParameters p = parse_batching_parameters(text);
    if (p.max_batch_size < 1 || p.max_enqueued_batches < 1 || p.batch_timeout_micros < 0 || p.num_batch_threads < 0)
      fuzz::fail("batching parameters out of range were accepted");
  });
  return 0;
}
