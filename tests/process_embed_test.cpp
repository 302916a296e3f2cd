// `tensorhub embed` as a real process (issue 24): a hub model's layer outputs on a hub
// dataset's first examples, written as TensorBoard projector files and read back with
// read_projector (which refuses what TensorBoard's projector would). The expected activations
// are computed here from the weights the test chose; bad input is refused with a clear error
// and writes nothing. On SQLite and PostgreSQL.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/summary/event_file_reader.h"
#include "tensorhub/summary/projector.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

class EmbedTest : public BackendTest {
 protected:
  void set_up() override { uri = db_->uri(); }

  int tensorhub(std::vector<std::string> args) {
    args.insert(args.begin(), kTensorhub);
    args.insert(args.end(), {"--hub", uri, "--project", "p"});
    std::filesystem::remove(dir / "out.log");
    return wait_exit(spawn(args, (dir / "out.log").string()));
  }
  std::string output() { return read_text(dir / "out.log"); }

  // A 2 x 2 image classifier (flat rows of 4 pixels): Dense(3, relu) "hidden" -> Dense(2).
  // hidden = relu(x W^T + b), W [3, 4] (torch's layout) as below.
  std::int64_t save_model(Hub& hub) {
    const Json arch{{"name", "tiny"},
                    {"input_shape", {4}},
                    {"layers",
                     {{{"type", "Dense"}, {"name", "hidden"}, {"units", 3}, {"activation", "relu"}},
                      {{"type", "Dense"}, {"name", "out"}, {"units", 2}}}},
                    {"loss", "sparse_categorical_crossentropy"},
                    {"optimizer", {{"type", "Adam"}}}};
    NamedTensors w;
    w["hidden.weight"] = Tensor::from<float>(DType::kF32, {3, 4}, kW);
    w["hidden.bias"] = Tensor::from<float>(DType::kF32, {3}, kB);
    w["out.weight"] = Tensor::from<float>(DType::kF32, {2, 3}, std::vector<float>{1, 0, 0, 0, 1, 0});
    w["out.bias"] = Tensor::from<float>(DType::kF32, {2}, std::vector<float>{0, 0});
    return hub.save_model(arch, w, "tiny", {{"test_accuracy", 0.5}});
  }
  // Five images of 2 x 2 pixels in [0, 1] (image i: pixels (i + p) / 8), labels 0 1 2 0 1.
  void save_dataset(Hub& hub, const Json& tags) {
    std::vector<float> x;
    for (int i = 0; i < 5; ++i)
      for (int p = 0; p < 4; ++p) x.push_back(static_cast<float>(i + p) / 8.0f);
    NamedTensors t;
    t["X_test"] = Tensor::from<float>(DType::kF32, {5, 4}, x);
    t["y_test"] = Tensor::from<std::int64_t>(DType::kI64, {5}, std::vector<std::int64_t>{0, 1, 2, 0, 1});
    hub.save_dataset(t, "pictures", tags);
  }
  float expected_hidden(int example, int unit) const {
    double s = kB[unit];
    for (int p = 0; p < 4; ++p) s += kW[unit * 4 + p] * (static_cast<double>(example + p) / 8.0);
    return static_cast<float>(std::max(0.0, s));
  }

  const std::vector<float> kW{1, -1, 0.5f, 2, -2, 0.25f, 1, 0, 0.5f, 0.5f, -0.5f, -3};
  const std::vector<float> kB{0.1f, -0.2f, 0.3f};
  std::string uri;
  TempDir dir;
};

