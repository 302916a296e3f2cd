// tensorhub train-spec: the trainer entry point of spec tasks (tensorhub/train/spec.h). A runner
// starts it for every spec task with TENSORHUB_SPEC_FILE and the task environment; it can also
// be run by hand to try a spec before queueing it.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "tensorhub/core/error.h"
#include "tensorhub/queue/task_context.h"
#include "tensorhub/store/blob_cache.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/model.h"
#include "tensorhub/train/spec.h"

namespace tensorhub {
namespace {

// `tensorhub train-spec --help`'s description.
struct TrainSpecArgs {
  HubFlags hub;
  std::string spec_file;
  std::string hyper_parameters;
};

nlohmann::json read_spec(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Unavailable("cannot read spec file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_object(text.str(), "spec file " + path);
}

void run(const TrainSpecArgs& args) {
  TaskContext ctx = TaskContext::from_environment();
  std::string spec_file = args.spec_file;
  if (spec_file.empty()) {
    const char* env = std::getenv("TENSORHUB_SPEC_FILE");
    if (!env || !*env) throw UsageError("train-spec needs --spec FILE (or TENSORHUB_SPEC_FILE, set by a runner)");
    spec_file = env;
  }
  Json hp = ctx.hyper_parameters();
  if (!args.hyper_parameters.empty()) {
    hp = parse_json_object(args.hyper_parameters, "--hyper-parameters");
  }
  set_num_threads(0);  // OMP_NUM_THREADS, which a runner sets to cores / slots
  const TrainSpec spec = parse_train_spec(read_spec(spec_file), hp);
  // Through the machine's blob cache: the dataset crosses the network once per machine.
  Hub hub(HubOptions{.uri = args.hub.hub, .project_name = args.hub.project, .blob_cache = machine_blob_cache()});
  TrainSpecContext context;
  context.task_id = ctx.task_id();
  context.missing_dataset_advice = [](const std::string& name) {
    return "import one with `tensorhub dataset import --name " + name + "` (or save one from C++ with Hub::save_dataset)";
  };
  bool warned = false;
  context.on_epoch_end = [&](int epoch, const Json& logs) {
    try {
      ctx.report_epoch(epoch, logs);
    } catch (const Error& e) {
      // Live reports are a convenience: a hub hiccup must not cost the training.
      if (!warned) std::cerr << "tensorhub train-spec: could not report epoch " << epoch << ": " << e.what() << std::endl;
      warned = true;
    }
  };
  const Json results = run_train_spec(spec, hub, context);
  for (const auto& [key, value] : results.items()) ctx.set_result(key, value);
  Json summary = results;
  summary.erase("history");
  std::cout << summary.dump() << std::endl;
}

}  // namespace

void add_train_spec_command(CLI::App& app) {
  auto args = std::make_shared<TrainSpecArgs>();
  auto* cmd = app.add_subcommand("train-spec", torch_command_description("train-spec"));
  add_hub_options(*cmd, args->hub);
  cmd->add_option("--spec", args->spec_file, "spec JSON file (default: $TENSORHUB_SPEC_FILE)");
  cmd->add_option("--hyper-parameters", args->hyper_parameters,
                  "JSON object for ${name} placeholders (default: $TENSORHUB_HYPER_PARAMETERS)");
  cmd->callback([args]() { run(*args); });
}

}  // namespace tensorhub
