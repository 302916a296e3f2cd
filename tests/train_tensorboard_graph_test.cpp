// The TensorBoard callback's graph (write_graph) and projector files (embeddings_freq,
// embeddings_metadata): model.json -> Keras's to_json() checked field by field against what
// Keras 2.x writes for the same layers, the graph summary read back from the event file, and
// the projector files read back with projector.h and compared to the model's weights.
// tests/python/test_tensorboard.py has TensorBoard itself read the same files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tensorhub/core/error.h"
#include "tensorhub/core/log.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/summary/event_file_reader.h"
#include "tensorhub/summary/projector.h"
#include "tensorhub/train/callbacks.h"
#include "tensorhub/train/keras_model_json.h"
#include "tensorhub/tf/event.pb.h"
#include "tensorhub/tf/graph.pb.h"
#include "test_util.h"
#include "train_test_data.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::separable;
using testing::quiet;
using testing::TempDir;

TEST(KerasModelJson, ASmallCnnAsKerasWritesIt) {
  const json config = {
      {"name", "cnn"},
      {"input_shape", {8, 8, 1}},
      {"layers",
       {{{"type", "Conv2D"}, {"filters", 4}, {"kernel_size", 3}, {"activation", "relu"}},
        {{"type", "MaxPooling2D"}},
        {{"type", "Flatten"}},
        {{"type", "Dropout"}, {"rate", 0.5}},
        {{"type", "Dense"}, {"units", 10}, {"name", "logits"}}}}};
  const json k = keras_model_json(Model::from_config(config).config());
  EXPECT_EQ(k["class_name"], "Sequential");
  EXPECT_EQ(k["config"]["name"], "cnn");
  const json& layers = k["config"]["layers"];
  ASSERT_EQ(layers.size(), 6u);
  std::vector<std::string> classes, names;
  for (const auto& l : layers) {
    classes.push_back(l["class_name"]);
    names.push_back(l["config"]["name"]);
    EXPECT_EQ(l["config"]["dtype"], "float32");  // TensorBoard's dtype attr reads this
  }
  EXPECT_EQ(classes, (std::vector<std::string>{"InputLayer", "Conv2D", "MaxPooling2D", "Flatten", "Dropout", "Dense"}));
  // Keras 2.x names a Sequential's input "<first layer>_input".
  EXPECT_EQ(names, (std::vector<std::string>{"conv2d_input", "conv2d", "max_pooling2d", "flatten", "dropout", "logits"}));
  EXPECT_EQ(layers[0]["config"]["batch_input_shape"], json::parse("[null, 8, 8, 1]"));
  const json& conv = layers[1]["config"];
  EXPECT_EQ(conv["batch_input_shape"], json::parse("[null, 8, 8, 1]"));
  EXPECT_EQ(conv["filters"], 4);
  EXPECT_EQ(conv["kernel_size"], json::parse("[3, 3]"));
  EXPECT_EQ(conv["strides"], json::parse("[1, 1]"));
  EXPECT_EQ(conv["padding"], "valid");
  EXPECT_EQ(conv["activation"], "relu");
  EXPECT_EQ(conv["data_format"], "channels_last");
  EXPECT_EQ(layers[2]["config"]["pool_size"], json::parse("[2, 2]"));
  EXPECT_EQ(layers[2]["config"]["strides"], json::parse("[2, 2]"));  // Keras: strides default to pool_size
  EXPECT_EQ(layers[4]["config"]["rate"], 0.5);
  EXPECT_EQ(layers[5]["config"]["units"], 10);
  EXPECT_EQ(layers[5]["config"]["activation"], "linear");
  EXPECT_FALSE(layers[5]["config"].contains("batch_input_shape"));
}

TEST(KerasModelJson, InputLayerAndUnnamedLayersGetKerasNames) {
  const json config = {{"layers",
                        {{{"type", "Input"}, {"shape", {3}}},
                         {{"type", "Dense"}, {"units", 2}},
                         {{"type", "Dense"}, {"units", 2}},
                         {{"type", "GlobalAveragePooling1D"}},
                         {{"type", "MaxPooling1D"}, {"pool_size", 2}}}}};
  const json k = keras_model_json(config);  // not built: names come from the Keras rule here
  const json& layers = k["config"]["layers"];
  EXPECT_EQ(k["config"]["name"], "sequential");
  ASSERT_EQ(layers.size(), 5u);
  EXPECT_EQ(layers[0]["class_name"], "InputLayer");
  EXPECT_EQ(layers[0]["config"]["name"], "input_1");
  EXPECT_EQ(layers[0]["config"]["batch_input_shape"], json::parse("[null, 3]"));
  EXPECT_EQ(layers[1]["config"]["name"], "dense");
  EXPECT_EQ(layers[2]["config"]["name"], "dense_1");
  EXPECT_EQ(layers[3]["config"]["name"], "global_average_pooling1d");
  EXPECT_EQ(layers[4]["config"]["pool_size"], json::parse("[2]"));
  testing::expect_error([] { keras_model_json(json::object()); }, ErrorKind::kInvalidArgument, {"no \"layers\""});
}

