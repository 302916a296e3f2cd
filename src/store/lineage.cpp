// Lineage recorded with saved models (lineage.h).
#include "tensorhub/store/lineage.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "tensorhub/core/hash.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/core/version.h"  // CMakeLists.txt defines the version on this file

namespace tensorhub {
namespace {

struct DatasetRead {
  std::int64_t id;
  std::string name;
  std::string sha256;
};

std::mutex& reads_mutex() {
  static std::mutex m;
  return m;
}

std::vector<DatasetRead>& reads() {
  static std::vector<DatasetRead> r;
  return r;
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

std::string dataset_content_sha256(const Document& dataset) {
  if (const auto it = dataset.parts.find("tensors.safetensors"); it != dataset.parts.end() && dataset.parts.size() == 1)
    return it->second;
  std::string lines;  // std::map: in name order
  for (const auto& [name, sha] : dataset.parts) lines += name + " " + sha + "\n";
  return sha256_hex(lines);
}

void note_dataset_read(const Document& dataset) {
  DatasetRead read{dataset.id, dataset.tags.value("dataset_name", ""), dataset_content_sha256(dataset)};
  std::lock_guard lock(reads_mutex());
  auto& r = reads();
  if (std::none_of(r.begin(), r.end(), [&](const DatasetRead& d) { return d.id == read.id && d.sha256 == read.sha256; }))
    r.push_back(std::move(read));
}

void clear_datasets_read() {
  std::lock_guard lock(reads_mutex());
  reads().clear();
}

Json current_lineage() {
  Json out = Json::object();
  if (const char* text = std::getenv(kLineageEnv); text != nullptr && *text != '\0') {
    const Json given = Json::parse(text, nullptr, false);
    if (given.is_object())
      out = decode_non_finite(given);
    else
      out["runner_lineage_error"] = std::string(kLineageEnv) + " is not a JSON object";
  }
  Json datasets = Json::array(), ids = Json::array(), hashes = Json::array();
  {
    std::lock_guard lock(reads_mutex());
    for (const DatasetRead& d : reads()) {
      datasets.push_back({{"id", d.id}, {"dataset_name", d.name}, {"sha256", d.sha256}});
      ids.push_back(d.id);
      hashes.push_back(d.sha256);
    }
  }
  out["datasets"] = std::move(datasets);
  out["dataset_ids"] = std::move(ids);
  out["dataset_sha256"] = std::move(hashes);
  out["tensorhub_version"] = kVersion;
  out["git_commit"] = kGitCommit;
  out["host"] = host_name();
  return out;
}

Json lineage_chain(Hub& hub, const Document& model) {
  Json chain = {{"model", {{"id", model.id}, {"model_name", model.tags.value("model_name", "")}, {"time", model.time}}}};
  const auto it = model.tags.find("lineage");
  if (it == model.tags.end() || !it->is_object()) {
    chain["recorded"] = false;
    return chain;
  }
  chain["recorded"] = true;
  for (const auto& [key, value] : it->items())
    if (key != "dataset_ids" && key != "dataset_sha256") chain[key] = value;
  Json datasets = Json::array();
  for (Json d : it->value("datasets", Json::array())) {
    if (!d.is_object() || !d.contains("id") || !d["id"].is_number_integer()) continue;  // a caller's own shape
    const auto found = hub.find_documents(Collection::kDatasets, {{"id", d["id"]}}, {}, 1);
    d["in_hub"] = !found.empty();
    d["unchanged"] = !found.empty() && dataset_content_sha256(found[0]) == d.value("sha256", "");
    datasets.push_back(std::move(d));
  }
  chain["datasets"] = std::move(datasets);
  return chain;
}

}  // namespace tensorhub
