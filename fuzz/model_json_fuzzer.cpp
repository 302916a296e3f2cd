// libFuzzer target for model.json (train/model.h, Model::from_config): any bytes as a model
// config. Building either throws tensorhub::Error, or gives a model whose config (as save()
// writes it) rebuilds with its weights (Model::from_parts), and that predicts on one example
// of its input shape (zeros) with an output of one row. Built with libtorch (not instrumented;
// our code that drives it is).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tensorhub/train/model.h"

using namespace tensorhub;

namespace {

// The input shape as model.h defines it: "input_shape", else the first layer's "shape" or
// "input_shape".
std::vector<std::int64_t> input_shape_of(const nlohmann::json& config) {
  const nlohmann::json& first = config.at("layers").at(0);
  const nlohmann::json& s = config.contains("input_shape") ? config.at("input_shape")
                            : first.contains("shape")      ? first.at("shape")
                                                           : first.at("input_shape");
  return s.get<std::vector<std::int64_t>>();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_num_threads(1);  // one core per fuzzer; the machine is shared
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json config = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return 0;
  std::optional<Model> model;
  fuzz::expect_clean([&] { model.emplace(Model::from_config(config)); });
  if (!model) return 0;
  try {
    const Model again = Model::from_parts(model->config(), model->weights());
    if (again.count_params() != model->count_params()) fuzz::fail("the saved config rebuilds another model");
  } catch (const std::exception& e) {
    fuzz::fail(std::string("the config of a built model does not rebuild: ") + e.what());
  }
  std::vector<std::int64_t> shape = {1};
  for (std::int64_t d : input_shape_of(model->config())) shape.push_back(d);
  Tensor x;
  x.dtype = DType::kF32;
  x.shape = shape;
  if (x.numel() < 0 || x.numel() > (1 << 16)) return 0;  // a valid but large example: skip
  x.data.assign(static_cast<std::size_t>(x.numel()) * sizeof(float), std::byte{0});
  try {
    const Tensor y = model->predict(x);
    if (y.dtype != DType::kF32 || y.shape.empty() || y.shape[0] != 1) fuzz::fail("predict gave no row for one example");
  } catch (const std::exception& e) {
    fuzz::fail(std::string("a built model cannot predict on its own input shape: ") + e.what());
  }
  return 0;
}
