// Loader: how a source hands one version to the manager without loading it, after TF
// Serving's Loader (tensorflow_serving/core/loader.h). The source says which versions exist
// and how to load each; the manager decides which to load, when, and when to unload.
#pragma once

#include <functional>
#include <memory>

#include "tensorhub/serve/servable.h"

namespace tensorhub {

/// Loads one version: reads its files or its hub document and returns the servable. May take
/// seconds. Called by the manager on its polling thread only, never concurrently with the
/// source's list_versions(). Unloading is dropping the returned pointer: requests in flight
/// keep their shared_ptr until they finish. Throws any Error (NotFound for a version
/// directory without a model, DataLoss for corrupt files, Unavailable for a lost database);
/// the manager records the message in the version's status and retries later.
using Loader = std::function<std::shared_ptr<const Servable>()>;

}  // namespace tensorhub
