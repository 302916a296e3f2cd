// `tensorhub dataset save|fetch` and `model save|fetch` (issue 23, "the same doors for any
// language") as real processes: numpy's own .npz files (written by Debian's /usr/bin/python3
// with python3-numpy, stored and deflated), safetensors files, model directories, and bad
// input, each refused with a clear error and nothing saved. On SQLite and PostgreSQL.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

const std::string kPython = "/usr/bin/python3";

class SaveFetchTest : public BackendTest {
 protected:
  void set_up() override { uri = db_->uri(); }

  // Runs `tensorhub ARGS --hub uri --project p`; its exit code, output in output().
  int tensorhub(std::vector<std::string> args) {
    args.insert(args.begin(), kTensorhub);
    args.insert(args.end(), {"--hub", uri, "--project", "p"});
    return wait_exit(spawn(args, log_path()));
  }
  int python(const std::string& code) {
    return wait_exit(spawn({kPython, "-c", code}, log_path()));
  }
  std::string log_path() {
    std::filesystem::remove(dir / "out.log");
    return (dir / "out.log").string();
  }
  std::string output() { return read_text(dir / "out.log"); }
  bool has_numpy() { return python("import numpy") == 0; }

  std::string uri;
  TempDir dir;
};

std::vector<float> floats_of(const Tensor& t) { return {t.as<float>(), t.as<float>() + t.numel()}; }

