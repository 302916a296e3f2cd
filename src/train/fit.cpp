// fit / evaluate / predict: the training and inference loops.
//
// Speed notes (the loop is measured against PyTorch by bench/train_throughput.cpp):
// - the inputs are copied once into one contiguous torch tensor; every batch is gathered with
//   index_select_out into buffers allocated once per fit() call;
// - gradients are reset to undefined rather than zeroed, so backward() hands its fresh
//   gradient buffers to the parameters instead of adding them into zeroed ones;
// - evaluate runs under NoGradGuard, predict under InferenceMode, on views of the caller's
//   memory (no copy).
#include "fit_internal.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>

#include "model_impl.h"
#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/train/callbacks.h"

namespace tensorhub {
namespace {

// Checks x against [n, input_shape...] F32 and returns n.
std::int64_t check_x(const Tensor& x, const std::string& what,
                     const std::vector<std::int64_t>& input_shape) {
  std::vector<std::int64_t> want = {x.shape.empty() ? 0 : x.shape[0]};
  want.insert(want.end(), input_shape.begin(), input_shape.end());
  if (x.dtype != DType::kF32)
    throw InvalidArgument(what + " has dtype " + dtype_name(x.dtype) + "; the model needs F32");
  if (x.shape.empty() || x.shape != want)
    throw InvalidArgument(what + " has shape " + shape_to_string(x.shape) + "; the model needs " +
                          "[n, " + shape_to_string(input_shape).substr(1));
  const std::int64_t numel = x.numel();
  if (numel < 0 || x.data.size() != static_cast<std::size_t>(numel) * sizeof(float))
    throw InvalidArgument(what + " holds " + std::to_string(x.data.size()) +
                          " bytes, which does not match its shape " + shape_to_string(x.shape));
  return x.shape[0];
}

using detail::LossKind;

// x as the network takes it: an F32 x as it is; for a network whose first layer is an
// Embedding, integer ids of another dtype (F64, I64, I32, U8, I8), each checked in its own
// dtype and converted into `converted` (layer_spec.h's embedding_ids_as_f32). F32 ids are
// checked here too, over the whole of x: a bad id is then reported at its place in x, not in
// the batch the layer's own check would meet it in, and before any batch has trained.
const Tensor& network_input(const Tensor& x, const Model::Impl& m, Tensor& converted) {
  if (m.net->layers.empty() || m.net->layers[0].kind != LayerKind::kEmbedding) return x;
  if (x.dtype == DType::kF32) {
    if (x.data.size() == static_cast<std::size_t>(x.numel()) * sizeof(float)) {
      std::vector<float> ids(static_cast<std::size_t>(x.numel()));  // aligned copy of the bytes
      if (!ids.empty()) std::memcpy(ids.data(), x.data.data(), x.data.size());
      check_embedding_ids(ids.data(), x.numel(), m.net->layers[0]);
    }
    return x;
  }
  converted = embedding_ids_as_f32(x, m.net->layers[0]);
  return converted;
}

// The shape of y the loss needs for n examples: sparse [n]; categorical [n, classes]; binary
// [n, outputs] (or [n] when there is one output); mse [n, output shape...].
std::vector<std::int64_t> target_shape(const Model::Impl& m, std::int64_t n) {
  std::vector<std::int64_t> shape = {n};
  if (m.loss == LossKind::kSparseCategoricalCrossentropy) return shape;
  shape.insert(shape.end(), m.output_shape.begin(), m.output_shape.end());
  return shape;
}

// Checks y against what the model's loss needs (model.h's "loss"): dtype, shape, and the
// values (class indices in [0, classes), binary labels in [0, 1], finite floats).
void check_y(const Tensor& y, const std::string& what, std::int64_t n, const Model::Impl& m) {
  if (m.loss == LossKind::kNone)
    throw FailedPrecondition("this model has \"loss\": null: it is for inference only (predict); give it a loss to "
                             "fit or evaluate it");
  const std::string loss = detail::loss_name(m.loss);
  const bool sparse = m.loss == LossKind::kSparseCategoricalCrossentropy;
  std::vector<std::int64_t> want = target_shape(m, n);
  std::string need;
  switch (m.loss) {
    case LossKind::kSparseCategoricalCrossentropy: need = "I64 class indices"; break;
    case LossKind::kCategoricalCrossentropy:
      need = "F32 one-hot rows (or class probabilities); for class indices use "
             "sparse_categorical_crossentropy";
      break;
    case LossKind::kBinaryCrossentropy: need = "F32 labels in [0, 1]"; break;
    default: need = "F32 targets of the output's shape"; break;
  }
  if (y.dtype != (sparse ? DType::kI64 : DType::kF32))
    throw InvalidArgument(what + " has dtype " + dtype_name(y.dtype) + "; " + loss + " needs " +
                          need + ", shape " + shape_to_string(want));
  // binary_crossentropy with one output also takes labels [n] (Keras's y of shape (n,)).
  const bool flat_binary = m.loss == LossKind::kBinaryCrossentropy && want.size() == 2 &&
                           want[1] == 1 && y.shape == std::vector<std::int64_t>{n};
  if (y.shape != want && !flat_binary)
    throw InvalidArgument(what + " has shape " + shape_to_string(y.shape) + "; " + loss +
                          " needs " + shape_to_string(want) +
                          (sparse ? ", one class index per example" : "") +
                          (want.size() == 2 && want[1] == 1 ? " or [" + std::to_string(n) + "]"
                                                            : ""));
  const std::int64_t numel = y.numel();
  if (numel < 0 || y.data.size() != static_cast<std::size_t>(numel) * dtype_size(y.dtype))
    throw InvalidArgument(what + " holds " + std::to_string(y.data.size()) +
                          " bytes, which does not match its shape " + shape_to_string(y.shape));
  if (sparse) {
    const std::int64_t* v = y.as<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i)
      if (v[i] < 0 || v[i] >= m.num_classes)
        throw InvalidArgument(what + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) +
                              " is not a class index in [0, " + std::to_string(m.num_classes) + ")");
    return;
  }
  const float* v = y.as<float>();
  const bool binary = m.loss == LossKind::kBinaryCrossentropy;
  for (std::int64_t i = 0; i < numel; ++i)
    if (!std::isfinite(v[i]) || (binary && (v[i] < 0 || v[i] > 1)))
      throw InvalidArgument(what + " element " + std::to_string(i) + " = " + std::to_string(v[i]) +
                            (binary ? " is not a label in [0, 1]" : " is not finite"));
}

