// tensorhub dataset save|fetch, model save|fetch: the hub's datasets and models as files, for a
// task in any language (a shell script, a numpy program) that cannot link tensorhub:
//   dataset save --name NAME FILE.safetensors|FILE.npz|FILE.npy   (numpy's files: data/npy.h)
//   dataset fetch --name NAME --output FILE.safetensors
//   model save --model-name NAME --path DIR                      (model.json + weights.safetensors)
//   model save --model-name NAME --path FILE.pt                  (TorchScript, torch.jit.save's)
//   model fetch --model-name NAME --output DIR
// Every input is read and checked before the hub is opened, so bad input saves nothing.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "tensorhub/core/error.h"
#include "tensorhub/data/npy.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/torchscript_part.h"

namespace tensorhub {
namespace {

namespace fs = std::filesystem;

struct SaveFetchArgs {
  HubFlags hub;
  std::string name;
  std::string file;
  std::string tags;
  std::string filter;
  std::string sort;
};

// The files a model directory may hold (Model::save writes them; train/checkpoint.cpp), the
// first two required; model.pt only beside the model.json of a PyTorch module saved from
// Python (what `model fetch` writes for one).
constexpr const char* kModelFiles[] = {"model.json", "weights.safetensors", "optimizer.safetensors", "state.json",
                                       kTorchScriptPart};

// A model directory as read from disk, checked: the architecture a JSON object, every
// safetensors file well-formed, state.json JSON.
struct ModelDirectory {
  Json architecture;
  NamedTensors weights;
  Parts extra;  // optimizer.safetensors, state.json, model.pt as they are on disk
};

std::string text_of(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// The JSON of file `path`; DataLoss naming it when it is not JSON.
Json read_json_file(const fs::path& path) {
  Json j = Json::parse(text_of(read_file_bytes(path)), nullptr, false);
  if (j.is_discarded()) throw DataLoss(path.string() + " is not valid JSON");
  return j;
}

// Throws InvalidArgument when `dir` is not a model directory: not a directory, without
// model.json or weights.safetensors, or with a file a model directory does not hold.
void check_model_layout(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw NotFound("--path " + dir.string() + " does not exist");
  if (!fs::is_directory(dir, ec))
    throw InvalidArgument("--path " + dir.string() + " is neither a model directory (model.json + "
                          "weights.safetensors, as Model::save and `model fetch` write) nor a TorchScript file");
  std::vector<std::string> found, unknown;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    found.push_back(name);
    if (std::find(std::begin(kModelFiles), std::end(kModelFiles), name) == std::end(kModelFiles))
      unknown.push_back(name);
  }
  std::sort(found.begin(), found.end());
  const bool complete = std::count(found.begin(), found.end(), "model.json") &&
                        std::count(found.begin(), found.end(), "weights.safetensors");
  if (complete && unknown.empty()) return;
  std::string listed;
  for (const auto& f : found) listed += (listed.empty() ? "" : ", ") + f;
  throw InvalidArgument(
      "unknown model directory layout: " + dir.string() + " holds " + (listed.empty() ? "nothing" : listed) +
      "; a model directory holds model.json and weights.safetensors, optionally optimizer.safetensors, "
      "state.json and (beside the model.json of a PyTorch module saved from Python) model.pt, nothing else" +
      (std::count(found.begin(), found.end(), kTorchScriptPart)
           ? std::string(" (to store a TorchScript module on its own, give the file: --path ") +
                 (dir / kTorchScriptPart).string() + ")"
           : ""));
}

// The bytes of the TorchScript file `path`. Throws InvalidArgument when they do not start as
// the zip archive torch.jit.save writes.
std::vector<std::byte> read_torchscript_file(const fs::path& path) {
  std::vector<std::byte> bytes = read_file_bytes(path);
  if (!is_zip_archive(bytes))
    throw InvalidArgument(path.string() + " is not a TorchScript file: a model.pt written by torch.jit.save is a " +
                          "zip archive (it starts with PK\\x03\\x04); --path takes such a file or a model " +
                          "directory (model.json + weights.safetensors)");
  return bytes;
}

// A TorchScript file as a model: architecture {"format": "torchscript"}, no weights, its bytes
// the model.pt part.
ModelDirectory read_torchscript_model(const fs::path& file) {
  ModelDirectory m;
  m.architecture = {{"format", kTorchScriptFormat}};
  m.extra[kTorchScriptPart] = read_torchscript_file(file);
  return m;
}

ModelDirectory read_model_directory(const fs::path& dir) {
  check_model_layout(dir);
  ModelDirectory m;
  m.architecture = read_json_file(dir / "model.json");
  if (!m.architecture.is_object())
    throw DataLoss((dir / "model.json").string() + " is not a JSON object (a model's architecture)");
  m.weights = read_safetensors(dir / "weights.safetensors");
  if (fs::exists(dir / "optimizer.safetensors")) {
    m.extra["optimizer.safetensors"] = read_file_bytes(dir / "optimizer.safetensors");
    from_safetensors(m.extra["optimizer.safetensors"], (dir / "optimizer.safetensors").string());  // checks it
  }
  if (fs::exists(dir / "state.json")) {
    read_json_file(dir / "state.json");  // checks it
    m.extra["state.json"] = read_file_bytes(dir / "state.json");
  }
  if (fs::exists(dir / kTorchScriptPart)) {
    // Served in place of model.json (serve/hub_source.cpp), so only where model.json has no
    // layers to run: the "format" of an architecture the Python package wrote.
    if (model_format(m.architecture).empty())
      throw InvalidArgument(dir.string() + " holds " + kTorchScriptPart + " beside a model.json of tensorhub " +
                            "layers: keep one of them (give a TorchScript module on its own as --path " +
                            (dir / kTorchScriptPart).string() + ")");
    m.extra[kTorchScriptPart] = read_torchscript_file(dir / kTorchScriptPart);
  }
  return m;
}

// The model at --path: a model directory, or a TorchScript file.
ModelDirectory read_model_path(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return read_torchscript_model(path);
  return read_model_directory(path);
}

// The tensors of a dataset file, by its extension. Throws UsageError for another extension.
NamedTensors read_dataset_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw NotFound(path.string() + " does not exist");
  const std::string ext = path.extension().string();
  NamedTensors tensors;
  if (ext == ".safetensors") tensors = read_safetensors(path);
  else if (ext == ".npz" || ext == ".npy") tensors = read_numpy_file(path);
  else throw UsageError(path.string() + ": give a .safetensors, .npz or .npy file (the extension says which)");
  if (tensors.empty()) throw InvalidArgument(path.string() + " holds no tensor: nothing to save");
  return tensors;
}

void print_tensors(const NamedTensors& tensors) {
  for (const auto& [name, t] : tensors)
    std::cout << "  " << name << " " << dtype_name(t.dtype) << " " << shape_to_string(t.shape) << std::endl;
}

void add_dataset_save(CLI::App& dataset) {
  auto a = std::make_shared<SaveFetchArgs>();
  auto* cmd = dataset.add_subcommand(
      "save", "save a .safetensors file, or numpy's .npz (numpy.savez, savez_compressed) or .npy, as a dataset "
              "of named tensors (npz: each NAME.npy becomes tensor NAME; object arrays are refused, never unpickled)");
  add_hub_options(*cmd, a->hub);
  cmd->add_option("--name", a->name, "dataset name")->required();
  cmd->add_option("file", a->file, "FILE.safetensors, FILE.npz or FILE.npy")->required();
  cmd->add_option("--tags", a->tags, R"(extra tags, a JSON object, e.g. '{"description": "..."}')");
  cmd->callback([a] {
    Json tags = a->tags.empty() ? Json::object() : parse_json_object(a->tags, "--tags");
    if (a->name.empty()) throw UsageError("--name must not be empty");
    check_hub_options(a->hub);
    const NamedTensors tensors = read_dataset_file(a->file);
    if (!tags.contains("source")) tags["source"] = fs::path(a->file).filename().string();
    Hub hub = open_hub(a->hub, OpenMode::kCreate);
    const std::int64_t id = hub.save_dataset(tensors, a->name, tags);
    std::cout << "saved dataset " << a->name << " (id " << id << ") in project " << a->hub.project << std::endl;
    print_tensors(tensors);
  });
}

void add_dataset_fetch(CLI::App& dataset) {
  auto a = std::make_shared<SaveFetchArgs>();
  auto* cmd = dataset.add_subcommand(
      "fetch", "write a dataset's tensors to a .safetensors file (the newest of that name, or the first by --sort)");
  add_hub_options(*cmd, a->hub);
  cmd->add_option("--name", a->name, "dataset name")->required();
  cmd->add_option("--output", a->file, "the .safetensors file to write")->required();
  cmd->add_option("--filter", a->filter, R"(JSON filter on its tags, e.g. '{"version": 2}')");
  cmd->add_option("--sort", a->sort, "sort keys, e.g. time:-1 (default newest first)");
  cmd->callback([a] {
    const Json filter = parse_filter(a->filter);
    const SortSpec sort = parse_sort_flag(a->sort);
    Hub hub = open_hub(a->hub, OpenMode::kReadOnly);
    const auto record = hub.find_top_dataset(a->name, filter, sort);
    if (!record)
      throw NotFound("no dataset \"" + a->name + "\"" + (filter.empty() ? "" : " matching " + filter.dump()) +
                     " in project \"" + a->hub.project + "\"; see `tensorhub dataset list`");
    write_safetensors(a->file, record->tensors);
    std::cout << "wrote dataset " << a->name << " (id " << record->document.id << ") to " << a->file << std::endl;
    print_tensors(record->tensors);
  });
}

void add_model_save(CLI::App& model) {
  auto a = std::make_shared<SaveFetchArgs>();
  auto* cmd = model.add_subcommand(
      "save", "save a model directory (model.json + weights.safetensors, optionally optimizer.safetensors and "
              "state.json, as Model::save writes it), or a TorchScript file (model.pt, as PyTorch's "
              "torch.jit.save writes it; `tensorhub serve --hub_model` runs it), as a model of the hub");
  add_hub_options(*cmd, a->hub);
  cmd->add_option("--model-name", a->name, "model name (find_top_model's)")->required();
  cmd->add_option("--path", a->file, "the model directory, or a TorchScript file (FILE.pt, a zip archive)")
      ->required();
  cmd->add_option("--tags", a->tags, R"(tags, a JSON object, e.g. '{"test_accuracy": 0.87}')");
  cmd->callback([a] {
    const Json tags = a->tags.empty() ? Json::object() : parse_json_object(a->tags, "--tags");
    if (a->name.empty()) throw UsageError("--model-name must not be empty");
    check_hub_options(a->hub);
    const ModelDirectory m = read_model_path(a->file);
    Hub hub = open_hub(a->hub, OpenMode::kCreate);
    const std::int64_t id = hub.save_model(m.architecture, m.weights, a->name, tags, m.extra);
    std::cout << "saved model " << a->name << " (id " << id << ") in project " << a->hub.project << ": "
              << m.weights.size() << " weight tensor(s)"
              << (m.extra.count("optimizer.safetensors") || m.extra.count("state.json") ? ", the optimizer state" : "")
              << (m.extra.count(kTorchScriptPart) ? ", a TorchScript module" : "") << std::endl;
  });
}

void add_model_fetch(CLI::App& model) {
  auto a = std::make_shared<SaveFetchArgs>();
  auto* cmd = model.add_subcommand(
      "fetch", "write a model of the hub as a model directory (what model save reads): the newest of that name, "
               "or the first by --sort; a TorchScript module is written as model.pt (alone for a model saved "
               "from a .pt file)");
  add_hub_options(*cmd, a->hub);
  cmd->add_option("--model-name", a->name, "model name")->required();
  cmd->add_option("--output", a->file, "the directory to write (created; files of the model in it are replaced)")
      ->required();
  cmd->add_option("--filter", a->filter, R"(JSON filter on its tags, e.g. '{"test_accuracy": {"$gte": 0.8}}')");
  cmd->add_option("--sort", a->sort, "sort keys, e.g. test_accuracy:-1 (default newest first)");
  cmd->callback([a] {
    const Json filter = parse_filter(a->filter);
    const SortSpec sort = parse_sort_flag(a->sort);
    Hub hub = open_hub(a->hub, OpenMode::kReadOnly);
    const auto record = hub.find_top_model(a->name, filter, sort);
    if (!record)
      throw NotFound("no model \"" + a->name + "\"" + (filter.empty() ? "" : " matching " + filter.dump()) +
                     " in project \"" + a->hub.project + "\"; see `tensorhub model list`");
    const fs::path dir = a->file;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Unavailable("cannot create " + dir.string() + ": " + ec.message());
    // A model saved from a .pt file is that file alone: no model.json of layers to write.
    const Json& arch_json = record->architecture;
    if (model_format(arch_json) != kTorchScriptFormat) {
      const std::string arch = arch_json.dump(2) + "\n";
      const auto* begin = reinterpret_cast<const std::byte*>(arch.data());
      write_file_bytes(dir / "model.json", std::vector<std::byte>(begin, begin + arch.size()));
      write_safetensors(dir / "weights.safetensors", record->weights);
    }
    for (const char* part : {"optimizer.safetensors", "state.json", kTorchScriptPart})
      if (const auto bytes = hub.load_model_part(record->document, part)) write_file_bytes(dir / part, *bytes);
    std::cout << "wrote model " << a->name << " (id " << record->document.id << ") to " << dir.string() << std::endl;
  });
}

}  // namespace

void add_save_fetch_commands(CLI::App& app) {
  add_dataset_save(*app.get_subcommand("dataset"));
  add_dataset_fetch(*app.get_subcommand("dataset"));
  add_model_save(*app.get_subcommand("model"));
  add_model_fetch(*app.get_subcommand("model"));
}

}  // namespace tensorhub
