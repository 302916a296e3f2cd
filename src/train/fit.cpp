// fit / evaluate / predict: the training and inference loops.
//
// Speed notes (the loop is measured against PyTorch by bench/train_throughput.cpp):
// - the inputs are copied once into one contiguous torch tensor; every batch is gathered with
//   index_select_out into buffers allocated once per fit() call;
// - gradients are reset to undefined rather than zeroed, so backward() hands its fresh
//   gradient buffers to the parameters instead of adding them into zeroed ones;
// - evaluate/predict run under NoGradGuard on views of the caller's memory (no copy).
#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "model_impl.h"
#include "tensorhub/core/error.h"

namespace tensorhub::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Checks x against [n, input_shape...] F32 and returns n.
std::int64_t check_x(const Tensor& x, const std::string& what,
                     const std::vector<std::int64_t>& input_shape) {
  std::vector<std::int64_t> want = {x.shape.empty() ? 0 : x.shape[0]};
  want.insert(want.end(), input_shape.begin(), input_shape.end());
  if (x.dtype != DType::kF32)
    throw InvalidArgument(what + " has dtype " + dtype_name(x.dtype) + "; the model needs F32");
  if (x.shape.empty() || x.shape != want)
    throw InvalidArgument(what + " has shape " + shape_string(x.shape) + "; the model needs " +
                          "[n, " + shape_string(input_shape).substr(1));
  const std::int64_t numel = x.numel();
  if (numel < 0 || x.data.size() != static_cast<std::size_t>(numel) * sizeof(float))
    throw InvalidArgument(what + " holds " + std::to_string(x.data.size()) +
                          " bytes, which does not match its shape " + shape_string(x.shape));
  return x.shape[0];
}

// Checks y against I64 [n] with every label in [0, classes).
void check_y(const Tensor& y, const std::string& what, std::int64_t n, std::int64_t classes) {
  if (classes == 0)
    throw FailedPrecondition("this model has \"loss\": null: it is for inference only (predict); give it a loss to "
                             "fit or evaluate it");
  if (y.dtype != DType::kI64)
    throw InvalidArgument(what + " has dtype " + dtype_name(y.dtype) +
                          "; sparse_categorical_crossentropy needs I64 class indices");
  if (y.shape != std::vector<std::int64_t>{n})
    throw InvalidArgument(what + " has shape " + shape_string(y.shape) + "; expected [" +
                          std::to_string(n) + "], one class index per example");
  if (y.data.size() != static_cast<std::size_t>(n) * sizeof(std::int64_t))
    throw InvalidArgument(what + " holds " + std::to_string(y.data.size()) +
                          " bytes, which does not match its shape " + shape_string(y.shape));
  const std::int64_t* v = y.as<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i)
    if (v[i] < 0 || v[i] >= classes)
      throw InvalidArgument(what + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) +
                            " is not a class index in [0, " + std::to_string(classes) + ")");
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

std::string format_logs(const Logs& logs) {
  std::string s;
  char buf[64];
  // Keras's order: loss, metrics, then val_*.
  for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy"}) {
    auto it = logs.find(key);
    if (it == logs.end()) continue;
    std::snprintf(buf, sizeof buf, " - %s: %.4f", key, it->second);
    s += buf;
  }
  return s;
}

// Progress output of one epoch on stderr: a bar redrawn with '\r' on a terminal (verbose 1),
// otherwise (or with verbose 2) one line when the epoch ends.
class Progress {
 public:
  Progress(int verbose, int epoch, int epochs, std::int64_t steps)
      : bar_(verbose == 1 && ::isatty(2)), enabled_(verbose > 0), epoch_(epoch), epochs_(epochs),
        steps_(steps), start_(Clock::now()), last_draw_(start_) {}

  void update(std::int64_t step, double loss, double accuracy) {
    if (!bar_) return;
    const auto now = Clock::now();
    if (step < steps_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * step / std::max<std::int64_t>(steps_, 1));
    std::string bar(kWidth, '.');
    for (int i = 0; i < filled; ++i) bar[i] = '=';
    if (filled < kWidth) bar[filled] = '>';
    std::fprintf(stderr, "\rEpoch %d/%d %lld/%lld [%s] - loss: %.4f - accuracy: %.4f", epoch_ + 1,
                 epochs_, static_cast<long long>(step), static_cast<long long>(steps_),
                 bar.c_str(), loss, accuracy);
    std::fflush(stderr);
  }