// A torch view of y shaped as the loss consumes it (binary labels [n] become [n, 1]).
torch::Tensor targets_of(const Tensor& y, const Model::Impl& m, std::int64_t n) {
  if (m.loss == LossKind::kSparseCategoricalCrossentropy)
    return torch::from_blob(const_cast<std::byte*>(y.data.data()), {n}, torch::kLong);
  return torch::from_blob(const_cast<std::byte*>(y.data.data()), target_shape(m, n),
                          torch::kFloat);
}

// The loss of a batch from the network's output without the loss's own activation (`out`):
// the mean over the batch (sum = false), or the sum over examples of each example's loss (for
// binary_crossentropy and mse an example's loss is the mean over its outputs, as Keras
// averages over the last axis). Cross-entropies are computed from logits (log-softmax,
// log-sigmoid), which is stabler than Keras's clipped probabilities.
torch::Tensor loss_of(LossKind loss, const torch::Tensor& out, const torch::Tensor& y, bool sum) {
  const auto reduction = sum ? at::Reduction::Sum : at::Reduction::Mean;
  switch (loss) {
    case LossKind::kSparseCategoricalCrossentropy:
    case LossKind::kCategoricalCrossentropy:  // probability targets: -sum(y log_softmax(out))
      return at::cross_entropy_loss(out, y, {}, reduction);
    case LossKind::kBinaryCrossentropy: {
      const torch::Tensor l = at::binary_cross_entropy_with_logits(out, y, {}, {}, reduction);
      return sum ? l / static_cast<double>(out.size(1)) : l;
    }
    case LossKind::kMse: {
      const torch::Tensor l = at::mse_loss(out, y, reduction);
      return sum ? l / static_cast<double>(out.numel() / std::max<std::int64_t>(out.size(0), 1)) : l;
    }
    case LossKind::kNone: break;
  }
  throw Internal("loss_of: the model has no loss");
}

