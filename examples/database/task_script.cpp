// The task program of the main job, as TensorLayer's examples/database/task_script.py:
// read the hyperparameters, load dataset "mnist" from the hub, train the original MLP,
// save it as model "mlp" with its test accuracy, and report test_accuracy as the result.
//
// Run by a runner (which sets TENSORHUB_* variables), or by hand:
//   task_script --hub sqlite:///$PWD/tensorhub.db --project tutorial --epochs 1
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "tensorhub/core/error.h"
#include "tensorhub/queue/task_context.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/callbacks.h"
#include "tensorhub/train/model.h"

using namespace tensorhub;

int main(int argc, char** argv) {
  reexec_for_fast_blas(argv);  // before anything else: OpenBLAS picks kernels at load
  TaskContext ctx = TaskContext::from_environment();
  std::string hub_uri = ctx.hub_uri();
  std::string project = ctx.project_name();
  int epochs = 20;
  int n_units1 = ctx.get<int>("n_units1", 800);
  int n_units2 = ctx.get<int>("n_units2", 800);
  double learning_rate = ctx.get<double>("learning_rate", 1e-4);
  std::int64_t batch_size = ctx.get<std::int64_t>("batch_size", 256);

  CLI::App app{"Train the original TensorHub MLP on dataset \"mnist\" and save it as model \"mlp\"."};
  app.add_option("--hub", hub_uri, "hub URI (env TENSORHUB_URI)")->capture_default_str();
  app.add_option("--project", project, "project (env TENSORHUB_PROJECT)")->capture_default_str();
  app.add_option("--epochs", epochs, "training epochs (the original used 20)")->capture_default_str();
  app.add_option("--n-units1", n_units1, "units of the first Dense layer (hyperparameter n_units1)")->capture_default_str();
  app.add_option("--n-units2", n_units2, "units of the second Dense layer (hyperparameter n_units2)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    const char* threads = std::getenv("TENSORHUB_NUM_THREADS");
    set_num_threads(threads ? std::atoi(threads) : 0);
    Hub hub(hub_uri, project);
    auto dataset = hub.find_top_dataset("mnist");
    if (!dataset)
      throw NotFound("no dataset \"mnist\" in project \"" + project + "\" of " + hub_uri +
                     "; run dispatch_tasks (or tensorhub demo) first");
    auto& t = dataset->tensors;
    for (const char* name : {"X_train", "y_train", "X_val", "y_val", "X_test", "y_test"})
      if (!t.count(name)) throw DataLoss(std::string("dataset \"mnist\" lacks tensor ") + name);

    const std::string name = std::to_string(n_units1) + "-" + std::to_string(n_units2);
    std::cout << "training MLP " << name << " for " << epochs << " epoch(s) on " << t["X_train"].shape[0]
              << " examples" << std::endl;
    auto model = Model::from_config(mlp_config(n_units1, n_units2, learning_rate));
    FitOptions fit;
    fit.batch_size = batch_size;
    fit.epochs = epochs;
    auto log_epoch = std::make_shared<LambdaCallback>();
    log_epoch->epoch_end = [&](int epoch, const Logs& logs) {
      Json log = {{"task_id", ctx.task_id()}, {"name", name}, {"epoch", epoch + 1}, {"epochs", epochs}};
      for (const auto& [k, v] : logs) log[k] = v;
      hub.save_training_log(log);
    };
    fit.callbacks.push_back(log_epoch);
    const auto start = std::chrono::steady_clock::now();
    model.fit(t["X_train"], t["y_train"], fit, &t["X_val"], &t["y_val"]);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    const auto test = model.evaluate(t["X_test"], t["y_test"]);
    std::cout << "test_accuracy " << test.accuracy << " test_loss " << test.loss << std::endl;
    Json tags = {{"name", name}, {"test_accuracy", test.accuracy}, {"test_loss", test.loss},
                 {"epochs", epochs}, {"n_units1", n_units1}, {"n_units2", n_units2},
                 {"learning_rate", learning_rate}, {"train_seconds", seconds}, {"task_id", ctx.task_id()}};
    // The dataset's class names (dispatch_tasks tags them) name the model's outputs, e.g. on
    // the dashboard's try-a-model page.
    if (dataset->document.tags.contains("class_names")) tags["class_names"] = dataset->document.tags["class_names"];
    hub.save_model(model.config(), model.weights(), "mlp", tags);
    ctx.set_result("test_accuracy", test.accuracy);
    return 0;
  } catch (const Error& e) {
    std::cerr << "task_script: " << e.what() << std::endl;
    return 1;
  }
}
