// Model::fit and Model::evaluate over a Dataset (model.h): batches of named tensors, with
// Keras's steps_per_epoch and validation_steps (tf.keras's DataHandler rules).
//
// A batch reaches libtorch without a copy when its tensors already have the dtype the model
// needs (torch::from_blob on the batch's own bytes, which the Batch keeps alive until its step
// is done); another dtype takes one vectorised conversion (torch's Tensor::to).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "fit_internal.h"

#include "tensorhub/core/error.h"
#include "tensorhub/core/log.h"
#include "tensorhub/data/dataset.h"
#include "tensorhub/train/callbacks.h"

namespace tensorhub {
namespace {

using detail::LossKind;
using Callbacks = std::vector<std::shared_ptr<Callback>>;

torch::ScalarType torch_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return torch::kFloat;
    case DType::kF64: return torch::kDouble;
    case DType::kI64: return torch::kLong;
    case DType::kI32: return torch::kInt;
    case DType::kU8: return torch::kByte;
    case DType::kI8: return torch::kChar;
    case DType::kBool: return torch::kBool;
  }
  throw Internal("unknown dtype");
}

bool is_integer(DType d) {
  return d == DType::kI64 || d == DType::kI32 || d == DType::kU8 || d == DType::kI8;
}

// Where a batch came from, for messages: "batch 3 of epoch 2" / "batch 3 of the evaluation".
struct BatchPlace {
  std::int64_t batch = 0;
  int epoch = -1;  // -1: evaluation
  std::string str() const {
    return "batch " + std::to_string(batch) +
           (epoch >= 0 ? " of epoch " + std::to_string(epoch + 1) : std::string(" of the evaluation"));
  }
};

// One batch as torch tensors: x F32 [b, input_shape...], y as the loss consumes it.
// `element` owns the bytes the views point into.
struct Batch {
  NamedTensors element;
  torch::Tensor x, y;
  std::int64_t size = 0;
};

const Tensor& tensor_named(const NamedTensors& e, const std::string& key, const char* option,
                           const BatchPlace& place) {
  auto it = e.find(key);
  if (it != e.end()) return it->second;
  std::string names;
  for (const auto& [k, v] : e) names += (names.empty() ? "\"" : ", \"") + k + "\"";
  throw InvalidArgument(place.str() + " has no tensor \"" + key + "\" (FitOptions::" + option +
                        "); it has: " + (names.empty() ? "none" : names));
}

// A torch view of `t`'s bytes (no copy), after checking that their count fits its shape.
torch::Tensor view_of(const Tensor& t, const std::string& what) {
  const std::int64_t numel = t.numel();
  if (numel < 0 || t.data.size() != static_cast<std::size_t>(numel) * dtype_size(t.dtype))
    throw InvalidArgument(what + " holds " + std::to_string(t.data.size()) +
                          " bytes, which does not match its shape " + shape_to_string(t.shape));
  return torch::from_blob(const_cast<std::byte*>(t.data.data()), t.shape, torch_type(t.dtype));
}

torch::Tensor inputs_of(const Tensor& x, const std::string& what, const Model::Impl& m) {
  std::vector<std::int64_t> want = {x.shape.empty() ? 0 : x.shape[0]};
  want.insert(want.end(), m.input_shape.begin(), m.input_shape.end());
  if (x.shape.empty() || x.shape != want) {
    // One dimension short: the elements are single examples, not batches. Otherwise the data
    // and the model's input_shape disagree.
    const bool unbatched = x.shape.size() == m.input_shape.size() &&
                           std::equal(x.shape.begin(), x.shape.end(), m.input_shape.begin());
    throw InvalidArgument(what + " has shape " + shape_to_string(x.shape) + "; the model needs [batch, " +
                          shape_to_string(m.input_shape).substr(1) +
                          (unbatched ? " (batch the dataset with .batch(n))"
                                     : " (the model's input_shape " + shape_to_string(m.input_shape) +
                                           " does not fit the data: change input_shape, or reshape the data)"));
  }
  if (x.dtype == DType::kBool) throw InvalidArgument(what + " has dtype BOOL; the model needs numbers");
  const torch::Tensor v = view_of(x, what);
  return x.dtype == DType::kF32 ? v : v.to(torch::kFloat);
}

