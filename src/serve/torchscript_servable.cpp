// TorchScript models (torch.jit.save from PyTorch) as servables: one input tensor in, one
// tensor out; shapes are whatever the module accepts.
#include <torch/script.h>

#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/serve/servable.h"

namespace tensorhub {
namespace {

class TorchScriptServable final : public Servable {
 public:
  explicit TorchScriptServable(const std::filesystem::path& file) : source_(file.string()) {
    try {
      module_ = torch::jit::load(file.string());
    } catch (const c10::Error& e) {
      throw InvalidArgument("cannot load TorchScript module " + file.string() + ": " + e.what_without_backtrace());
    }
    module_.eval();
    Signature sig;
    sig.inputs["inputs"] = TensorInfo{"inputs:0", DType::kF32, {}, true};
    sig.outputs["outputs"] = TensorInfo{"outputs:0", DType::kF32, {}, true};
    signatures_[kDefaultSignature] = sig;
  }

  const std::map<std::string, Signature>& signatures() const override { return signatures_; }
  std::string source() const override { return source_; }

  NamedTensors predict(const std::string& signature, const NamedTensors& inputs) const override {
    if (!signatures_.count(signature)) throw NotFound("signature " + signature + " not found");
    const auto it = inputs.find("inputs");
    if (it == inputs.end()) throw InvalidArgument("expected input \"inputs\"");
    const Tensor& x = it->second;
    torch::NoGradGuard no_grad;
    try {
      auto in = torch::from_blob(const_cast<std::byte*>(x.data.data()), x.shape, torch::kFloat).clone();
      MutexLock lock(mutex_);
      at::Tensor y = module_.forward({in}).toTensor().to(torch::kFloat).contiguous();
      Tensor out;
      out.dtype = DType::kF32;
      out.shape.assign(y.sizes().begin(), y.sizes().end());
      out.data.resize(static_cast<std::size_t>(y.numel()) * sizeof(float));
      std::memcpy(out.data.data(), y.data_ptr<float>(), out.data.size());
      return {{"outputs", std::move(out)}};
    } catch (const c10::Error& e) {
      throw InvalidArgument(std::string("the TorchScript model refused the input: ") + e.what_without_backtrace());
    }
  }

 private:
  mutable torch::jit::script::Module module_ TENSORHUB_GUARDED_BY(mutex_);
  mutable Mutex mutex_;  // one forward() at a time
  std::string source_;
  std::map<std::string, Signature> signatures_;
};

}  // namespace

std::shared_ptr<Servable> load_torchscript_servable(const std::filesystem::path& file) {
  return std::make_shared<TorchScriptServable>(file);
}

}  // namespace tensorhub