TEST_P(EmbedTest, WritesALayersOutputsWithLabelsClassNamesAndASprite) {
  std::int64_t id = 0;
  {
    Hub hub(uri, "p");
    id = save_model(hub);
    save_dataset(hub, {{"image_shape", {2, 2}}, {"class_names", {"cat", "dog", "owl"}}});
  }
  const auto logdir = dir / "run";
  ASSERT_EQ(tensorhub({"embed", "--model", std::to_string(id), "--dataset", "pictures", "--layer", "hidden", "-n", "4",
                       "--logdir", logdir.string()}), 0) << output();
  EXPECT_NE(output().find("wrote 4 x 3 activations of layer \"hidden\""), std::string::npos) << output();

  const auto embeddings = read_projector(logdir / kProjectorConfigFile);
  ASSERT_EQ(embeddings.size(), 1u);
  const auto& e = embeddings[0];
  EXPECT_EQ(e.info.tensor_shape, (std::vector<std::uint32_t>{4, 3}));
  ASSERT_EQ(e.tensor.rows, 4);
  ASSERT_EQ(e.tensor.cols, 3);
  for (int i = 0; i < 4; ++i)
    for (int u = 0; u < 3; ++u) EXPECT_NEAR(e.tensor.values[i * 3 + u], expected_hidden(i, u), 1e-6) << i << "," << u;
  ASSERT_TRUE(e.metadata);
  EXPECT_EQ(e.metadata->columns, (std::vector<std::string>{"label", "class"}));
  EXPECT_EQ(e.metadata->rows, (std::vector<std::vector<std::string>>{{"0", "cat"}, {"1", "dog"}, {"2", "owl"}, {"0", "cat"}}));
  // Four 2 x 2 images in a 2 x 2 grid; image 1 (pixels (1 + p) / 8 * 255) is the top right cell.
  ASSERT_TRUE(e.sprite);
  EXPECT_EQ(e.info.sprite->single_image_width, 2u);
  EXPECT_EQ(e.sprite->width, 4);
  EXPECT_EQ(e.sprite->height, 4);
  EXPECT_EQ(e.sprite->pixels[0 * 4 + 2], std::lround(1 / 8.0 * 255));
  EXPECT_EQ(e.sprite->pixels[1 * 4 + 3], std::lround(4 / 8.0 * 255));

  // An event file makes the directory a TensorBoard run, so `tensorboard --logdir` of its
  // parent finds the projector too.
  EXPECT_EQ(find_event_runs(dir.path()), (std::vector<std::string>{"run"}));

  // A second layer joins the same config; the first stays.
  ASSERT_EQ(tensorhub({"embed", "--model", std::to_string(id), "--dataset", "pictures", "--layer", "out",
                       "--logdir", logdir.string()}), 0) << output();
  const auto both = read_projector(logdir / kProjectorConfigFile);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[1].tensor.rows, 5) << "-n 2000 takes all five examples";
}

TEST_P(EmbedTest, BadInputIsRefusedWithWhatToDoAndWritesNothing) {
  std::int64_t id = 0;
  {
    Hub hub(uri, "p");
    id = save_model(hub);
    save_dataset(hub, Json::object());
  }
  const auto logdir = dir / "bad";
  const std::vector<std::string> base{"embed", "--model", std::to_string(id), "--dataset", "pictures",
                                      "--logdir", logdir.string()};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  EXPECT_EQ(tensorhub(with({"--layer", "hiden"})), 1);
  EXPECT_NE(output().find("hidden"), std::string::npos) << "lists the model's layers: " << output();
  EXPECT_EQ(tensorhub(with({"--layer", "hidden", "--x", "X_train"})), 2);
  EXPECT_NE(output().find("has no such tensor; it has X_test [5, 4], y_test [5]"), std::string::npos) << output();
  for (const std::string shape : {"3,3", "2", "2,2,2", "2,2,1,1"}) {
    EXPECT_EQ(tensorhub(with({"--layer", "hidden", "--image-shape", shape})), 2) << shape;
    EXPECT_NE(output().find("--image-shape " + shape + " is not H,W or H,W,C"), std::string::npos) << output();
  }
  EXPECT_EQ(tensorhub(with({"--layer", "hidden", "--y", "X_test", "--x", "X_test"})), 1);  // [5, 4]: not one label each
  EXPECT_NE(output().find("not one per example"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"embed", "--model", "999", "--dataset", "pictures", "--layer", "hidden", "--logdir",
                       logdir.string()}), 1);
  EXPECT_NE(output().find("no model with id 999"), std::string::npos) << output();
  EXPECT_FALSE(std::filesystem::exists(logdir / kProjectorConfigFile));
}

INSTANTIATE_TEST_SUITE_P(Backends, EmbedTest, ::testing::ValuesIn(backend_params()), backend_param_name);

}  // namespace
}  // namespace tensorhub
