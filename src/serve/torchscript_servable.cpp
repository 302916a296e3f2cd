// TorchScript models (torch.jit.save from PyTorch) as servables: one input tensor in, one
// tensor out; shapes are whatever the module accepts. Loaded from a model.pt file of a version
// directory, or from the bytes of a hub model's "model.pt" part.
#include <torch/script.h>

#include <sstream>

#include "tensorhub/core/error.h"
#include "tensorhub/core/mutex.h"
#include "tensorhub/serve/servable.h"
#include "tensorhub/store/torchscript_part.h"

namespace tensorhub {
namespace {

class TorchScriptServable final : public Servable {
 public:
  // Serves `module` (put in eval mode: Dropout off, BatchNorm's running statistics) as `source`.
  TorchScriptServable(torch::jit::Module module, std::string source)
      : module_(std::move(module)), source_(std::move(source)) {
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

// The module `load` returns; InvalidArgument naming `source` when libtorch refuses it (not a
// TorchScript archive, a newer format, an operator this libtorch lacks). Loads map every
// tensor onto the CPU, where predict() runs, so a module saved from a GPU loads too.
template <typename Load>
torch::jit::Module load_module(const Load& load, const std::string& source) {
  try {
    return load();
  } catch (const c10::Error& e) {
    throw InvalidArgument("cannot load TorchScript module " + source + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw InvalidArgument("cannot load TorchScript module " + source + ": " + e.what());
  }
}

}  // namespace

std::shared_ptr<Servable> load_torchscript_servable(const std::filesystem::path& file) {
  auto module = load_module([&] { return torch::jit::load(file.string(), torch::kCPU); }, file.string());
  return std::make_shared<TorchScriptServable>(std::move(module), file.string());
}

std::shared_ptr<Servable> load_torchscript_servable(const std::vector<std::byte>& bytes, const std::string& source) {
  // torch.jit.save writes a zip archive; anything else is refused before libtorch parses it.
  if (!is_zip_archive(bytes))
    throw InvalidArgument("cannot load TorchScript module " + source + ": it is not a zip archive (a model.pt " +
                          "written by torch.jit.save starts with PK\\x03\\x04)");
  std::istringstream in(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  auto module = load_module([&] { return torch::jit::load(in, torch::kCPU); }, source);
  return std::make_shared<TorchScriptServable>(std::move(module), source);
}

}  // namespace tensorhub
