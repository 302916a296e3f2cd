// tensorhub embed: the activations of one layer of a hub model on a hub dataset's first
// examples, written as a TensorBoard projector embedding (summary/projector.h): the tensor as
// TSV, the labels (and class names) as metadata, and for image inputs a sprite; TensorBoard's
// classic MNIST projector for any model in the hub. `tensorboard --logdir DIR` (PROJECTOR tab)
// and `tensorhub ui --logdir DIR` (#/projector) show it.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>

#include "commands.h"
#include "tensorhub/core/error.h"
#include "tensorhub/summary/event_file_reader.h"
#include "tensorhub/summary/event_file_writer.h"
#include "tensorhub/summary/projector.h"
#include "tensorhub/train/model.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;

struct EmbedArgs {
  HubFlags hub;
  std::int64_t model_id = 0;
  std::string dataset, layer, logdir, x = "X_test", y = "y_test", image_shape, class_names;
  std::int64_t n = 2000, batch_size = 1024;
};

std::string tensor_names(const NamedTensors& tensors) {
  std::string out;
  for (const auto& [name, t] : tensors) out += (out.empty() ? "" : ", ") + name + " " + shape_to_string(t.shape);
  return out;
}

const Tensor& dataset_tensor(const DatasetRecord& d, const std::string& name, const std::string& flag) {
  auto it = d.tensors.find(name);
  if (it == d.tensors.end())
    throw UsageError(flag + " " + name + ": dataset \"" + d.document.tags.value("dataset_name", "") +
                     "\" has no such tensor; it has " + tensor_names(d.tensors));
  return it->second;
}

// The first `n` rows of `t` (all when it has fewer).
Tensor first_rows(const Tensor& t, std::int64_t n) {
  if (t.shape.empty()) throw InvalidArgument("a scalar has no rows");
  Tensor out = t;
  out.shape[0] = std::min(n, t.shape[0]);
  out.data.resize(static_cast<std::size_t>(out.numel()) * dtype_size(t.dtype));
  return out;
}

// Element i of t as a double, whatever its dtype.
double value_at(const Tensor& t, std::int64_t i) {
  switch (t.dtype) {
    case DType::kF32: return t.as<float>()[i];
    case DType::kF64: return t.as<double>()[i];
    case DType::kI64: return static_cast<double>(t.as<std::int64_t>()[i]);
    case DType::kI32: return t.as<std::int32_t>()[i];
    case DType::kU8: return t.as<std::uint8_t>()[i];
    case DType::kI8: return t.as<std::int8_t>()[i];
    case DType::kBool: return t.as<bool>()[i] ? 1.0 : 0.0;
  }
  return 0;
}

// One label per row of y ([n] or [n, 1] numbers), as text ("3", "0.5").
std::vector<std::string> label_texts(const Tensor& y) {
  if (y.shape.empty() || y.numel() != y.shape[0])
    throw InvalidArgument("labels of shape " + shape_to_string(y.shape) + " are not one per example ([n] or [n, 1])");
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < y.shape[0]; ++i) {
    std::ostringstream s;
    s << value_at(y, i);
    out.push_back(s.str());
  }
  return out;
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// Labels, and class names where known (--class-names, else the dataset's "class_names" tag):
// one column "label", or "label" and "class" (TensorBoard then reads a header line).
ProjectorMetadata metadata_of(const std::vector<std::string>& labels, std::vector<std::string> classes) {
  ProjectorMetadata m;
  if (classes.empty()) {
    for (const auto& l : labels) m.rows.push_back({l});
    return m;
  }
  m.columns = {"label", "class"};
  std::int64_t unknown = 0;
  for (const auto& l : labels) {
    char* end = nullptr;
    const long k = std::strtol(l.c_str(), &end, 10);
    const bool known = end && *end == '\0' && k >= 0 && static_cast<std::size_t>(k) < classes.size();
    m.rows.push_back({l, known ? classes[static_cast<std::size_t>(k)] : "?"});
    unknown += !known;
  }
  if (unknown > 0)
    std::fprintf(stderr, "warning: %lld labels are not class indices below the %zu class names given; their class is \"?\"\n",
                 static_cast<long long>(unknown), classes.size());
  return m;
}

// A sprite is at most 8192 px a side (TensorBoard's limit), so no single image is larger.
constexpr std::int64_t kMaxSide = 8192;