  void end(const Logs& logs) {
    if (!enabled_) return;
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    std::fprintf(stderr, "%sEpoch %d/%d %lld/%lld - %.1fs%s\n", bar_ ? "\r\033[K" : "",
                 epoch_ + 1, epochs_, static_cast<long long>(steps_),
                 static_cast<long long>(steps_), s, format_logs(logs).c_str());
    std::fflush(stderr);
  }

 private:
  bool bar_, enabled_;
  int epoch_, epochs_;
  std::int64_t steps_;
  Clock::time_point start_, last_draw_;
};

}  // namespace

History Model::fit(const Tensor& x, const Tensor& y, const FitOptions& options,
                   const Tensor* x_val, const Tensor* y_val) {
  Impl& m = *impl_;
  if (options.batch_size < 1)
    throw InvalidArgument("batch_size = " + std::to_string(options.batch_size) +
                          " must be at least 1");
  if (options.epochs < 0 || options.initial_epoch < 0)
    throw InvalidArgument("epochs = " + std::to_string(options.epochs) + " and initial_epoch = " +
                          std::to_string(options.initial_epoch) + " must not be negative");
  const std::int64_t n = check_x(x, "x", m.input_shape);
  if (n == 0) throw InvalidArgument("x holds no examples; fit needs at least one");
  check_y(y, "y", n, m.num_classes);
  if ((x_val == nullptr) != (y_val == nullptr))
    throw InvalidArgument("validation data needs both x_val and y_val");
  if (x_val) {
    const std::int64_t n_val = check_x(*x_val, "x_val", m.input_shape);
    if (n_val == 0) throw InvalidArgument("x_val holds no examples; pass no validation data");
    check_y(*y_val, "y_val", n_val, m.num_classes);
  }

  if (options.verbose > 0) detail::warn_if_slow_blas();
  History history;
  try {
    // One contiguous copy of the inputs for the whole call; batches are gathered from it.
    const torch::Tensor X = view_of(x, torch::kFloat).clone();
    const torch::Tensor Y = view_of(y, torch::kLong).clone();
    const std::int64_t bs = std::min(options.batch_size, n);
    std::vector<std::int64_t> batch_shape = {bs};
    batch_shape.insert(batch_shape.end(), m.input_shape.begin(), m.input_shape.end());
    torch::Tensor x_buf = torch::empty(batch_shape, torch::kFloat);
    torch::Tensor y_buf = torch::empty({bs}, torch::kLong);

    // Shuffling and dropout use generators of their own, seeded from options.seed if given.
    std::uint64_t shuffle_seed = options.seed;
    if (shuffle_seed == 0)
      shuffle_seed = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
    else
      m.net->generator.set_current_seed(options.seed ^ 0x9e3779b97f4a7c15ull);
    torch::Generator shuffle_gen = at::make_generator<at::CPUGeneratorImpl>(shuffle_seed);
    const torch::Tensor order = torch::arange(n, torch::kLong);

    const auto params = m.net->parameters();
    const std::int64_t steps = (n + bs - 1) / bs;
    for (int epoch = options.initial_epoch; epoch < options.epochs; ++epoch) {
      Progress progress(options.verbose, epoch, options.epochs, steps);
      Logs logs;
      {
        ModeGuard mode(*m.net, /*training=*/true);
        const torch::Tensor perm =
            options.shuffle ? torch::randperm(n, shuffle_gen, torch::kLong) : order;
        double loss_sum = 0;
        std::int64_t correct = 0, seen = 0;
        for (std::int64_t step = 0; step < steps; ++step) {
          const std::int64_t start = step * bs, b = std::min(bs, n - start);
          const torch::Tensor idx = perm.narrow(0, start, b);
          torch::Tensor xb = x_buf.narrow(0, 0, b);
          torch::Tensor yb = y_buf.narrow(0, 0, b);
          at::index_select_out(xb, X, 0, idx);
          at::index_select_out(yb, Y, 0, idx);

          for (auto& p : params) p.mutable_grad().reset();
          const torch::Tensor logits = m.net->forward(xb, /*logits=*/true);
          const torch::Tensor loss = at::cross_entropy_loss(logits, yb);
          loss.backward();
          m.optimizer->step();

          torch::NoGradGuard no_grad;
          loss_sum += loss.item<double>() * static_cast<double>(b);
          correct += logits.argmax(1).eq(yb).sum().item<std::int64_t>();
          seen += b;
          progress.update(step + 1, loss_sum / static_cast<double>(seen),
                          static_cast<double>(correct) / static_cast<double>(seen));
        }
        logs["loss"] = loss_sum / static_cast<double>(n);
        logs["accuracy"] = static_cast<double>(correct) / static_cast<double>(n);
      }
      if (x_val) {
        const Evaluation ev = evaluate(*x_val, *y_val);
        logs["val_loss"] = ev.loss;
        logs["val_accuracy"] = ev.accuracy;
      }
      progress.end(logs);
      history.epochs.push_back(logs);
      if (options.on_epoch_end && !options.on_epoch_end(epoch, logs)) break;
    }
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::fit", e);
  }
  return history;
}