torch::Tensor targets_of(const Tensor& y, const std::string& what, std::int64_t n, const Model::Impl& m) {
  const bool sparse = m.loss == LossKind::kSparseCategoricalCrossentropy;
  const std::vector<std::int64_t> want = detail::loss_target_shape(m, n);
  // binary_crossentropy with one output also takes labels [n] (Keras's y of shape (n,)).
  const bool flat_binary = m.loss == LossKind::kBinaryCrossentropy && want.size() == 2 && want[1] == 1 &&
                           y.shape == std::vector<std::int64_t>{n};
  const std::string loss = detail::loss_name(m.loss);
  if (y.shape != want && !flat_binary)
    throw InvalidArgument(what + " has shape " + shape_to_string(y.shape) + "; " + loss + " needs " +
                          shape_to_string(want) + " for a batch of " + std::to_string(n) +
                          (sparse ? ", one class index per example" : ""));
  const torch::Tensor v = view_of(y, what);
  if (sparse) {
    if (!is_integer(y.dtype))
      throw InvalidArgument(what + " has dtype " + dtype_name(y.dtype) + "; " + loss +
                            " needs integer class indices (I64, I32, U8, ...)");
    torch::Tensor t = y.dtype == DType::kI64 ? v : v.to(torch::kLong);
    const torch::Tensor bad = (t < 0).logical_or(t >= m.num_classes).nonzero();
    if (bad.numel() > 0) {
      const std::int64_t i = bad[0][0].item<std::int64_t>();
      throw InvalidArgument(what + "[" + std::to_string(i) + "] = " + std::to_string(t[i].item<std::int64_t>()) +
                            " is not a class index in [0, " + std::to_string(m.num_classes) + ")");
    }
    return t;
  }
  if (y.dtype == DType::kBool) throw InvalidArgument(what + " has dtype BOOL; " + loss + " needs F32 targets");
  torch::Tensor t = y.dtype == DType::kF32 ? v : v.to(torch::kFloat);
  if (flat_binary) t = t.view({n, 1});
  const bool binary = m.loss == LossKind::kBinaryCrossentropy;
  const torch::Tensor ok = binary ? t.ge(0).logical_and(t.le(1)) : torch::isfinite(t);
  if (!ok.all().item<bool>())
    throw InvalidArgument(what + " holds " + (binary ? "a value outside [0, 1]; binary labels must lie in it"
                                                     : "a value that is not finite"));
  return t;
}

Batch to_batch(NamedTensors element, const std::string& x_key, const std::string& y_key, const Model::Impl& m,
               const BatchPlace& place) {
  Batch b;
  b.element = std::move(element);
  const Tensor& x = tensor_named(b.element, x_key, "x_key", place);
  const Tensor& y = tensor_named(b.element, y_key, "y_key", place);
  const std::string where = place.str() + " \"";
  b.x = inputs_of(x, where + x_key + "\"", m);
  b.size = x.shape[0];
  if (b.size == 0) throw InvalidArgument(place.str() + " holds no examples");
  b.y = targets_of(y, where + y_key + "\"", b.size, m);
  return b;
}

void require_loss(const Model::Impl& m) {
  if (m.loss == LossKind::kNone)
    throw FailedPrecondition("this model has \"loss\": null: it is for inference only (predict); give it a loss "
                             "to fit or evaluate it");
}

// The training passes over the dataset, by tf.keras's DataHandler rules: with steps_per_epoch
// 0 every epoch is a new pass; with N > 0 one pass continues across epochs, except that a
// pass found to hold exactly N batches is restarted at every epoch (Keras recreates the
// iterator when the dataset's cardinality equals steps_per_epoch).
class EpochBatches {
 public:
  EpochBatches(const Dataset& dataset, std::int64_t steps_per_epoch) : dataset_(dataset), steps_(steps_per_epoch) {}

  // The first batch of the next epoch, or nothing when the data ran out.
  std::optional<NamedTensors> first_of_epoch() {
    if (!pass_ || steps_ == 0) start_pass();
    std::optional<NamedTensors> e = pass_->next();
    if (!e && steps_ > 0 && in_pass_ == steps_) {
      start_pass();
      e = pass_->next();
    }
    if (e) ++in_pass_;
    return e;
  }

  std::optional<NamedTensors> next() {
    std::optional<NamedTensors> e = pass_->next();
    if (e) ++in_pass_;
    return e;
  }

 private:
  void start_pass() {
    pass_.reset();  // stops the previous pass's threads first
    pass_.emplace(dataset_.iterator());
    in_pass_ = 0;
  }

  const Dataset& dataset_;
  const std::int64_t steps_;
  std::optional<DatasetIterator> pass_;
  std::int64_t in_pass_ = 0;
};

// tf.keras's DataHandler refuses an infinite dataset without a step count (it would never end
// an epoch); `what` names the dataset and `steps_option` the option that bounds it.
void require_finite(const Dataset& dataset, std::int64_t steps, const char* what, const char* steps_option) {
  if (steps > 0 || dataset.cardinality() != Dataset::kInfiniteCardinality) return;
  throw InvalidArgument(std::string(what) + " is infinite (a repeat() without a count) and " + steps_option +
                        " is 0, so an epoch would never end: set " + steps_option +
                        " to the number of batches per epoch, or repeat() it a number of times");
}

void warn_out_of_data(const FitOptions& options, std::int64_t steps) {
  if (options.verbose <= 0) return;
  log_warning(fmt::format(
      "Your input ran out of data; interrupting training. Make sure that your dataset can generate at least "
      "`steps_per_epoch * epochs` batches (in this case, {} batches). You may need to use the repeat() function "
      "when building your dataset.",
      steps * (options.epochs - options.initial_epoch)));
}

}  // namespace