TEST_P(SaveFetchTest, NumpysNpzFilesStoredAndDeflatedComeBackValueEqual) {
  if (!has_numpy()) GTEST_SKIP() << kPython << " has no numpy (scripts/setup --test installs python3-numpy)";
  const std::string arrays =
      "import numpy as np\n"
      "a = dict(X=np.arange(12, dtype=np.float32).reshape(3, 4) / 4, y=np.array([1, -2, 3], dtype=np.int64),\n"
      "         mask=np.array([True, False]), f=np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),\n"
      "         big=np.array([1.5, -2.25], dtype='>f8'), img=np.full((2, 2), 255, dtype=np.uint8),\n"
      "         empty=np.zeros((0, 3), dtype=np.float64))\n";
  ASSERT_EQ(python(arrays + "np.savez('" + (dir / "plain.npz").string() + "', **a)\n" + "np.savez_compressed('" +
                   (dir / "small.npz").string() + "', **a)\n"), 0) << output();
  for (const std::string name : {"plain", "small"}) {
    ASSERT_EQ(tensorhub({"dataset", "save", "--name", name, (dir / (name + ".npz")).string()}), 0) << output();
    EXPECT_NE(output().find("saved dataset " + name), std::string::npos) << output();
    EXPECT_NE(output().find("  X F32 [3, 4]"), std::string::npos) << output();
    const auto out = dir / (name + ".safetensors");
    ASSERT_EQ(tensorhub({"dataset", "fetch", "--name", name, "--output", out.string()}), 0) << output();
    const NamedTensors t = read_safetensors(out);
    ASSERT_EQ(t.size(), 7u);
    EXPECT_EQ(t.at("X").shape, (std::vector<std::int64_t>{3, 4}));
    EXPECT_EQ(floats_of(t.at("X")), (std::vector<float>{0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 2, 2.25, 2.5, 2.75}));
    EXPECT_EQ(t.at("y").dtype, DType::kI64);
    EXPECT_EQ(std::vector<std::int64_t>(t.at("y").as<std::int64_t>(), t.at("y").as<std::int64_t>() + 3),
              (std::vector<std::int64_t>{1, -2, 3}));
    EXPECT_EQ(t.at("mask").dtype, DType::kBool);
    EXPECT_EQ(t.at("mask").data, (std::vector<std::byte>{std::byte{1}, std::byte{0}}));
    // Fortran order and big-endian bytes are converted to the C-order little-endian tensor.
    EXPECT_EQ(std::vector<std::int32_t>(t.at("f").as<std::int32_t>(), t.at("f").as<std::int32_t>() + 6),
              (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(std::vector<double>(t.at("big").as<double>(), t.at("big").as<double>() + 2),
              (std::vector<double>{1.5, -2.25}));
    EXPECT_EQ(t.at("img").dtype, DType::kU8);
    EXPECT_EQ(t.at("empty").shape, (std::vector<std::int64_t>{0, 3}));
  }
  // The file's name is kept as the dataset's source tag.
  Hub hub(uri, "p");
  EXPECT_EQ(hub.find_datasets({{"dataset_name", "small"}})[0].tags["source"], "small.npz");
}

TEST_P(SaveFetchTest, ASafetensorsFileComesBackByteEqual) {
  NamedTensors tensors;
  tensors["X_train"] = Tensor::from<float>(DType::kF32, {2, 2}, {1, 2, 3, 4});
  tensors["y_train"] = Tensor::from<std::int64_t>(DType::kI64, {2}, {7, 9});
  const auto in = dir / "data.safetensors";
  write_safetensors(in, tensors);
  ASSERT_EQ(tensorhub({"dataset", "save", "--name", "d", in.string(), "--tags", R"({"version": 2})"}), 0) << output();
  const auto out = dir / "back.safetensors";
  ASSERT_EQ(tensorhub({"dataset", "fetch", "--name", "d", "--output", out.string()}), 0) << output();
  EXPECT_EQ(read_file_bytes(out), read_file_bytes(in));
  Hub hub(uri, "p");
  EXPECT_EQ(hub.find_top_dataset("d")->document.tags["version"], 2);
  EXPECT_EQ(tensorhub({"dataset", "fetch", "--name", "nope", "--output", out.string()}), 1);
  EXPECT_NE(output().find("no dataset \"nope\" in project \"p\""), std::string::npos) << output();
}

TEST_P(SaveFetchTest, AModelDirectoryRoundTrips) {
  const auto model = dir / "model";
  std::filesystem::create_directories(model);
  const Json arch = {{"layers", {{{"class_name", "Dense"}, {"config", {{"units", 2}}}}}}, {"input_shape", {3}}};
  std::ofstream(model / "model.json") << arch.dump(2);
  NamedTensors weights;
  weights["dense.weight"] = Tensor::from<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  weights["dense.bias"] = Tensor::from<float>(DType::kF32, {2}, {0.5, -0.5});
  write_safetensors(model / "weights.safetensors", weights);
  std::ofstream(model / "state.json") << R"({"epoch": 3, "step": 120})";
  ASSERT_EQ(tensorhub({"model", "save", "--model-name", "mlp", "--path", model.string(), "--tags",
                       R"({"test_accuracy": 0.875})"}), 0) << output();
  EXPECT_NE(output().find("saved model mlp"), std::string::npos) << output();

  Hub hub(uri, "p");
  const auto best = hub.find_top_model("mlp", {}, {{"test_accuracy", -1}});
  ASSERT_TRUE(best);
  EXPECT_EQ(best->document.tags["test_accuracy"], 0.875);
  EXPECT_EQ(best->architecture, arch);

  const auto back = dir / "back";
  ASSERT_EQ(tensorhub({"model", "fetch", "--model-name", "mlp", "--output", back.string()}), 0) << output();
  EXPECT_EQ(Json::parse(read_text(back / "model.json")), arch);
  EXPECT_EQ(read_file_bytes(back / "weights.safetensors"), read_file_bytes(model / "weights.safetensors"));
  EXPECT_EQ(read_text(back / "state.json"), R"({"epoch": 3, "step": 120})");
  EXPECT_FALSE(std::filesystem::exists(back / "optimizer.safetensors"));
  // What fetch wrote, save reads again.
  ASSERT_EQ(tensorhub({"model", "save", "--model-name", "mlp", "--path", back.string()}), 0) << output();
  EXPECT_EQ(hub.find_models({{"model_name", "mlp"}}).size(), 2u);
}

TEST_P(SaveFetchTest, ATorchScriptFileRoundTripsByteEqual) {
  if (python("import torch") != 0) GTEST_SKIP() << kPython << " has no torch (python3-torch)";
  const auto pt = dir / "scaled.pt";
  // A file, not `python -c`: torch.jit.script reads the module's source.
  std::ofstream(dir / "export.py") << "import sys, torch\n"
                                      "class M(torch.nn.Module):\n"
                                      "    def forward(self, x):\n"
                                      "        return x * 3.0 - 1.0\n"
                                      "torch.jit.save(torch.jit.script(M()), sys.argv[1])\n";
  ASSERT_EQ(wait_exit(spawn({kPython, (dir / "export.py").string(), pt.string()}, log_path())), 0) << output();
  ASSERT_EQ(tensorhub({"model", "save", "--model-name", "ts", "--path", pt.string(), "--tags", R"({"version": 1})"}),
            0) << output();
  EXPECT_NE(output().find("saved model ts"), std::string::npos) << output();
  EXPECT_NE(output().find("0 weight tensor(s), a TorchScript module"), std::string::npos) << output();
  Hub hub(uri, "p");
  const auto stored = hub.find_top_model("ts");
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->architecture, Json({{"format", "torchscript"}}));
  EXPECT_EQ(stored->document.parts.count("model.pt"), 1u);
  EXPECT_EQ(stored->document.tags["version"], 1);

  const auto back = dir / "back";
  ASSERT_EQ(tensorhub({"model", "fetch", "--model-name", "ts", "--output", back.string()}), 0) << output();
  EXPECT_EQ(read_file_bytes(back / "model.pt"), read_file_bytes(pt));
  EXPECT_FALSE(std::filesystem::exists(back / "model.json"));  // the module is the whole model
  // What fetch wrote, save reads again.
  ASSERT_EQ(tensorhub({"model", "save", "--model-name", "ts", "--path", (back / "model.pt").string()}), 0) << output();
  EXPECT_EQ(hub.find_models({{"model_name", "ts"}}).size(), 2u);
}

TEST_P(SaveFetchTest, BadInputIsRefusedClearlyAndNothingIsSaved) {
  // A missing file, a truncated safetensors file, a file of another kind.
  EXPECT_EQ(tensorhub({"dataset", "save", "--name", "d", (dir / "none.npz").string()}), 1);
  EXPECT_NE(output().find((dir / "none.npz").string() + " does not exist"), std::string::npos) << output();
  NamedTensors tensors;
  tensors["x"] = Tensor::from<float>(DType::kF32, {4}, {1, 2, 3, 4});
  auto bytes = to_safetensors(tensors);
  bytes.resize(bytes.size() - 3);
  write_file_bytes(dir / "cut.safetensors", bytes);
  EXPECT_EQ(tensorhub({"dataset", "save", "--name", "d", (dir / "cut.safetensors").string()}), 1);
  EXPECT_NE(output().find("cut.safetensors"), std::string::npos) << output();
  EXPECT_EQ(tensorhub({"dataset", "save", "--name", "d", (dir / "cut.csv").string()}), 1) << output();
  if (has_numpy()) {
    // An object array: numpy pickles it; tensorhub never unpickles.
    ASSERT_EQ(python("import numpy as np\nnp.savez('" + (dir / "obj.npz").string() +
                     "', ok=np.zeros(2), o=np.array([{'a': 1}, None], dtype=object))"), 0) << output();
    EXPECT_EQ(tensorhub({"dataset", "save", "--name", "d", (dir / "obj.npz").string()}), 1);
    EXPECT_NE(output().find("o.npy is an object array (dtype |O), which numpy stores with pickle; tensorhub never "
                            "unpickles"), std::string::npos) << output();
    ASSERT_EQ(python("import numpy as np\nnp.savez('" + (dir / "half.npz").string() + "', h=np.zeros(2, np.float16))"),
              0);
    EXPECT_EQ(tensorhub({"dataset", "save", "--name", "d", (dir / "half.npz").string()}), 1);
    EXPECT_NE(output().find("has dtype <f2, which a hub dataset cannot hold"), std::string::npos) << output();
  }
  // A directory that is not a model directory: a TorchScript file only; one without weights.
  const auto ts = dir / "torchscript";
  std::filesystem::create_directories(ts);
  std::ofstream(ts / "model.pt") << "not really";
  EXPECT_EQ(tensorhub({"model", "save", "--model-name", "m", "--path", ts.string()}), 1);
  EXPECT_NE(output().find("unknown model directory layout: " + ts.string() + " holds model.pt; a model directory "
                          "holds model.json and weights.safetensors"), std::string::npos) << output();
  EXPECT_NE(output().find("(to store a TorchScript module on its own, give the file: --path " +
                          (ts / "model.pt").string() + ")"), std::string::npos) << output();
  // That file itself: not a zip archive, so not what torch.jit.save writes.
  EXPECT_EQ(tensorhub({"model", "save", "--model-name", "m", "--path", (ts / "model.pt").string()}), 1);
  EXPECT_NE(output().find((ts / "model.pt").string() + " is not a TorchScript file: a model.pt written by "
                          "torch.jit.save is a zip archive (it starts with PK\\x03\\x04)"), std::string::npos)
      << output();
  const auto half = dir / "half";
  std::filesystem::create_directories(half);
  std::ofstream(half / "model.json") << "{}";
  write_file_bytes(half / "weights.safetensors", bytes);  // truncated
  EXPECT_EQ(tensorhub({"model", "save", "--model-name", "m", "--path", half.string()}), 1);
  EXPECT_NE(output().find("weights.safetensors"), std::string::npos) << output();

  Hub hub(uri, "p");
  EXPECT_TRUE(hub.find_datasets().empty());
  EXPECT_TRUE(hub.find_models().empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, SaveFetchTest, ::testing::ValuesIn(backend_params()), backend_param_name);

}  // namespace
}  // namespace tensorhub
