// The seed of the Try-a-model view: two small models really trained on Fashion-MNIST (Debian's
// dataset-fashion-mnist), in project "try" of the seeded hub so that the other views' counts
// and leaderboards (project "p") stay as their tests expect:
//  - "fashion_mlp": the demo's kind of model, input [784] scaled to [0, 1] (as the demo's
//    dataset import scales it), 10 logits out (no softmax: the page applies one);
//  - "fashion_u8": input [28, 28, 1] of raw bytes 0..255, a Rescaling(1/255) layer first and a
//    softmax last (the page then sends 0..255 and shows the outputs as they are).
// Both tag the ten Fashion-MNIST class names (class_names), as the demo's models do.
#include "seed.h"

#include "tensorhub/data/idx.h"
#include "tensorhub/train/model.h"

namespace tensorhub::testing {
namespace {

constexpr std::int64_t kTrainImages = 6000;  // enough for ~80% test accuracy in a second or two

Json class_names() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
}

// Rows [begin, end) of a [n, ...] float tensor, reshaped to `shape` per row, times `scale`.
Tensor rows(const Tensor& x, std::int64_t end, std::vector<std::int64_t> shape, float scale) {
  const std::int64_t per_row = x.numel() / x.shape[0];
  std::vector<float> values(x.as<float>(), x.as<float>() + end * per_row);
  for (float& v : values) v *= scale;
  shape.insert(shape.begin(), end);
  return Tensor::from<float>(DType::kF32, shape, values);
}

Tensor labels(const Tensor& y, std::int64_t end) {
  return Tensor::from<std::int64_t>(DType::kI64, {end}, std::vector<std::int64_t>(y.as<std::int64_t>(), y.as<std::int64_t>() + end));
}

// Trains `config` on the first kTrainImages training images (their pixels times `scale`, in
// `shape`) and saves it as `name` in `hub` with its test accuracy and the class names.
std::int64_t train_and_save(Hub& hub, const MnistSplits& data, const Json& config, const std::string& name,
                            std::vector<std::int64_t> shape, float scale) {
  Model model = Model::from_config(config);
  FitOptions fit;
  fit.epochs = 3;
  fit.batch_size = 64;
  fit.seed = 7;
  fit.verbose = 0;
  model.fit(rows(data.X_train, kTrainImages, shape, scale), labels(data.y_train, kTrainImages), fit);
  const std::int64_t n_test = data.X_test.shape[0];
  const auto test = model.evaluate(rows(data.X_test, n_test, shape, scale), labels(data.y_test, n_test));
  return hub.save_model(model.config(), model.weights(), name,
                        {{"class_names", class_names()}, {"dataset", "fashion-mnist"},
                         {"test_accuracy", test.accuracy}, {"train_images", kTrainImages}});
}

}  // namespace

Json seed_try(Hub& hub, const std::filesystem::path&) {
  Hub try_hub(hub.uri(), "try");
  const MnistSplits data = load_mnist_dataset(default_mnist_dir(), 50000);
  const Json mlp = {{"name", "fashion_mlp"},
                    {"seed", 1},
                    {"input_shape", {784}},
                    {"layers", {{{"type", "Dense"}, {"units", 64}, {"activation", "relu"}},
                                {{"type", "Dense"}, {"units", 10}}}},
                    {"loss", "sparse_categorical_crossentropy"},
                    {"metrics", {"accuracy"}},
                    {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.002}}}};
  const Json u8 = {{"name", "fashion_u8"},
                   {"seed", 1},
                   {"input_shape", {28, 28, 1}},
                   {"layers", {{{"type", "Rescaling"}, {"scale", 1.0 / 255}},
                               {{"type", "Flatten"}},
                               {{"type", "Dense"}, {"units", 10}, {"activation", "softmax"}}}},
                   {"loss", "sparse_categorical_crossentropy"},
                   {"metrics", {"accuracy"}},
                   {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.002}}}};
  Json ids;
  ids["try_project"] = "try";
  ids["try_mlp"] = train_and_save(try_hub, data, mlp, "fashion_mlp", {784}, 1.0f);
  ids["try_u8"] = train_and_save(try_hub, data, u8, "fashion_u8", {28, 28, 1}, 255.0f);
  return ids;
}

}  // namespace tensorhub::testing
