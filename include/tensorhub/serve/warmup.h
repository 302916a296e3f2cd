// Model warmup, as TF Serving does it (tensorflow_serving/servables/tensorflow/
// saved_model_warmup.cc and saved_model_warmup_util.cc; g3doc/saved_model_warmup.md): a model
// version may carry sample requests in assets.extra/tf_serving_warmup_requests, a TFRecord file
// (data/tfrecord.h) of serialized tensorflow.serving.PredictionLog records
// (proto/tensorflow_serving/apis/prediction_log.proto). After the version is loaded, and before
// it is AVAILABLE, the model manager replays them (model_manager.h), so that the first user
// request does not pay for what runs slowly the first time (allocations, kernels chosen at the
// first call). A hub model carries the same file as its part "assets.extra/tf_serving_warmup_requests"
// (hub_source.h).
//
// As TF Serving:
//  - predict_log, classify_log and regress_log records run their request on the version
//    (the request's model name and version are ignored; its signature_name is used);
//    multi_inference_log, predict_streamed_log and session_run_log records fail the warmup
//    (TF Serving runs MultiInference, which tensorhub does not serve), a record with no log
//    type is skipped;
//  - at most 1,000 records (WarmupConsts::kMaxNumRecords): the 1,001st is replayed, then the
//    warmup fails with "Number of warmup records exceeds the maximum (1000) at <file>";
//  - a record that is not a PredictionLog fails with InvalidArgument "Failed to parse warmup
//    record ..."; a damaged file (bad CRC, truncated record) with DataLoss "... Please verify
//    your warmup data is in TFRecord format."; a request the model refuses with its error;
//  - a failed warmup fails the load: the version never becomes AVAILABLE and its status says
//    why (it is retried as any failed load, model_manager.h);
//  - metrics :tensorflow:serving:model_warmup_records_read{model_path,status} (records read)
//    and :tensorflow:serving:model_warmup_latency{model_path,status} (a histogram of the
//    warmup's wall time in microseconds, buckets 10 * 1.8^i for i < 33), process-wide as TF
//    Serving's monitoring registry, shown beside the request metrics (metrics.h). Warmup
//    requests are not counted in :tensorflow:serving:request_count. Unlike TF Serving, which
//    records only warmups that end OK or with a read error, every warmup is recorded.
// Differences: TF Serving's Unimplemented code is FailedPrecondition here (core/error.h has no
// such kind); "Failed to parse warmup record" names the record's number and size, not its bytes;
// an error of a request names the record (" (warmup record 3 of <file>)").
//
// Thread safety: run_warmup may be called from any thread; it runs the servable's predict()
// (thread-safe) on the calling thread, one request at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tensorhub/serve/servable.h"

namespace tensorhub {

/// The warmup file of a version directory, relative to it (TF Serving's
/// kSavedModelAssetsExtraDirectory / WarmupConsts::kRequestsFileName).
inline constexpr const char* kWarmupFile = "assets.extra/tf_serving_warmup_requests";
/// The part of a hub model that holds the same file (Hub::save_model's extra_parts).
inline constexpr const char* kWarmupPart = "assets.extra/tf_serving_warmup_requests";
/// TF Serving's WarmupConsts::kMaxNumRecords.
inline constexpr std::int64_t kMaxWarmupRecords = 1000;

/// Where a version's warmup records are: a file, or its bytes (a hub part).
struct WarmupRequests {
  /// The version as the metrics' model_path label names it: the version directory
  /// ("/models/mlp/1", TF Serving's export_dir) or "hub model 42".
  std::string model_path;
  /// The file as messages name it: "/models/mlp/1/assets.extra/tf_serving_warmup_requests",
  /// "hub model 42 part assets.extra/tf_serving_warmup_requests".
  std::string where;
  /// The TFRecord file to read, unless `bytes` is set.
  std::filesystem::path file;
  /// The file's bytes (read from a hub part).
  std::optional<std::vector<std::byte>> bytes;
};

/// What a warmup did.
struct WarmupResult {
  std::int64_t records = 0;  ///< records read (replayed or skipped)
  double seconds = 0;        ///< wall time of the whole warmup
};

/// The warmup requests of version directory `dir`: its kWarmupFile, or nothing when it has
/// none (TF Serving: "No warmup data file found", and the version loads without warmup).
std::optional<WarmupRequests> warmup_requests_of(const std::filesystem::path& dir);

/// Replays `requests` on `servable` as described above and records the warmup metrics.
/// Returns the number of records and the time taken. Throws InvalidArgument (a record that is
/// not a PredictionLog, more than kMaxWarmupRecords records, a request the signature refuses),
/// FailedPrecondition (a log type tensorhub cannot replay, an unknown signature), DataLoss (a
/// damaged TFRecord file), NotFound or Unavailable (the file cannot be read), or what the
/// model's predict() throws.
WarmupResult run_warmup(const Servable& servable, const WarmupRequests& requests);

}  // namespace tensorhub
