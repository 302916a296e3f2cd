// The seed of the Overview, Tasks and Models views: tasks in every state (named after it), the
// pending one asking for 2 cpus, 1 GPU and 8 GiB that the one live runner of its name (no GPU)
// cannot take, a dataset, and 50 models: three of the MLP, one of them named "<img src=x onerror=alert(1)>" so
// that the page must show it as text, and 47 named "cnn".
#include "seed.h"

#include "tensorhub/core/named_tensors.h"
#include "tensorhub/queue/task_queue.h"

namespace tensorhub::testing {
namespace {

Json mlp_architecture() {
  return {{"name", "mlp"},
          {"input_shape", {784}},
          {"layers", {{{"type", "Dropout"}, {"rate", 0.2}},
                      {{"type", "Dense"}, {"units", 32}, {"activation", "relu"}},
                      {{"type", "Dense"}, {"units", 10}}}},
          {"loss", "sparse_categorical_crossentropy"},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.001}}}};
}

TaskSpec spec_named(const std::string& name, int max_attempts = 3) {
  TaskSpec s;
  s.task_name = name;
  s.command = "train.sh {lr}";
  s.hyper_parameters = {{"lr", 0.01}, {"n_units", 800}};
  s.max_attempts = max_attempts;
  return s;
}

// What the attempts of the finished and the failed task used (task_attempt.h), as a runner records
// them: the finished one on two GPUs with NVML samples every 5 s (GPU 0: 50, 55, ..., 95 %; GPU 1:
// 20 % throughout, so the mean over both is 46.25 % and the max 95 %). Its epoch reports, drawn
// beside them on its detail, are seed_curves.cpp's (20 epochs).
void seed_attempts(TaskQueue& queue, std::int64_t finished, std::int64_t failed) {
  TaskAttempt a;
  a.task_id = finished;
  a.attempt = 1;
  a.owner = "runner-a";
  a.host = "gpu-node-1";
  a.gpus = {0, 1};
  queue.begin_attempt(a);
  AttemptUsage u;
  u.wall_s = 125.0;
  u.cpu_s = 98.4;
  u.peak_memory_bytes = 1610612736;  // 1.5 GiB
  u.memory_source = "cgroup";
  for (int i = 0; i < 10; ++i) {
    u.gpu_samples.push_back({5.0 * i, 50.0 + 5 * i, (1000LL + 100 * i) << 20, 0});
    u.gpu_samples.push_back({5.0 * i, 20.0, 500LL << 20, 1});
  }
  queue.end_attempt(finished, 1, "finished", "", u);
  a.task_id = failed;
  a.host = "cpu-node-2";
  a.gpus = {};
  queue.begin_attempt(a);
  AttemptUsage f;
  f.wall_s = 3.5;
  f.cpu_s = 2.0;
  f.peak_memory_bytes = 256LL << 20;
  f.memory_source = "rusage";
  queue.end_attempt(failed, 1, "failed", "exit status 1", f);
}

}  // namespace

Json seed_tasks_and_models(Hub& hub) {
  TaskQueue queue(hub);
  Json ids;
  hub.save_dataset({{"x", Tensor::from<float>(DType::kF32, {2}, {1, 2})}}, "mnist");
  // The finished task is a Python script task (TensorHub's create_task(script=...)).
  TaskSpec script_task = spec_named("finished");
  script_task.command.clear();
  script_task.script = "test_accuracy = 0.875\n";
  script_task.script_name = "task_script.py";
  ids["finished"] = queue.create_task(script_task);
  auto t = queue.claim("finished", "runner-a", 60);
  queue.complete(*t, {{"test_accuracy", 0.875}});
  ids["failed"] = queue.create_task(spec_named("failed", 1));
  t = queue.claim("failed", "runner-a", 60);
  queue.fail(*t, "exit status 1", "epoch 1/5\nRuntimeError: CUDA out of memory\n");
  seed_attempts(queue, ids["finished"], ids["failed"]);
  ids["cancelled"] = queue.create_task(spec_named("cancelled"));
  queue.cancel_tasks({{"id", ids["cancelled"]}});
  ids["running"] = queue.create_task(spec_named("running"));
  queue.claim("running", "runner-b", 3600);
  TaskSpec pending = spec_named("pending");
  pending.resources = {2, 1, 8LL << 30};
  ids["pending"] = queue.create_task(pending);
  // Registered after the task (creation refuses a request every live runner is too small for):
  // `task list` and the dashboard say "needs 1 GPU; the live runner has 0".
  RunnerInfo runner;
  runner.owner = "runner-c";
  runner.task_name = "pending";
  runner.host = "cpu-node-3";
  runner.pid = 1;
  runner.cpus = 4;
  runner.memory_bytes = 16LL << 30;
  runner.lease_s = 24 * 3600;  // live for the whole test run
  queue.register_runner(runner);
  ids["model_low"] = hub.save_model(mlp_architecture(), {}, "mlp", {{"test_accuracy", 0.5}, {"name", "low"}});
  ids["model_high"] = hub.save_model(mlp_architecture(), {}, "mlp", {{"test_accuracy", 0.9}, {"name", "high"}});
  ids["model_xss"] = hub.save_model(mlp_architecture(), {}, "<img src=x onerror=alert(1)>", {{"test_accuracy", 0.7}});
  // 47 more, so that the leaderboard holds the 50 models: "cnn-0" .. "cnn-46" with
  // test_accuracy 0.600 .. 0.646 (between the low and the markup-named one) and a val_loss.
  for (int i = 0; i < 47; ++i)
    hub.save_model(mlp_architecture(), {}, "cnn",
                   {{"test_accuracy", (600 + i) / 1000.0}, {"val_loss", (100 - i) / 100.0}, {"name", "cnn-" + std::to_string(i)}});
  return ids;
}

}  // namespace tensorhub::testing
