// tensorhub dataset save|fetch, model save|fetch: the hub's datasets and models as files, for a
// task in any language (a shell script, a numpy program) that cannot link tensorhub:
//   dataset save --name NAME FILE.safetensors|FILE.npz|FILE.npy   (numpy's files: data/npy.h)
//   dataset fetch --name NAME --output FILE.safetensors
//   model save --model-name NAME --path DIR                      (model.json + weights.safetensors)
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
// first two required.
constexpr const char* kModelFiles[] = {"model.json", "weights.safetensors", "optimizer.safetensors", "state.json"};

// A model directory as read from disk, checked: the architecture a JSON object, every
// safetensors file well-formed, state.json JSON.
struct ModelDirectory {
  Json architecture;
  NamedTensors weights;
  Parts extra;  // optimizer.safetensors, state.json as they are on disk
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
    throw InvalidArgument("--path " + dir.string() + " is a file, not a model directory (model.json + "
                          "weights.safetensors, as Model::save and `model fetch` write)");
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
      "; a model directory holds model.json and weights.safetensors, optionally optimizer.safetensors and "
      "state.json, nothing else" +
      (std::count(found.begin(), found.end(), "model.pt") ? " (a TorchScript model.pt is not stored by model save)"
                                                          : ""));
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
  return m;
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
    Hub hub = open_hub(a->hub, OpenMode::kExisting);
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
              "state.json, as Model::save writes it) as a model of the hub");
  add_hub_options(*cmd, a->hub);
  cmd->add_option("--model-name", a->name, "model name (find_top_model's)")->required();
  cmd->add_option("--path", a->file, "the model directory")->required();
  cmd->add_option("--tags", a->tags, R"(tags, a JSON object, e.g. '{"test_accuracy": 0.87}')");
  cmd->callback([a] {
    const Json tags = a->tags.empty() ? Json::object() : parse_json_object(a->tags, "--tags");
    if (a->name.empty()) throw UsageError("--model-name must not be empty");
    check_hub_options(a->hub);
    const ModelDirectory m = read_model_directory(a->file);
    Hub hub = open_hub(a->hub, OpenMode::kCreate);
    const std::int64_t id = hub.save_model(m.architecture, m.weights, a->name, tags, m.extra);
    std::cout << "saved model " << a->name << " (id " << id << ") in project " << a->hub.project << ": "
              << m.weights.size() << " weight tensor(s)" << (m.extra.empty() ? "" : " and the optimizer state")
              << std::endl;
  });
}

void add_model_fetch(CLI::App& model) {
  auto a = std::make_shared<SaveFetchArgs>();
  auto* cmd = model.add_subcommand(
      "fetch", "write a model of the hub as a model directory (what model save reads): the newest of that name, "
               "or the first by --sort");
  add_hub_options(*cmd, a->hub);
  cmd->add_option("--model-name", a->name, "model name")->required();
  cmd->add_option("--output", a->file, "the directory to write (created; files of the model in it are replaced)")
      ->required();
  cmd->add_option("--filter", a->filter, R"(JSON filter on its tags, e.g. '{"test_accuracy": {"$gte": 0.8}}')");
  cmd->add_option("--sort", a->sort, "sort keys, e.g. test_accuracy:-1 (default newest first)");
  cmd->callback([a] {
    const Json filter = parse_filter(a->filter);
    const SortSpec sort = parse_sort_flag(a->sort);
    Hub hub = open_hub(a->hub, OpenMode::kExisting);
    const auto record = hub.find_top_model(a->name, filter, sort);
    if (!record)
      throw NotFound("no model \"" + a->name + "\"" + (filter.empty() ? "" : " matching " + filter.dump()) +
                     " in project \"" + a->hub.project + "\"; see `tensorhub model list`");
    const fs::path dir = a->file;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Unavailable("cannot create " + dir.string() + ": " + ec.message());
    const std::string arch = record->architecture.dump(2) + "\n";
    write_file_bytes(dir / "model.json", std::vector<std::byte>(reinterpret_cast<const std::byte*>(arch.data()),
                                                                reinterpret_cast<const std::byte*>(arch.data()) + arch.size()));
    write_safetensors(dir / "weights.safetensors", record->weights);
    for (const char* part : {"optimizer.safetensors", "state.json"})
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
