// HubSource: a served model that is the best model of a hub query ("the model named mlp with
// the highest test_accuracy"). It lists one version, the id of the model document the query
// matches now; when a better model is saved, the listed version changes and the manager
// swaps to it (loading the new one before unloading the old). A model with a "model.pt" part
// (TorchScript, store/torchscript_part.h: a PyTorch module saved from Python, or a model.pt
// stored by `tensorhub model save`) runs through libtorch; any other runs model.json's layers.
// A model with a part "assets.extra/tf_serving_warmup_requests" is warmed up with it before it
// serves (warmup.h), as a version directory with that file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorhub/serve/source.h"
#include "tensorhub/store/document.h"

namespace tensorhub {
class Hub;
}

namespace tensorhub {

/// The hub query: the first model document named `model_name` matching `filter` in `sort`
/// order (newest first when `sort` is empty).
struct HubModelQuery {
  std::string hub_uri;
  std::string project = "default";
  std::string model_name;  ///< the hub's model_name
  Json filter = Json::object();
  SortSpec sort;
  /// Serve what aliases name instead of the query (`--hub_alias champion=90,challenger=10`):
  /// (alias, weight) pairs. Requests without a version or label are split between them by
  /// weight (ModelManager::resolve_version); filter and sort are then unused.
  std::vector<std::pair<std::string, double>> aliases;
};

/// Parses --hub_alias's "champion" or "champion=90,challenger=10" into (alias, weight) pairs
/// (a lone alias weighs 1). Throws InvalidArgument naming the flag for a bad alias name
/// (check_alias_name), a weight that is not a positive finite number, or an alias given twice.
std::vector<std::pair<std::string, double>> parse_alias_weights(const std::string& text);

class HubSource final : public Source {
 public:
  explicit HubSource(HubModelQuery query);
  ~HubSource() override;

  /// The matching model document, if any, as one version (its id); its loader throws
  /// FailedPrecondition for a PyTorch state_dict saved without TorchScript (make_model_servable
  /// says how to fix it), InvalidArgument for a model.pt libtorch cannot load. The hub is opened on the
  /// first call (OpenMode::kExisting: never created) and kept open; after an error it is
  /// reopened on the next call. Throws what Hub throws: NotFound when there is no hub at the
  /// URI (a mistyped SQLite path), Unavailable for a database that cannot be reached.
  std::map<std::int64_t, Loader> list_versions() override;
  /// "hub query {"model_name":"mlp",...} sorted by test_accuracy:-1 in project p of <uri>",
  /// the URI's password masked (mask_passwords).
  std::string describe() const override;
  std::string empty_message() const override;
  /// The listed model's part "assets.extra/tf_serving_warmup_requests" (kWarmupPart, warmup.h),
  /// when it has one: the same TFRecord file of PredictionLogs as a version directory's,
  /// stored with Hub::save_model's extra_parts (Python: the core's save_model(..., parts=)).
  /// Throws what Hub::load_model_part throws (DataLoss for a blob that fails verification).
  std::optional<WarmupRequests> warmup_requests(std::int64_t version) override;
  /// With aliases: every alias of the model (the given ones and any other) as a version label
  /// naming its model, from the last listing; nothing otherwise.
  std::optional<std::map<std::string, std::int64_t>> listed_labels() override;
  /// The given aliases and their weights (none in query mode).
  std::vector<std::pair<std::string, double>> traffic_split() const override;

 private:
  void open();

  HubModelQuery query_;
  std::shared_ptr<Hub> hub_;  // shared with the loaders of the last listing
  std::map<std::int64_t, Document> listed_;  // the model documents of the last listing
  std::map<std::string, std::int64_t> labels_;  // with aliases: every alias of the model, at the last listing

  std::map<std::int64_t, Loader> list_query();
  std::map<std::int64_t, Loader> list_aliases();
};

}  // namespace tensorhub
