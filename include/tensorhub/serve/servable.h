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

namespace tensorhub {

/// TF's TensorInfo: a signature's tensor. shape uses -1 for an unknown dimension (the batch);
/// an empty shape with unknown_rank means any shape.
struct TensorInfo {
  std::string name;   ///< tensor name as TF Serving reports it, e.g. "x:0"
  DType dtype = DType::kF32;  ///< element type; unused when is_string
  std::vector<std::int64_t> shape;
  bool unknown_rank = false;
  bool is_string = false;  ///< TF's DT_STRING: one byte string per element (core has no such DType)
};

/// A DT_STRING tensor (TF's tstring elements): one byte string per element, row-major. (Not
/// data/example.h's StringTensor, which packs its strings end to end: one namespace holds both.)
/// The REST API carries them as JSON strings or as {"b64": "<base64>"} for binary data.
struct BytesTensor {
  std::vector<std::int64_t> shape;  ///< empty for a scalar
  std::vector<std::string> values;  ///< numel() byte strings (any bytes, not only UTF-8)

  /// Number of elements (product of shape; 1 for a scalar).
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

/// DT_STRING tensors by name.
using NamedStringTensors = std::map<std::string, BytesTensor>;

/// TF's method names (tensorflow/cc/saved_model/signature_constants.h).
inline constexpr const char* kPredictMethodName = "tensorflow/serving/predict";
inline constexpr const char* kClassifyMethodName = "tensorflow/serving/classify";
inline constexpr const char* kRegressMethodName = "tensorflow/serving/regress";

/// One feature of a tf.Example that a classify or regress signature reads: floats (TF's
/// tf.io.FixedLenFeature([size], tf.float32, default_value)), or one byte string per example
/// (FixedLenFeature([], tf.string)) that the model's DT_STRING input decodes.
struct ExampleFeature {
  std::string name;
  std::int64_t size = 1;              ///< floats per example
  std::vector<float> default_value;   ///< `size` floats for an example without it; empty: required
  bool bytes = false;                 ///< a bytes feature: the signature's only one, size 1, no default
};

/// How a classify or regress signature runs the model, as TF's graph does with
/// tf.io.parse_example: each example's features, concatenated in this order, are its row of
/// the serving_default input `input`; the serving_default output `output` holds the scores
/// (classify: one column per class) or the value (regress: one per example).
struct ExampleSignature {
  std::vector<ExampleFeature> features;
  std::string input;
  std::string output;
  std::vector<std::string> classes;  ///< classify: the label of each score column; empty: "" for all
};

/// TF's SignatureDef. inputs and outputs are what the metadata API shows; a classify or
/// regress signature (method_name) also says in `examples` how it runs the model.
struct Signature {
  std::map<std::string, TensorInfo> inputs;
  std::map<std::string, TensorInfo> outputs;
  std::string method_name = kPredictMethodName;
  ExampleSignature examples;  ///< classify and regress signatures only
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
  /// Turns the DT_STRING input `input` of `signature` into the numeric tensor predict() takes
  /// under the same name: the model's decoding step, which a TensorFlow model runs inside its
  /// graph (e.g. tf.io.decode_raw). `values` has shape [batch], one string per example; the
  /// result is batch first. Runs before batching, so decoded requests batch like any other.
  /// Throws InvalidArgument for a string of the wrong length or shape, or when `input` is no
  /// DT_STRING input of `signature` (the default: servables without string inputs).
  virtual Tensor decode_string_input(const std::string& signature, const std::string& input,
                                     const BytesTensor& values) const;
  /// Where it came from ("/models/mlp/3", "hub model 42"), for logs and metadata.
  virtual std::string source() const = 0;
};

/// Loads one version directory: our saved-model format (model.json + weights.safetensors,
/// see train/model.h; model.json may name its signature tensors with
/// "signature": {"inputs": "x", "outputs": "y"}) or a TorchScript module (model.pt, as
/// written by PyTorch's torch.jit.save).
///
/// A model.json signature may declare a bytes input instead of floats:
///   "signature": {"inputs": "image_bytes", "outputs": "probabilities",
///                 "input_dtype": "DT_STRING", "decode": "raw_uint8", "decode_scale": 0.00392156862745098}
/// The input is then DT_STRING with shape [-1]: one string per example, which must hold
/// exactly prod(input_shape) bytes (784 for a 28x28 image); byte i becomes the float
/// byte * decode_scale (default 1.0) at row-major position i of the model's input_shape.
/// Clients send such strings as {"b64": "<base64>"}. "decode" accepts only "raw_uint8". Throws NotFound if the directory holds neither,
/// DataLoss or InvalidArgument if the files are malformed.
///
/// model.json may add classify and regress signatures (TF's classification and regression
/// SignatureDefs, which read tf.Examples), each reading float features into the model's input:
///   "signatures": {"regress_x_to_y": {"method_name": "tensorflow/serving/regress",
///                                     "features": [{"name": "x", "size": 1, "default": [0.0]}]},
///                  "classify_digits": {"method_name": "tensorflow/serving/classify",
///                                      "features": [{"name": "pixels", "size": 784}],
///                                      "classes": ["0", "1", ...]}}
/// The features' sizes must add up to the model's input size; a regression's model gives one
/// value per example, a classification's one score per class ("classes", if given, names
/// them). size defaults to 1; a feature without "default" is required. A model whose input is
/// DT_STRING (a "decode" step, above) reads one bytes feature instead, {"name": "image",
/// "dtype": "string"}: each example's byte string goes through that decoding step.
std::shared_ptr<Servable> load_servable(const std::filesystem::path& version_dir);

/// A servable from a model's architecture and weights (e.g. a hub ModelRecord). Throws
/// FailedPrecondition, saying what to do, for the architectures the Python package writes
/// that hold no layers to run: {"format": "pytorch_state_dict"} (a torch.nn.Module's
/// state_dict: the module's Python class is not stored), {"format": "named_tensors"} and
/// {"format": "torchscript"} (whose module is the model.pt part, not model.json); InvalidArgument
/// or DataLoss when the layers and weights do not fit (Model::from_parts).
std::shared_ptr<Servable> make_model_servable(const Json& architecture, const NamedTensors& weights,
                                              const std::string& source);

/// A servable from a TorchScript module's bytes, as torch.jit.save writes them (a hub model's
/// "model.pt" part, store/torchscript_part.h); `source` names it in errors and metadata
/// ("hub model 42"). The module runs in eval mode and takes one float32 tensor "inputs" (the
/// request's instances, batch first), returning one tensor "outputs" as float32. Throws
/// InvalidArgument when the bytes are not a zip archive or libtorch cannot load them.
std::shared_ptr<Servable> load_torchscript_servable(const std::vector<std::byte>& bytes, const std::string& source);

/// The signature a classify (`classify` true) or regress request runs, by TF Serving's rules
/// (GetClassificationSignatureDef, GetRegressionSignatureDef): the one named `name`, or
/// serving_default when `name` is empty; except that with an empty `name`, when serving_default
/// is not of the method and exactly one signature is, that one runs (so that half_plus_two,
/// which keeps its regression signature under another name, regresses unnamed; TF Serving
/// would refuse). Used by the REST and gRPC APIs alike. Throws InvalidArgument, with TF
/// Serving's message, for an unknown name (naming `name_field`, the request field, when not
/// empty) or a signature of another method.
const Signature& example_signature(const Servable& servable, const std::string& name, bool classify,
                                   const std::string& name_field = "");

/// "DT_FLOAT", "DT_INT64", ... TensorFlow's names for our dtypes.
std::string tf_dtype_name(DType dtype);
/// TensorFlow's dtype name of a signature tensor: "DT_STRING" when info.is_string, else
/// tf_dtype_name(info.dtype).
std::string tf_dtype_name(const TensorInfo& info);

}  // namespace tensorhub