// keras_util.keras_model_to_graph_def's nodes (tensorboard/plugins/graph/keras_util.py, read
// for this test): a model's layers named "<model>/<layer>", a nested model's "<model>/<inner>/
// <layer>", each fed by the node before it, dtype from a string or a policy's config.name.
TEST(KerasGraphNodes, SequentialLayersChainedAsTensorBoardDrawsThem) {
  const json k = json::parse(R"({"class_name": "Sequential", "config": {"name": "outer", "layers": [
      {"class_name": "InputLayer", "config": {"name": "x", "dtype": "float32"}},
      {"class_name": "Sequential", "config": {"name": "inner", "layers": [
          {"class_name": "Dense", "config": {"name": "d", "dtype": {"class_name": "Policy", "config": {"name": "float16"}}}},
          {"class_name": "Dropout", "config": {"name": "drop", "dtype": "mixed_float16"}}]}},
      {"class_name": "Dense", "config": {"name": "out", "dtype": "int64"}}]}})");
  const std::vector<GraphNode> nodes = keras_graph_nodes(k);
  ASSERT_EQ(nodes.size(), 4u);
  std::vector<std::string> names, ops;
  for (const auto& n : nodes) {
    names.push_back(n.name);
    ops.push_back(n.op);
    EXPECT_EQ(n.string_attrs, (std::map<std::string, std::string>{{"keras_class", n.op}}));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"outer/x", "outer/inner/d", "outer/inner/drop", "outer/out"}));
  EXPECT_EQ(ops, (std::vector<std::string>{"InputLayer", "Dense", "Dropout", "Dense"}));
  EXPECT_TRUE(nodes[0].input.empty());
  EXPECT_EQ(nodes[1].input, std::vector<std::string>{"outer/x"});
  EXPECT_EQ(nodes[2].input, std::vector<std::string>{"outer/inner/d"});
  EXPECT_EQ(nodes[3].input, std::vector<std::string>{"outer/inner/drop"});
  EXPECT_EQ(nodes[0].type_attrs, (std::map<std::string, int>{{"dtype", 1}}));   // DT_FLOAT
  EXPECT_EQ(nodes[1].type_attrs, (std::map<std::string, int>{{"dtype", 19}}));  // DT_HALF
  EXPECT_TRUE(nodes[2].type_attrs.empty());  // not a dtype: left out, as TensorBoard does
  EXPECT_EQ(nodes[3].type_attrs, (std::map<std::string, int>{{"dtype", 9}}));   // DT_INT64
  testing::expect_error([] { keras_graph_nodes(json::parse(R"({"config": {"layers": []}})")); },
                        ErrorKind::kInvalidArgument, {"string \"name\""});
  testing::expect_error([] { keras_graph_nodes(json::parse(R"({"config": {"name": "m", "layers": [7]}})")); },
                        ErrorKind::kInvalidArgument, {"not an object"});
}

// Every graph_def of the event files in `run_dir`, parsed.
std::vector<tf::GraphDef> graph_defs(const fs::path& run_dir) {
  std::vector<tf::GraphDef> out;
  for (const auto& f : fs::directory_iterator(run_dir)) {
    if (f.path().filename().string().find("tfevents") == std::string::npos) continue;
    for (const std::string& record : read_tfrecord_file(f.path())) {
      tf::Event e;
      EXPECT_TRUE(e.ParseFromString(record));
      if (e.what_case() != tf::Event::kGraphDef) continue;
      EXPECT_TRUE(out.emplace_back().ParseFromString(e.graph_def()));
    }
  }
  return out;
}

json mlp() {
  return {{"input_shape", {4}},
          {"layers", {{{"type", "Dense"}, {"units", 8}, {"activation", "relu"}}, {{"type", "Dense"}, {"units", 2}}}},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.01}}},
          {"seed", 3}};
}

