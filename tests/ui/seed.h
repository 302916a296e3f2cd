// ui_seed_hub's parts: each view's browser tests need their own data in the one seeded hub.
// Each function fills `hub`'s project and returns the ids (and other facts) its tests look up,
// as a JSON object; ui_seed_hub prints their union. `dir` is a scratch directory of the test run
// that the hub lives in (for files a view reads beside the hub, e.g. event files for --logdir).
#pragma once

#include <filesystem>

#include "tensorhub/store/hub.h"

namespace tensorhub::testing {

/// Tasks in every state, a dataset "mnist", three MLP models (seed_tasks.cpp).
Json seed_tasks_and_models(Hub& hub);

/// The Curves view's event files under dir/logs (a 100,000-point series with NaN, infinities
/// and a spike; a fit with the TensorBoard callback) and epoch reports of seed_tasks' tasks
/// (seed_curves.cpp). Call after seed_tasks_and_models.
Json seed_curves(Hub& hub, const std::filesystem::path& dir);

/// Two models trained on Fashion-MNIST, in project "try" of `hub`'s hub (seed_try.cpp):
/// {"try_project": "try", "try_mlp": id ([784] in 0..1, logits), "try_u8": id ([28, 28, 1] in
/// 0..255 with Rescaling, softmax)}.
Json seed_try(Hub& hub, const std::filesystem::path& dir);

}  // namespace tensorhub::testing
