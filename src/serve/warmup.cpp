#include "tensorhub/serve/warmup.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "proto_requests.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"
#include "tensorhub/core/error.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/serve/metrics.h"
#include "tensorhub/serve/status_codes.h"

namespace tensorhub {
namespace {

namespace tfs = tensorflow::serving;
using Clock = std::chrono::steady_clock;

// A hub part's bytes in a temporary file, for TFRecordReader (which reads files); removed
// when this goes.
class TempCopy {
 public:
  explicit TempCopy(const std::vector<std::byte>& bytes) {
    std::string name = (std::filesystem::temp_directory_path() / "tensorhub-warmup-XXXXXX").string();
    const int fd = mkstemp(name.data());
    if (fd < 0) throw Unavailable("cannot create a temporary file for the warmup requests: " + name);
    path_ = name;
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        throw Unavailable("cannot write the warmup requests to " + name);
      }
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
  }
  ~TempCopy() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempCopy(const TempCopy&) = delete;
  TempCopy& operator=(const TempCopy&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// `text` with every `from` replaced by `to` (a temporary file's name by what it holds).
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// An Error of `e`'s kind whose message has `suffix` appended.
Error with_suffix(const Error& e, const std::string& suffix) { return Error(e.kind(), e.message() + suffix); }

// The output `name` of `outputs`; Internal when the model gave none.
const Tensor& output_of(const NamedTensors& outputs, const std::string& name) {
  const auto it = outputs.find(name);
  if (it == outputs.end()) throw Internal("the model gave no output " + name);
  return it->second;
}

void run_predict(const Servable& servable, const tfs::PredictRequest& request) {
  const std::string signature =
      request.model_spec().signature_name().empty() ? kDefaultSignature : request.model_spec().signature_name();
  const Signature& sig = detail::predict_signature(servable, signature);
  const NamedTensors inputs = detail::predict_inputs(servable, signature, sig, request);
  const std::set<std::string> wanted = detail::predict_outputs(sig, request);
  const NamedTensors outputs = servable.predict(signature, inputs);
  for (const auto& name : wanted) output_of(outputs, name);
}

// Classify (`classify`) or Regress, as the gRPC API runs them: the examples' rows through
// serving_default, the answer built and dropped.
template <typename Request>
void run_examples(const Servable& servable, const Request& request, bool classify) {
  const Signature& sig =
      example_signature(servable, request.model_spec().signature_name(), classify, "model_spec.signature_name");
  NamedTensors inputs;
  inputs[sig.examples.input] = detail::rows_from_input(servable, sig.examples, request.input());
  const NamedTensors outputs = servable.predict(kDefaultSignature, inputs);
  const Tensor& y = output_of(outputs, sig.examples.output);
  if (classify) {
    tfs::ClassificationResult result;
    detail::fill_classification(y, sig.examples, &result);
  } else {
    tfs::RegressionResult result;
    detail::fill_regression(y, detail::example_count(request.input()), &result);
  }
}

// TF Serving's RunWarmupRequest: one record's request on the servable.
void replay(const Servable& servable, const tfs::PredictionLog& log) {
  switch (log.log_type_case()) {
    case tfs::PredictionLog::kPredictLog: return run_predict(servable, log.predict_log().request());
    case tfs::PredictionLog::kClassifyLog: return run_examples(servable, log.classify_log().request(), true);
    case tfs::PredictionLog::kRegressLog: return run_examples(servable, log.regress_log().request(), false);
    case tfs::PredictionLog::kMultiInferenceLog:
      throw FailedPrecondition("Unsupported log_type for warmup: " + std::to_string(log.log_type_case()) +
                               " (multi_inference_log: tensorhub serves no MultiInference; use predict_log, "
                               "classify_log or regress_log records)");
    case tfs::PredictionLog::kPredictStreamedLog:
    case tfs::PredictionLog::kSessionRunLog:
      throw FailedPrecondition("Unsupported log_type for warmup: " + std::to_string(log.log_type_case()));
    case tfs::PredictionLog::LOG_TYPE_NOT_SET: return;  // TF Serving skips it too
  }
}

// Reads and replays every record of `file`; `count` is the number of records read so far.
// Throws as run_warmup, naming the file `where`.
void replay_file(const Servable& servable, const std::filesystem::path& file, const std::string& where,
                 std::int64_t& count) {
  TFRecordReader reader(file);
  std::string record;
  tfs::PredictionLog log;
  while (true) {
    try {
      if (!reader.read(record)) return;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kDataLoss) throw;
      throw DataLoss(e.message() + ". Please verify your warmup data is in TFRecord format.");
    }
    const std::string which = "record " + std::to_string(count + 1);
    if (!log.ParseFromString(record))
      throw InvalidArgument("Failed to parse warmup record: " + which + " (" + std::to_string(record.size()) +
                            " bytes) is not a serialized tensorflow.serving.PredictionLog, from " + where);
    try {
      replay(servable, log);
    } catch (const Error& e) {
      throw with_suffix(e, " (warmup " + which + " of " + where + ")");
    } catch (const std::exception& e) {
      throw Internal(std::string(e.what()) + " (warmup " + which + " of " + where + ")");
    }
    // Counted after its replay, as TF Serving counts: the 1,001st record runs, then fails.
    if (++count > kMaxWarmupRecords)
      throw InvalidArgument("Number of warmup records exceeds the maximum (" + std::to_string(kMaxWarmupRecords) +
                            ") at " + where);
  }
}

}  // namespace

std::optional<WarmupRequests> warmup_requests_of(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / kWarmupFile;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  WarmupRequests r;
  r.model_path = dir.string();
  r.where = file.string();
  r.file = file;
  return r;
}

WarmupResult run_warmup(const Servable& servable, const WarmupRequests& requests) {
  const auto start = Clock::now();
  WarmupResult result;
  const auto record = [&](const std::string& status) {
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    record_model_warmup(requests.model_path, status, result.records, result.seconds);
  };
  try {
    if (requests.bytes) {
      const TempCopy copy(*requests.bytes);
      try {
        replay_file(servable, copy.path(), requests.where, result.records);
      } catch (const Error& e) {
        // Reader errors name the file: the temporary copy's name means nothing to the user.
        throw Error(e.kind(), replace_all(e.message(), copy.path().string(), requests.where));
      }
    } else {
      replay_file(servable, requests.file, requests.where, result.records);
    }
  } catch (const Error& e) {
    record(std::string(grpc_code_name(e.kind())) + ": " + e.message());
    throw;
  }
  record("OK");
  return result;
}

}  // namespace tensorhub