History Model::fit(const Dataset& dataset, const FitOptions& options, const Dataset* validation_data) {
  Impl& m = *impl_;
  require_loss(m);
  if (options.epochs < 0 || options.initial_epoch < 0)
    throw InvalidArgument("epochs = " + std::to_string(options.epochs) + " and initial_epoch = " +
                          std::to_string(options.initial_epoch) + " must not be negative");
  if (options.steps_per_epoch < 0 || options.validation_steps < 0)
    throw InvalidArgument("steps_per_epoch = " + std::to_string(options.steps_per_epoch) +
                          " and validation_steps = " + std::to_string(options.validation_steps) +
                          " must not be negative (0: until the dataset ends)");
  require_finite(dataset, options.steps_per_epoch, "fit: the dataset", "steps_per_epoch");
  if (validation_data) require_finite(*validation_data, options.validation_steps, "fit: validation_data", "validation_steps");
  // steps 0: unknown until the first pass ends, unless the dataset knows its length (Keras's
  // inferred_steps) and the progress bar can show it from the start.
  const std::int64_t known = dataset.cardinality();
  CallbackParams params{options.epochs, options.steps_per_epoch > 0 ? options.steps_per_epoch : std::max<std::int64_t>(known, 0),
                        options.verbose};
  detail::FitRun run(this, m, options, params);
  const Callbacks& cbs = run.callbacks();
  const LossKind loss_kind = m.loss;
  EpochBatches batches(dataset, options.steps_per_epoch);
  try {
    const auto params_list = m.net->parameters();
    for (int epoch = run.first_epoch(); epoch < options.epochs; ++epoch) {
      if (options.seed != 0) m.net->generator.set_current_seed(detail::fit_epoch_seed(options.seed, epoch, 2));
      for (auto& c : cbs) c->on_epoch_begin(epoch, {});
      std::optional<NamedTensors> element = batches.first_of_epoch();
      if (!element) {
        if (epoch == run.first_epoch())
          throw InvalidArgument("fit: the dataset yielded no batch in the first epoch (an empty dataset, or one "
                                "that ran out: repeat() it or lower steps_per_epoch)");
        warn_out_of_data(options, params.steps);
        break;
      }
      Logs logs;
      std::int64_t step = 0;
      {
        detail::TrainingMode mode(*m.net, /*training=*/true);
        while (element) {
          run.begin_batch(step);
          const Batch b = to_batch(std::move(*element), options.x_key, options.y_key, m, {step, epoch});
          for (auto& p : params_list) p.mutable_grad().reset();
          const torch::Tensor logits = m.net->forward(b.x, /*logits=*/true);
          const torch::Tensor loss = detail::batch_loss(loss_kind, logits, b.y, /*sum=*/false);
          run.end_batch(step, loss, logits, b.y, b.size);
          ++step;
          if (m.stop_training || step == options.steps_per_epoch) break;
          element = batches.next();
        }
        run.put_epoch_metrics(logs);
      }
      const bool ran_out = options.steps_per_epoch > 0 && step < options.steps_per_epoch && !m.stop_training;
      if (params.steps == 0 && !m.stop_training) {  // a whole pass: now the progress bar knows its length
        params.steps = step;
        for (auto& c : cbs) c->set_params(params);
      }
      std::optional<Evaluation> validation;
      if (validation_data)
        validation = evaluate(*validation_data, {options.validation_steps, options.x_key, options.y_key, cbs});
      run.end_epoch(epoch, std::move(logs), validation);
      if (ran_out) warn_out_of_data(options, params.steps);
      if (m.stop_training || ran_out) break;
    }
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::fit", e);
  }
  return run.finish();
}

Evaluation Model::evaluate(const Dataset& dataset, const EvaluateOptions& options) const {
  Impl& m = *impl_;
  require_loss(m);
  if (options.steps < 0)
    throw InvalidArgument("steps = " + std::to_string(options.steps) +
                          " must not be negative (0: until the dataset ends)");
  require_finite(dataset, options.steps, "evaluate: the dataset", "steps");
  try {
    torch::NoGradGuard no_grad;
    detail::TrainingMode mode(*m.net, /*training=*/false);
    detail::EvaluateRun run(this, m, options.callbacks);
    DatasetIterator pass = dataset.iterator();
    for (std::int64_t batch = 0; options.steps == 0 || batch < options.steps; ++batch) {
      std::optional<NamedTensors> element = pass.next();
      if (!element) break;
      run.begin_batch(batch);
      const Batch b = to_batch(std::move(*element), options.x_key, options.y_key, m, {batch, -1});
      const torch::Tensor logits = m.net->forward(b.x, /*logits=*/true);
      run.end_batch(batch, logits, b.y, b.size);
    }
    if (run.seen() == 0) throw InvalidArgument("evaluate: the dataset yielded no batch");
    return run.finish();
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::evaluate", e);
  }
}

}  // namespace tensorhub
