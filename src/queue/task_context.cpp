#include "tensorhub/queue/task_context.h"

#include <cstdlib>

#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/queue/epoch_report.h"
#include "tensorhub/store/hub.h"

namespace tensorhub {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

TaskContext TaskContext::from_environment() {
  TaskContext ctx;
  ctx.hub_uri_ = env_or("TENSORHUB_URI", default_hub_uri());
  ctx.project_ = env_or("TENSORHUB_PROJECT", "default");
  ctx.result_file_ = env_or("TENSORHUB_RESULT_FILE", "");
  const std::string id = env_or("TENSORHUB_TASK_ID", "");
  if (!id.empty()) {
    try {
      ctx.task_id_ = std::stoll(id);
    } catch (const std::exception&) {
      throw InvalidArgument("TENSORHUB_TASK_ID=\"" + id + "\" is not a number");
    }
  }
  const std::string hp = env_or("TENSORHUB_HYPER_PARAMETERS", "{}");
  ctx.hyper_parameters_ = Json::parse(hp, nullptr, false);
  if (ctx.hyper_parameters_.is_discarded() || !ctx.hyper_parameters_.is_object())
    throw InvalidArgument("TENSORHUB_HYPER_PARAMETERS is not a JSON object: " + hp.substr(0, 200));
  ctx.hyper_parameters_ = decode_non_finite(ctx.hyper_parameters_);
  return ctx;
}

void TaskContext::set_result(const std::string& key, const Json& value) {
  results_[key] = value;
  if (result_file_.empty()) return;
  // NaN and +/-Inf as {"$numberDouble": ...} (document.h): a diverged loss is a result too.
  const std::string text = encode_non_finite(results_).dump();
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  write_file_bytes(result_file_, std::vector<std::byte>(p, p + text.size()));
}

TaskContext::TaskContext() = default;
TaskContext::~TaskContext() = default;
TaskContext::TaskContext(TaskContext&&) noexcept = default;
TaskContext& TaskContext::operator=(TaskContext&&) noexcept = default;

void TaskContext::report_epoch(int epoch, const Json& logs) {
  if (!logs.is_object()) throw InvalidArgument("report_epoch: logs must be a JSON object, got " + logs.dump());
  if (!under_runner()) return;
  if (!hub_) {
    // The runner's hub exists: a wrong TENSORHUB_URI must not create another one.
    auto hub = std::make_unique<Hub>(hub_uri_, project_, OpenMode::kExisting);
    if (TaskQueue(*hub).find_tasks({{"id", task_id_}}, {}, 1).empty())
      throw NotFound("task " + std::to_string(task_id_) + " (TENSORHUB_TASK_ID) is not in project \"" + project_ +
                     "\" of hub " + hub->display_uri() + "; epochs are reported for the task a runner "
                     "started, with the environment it set");
    hub_ = std::move(hub);
  }
  // The attempt lets a tuner ignore an orphaned earlier attempt (its runner SIGKILLed) that
  // still reports while the retry runs.
  const int attempt = std::atoi(env_or("TENSORHUB_ATTEMPT", "0").c_str());
  save_epoch_report(*hub_, task_id_, attempt, epoch, logs);
}

void TaskContext::throw_type_error(const std::string& name) const {
  throw InvalidArgument("hyperparameter \"" + name + "\" has an unexpected type: " +
                        hyper_parameters_.at(name).dump());
}

}  // namespace tensorhub