TEST(TensorBoardGraph, WrittenOncePerFitIntoTheTrainRun) {
  TempDir dir;
  Tensor x, y;
  separable(8, 1, x, y);
  Model model = Model::from_config(mlp());
  TensorBoardOptions to;
  to.log_dir = (dir / "logs").string();
  FitOptions o = quiet(2);
  o.callbacks = {std::make_shared<TensorBoard>(to)};
  model.fit(x, y, o);
  const RunEvents train = read_run_events(dir / "logs" / "train");
  ASSERT_EQ(train.keras_models.size(), 1u);
  const json graph = json::parse(train.keras_models.at("keras"));
  EXPECT_EQ(graph, keras_model_json(model.config()));
  EXPECT_EQ(graph["config"]["layers"][1]["config"]["units"], 8);
  EXPECT_EQ(train.scalars.at("epoch_loss").size(), 2u);  // the START that follows kept them
  // The op graph: the keras summary's layers, chained in order.
  const std::vector<tf::GraphDef> ops = graph_defs(dir / "logs" / "train");
  ASSERT_EQ(ops.size(), 1u);
  const json& layers = graph["config"]["layers"];
  ASSERT_EQ(ops[0].node_size(), 3);
  ASSERT_EQ(layers.size(), 3u);
  const std::string model_name = graph["config"]["name"];
  for (int i = 0; i < 3; ++i) {
    const tf::NodeDef& n = ops[0].node(i);
    EXPECT_EQ(n.name(), model_name + "/" + layers[i]["config"]["name"].get<std::string>());
    EXPECT_EQ(n.op(), (std::vector<std::string>{"InputLayer", "Dense", "Dense"})[i]);
    EXPECT_EQ(n.attr().at("keras_class").s(), n.op());
    EXPECT_EQ(n.attr().at("dtype").type(), tf::DT_FLOAT);
    if (i == 0) {
      EXPECT_EQ(n.input_size(), 0);
    } else {
      ASSERT_EQ(n.input_size(), 1);
      EXPECT_EQ(n.input(0), ops[0].node(i - 1).name());
    }
  }

  TempDir off;
  to.log_dir = (off / "logs").string();
  to.write_graph = false;
  o.callbacks = {std::make_shared<TensorBoard>(to)};
  model.fit(x, y, o);
  EXPECT_TRUE(read_run_events(off / "logs" / "train").keras_models.empty());
  EXPECT_TRUE(graph_defs(off / "logs" / "train").empty());
}

// A bag-of-ids classifier: 4 ids in [0, 6) per example, class = whether id 5 occurs.
json bag_of_ids() {
  return {{"input_shape", {4}},
          {"layers",
           {{{"type", "Embedding"}, {"input_dim", 6}, {"output_dim", 3}, {"name", "words"}},
            {{"type", "GlobalAveragePooling1D"}},
            {{"type", "Dense"}, {"units", 2}}}},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.05}}},
          {"seed", 2}};
}

void bag_data(Tensor& x, Tensor& y) {
  std::vector<float> ids;
  std::vector<std::int64_t> labels;
  for (int i = 0; i < 24; ++i) {
    bool five = false;
    for (int j = 0; j < 4; ++j) {
      const int id = (i * 7 + j * 3 + i / 5) % 6;
      ids.push_back(static_cast<float>(id));
      five = five || id == 5;
    }
    labels.push_back(five ? 1 : 0);
  }
  x = testing::f32({24, 4}, ids);
  y = testing::i64(labels);
}

TEST(TensorBoardProjector, EmbeddingWeightsAndMetadataEveryNEpochs) {
  TempDir dir;
  Tensor x, y;
  bag_data(x, y);
  Model model = Model::from_config(bag_of_ids());
  std::ofstream(dir / "words.tsv") << "<pad>\nthe\nking\nqueen\nman\nwoman\n";
  TensorBoardOptions to;
  to.log_dir = (dir / "logs").string();
  to.embeddings_freq = 2;
  to.embeddings_metadata = {{"words", (dir / "words.tsv").string()}};
  std::vector<float> at_epoch_2;
  auto spy = std::make_shared<LambdaCallback>();
  spy->epoch_end = [&, s = spy.get()](int epoch, Logs&) {
    if (epoch != 2) return;
    const Tensor w = s->model()->weights().at("words.weight");
    const auto* p = reinterpret_cast<const float*>(w.data.data());
    at_epoch_2.assign(p, p + w.numel());
  };
  FitOptions o = quiet(4);  // epochs 0..3: written at 0 and 2, so the files hold epoch 2's
  o.callbacks = {std::make_shared<TensorBoard>(to), spy};
  model.fit(x, y, o);
  const fs::path config = dir / "logs" / "train" / kProjectorConfigFile;
  const auto loaded = read_projector(config);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].info.tensor_name, "words/embeddings");
  EXPECT_EQ(loaded[0].info.tensor_path, "words.tsv");
  EXPECT_EQ(loaded[0].info.metadata_path, "words_metadata.tsv");
  EXPECT_EQ(loaded[0].info.tensor_shape, (std::vector<std::uint32_t>{6, 3}));
  EXPECT_EQ(loaded[0].tensor.values, at_epoch_2);  // float32 exact through the TSV
  const Tensor final_w = model.weights().at("words.weight");
  EXPECT_NE(loaded[0].tensor.values,
            std::vector<float>(reinterpret_cast<const float*>(final_w.data.data()),
                               reinterpret_cast<const float*>(final_w.data.data()) + final_w.numel()));
  ASSERT_TRUE(loaded[0].metadata);
  EXPECT_EQ(loaded[0].metadata->rows[2], std::vector<std::string>{"king"});
  EXPECT_EQ(loaded[0].metadata->rows.size(), 6u);
}

