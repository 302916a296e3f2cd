// Servable: one loaded version of a model, as TensorFlow Serving calls it. It carries the
// signatures (named input and output tensors, TF's SignatureDef) and runs predictions.
//
// Lifecycle: created by a loader (load_servable, make_model_servable), shared by the model
// manager and in-flight requests through shared_ptr, destroyed when the last holds drops.
// Thread safety: every method is safe to call from many threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensorhub/core/named_tensors.h"
#include "tensorhub/store/document.h"

namespace tensorhub::serve {

/// TF's TensorInfo: a signature's tensor. shape uses -1 for an unknown dimension (the batch);
/// an empty shape with unknown_rank means any shape.
struct TensorInfo {
  std::string name;   ///< tensor name as TF Serving reports it, e.g. "x:0"
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  bool unknown_rank = false;
};

/// TF's SignatureDef for the predict method.
struct Signature {
  std::map<std::string, TensorInfo> inputs;
  std::map<std::string, TensorInfo> outputs;
  std::string method_name = "tensorflow/serving/predict";
};

/// "serving_default", the signature used when a request names none.
inline constexpr const char* kDefaultSignature = "serving_default";

class Servable {
 public:
  virtual ~Servable() = default;
  /// Signature name -> signature; always holds kDefaultSignature.
  virtual const std::map<std::string, Signature>& signatures() const = 0;
  /// Runs `signature` on `inputs` (one tensor per signature input, batch first). Returns one
  /// tensor per signature output, batch first. Throws InvalidArgument for a shape or dtype
  /// the model cannot take, Internal if the model fails.
  virtual NamedTensors predict(const std::string& signature, const NamedTensors& inputs) const = 0;
  /// Where it came from ("/models/mlp/3", "hub model 42"), for logs and metadata.
  virtual std::string source() const = 0;
};

/// Loads one version directory: our saved-model format (model.json + weights.safetensors,
/// see train/model.h; model.json may name its signature tensors with
/// "signature": {"inputs": "x", "outputs": "y"}) or a TorchScript module (model.pt, as
/// written by PyTorch's torch.jit.save). Throws NotFound if the directory holds neither,
/// DataLoss or InvalidArgument if the files are malformed.
std::shared_ptr<Servable> load_servable(const std::filesystem::path& version_dir);

/// A servable from a model's architecture and weights (e.g. a hub ModelRecord).
std::shared_ptr<Servable> make_model_servable(const Json& architecture, const NamedTensors& weights,
                                              const std::string& source);

/// "DT_FLOAT", "DT_INT64", ... TensorFlow's names for our dtypes.
std::string tf_dtype_name(DType dtype);

}  // namespace tensorhub::serve
