// libFuzzer target for spec tasks (train/spec.h, parse_train_spec): the input is the spec's
// JSON text, optionally followed by a NUL byte and the hyperparameters' JSON (default
// {"units": 8, "learning_rate": 0.01, "name": "mlp", "flag": true}). Parsing either throws
// tensorhub::Error or gives a spec whose substituted text parses again to the same spec.
// Nothing is trained: run_train_spec needs a hub. Built with libtorch (the model config is
// validated by building it).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "tensorhub/train/model.h"
#include "tensorhub/train/spec.h"

using namespace tensorhub;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* nul = static_cast<const std::uint8_t*>(std::memchr(data, 0, size));
  const Json spec = Json::parse(data, nul ? nul : data + size, nullptr, /*allow_exceptions=*/false);
  Json hp = {{"units", 8}, {"learning_rate", 0.01}, {"name", "mlp"}, {"flag", true}};
  if (nul) hp = Json::parse(nul + 1, data + size, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || hp.is_discarded()) return 0;
  std::optional<TrainSpec> parsed;
  fuzz::expect_clean([&] { parsed.emplace(parse_train_spec(spec, hp)); });
  // A substituted text that still holds "${" (e.g. "$" from a value, then "{x}") would be
  // substituted again: such specs are not expected to parse to themselves.
  if (!parsed || parsed->substituted.dump().find("${") != std::string::npos) return 0;
  try {
    const TrainSpec again = parse_train_spec(parsed->substituted, hp);
    if (again.substituted != parsed->substituted || again.callbacks != parsed->callbacks ||
        again.model != parsed->model)
      fuzz::fail("a substituted spec parses to another spec");
  } catch (const std::exception& e) {
    fuzz::fail(std::string("a substituted spec does not parse again: ") + e.what());
  }
  return 0;
}