// Keras's "accuracy" as it resolves per loss, summed over the batch's examples: class index
// match of the argmax (sparse_categorical_accuracy / categorical_accuracy; ties go to the first
// index), or for binary_crossentropy the share of outputs whose probability sigmoid(out) > 0.5
// (out > 0) equals the label (binary_accuracy). mse has no accuracy (never called).
double correct_of(LossKind loss, const torch::Tensor& out, const torch::Tensor& y) {
  switch (loss) {
    case LossKind::kSparseCategoricalCrossentropy:
      return static_cast<double>(out.argmax(1).eq(y).sum().item<std::int64_t>());
    case LossKind::kCategoricalCrossentropy:
      return static_cast<double>(out.argmax(1).eq(y.argmax(1)).sum().item<std::int64_t>());
    case LossKind::kBinaryCrossentropy:
      return static_cast<double>(out.gt(0).to(torch::kFloat).eq(y).sum().item<std::int64_t>()) /
             static_cast<double>(out.size(1));
    default: return 0;
  }
}

// A view of a tensorhub::Tensor's bytes as a torch tensor; no copy. The caller keeps `t` alive
// and does not write through the view.
torch::Tensor view_of(const Tensor& t, torch::ScalarType type) {
  return torch::from_blob(const_cast<std::byte*>(t.data.data()), t.shape, type);
}

// Sets the network's train/eval mode and restores the previous one on scope exit.
class ModeGuard {
 public:
  ModeGuard(detail::Network& net, bool training) : net_(net), was_(net.is_training()) {
    net_.train(training);
  }
  ~ModeGuard() { net_.train(was_); }

 private:
  detail::Network& net_;
  bool was_;
};

// Per-epoch seeds: shuffling and dropout of epoch e depend on (seed, e) only, so a run resumed
// at epoch e (BackupAndRestore, fit(initial_epoch)) draws what an uninterrupted run draws.
std::uint64_t epoch_seed(std::uint64_t seed, int epoch, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (static_cast<std::uint64_t>(epoch) + 1) +
                    stream * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;  // splitmix64's finaliser
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return z == 0 ? 1 : z;
}

using Callbacks = std::vector<std::shared_ptr<Callback>>;

}  // namespace

History Model::fit(const Tensor& x_in, const Tensor& y, const FitOptions& options,
                   const Tensor* x_val, const Tensor* y_val) {
  Impl& m = *impl_;
  Tensor x_converted, x_val_converted;
  const Tensor& x = network_input(x_in, m, x_converted);
  if (x_val) x_val = &network_input(*x_val, m, x_val_converted);
  if (options.batch_size < 1)
    throw InvalidArgument("batch_size = " + std::to_string(options.batch_size) +
                          " must be at least 1");
  if (options.epochs < 0 || options.initial_epoch < 0)
    throw InvalidArgument("epochs = " + std::to_string(options.epochs) + " and initial_epoch = " +
                          std::to_string(options.initial_epoch) + " must not be negative");
  const std::int64_t n = check_x(x, "x", m.input_shape);
  if (n == 0) throw InvalidArgument("x holds no examples; fit needs at least one");
  check_y(y, "y", n, m);
  if ((x_val == nullptr) != (y_val == nullptr))
    throw InvalidArgument("validation data needs both x_val and y_val");
  if (x_val) {
    const std::int64_t n_val = check_x(*x_val, "x_val", m.input_shape);
    if (n_val == 0) throw InvalidArgument("x_val holds no examples; pass no validation data");
    check_y(*y_val, "y_val", n_val, m);
  }

  const std::int64_t bs = std::min(options.batch_size, n);
  const std::int64_t steps = (n + bs - 1) / bs;
  detail::FitRun run(this, m, options, {options.epochs, steps, options.verbose});
  try {
    // One contiguous copy of the inputs for the whole call; batches are gathered from it.
    const torch::Tensor X = view_of(x, torch::kFloat).clone();
    const torch::Tensor Y = targets_of(y, m, n).clone();
    std::vector<std::int64_t> batch_shape = {bs};
    batch_shape.insert(batch_shape.end(), m.input_shape.begin(), m.input_shape.end());
    torch::Tensor x_buf = torch::empty(batch_shape, torch::kFloat);
    torch::Tensor y_buf = torch::empty(target_shape(m, bs), Y.options());
    const LossKind loss_kind = m.loss;

    // Shuffling and dropout use generators of their own, reseeded every epoch from
    // (options.seed, epoch) if a seed is given.
    std::uint64_t base_seed = options.seed;
    if (base_seed == 0)
      base_seed = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
    const torch::Tensor order = torch::arange(n, torch::kLong);

    const auto params_list = m.net->parameters();
    for (int epoch = run.first_epoch(); epoch < options.epochs; ++epoch) {
      torch::Generator shuffle_gen =
          at::make_generator<at::CPUGeneratorImpl>(epoch_seed(base_seed, epoch, 1));
      if (options.seed != 0) m.net->generator.set_current_seed(epoch_seed(base_seed, epoch, 2));
      for (auto& c : run.callbacks()) c->on_epoch_begin(epoch, {});
      Logs logs;
      {
        ModeGuard mode(*m.net, /*training=*/true);
        const torch::Tensor perm =
            options.shuffle ? torch::randperm(n, shuffle_gen, torch::kLong) : order;
        for (std::int64_t step = 0; step < steps; ++step) {
          run.begin_batch(step);
          const std::int64_t start = step * bs, b = std::min(bs, n - start);
          const torch::Tensor idx = perm.narrow(0, start, b);
          torch::Tensor xb = x_buf.narrow(0, 0, b);
          torch::Tensor yb = y_buf.narrow(0, 0, b);
          at::index_select_out(xb, X, 0, idx);
          at::index_select_out(yb, Y, 0, idx);

          for (auto& p : params_list) p.mutable_grad().reset();
          const torch::Tensor logits = m.net->forward(xb, /*logits=*/true);
          const torch::Tensor loss = loss_kind == LossKind::kSparseCategoricalCrossentropy
                                         ? at::cross_entropy_loss(logits, yb)
                                         : loss_of(loss_kind, logits, yb, /*sum=*/false);
          run.end_batch(step, loss, logits, yb, b);
          if (m.stop_training) break;
        }
        run.put_epoch_metrics(logs);
      }
      std::optional<Evaluation> validation;
      if (x_val) validation = evaluate(*x_val, *y_val, 1024, run.callbacks());
      run.end_epoch(epoch, std::move(logs), validation);
      if (m.stop_training) break;
    }
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::fit", e);
  }
  return run.finish();
}

