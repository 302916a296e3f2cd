// The dispatcher of the main job, as TensorLayer's examples/database/dispatch_tasks.py:
// push Fashion-MNIST to the hub, queue one training task per hyperparameter setting, wait
// for the runners, then pick the best model by test accuracy and check that the reloaded
// model gives the same accuracy.
//
//   dispatch_tasks --hub sqlite:///$PWD/tensorhub.db --epochs 5 &
//   tensorhub runner --hub sqlite:///$PWD/tensorhub.db --project tutorial --task-name mnist
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "tensorhub/core/error.h"
#include "tensorhub/data/idx.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/train/model.h"

using namespace tensorhub;

namespace {

std::string self_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

// One status line: task counts and the latest epoch of each running task.
// The names of the ten classes, tagged on the dataset (class_names) so that the trained models
// carry them (task_script copies the tag) and the dashboard's try-a-model page shows them:
// Fashion-MNIST's (the order of its labels 0-9) for a --data directory whose path says
// "fashion", as Debian's dataset-fashion-mnist does, else MNIST's digits "0".."9".
nlohmann::json class_names_of(const std::string& data_dir) {
  std::string path = data_dir;
  std::transform(path.begin(), path.end(), path.begin(), [](unsigned char c) { return std::tolower(c); });
  if (path.find("fashion") != std::string::npos)
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
}

std::string progress_line(Hub& hub, TaskQueue& queue, const TaskCounts& counts) {
  std::string line = to_string(counts);
  for (const auto& task : queue.find_tasks({{"status", "running"}})) {
    auto logs = hub.find_training_logs({{"task_id", task.id}}, {{"epoch", -1}});
    if (logs.empty()) continue;
    const auto& l = logs[0].tags;
    char buf[160];
    std::snprintf(buf, sizeof buf, " | %s epoch %d/%d val_acc %.4f", l.value("name", "?").c_str(),
                  l.value("epoch", 0), l.value("epochs", 0), l.value("val_accuracy", 0.0));
    line += buf;
  }
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  reexec_for_fast_blas(argv);  // before anything else: OpenBLAS picks kernels at load
  std::string hub_uri = default_hub_uri();
  std::string project = "tutorial";
  std::string data_dir = default_mnist_dir().string();
  std::string task_program = (std::filesystem::path(self_dir()) / "task_script").string();
  int epochs = 20;
  std::vector<int> units = {800, 600, 400};

  CLI::App app{"Dispatch MLP trainings on Fashion-MNIST to runners and pick the best model."};
  app.add_option("--hub", hub_uri, "hub URI")->capture_default_str();
  app.add_option("--project", project, "project name (its tasks, models and datasets are cleared)")->capture_default_str();
  app.add_option("--data", data_dir, "MNIST-format directory")->capture_default_str();
  app.add_option("--epochs", epochs, "epochs per training (the original used 20)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--units", units, "n_units1 = n_units2 of each task")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--task-program", task_program, "the task program runners start")->capture_default_str();
  // What each training asks of a runner (TaskSpec::resources); runners claim only what fits.
  TaskResources resources;
  std::string memory;
  app.add_option("--cpus", resources.cpus, "cores each training needs (fractional ok; 0: no request)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gpus", resources.gpus, "GPUs each training needs (0: none)")->check(CLI::NonNegativeNumber);
  app.add_option("--memory", memory, "memory each training needs, e.g. 4GiB (0 or unset: no request)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a wrong command line exits 2, as tensorhub's does.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    app.exit(e);
    return 2;
  }
  if (!memory.empty()) {
    try {
      resources.memory_bytes = parse_memory_size(memory);
    } catch (const Error& e) {
      std::cerr << "--memory: " << e.message() << std::endl;
      return 2;
    }
  }

  try {
    // Read and check the data first: a wrong --data must neither cost the previous results
    // nor leave a new, empty hub behind.
    std::cout << "loading " << data_dir << std::endl;
    const auto mnist = load_mnist_dataset(data_dir, 50000);
    Hub hub(hub_uri, project);
    TaskQueue queue(hub);
    // Start from a clean project, as the original does.
    queue.delete_tasks();
    hub.delete_models();
    hub.delete_datasets();
    hub.delete_training_logs();

    hub.save_dataset({{"X_train", mnist.X_train}, {"y_train", mnist.y_train}, {"X_val", mnist.X_val},
                      {"y_val", mnist.y_val}, {"X_test", mnist.X_test}, {"y_test", mnist.y_test}},
                     "mnist",
                     {{"description", "MNIST-format images from " + data_dir +
                                          ": 50,000 train / 10,000 validation / 10,000 test, 784 floats in [0, 1]"},
                      {"class_names", class_names_of(data_dir)},
                      {"image_shape", {28, 28}}});  // for `tensorhub embed`'s sprite
    std::cout << "saved dataset mnist (" << mnist.X_train.shape[0] << " train, " << mnist.X_val.shape[0]
              << " validation, " << mnist.X_test.shape[0] << " test)" << std::endl;

    for (int n : units) {
      TaskSpec spec;
      spec.task_name = "mnist";
      spec.command = task_program + " --epochs " + std::to_string(epochs);
      spec.hyper_parameters = {{"n_units1", n}, {"n_units2", n}};
      spec.saved_result_keys = {"test_accuracy"};
      spec.max_attempts = 3;
      spec.resources = resources;
      // Refuses a request that no live runner could ever meet; warns (once) when none is live.
      if (n == units.front())
        if (const auto warning = queue.check_resources_fit(spec); !warning.empty())
          std::cerr << "warning: " << warning << std::endl;
      const auto id = queue.create_task(spec);
      std::cout << "created task " << id << ": n_units1 = n_units2 = " << n << std::endl;
    }

    // Wait until no task is unfinished, showing progress.
    const bool tty = isatty(STDOUT_FILENO);
    std::string last;
    TaskCounts counts;
    while (true) {
      counts = queue.count_tasks({{"task_name", "mnist"}});
      const std::string line = progress_line(hub, queue, counts);
      if (line != last) std::cout << (tty ? "\r\033[K" : "") << line << (tty ? "" : "\n") << std::flush;
      last = line;
      if (counts.unfinished() == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (tty) std::cout << std::endl;
    for (const auto& t : queue.find_tasks({{"status", "failed"}})) {
      std::cout << "task " << t.id << " failed after " << t.failures << " attempt(s): " << t.error << std::endl;
      // The task's own last words usually say why (tensorhub task show ID has the whole tail).
      std::string tail = t.log_tail;
      while (!tail.empty() && tail.back() == '\n') tail.pop_back();
      if (const auto nl = tail.rfind('\n'); nl != std::string::npos) tail = tail.substr(nl + 1);
      if (!tail.empty()) std::cout << "  its last output: " << tail << std::endl;
    }

    auto best = hub.find_top_model("mlp", Json::object(), {{"test_accuracy", -1}});
    if (!best) throw NotFound("no model \"mlp\" was saved: every task failed (see above)");
    const double stored = best->document.tags.value("test_accuracy", std::nan(""));  // a double default: NAN is a float
    std::cout << "the best accuracy " << stored << " is from model "
              << best->document.tags.value("name", std::to_string(best->document.id)) << std::endl;

    // Round trip: rebuild the network from the hub and evaluate it again.
    auto model = Model::from_parts(best->architecture, best->weights);
    const auto again = model.evaluate(mnist.X_test, mnist.y_test);
    const bool same = again.accuracy == stored;
    std::cout << "reloaded model: test accuracy " << again.accuracy
              << (same ? " (same as when saved: the round trip works)" : " (DIFFERS from the saved value)") << std::endl;
    if (!same) {
      std::cout.precision(17);
      std::cout << "saved " << stored << ", reloaded " << again.accuracy << std::endl;
      return 2;
    }
    return counts.failed > 0 ? 3 : 0;
  } catch (const Error& e) {
    std::cerr << "dispatch_tasks: " << e.what() << std::endl;
    return 1;
  }
}