// [height, width, channels] of each example as an image: x's own shape for [n, H, W] and
// [n, H, W, C] (C 1, 3 or 4), --image-shape or the dataset's "image_shape" tag for flat rows;
// nothing when x is not an image.
std::optional<std::array<std::int64_t, 3>> image_dims(const Tensor& x, const std::string& flag, const Json& tags) {
  std::vector<std::int64_t> dims(x.shape.begin() + 1, x.shape.end());
  if (!flag.empty()) {
    dims.clear();
    for (const auto& part : split_names(flag)) {
      char* end = nullptr;
      const long long d = std::strtoll(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || d < 1) throw UsageError("--image-shape " + flag + ": expected H,W or H,W,C");
      dims.push_back(d);
    }
  } else if (x.shape.size() == 2 && tags.contains("image_shape") && tags.at("image_shape").is_array()) {
    dims.clear();
    for (const auto& d : tags.at("image_shape"))
      if (d.is_number_integer() && d.get<std::int64_t>() > 0) dims.push_back(d.get<std::int64_t>());
  }
  if (dims.size() == 2) dims.push_back(1);
  const bool image = dims.size() == 3 && (dims[2] == 1 || dims[2] == 3 || dims[2] == 4) && dims[0] <= kMaxSide &&
                     dims[1] <= kMaxSide && x.shape[0] > 0 && dims[0] * dims[1] * dims[2] * x.shape[0] == x.numel();
  if (image) return std::array<std::int64_t, 3>{dims[0], dims[1], dims[2]};
  if (!flag.empty())
    throw UsageError("--image-shape " + flag + " is not H,W or H,W,C (C 1, 3 or 4) of the examples, whose shape is " +
                     shape_to_string(x.shape));
  return std::nullopt;
}

// x's pixels as uint8: values in [0, 1] are scaled by 255 (how tensorhub imports images),
// larger ones clamped to 255.
std::vector<std::uint8_t> pixels_of(const Tensor& x) {
  double top = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) top = std::max(top, value_at(x, i));
  const double scale = top <= 1.0 ? 255.0 : 1.0;
  std::vector<std::uint8_t> out(static_cast<std::size_t>(x.numel()));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint8_t>(std::clamp(std::lround(value_at(x, static_cast<std::int64_t>(i)) * scale), 0L, 255L));
  return out;
}

// The files' stem: "<model_name>_<layer>", safe in a file name.
std::string stem_of(const std::string& model_name, const std::string& layer) {
  std::string s = model_name + "_" + layer;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return s;
}

// DIR/projector_config.pbtxt as it is (empty where there is none), read before anything is
// written so that a malformed one stops the command with nothing written.
ProjectorConfig existing_config(const fs::path& dir) {
  const fs::path file = dir / kProjectorConfigFile;
  return fs::exists(file) ? read_projector_config(file) : ProjectorConfig{};
}

// Adds (or replaces, by tensor_name) `e` in `config` and writes it to DIR.
void add_to_config(const fs::path& dir, ProjectorConfig config, const ProjectorEmbedding& e) {
  std::erase_if(config.embeddings, [&](const auto& old) { return old.tensor_name == e.tensor_name; });
  config.embeddings.push_back(e);
  write_projector_config(dir, config);
}