Evaluation Model::evaluate(const Tensor& x, const Tensor& y, std::int64_t batch_size) const {
  return evaluate(x, y, batch_size, {});
}

Tensor Model::predict(const Tensor& x, std::int64_t batch_size) const {
  return predict(x, batch_size, {});
}

Evaluation Model::evaluate(const Tensor& x_in, const Tensor& y, std::int64_t batch_size,
                           const Callbacks& cbs) const {
  Impl& m = *impl_;
  Tensor x_converted;
  const Tensor& x = network_input(x_in, m, x_converted);
  if (batch_size < 1)
    throw InvalidArgument("batch_size = " + std::to_string(batch_size) + " must be at least 1");
  const std::int64_t n = check_x(x, "x", m.input_shape);
  if (n == 0) throw InvalidArgument("x holds no examples; evaluate needs at least one");
  check_y(y, "y", n, m);
  try {
    torch::NoGradGuard no_grad;
    ModeGuard mode(*m.net, /*training=*/false);
    const torch::Tensor X = view_of(x, torch::kFloat);
    const torch::Tensor Y = targets_of(y, m, n);
    detail::EvaluateRun run(this, m, cbs);
    for (std::int64_t start = 0, batch = 0; start < n; start += batch_size, ++batch) {
      run.begin_batch(batch);
      const std::int64_t b = std::min(batch_size, n - start);
      const torch::Tensor logits = m.net->forward(X.narrow(0, start, b), /*logits=*/true);
      run.end_batch(batch, logits, Y.narrow(0, start, b), b);
    }
    return run.finish();
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::evaluate", e);
  }
}