// A run whose weights went NaN (here from the start) keeps training: the projector cannot place
// a NaN point, so the vectors are left out with a warning instead of ending fit.
TEST(TensorBoardProjector, NanWeightsAreSkippedWithAWarningNotAnError) {
  TempDir dir;
  Tensor x, y;
  bag_data(x, y);
  NamedTensors weights = Model::from_config(bag_of_ids()).weights();
  reinterpret_cast<float*>(weights.at("words.weight").data.data())[4] = std::nanf("");
  Model model = Model::from_parts(bag_of_ids(), weights);
  TensorBoardOptions to;
  to.log_dir = (dir / "logs").string();
  to.embeddings_freq = 1;
  FitOptions o = quiet(2);
  o.callbacks = {std::make_shared<TensorBoard>(to)};
  std::vector<std::string> warnings;
  struct SinkReset {
    ~SinkReset() { set_log_sink({}); }
  } reset;
  set_log_sink([&](LogLevel level, const std::string& m) { if (level == LogLevel::kWarning) warnings.push_back(m); });
  model.fit(x, y, o);
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("Embedding layer words holds NaN or infinite weights"), std::string::npos) << warnings[0];
  EXPECT_FALSE(fs::exists(dir / "logs" / "train" / "words.tsv"));
}

TEST(TensorBoardProjector, MetadataThatDoesNotFitIsRefusedBeforeTraining) {
  TempDir dir;
  Tensor x, y;
  bag_data(x, y);
  Model model = Model::from_config(bag_of_ids());
  TensorBoardOptions to;
  to.log_dir = (dir / "logs").string();
  to.embeddings_freq = 1;
  std::ofstream(dir / "five.tsv") << "a\nb\nc\nd\ne\n";
  to.embeddings_metadata = (dir / "five.tsv").string();
  FitOptions o = quiet(1);
  o.callbacks = {std::make_shared<TensorBoard>(to)};
  testing::expect_error([&] { model.fit(x, y, o); }, ErrorKind::kInvalidArgument,
                        {"five.tsv has 5 labels for Embedding layer words of input_dim 6"});
  std::ofstream(dir / "header.tsv") << "word\tcount\na\t1\nb\t1\nc\t1\nd\t1\ne\t1\nf\t1\n";
  to.embeddings_metadata = (dir / "header.tsv").string();  // 6 rows after its header: fits
  o.callbacks = {std::make_shared<TensorBoard>(to)};
  model.fit(x, y, o);
  EXPECT_EQ(read_metadata_tsv(dir / "logs" / "train" / "words_metadata.tsv").columns,
            (std::vector<std::string>{"word", "count"}));
  to.embeddings_metadata = "no-such-vocab.tsv";
  o.callbacks = {std::make_shared<TensorBoard>(to)};
  testing::expect_error([&] { model.fit(x, y, o); }, ErrorKind::kNotFound,
                        {"embeddings_metadata for Embedding layer words: no file no-such-vocab.tsv", "log_dir"});
  to.embeddings_metadata = {{"dense", (dir / "header.tsv").string()}};
  o.callbacks = {std::make_shared<TensorBoard>(to)};
  testing::expect_error([&] { model.fit(x, y, o); }, ErrorKind::kInvalidArgument,
                        {"\"dense\", which is not an Embedding layer", "words"});
}

TEST(TensorBoardGraph, BadEmbeddingOptionsAreRefused) {
  TensorBoardOptions to;
  to.embeddings_freq = -1;
  testing::expect_error([&] { TensorBoard tb(to); }, ErrorKind::kInvalidArgument, {"embeddings_freq"});
  to.embeddings_freq = 1;
  to.embeddings_metadata = json::array({"a.tsv"});
  testing::expect_error([&] { TensorBoard tb(to); }, ErrorKind::kInvalidArgument, {"embeddings_metadata"});
}

}  // namespace
}  // namespace tensorhub