void run(const EmbedArgs& a) {
  Hub hub = open_hub(a.hub, OpenMode::kReadOnly);
  const auto docs = hub.find_models({{"id", a.model_id}}, {}, 1);
  if (docs.empty()) throw NotFound("no model with id " + std::to_string(a.model_id) + " in project \"" +
                                   hub.project_name() + "\" (tensorhub model list)");
  const ModelRecord record = hub.load_model(docs[0]);
  const Model model = Model::from_parts(record.architecture, record.weights);
  const auto dataset = hub.find_top_dataset(a.dataset);
  if (!dataset) throw NotFound("no dataset named \"" + a.dataset + "\" in project \"" + hub.project_name() +
                               "\" (tensorhub dataset list)");
  const Tensor x = first_rows(dataset_tensor(*dataset, a.x, "--x"), a.n);
  const Tensor activations = model.layer_output(a.layer, x, a.batch_size);
  const std::int64_t rows = activations.shape[0];
  const std::int64_t cols = rows ? activations.numel() / rows : 0;

  const std::string model_name = docs[0].tags.value("model_name", "model");
  const std::string stem = stem_of(model_name, a.layer);
  ProjectorEmbedding e;
  e.tensor_name = model_name + "/" + a.layer + " (model " + std::to_string(a.model_id) + ")";
  e.tensor_path = stem + ".tsv";
  e.tensor_shape = {static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(cols)};
  // Everything is computed and checked before the first file is written.
  std::optional<ProjectorMetadata> metadata;
  if (dataset->tensors.contains(a.y)) {
    std::vector<std::string> classes = split_names(a.class_names);
    if (classes.empty() && dataset->document.tags.contains("class_names"))
      for (const auto& name : dataset->document.tags.at("class_names"))
        classes.push_back(name.is_string() ? name.get<std::string>() : name.dump());
    const Tensor& y = dataset->tensors.at(a.y);
    if (y.shape.empty() || y.shape[0] < rows)
      throw UsageError("--y " + a.y + " " + shape_to_string(y.shape) + " has fewer rows than the " +
                       std::to_string(rows) + " examples embedded from --x " + a.x);
    e.metadata_path = stem + "_metadata.tsv";
    metadata = metadata_of(label_texts(first_rows(y, rows)), classes);
  }
  std::optional<ProjectorImage> sprite;
  if (auto dims = image_dims(x, a.image_shape, dataset->document.tags)) {
    const auto [h, w, c] = *dims;
    e.sprite = ProjectorSprite{stem + "_sprite.png", static_cast<std::uint32_t>(w), static_cast<std::uint32_t>(h)};
    sprite = make_sprite(pixels_of(x).data(), rows, h, w, static_cast<int>(c));
  }
  const fs::path dir = a.logdir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw UsageError("--logdir " + a.logdir + ": cannot make a directory there" +
                                                    (ec ? " (" + ec.message() + ")" : ""));
  const ProjectorConfig config = existing_config(dir);
  write_tensor_tsv(dir / e.tensor_path, activations.as<float>(), rows, cols);
  if (metadata) write_metadata_tsv(dir / e.metadata_path, *metadata);
  if (sprite) write_png(dir / e.sprite->image_path, *sprite);
  add_to_config(dir, config, e);
  // An event file makes the directory a run, so that `tensorboard --logdir PARENT` finds its
  // projector too (TensorBoard's projector looks in runs and in the directory it is given).
  if (find_event_runs(dir).empty()) EventFileWriter(dir).close();
  std::printf("wrote %lld x %lld activations of layer \"%s\" (model %lld) to %s%s%s%s\n",
              static_cast<long long>(rows), static_cast<long long>(cols), a.layer.c_str(),
              static_cast<long long>(a.model_id), (fs::path(a.logdir) / e.tensor_path).c_str(),
              e.metadata_path.empty() ? "" : ", with labels", e.sprite ? " and a sprite" : "",
              rows < a.n ? (" (all of --x " + a.x + ": it has " + std::to_string(rows) + " rows)").c_str() : "");
  std::printf("view: tensorboard --logdir %s (PROJECTOR), or tensorhub ui --logdir %s (#/projector)\n",
              a.logdir.c_str(), a.logdir.c_str());
}

}  // namespace

void add_embed_command(CLI::App& app) {
  auto a = std::make_shared<EmbedArgs>();
  auto* cmd = app.add_subcommand("embed", torch_command_description("embed"));
  add_hub_options(*cmd, a->hub);
  cmd->add_option("--model", a->model_id, "id of the hub model (tensorhub model list)")->required();
  cmd->add_option("--dataset", a->dataset, "hub dataset whose examples to embed (the newest of that name)")->required();
  cmd->add_option("--layer", a->layer, "name of the layer whose outputs are the embedding (its model.json name)")
      ->required();
  cmd->add_option("--logdir", a->logdir, "directory for the projector files (a TensorBoard run)")->required();
  cmd->add_option("-n", a->n, "embed the first n examples")->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_option("--x", a->x, "the dataset's tensor of inputs")->capture_default_str();
  cmd->add_option("--y", a->y, "the dataset's tensor of labels (metadata; none if it has no such tensor)")
      ->capture_default_str();
  cmd->add_option("--image-shape", a->image_shape,
                  "H,W[,C] of each example for the sprite when the inputs are flat rows (default: the dataset's "
                  "image_shape tag; [n, H, W(, C)] inputs need none)");
  cmd->add_option("--class-names", a->class_names,
                  "comma-separated class names, label k -> k-th name (default: the dataset's class_names tag)");
  cmd->add_option("--batch-size", a->batch_size, "examples per forward pass")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->callback([a] { run(*a); });
}

}  // namespace tensorhub
