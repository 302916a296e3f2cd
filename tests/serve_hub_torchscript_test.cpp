// HubSource serving hub models that hold a TorchScript part ("model.pt"), on both backends:
// the module is written here by libtorch (torch::jit::Module::define, save to a stream), stored
// as a model part, listed and loaded by HubSource and run; a PyTorch state_dict saved without
// TorchScript is refused with a message that says how to fix it; bytes that are not a zip
// archive are refused before libtorch reads them.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <sstream>

#include "backend_factory.h"
#include "tensorhub/core/error.h"
#include "tensorhub/serve/hub_source.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/torchscript_part.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::backend_param_name;
using testing::backend_params;
using testing::BackendTest;
using testing::error_message_of;

// The bytes torch.jit.save would write for a module whose forward is `x * 2.0 + 1.0`.
std::vector<std::byte> two_x_plus_one() {
  torch::jit::Module m("m");
  m.define("def forward(self, x):\n  return x * 2.0 + 1.0\n");
  std::ostringstream out;
  m.save(out);
  const std::string s = out.str();
  const auto* begin = reinterpret_cast<const std::byte*>(s.data());
  return {begin, begin + s.size()};
}

HubModelQuery query(const std::string& uri, const std::string& model_name) {
  HubModelQuery q;
  q.hub_uri = uri;
  q.project = "p";
  q.model_name = model_name;
  return q;
}

// The servable HubSource loads for the newest model named `model_name`.
std::shared_ptr<const Servable> load(const std::string& uri, const std::string& model_name) {
  HubSource source(query(uri, model_name));
  auto versions = source.list_versions();
  if (versions.size() != 1) throw NotFound("expected one version of " + model_name);
  return versions.begin()->second();
}

class HubTorchScriptTest : public BackendTest {};

TEST_P(HubTorchScriptTest, ServesTheModelPtPartOfAHubModel) {
  const std::string uri = db_->uri();
  Hub hub(uri, "p");
  const Parts parts = {{kTorchScriptPart, two_x_plus_one()}};
  // As `tensorhub model save --path model.pt` stores it, and as the Python package stores a
  // scripted torch.nn.Module: a state_dict architecture and weights beside the TorchScript.
  const auto ts = hub.save_model({{"format", kTorchScriptFormat}}, {}, "ts", {}, parts);
  const auto py = hub.save_model({{"format", "pytorch_state_dict"}, {"module", "__main__.Net"}, {"torchscript", "script"}},
                                 {{"w", Tensor::from<float>(DType::kF32, {1}, {7.0f})}}, "py", {}, parts);
  for (const auto& [name, id] : {std::pair<std::string, std::int64_t>{"ts", ts}, {"py", py}}) {
    const auto servable = load(uri, name);
    EXPECT_EQ(servable->source(), "hub model " + std::to_string(id));
    const auto out = servable->predict(kDefaultSignature,
                                       {{"inputs", Tensor::from<float>(DType::kF32, {2, 2}, {1.0f, 2.0f, 0.5f, -3.0f})}});
    const Tensor& y = out.at("outputs");
    EXPECT_EQ(y.dtype, DType::kF32) << name;
    EXPECT_EQ(y.shape, (std::vector<std::int64_t>{2, 2})) << name;
    EXPECT_EQ(std::vector<float>(y.as<float>(), y.as<float>() + 4), (std::vector<float>{3.0f, 5.0f, 2.0f, -5.0f}))
        << name;
  }
}

TEST_P(HubTorchScriptTest, AStateDictWithoutTorchScriptSaysHowToServeIt) {
  const std::string uri = db_->uri();
  Hub hub(uri, "p");
  hub.save_model({{"format", "pytorch_state_dict"}, {"module", "__main__.Net"}},
                 {{"w", Tensor::from<float>(DType::kF32, {1}, {7.0f})}}, "net");
  const std::string why = error_message_of(ErrorKind::kFailedPrecondition, [&] { load(uri, "net"); }, "state_dict");
  EXPECT_NE(why.find("is a PyTorch state_dict (module __main__.Net) without TorchScript, which cannot be served"),
            std::string::npos) << why;
  EXPECT_NE(why.find("TensorHub.save_model(module, name, example_input=x)"), std::string::npos) << why;
  EXPECT_NE(why.find("tensorhub model save --model-name NAME --path model.pt"), std::string::npos) << why;

  hub.save_model({{"format", "named_tensors"}}, {{"w", Tensor::from<float>(DType::kF32, {1}, {7.0f})}}, "dict");
  const std::string dict = error_message_of(ErrorKind::kFailedPrecondition, [&] { load(uri, "dict"); }, "dict");
  EXPECT_NE(dict.find("holds named tensors (saved from a dict), no network"), std::string::npos) << dict;
}

TEST_P(HubTorchScriptTest, APartThatIsNotAZipArchiveIsRefused) {
  const std::string uri = db_->uri();
  Hub hub(uri, "p");
  const std::string text = "def forward(x): return x";
  const auto* begin = reinterpret_cast<const std::byte*>(text.data());
  hub.save_model({{"format", kTorchScriptFormat}}, {}, "bad", {},
                 {{kTorchScriptPart, std::vector<std::byte>(begin, begin + text.size())}});
  const std::string why = error_message_of(ErrorKind::kInvalidArgument, [&] { load(uri, "bad"); }, "not zip");
  EXPECT_NE(why.find("it is not a zip archive"), std::string::npos) << why;
  // A zip archive that is no TorchScript: libtorch's refusal, as InvalidArgument, not a crash.
  auto cut = two_x_plus_one();
  cut.resize(cut.size() / 2);
  hub.save_model({{"format", kTorchScriptFormat}}, {}, "cut", {}, {{kTorchScriptPart, cut}});
  const std::string half = error_message_of(ErrorKind::kInvalidArgument, [&] { load(uri, "cut"); }, "cut");
  EXPECT_NE(half.find("cannot load TorchScript module hub model"), std::string::npos) << half;
}

INSTANTIATE_TEST_SUITE_P(Backends, HubTorchScriptTest, ::testing::ValuesIn(backend_params()), backend_param_name);

}  // namespace
}  // namespace tensorhub