namespace {

// The network's outputs for x's n examples (of the layer at index `stop`; the model's outputs
// for stop = -1), in inference mode and batches of `batch_size`, as a new F32 [n, shape...].
// predict's callbacks `cbs` get their on_predict_* hooks around the pass and each batch (none
// for n = 0). libtorch's errors are rethrown as `where`'s.
Tensor forward_in_batches(const Model& model, Model::Impl& m, const Tensor& x, std::int64_t n,
                          const std::vector<std::int64_t>& shape, std::int64_t batch_size, std::size_t stop,
                          const Callbacks& cbs, const char* where) {
  Tensor out;
  out.dtype = DType::kF32;
  out.shape = {n};
  out.shape.insert(out.shape.end(), shape.begin(), shape.end());
  out.data.resize(static_cast<std::size_t>(out.numel()) * sizeof(float));
  if (n == 0) return out;
  try {
    // InferenceMode, not NoGradGuard: no autograd or version-counter bookkeeping on the tensors
    // made here (the answer is copied out), which took a sixth of a small model's predict
    // (tensorhub serve's half_plus_two: 61 -> 51 us of server CPU per REST request).
    c10::InferenceMode inference;
    ModeGuard mode(*m.net, /*training=*/false);
    const torch::Tensor X = view_of(x, torch::kFloat);
    torch::Tensor Out = torch::from_blob(out.data.data(), out.shape, torch::kFloat);
    for (auto& c : cbs)
      if (!c->model()) c->set_model(const_cast<Model*>(&model));
    for (auto& c : cbs) c->on_predict_begin({});
    for (std::int64_t start = 0, batch = 0; start < n; start += batch_size, ++batch) {
      for (auto& c : cbs) c->on_predict_batch_begin(batch, {});
      const std::int64_t b = std::min(batch_size, n - start);
      Out.narrow(0, start, b).copy_(m.net->forward(X.narrow(0, start, b), /*logits=*/false, stop));
      for (auto& c : cbs) c->on_predict_batch_end(batch, {});
    }
    for (auto& c : cbs) c->on_predict_end({});
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error(where, e);
  }
  return out;
}

// The index in m.net->layers of the layer named `name`, or -1 for an Input layer of that name;
// NotFound listing the layers' names otherwise.
std::int64_t layer_index(const Model::Impl& m, const std::string& name) {
  for (std::size_t i = 0; i < m.net->layers.size(); ++i)
    if (m.net->layers[i].name == name) return static_cast<std::int64_t>(i);
  std::string names;
  for (const auto& l : m.config.at("layers")) {
    const std::string n = l.value("name", std::string());
    if (n == name) return -1;  // an Input layer: Network keeps none
    names += (names.empty() ? "" : ", ") + n;
  }
  throw NotFound("layer \"" + name + "\" is not in this model; its layers are: " + names);
}

}  // namespace

Tensor Model::predict(const Tensor& x_in, std::int64_t batch_size, const Callbacks& cbs) const {
  Impl& m = *impl_;
  Tensor x_converted;
  const Tensor& x = network_input(x_in, m, x_converted);
  if (batch_size < 1)
    throw InvalidArgument("batch_size = " + std::to_string(batch_size) + " must be at least 1");
  const std::int64_t n = check_x(x, "x", m.input_shape);
  return forward_in_batches(*this, m, x, n, m.output_shape, batch_size, static_cast<std::size_t>(-1), cbs,
                            "Model::predict");
}

Tensor Model::layer_output(const std::string& layer, const Tensor& x_in,
                           std::int64_t batch_size) const {
  Impl& m = *impl_;
  if (batch_size < 1)
    throw InvalidArgument("batch_size = " + std::to_string(batch_size) + " must be at least 1");
  const std::int64_t index = layer_index(m, layer);
  Tensor x_converted;
  const Tensor& x = network_input(x_in, m, x_converted);
  const std::int64_t n = check_x(x, "x", m.input_shape);
  if (index < 0) return x;
  const auto i = static_cast<std::size_t>(index);
  return forward_in_batches(*this, m, x, n, m.net->layers[i].output_shape, batch_size, i, {}, "Model::layer_output");
}