Evaluation Model::evaluate(const Tensor& x, const Tensor& y, std::int64_t batch_size) const {
  Impl& m = *impl_;
  if (batch_size < 1)
    throw InvalidArgument("batch_size = " + std::to_string(batch_size) + " must be at least 1");
  const std::int64_t n = check_x(x, "x", m.input_shape);
  if (n == 0) throw InvalidArgument("x holds no examples; evaluate needs at least one");
  check_y(y, "y", n, m.num_classes);
  Evaluation ev;
  try {
    torch::NoGradGuard no_grad;
    ModeGuard mode(*m.net, /*training=*/false);
    const torch::Tensor X = view_of(x, torch::kFloat);
    const torch::Tensor Y = view_of(y, torch::kLong);
    double loss_sum = 0;
    std::int64_t correct = 0;
    for (std::int64_t start = 0; start < n; start += batch_size) {
      const std::int64_t b = std::min(batch_size, n - start);
      const torch::Tensor yb = Y.narrow(0, start, b);
      const torch::Tensor logits = m.net->forward(X.narrow(0, start, b), /*logits=*/true);
      loss_sum += at::cross_entropy_loss(logits, yb, {}, at::Reduction::Sum).item<double>();
      correct += logits.argmax(1).eq(yb).sum().item<std::int64_t>();
    }
    ev.loss = loss_sum / static_cast<double>(n);
    ev.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::evaluate", e);
  }
  return ev;
}

Tensor Model::predict(const Tensor& x, std::int64_t batch_size) const {
  Impl& m = *impl_;
  if (batch_size < 1)
    throw InvalidArgument("batch_size = " + std::to_string(batch_size) + " must be at least 1");
  const std::int64_t n = check_x(x, "x", m.input_shape);
  Tensor out;
  out.dtype = DType::kF32;
  out.shape = {n};
  out.shape.insert(out.shape.end(), m.output_shape.begin(), m.output_shape.end());
  out.data.resize(static_cast<std::size_t>(out.numel()) * sizeof(float));
  if (n == 0) return out;
  try {
    torch::NoGradGuard no_grad;
    ModeGuard mode(*m.net, /*training=*/false);
    const torch::Tensor X = view_of(x, torch::kFloat);
    torch::Tensor Out = torch::from_blob(out.data.data(), out.shape, torch::kFloat);
    for (std::int64_t start = 0; start < n; start += batch_size) {
      const std::int64_t b = std::min(batch_size, n - start);
      Out.narrow(0, start, b).copy_(m.net->forward(X.narrow(0, start, b), /*logits=*/false));
    }
  } catch (const c10::Error& e) {
    detail::rethrow_torch_error("Model::predict", e);
  }
  return out;
}

}  // namespace tensorhub::train
