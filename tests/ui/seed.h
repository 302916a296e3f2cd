// ui_seed_hub's parts: each view's browser tests need their own data in the one seeded hub.
// Each function fills `hub`'s project and returns the ids (and other facts) its tests look up,
// as a JSON object; ui_seed_hub prints their union. `dir` is a scratch directory of the test run
// that the hub lives in (for files a view reads beside the hub, e.g. event files for --logdir).
#pragma once

#include <filesystem>

#include "tensorhub/store/hub.h"

namespace tensorhub::testing {

/// Tasks in every state, a dataset "mnist", 50 models: three MLP ones ("low", "high" and one
/// named like markup) and 47 "cnn" ones (seed_tasks.cpp).
Json seed_tasks_and_models(Hub& hub);

/// The Curves view's event files under dir/logs (a 100,000-point series with NaN, infinities
/// and a spike; a fit with the TensorBoard callback) and epoch reports of seed_tasks' tasks
/// (seed_curves.cpp). Call after seed_tasks_and_models.
Json seed_curves(Hub& hub, const std::filesystem::path& dir);

/// Two models trained on Fashion-MNIST, in project "try" of `hub`'s hub (seed_try.cpp):
/// {"try_project": "try", "try_mlp": id ([784] in 0..1, logits), "try_u8": id ([28, 28, 1] in
/// 0..255 with Rescaling, softmax)}.
Json seed_try(Hub& hub, const std::filesystem::path& dir);

/// Two `tensorhub tune` searches run by the Tuner, in project "tune" of `hub`'s hub
/// (seed_searches.cpp): "hb-mlp", a finished Hyperband search with epoch reports, and
/// "asha-live", an ASHA search stopped with a trial running without a metric and a promoted one
/// pending. {"tune_project": "tune", "search_hb", "hb_trials",
/// "hb_scores": {trial id: score}, "hb_best_trial", "hb_best_task", "hb_best_score",
/// "search_asha", "asha_scores", "asha_running_task", "asha_running_trial", "asha_pending_task"}.
Json seed_searches(Hub& hub, const std::filesystem::path& dir);

/// The Graph view's models, in project "graph" of `hub`'s hub, and the TensorBoard run of one
/// of them under dir/graph-logs (seed_graph.cpp): {"graph": {"project", "logdir", "cnn", "mlp",
/// "bad", "epochs"}}.
Json seed_graph(Hub& hub, const std::filesystem::path& dir);

/// The Projector view's runs under dir/projector-logs, good and bad (seed_projector.cpp):
/// {"projector": {"logdir", "words", "images", "big", "bad_path", "bad_rows", "bad_number"}}.
Json seed_projector(Hub& hub, const std::filesystem::path& dir);

}  // namespace tensorhub::testing