// fit_internal.h: this file's helpers, for fit_dataset.cpp.
namespace detail {
std::vector<std::int64_t> loss_target_shape(const Model::Impl& m, std::int64_t n) { return target_shape(m, n); }
torch::Tensor batch_loss(LossKind loss, const torch::Tensor& logits, const torch::Tensor& y, bool sum) {
  return loss_of(loss, logits, y, sum);
}
std::uint64_t fit_epoch_seed(std::uint64_t seed, int epoch, std::uint64_t stream) {
  return epoch_seed(seed, epoch, stream);
}

FitRun::FitRun(Model* model, Model::Impl& m, const FitOptions& options, const CallbackParams& params)
    : m_(m), accuracy_(m.loss != LossKind::kMse) {  // Keras resolves no accuracy for mse
  if (options.verbose > 0) warn_if_slow_blas();
  bool has_bar = false;
  for (const auto& c : options.callbacks)
    if (c && dynamic_cast<ProgressBar*>(c.get())) has_bar = true;
  if (options.verbose > 0 && !has_bar) cbs_.push_back(std::make_shared<ProgressBar>(options.verbose));
  for (const auto& c : options.callbacks)
    if (c) cbs_.push_back(c);
  for (auto& c : cbs_) {
    c->set_model(model);
    c->set_params(params);
  }
  m.stop_training = false;
  m.resume_epoch = -1;
  for (auto& c : cbs_) c->on_train_begin({});
  first_epoch_ = m.resume_epoch >= 0 ? m.resume_epoch : options.initial_epoch;
  m.resume_epoch = -1;
}

void FitRun::begin_batch(std::int64_t step) {
  for (auto& c : cbs_) c->on_train_batch_begin(step, {});
}

void FitRun::end_batch(std::int64_t step, const torch::Tensor& loss, const torch::Tensor& logits,
                       const torch::Tensor& y, std::int64_t size) {
  loss.backward();
  m_.optimizer->step();
  ++m_.iterations;

  torch::NoGradGuard no_grad;
  const double batch_loss = loss.item<double>();
  const double batch_correct = accuracy_ ? correct_of(m_.loss, logits, y) : 0;
  loss_sum_ += batch_loss * static_cast<double>(size);
  correct_ += batch_correct;
  seen_ += size;
  if (cbs_.empty()) return;
  Logs batch_logs{{"loss", batch_loss}};
  if (accuracy_) batch_logs["accuracy"] = batch_correct / static_cast<double>(size);
  for (auto& c : cbs_) c->on_train_batch_end(step, batch_logs);
}

void FitRun::put_epoch_metrics(Logs& logs) {
  logs["loss"] = loss_sum_ / static_cast<double>(seen_);
  if (accuracy_) logs["accuracy"] = correct_ / static_cast<double>(seen_);
  loss_sum_ = correct_ = 0;
  seen_ = 0;
}

void FitRun::end_epoch(int epoch, Logs logs, const std::optional<Evaluation>& validation) {
  if (validation) {
    logs["val_loss"] = validation->loss;
    if (accuracy_) logs["val_accuracy"] = validation->accuracy;
  }
  m_.epochs_done = epoch + 1;
  for (auto& c : cbs_) c->on_epoch_end(epoch, logs);
  history_.epochs.push_back(logs);
  last_logs_ = std::move(logs);
}

History FitRun::finish() {
  for (auto& c : cbs_) c->on_train_end(last_logs_);
  return std::move(history_);
}

EvaluateRun::EvaluateRun(const Model* model, const Model::Impl& m, const FitRun::Callbacks& cbs)
    : m_(m), cbs_(cbs), accuracy_(m.loss != LossKind::kMse) {  // Keras resolves none for mse
  for (auto& c : cbs_)
    if (!c->model()) c->set_model(const_cast<Model*>(model));
  for (auto& c : cbs_) c->on_test_begin({});
}

void EvaluateRun::begin_batch(std::int64_t batch) {
  for (auto& c : cbs_) c->on_test_batch_begin(batch, {});
}

void EvaluateRun::end_batch(std::int64_t batch, const torch::Tensor& logits, const torch::Tensor& y,
                            std::int64_t size) {
  const double l = loss_of(m_.loss, logits, y, /*sum=*/true).item<double>();
  const double k = accuracy_ ? correct_of(m_.loss, logits, y) : 0;
  loss_sum_ += l;
  correct_ += k;
  seen_ += size;
  if (cbs_.empty()) return;
  Logs bl{{"loss", l / static_cast<double>(size)}};
  if (accuracy_) bl["accuracy"] = k / static_cast<double>(size);
  for (auto& c : cbs_) c->on_test_batch_end(batch, bl);
}

Evaluation EvaluateRun::finish() {
  Evaluation ev;
  ev.loss = loss_sum_ / static_cast<double>(seen_);
  ev.accuracy = accuracy_ ? correct_ / static_cast<double>(seen_) : std::nan("");
  Logs end_logs{{"loss", ev.loss}};
  if (accuracy_) end_logs["accuracy"] = ev.accuracy;
  for (auto& c : cbs_) c->on_test_end(end_logs);
  return ev;
}
}  // namespace detail

}  // namespace tensorhub
