// Where a model came from (store/lineage.h), end to end on both backends: a real `tensorhub
// runner` runs a spec task (trained by `tensorhub train-spec`) and a command task (`tensorhub
// model save` under /bin/sh); each saved model records its task, attempt, hyperparameters, what
// ran (the spec's SHA-256, the command) and the datasets it read, without the task asking;
// `tensorhub model list --filter` selects on it and `model show ID --lineage` shows the chain.
#include <gtest/gtest.h>
#include <unistd.h>

#include <random>

#include "backend_factory.h"
#include "process_util.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/queue/task_queue.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

// n points of [-1, 1]^2 labelled by x0 + x1 > 0.
NamedTensors plane(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = u(rng), b = u(rng);
    xs.insert(xs.end(), {a, b});
    ys.push_back(a + b > 0 ? 1 : 0);
  }
  return {{"X_train", Tensor::from<float>(DType::kF32, {n, 2}, xs)},
          {"y_train", Tensor::from<std::int64_t>(DType::kI64, {n}, ys)}};
}

class LineageProcessTest : public BackendTest {
 protected:
  void set_up() override {
    uri = db_->uri();
    hub = std::make_unique<Hub>(uri, "p");
    queue = std::make_unique<TaskQueue>(*hub);
    dataset_id = hub->save_dataset(plane(64, 1), "plane");
    other_id = hub->save_dataset(plane(8, 2), "unused");
  }

  TaskSpec spec_task() {
    TaskSpec s;
    s.task_name = "t";
    s.train_spec = {{"model", {{"name", "tiny"},
                               {"input_shape", {2}},
                               {"layers", {{{"type", "Dense"}, {"units", "${units}"}}, {{"type", "Dense"}, {"units", 2}}}},
                               {"optimizer", {{"type", "Adam"}, {"learning_rate", 0.05}}},
                               {"seed", 1}}},
                    {"data", {{"dataset", "plane"}}},
                    {"fit", {{"batch_size", 16}, {"epochs", 1}, {"seed", 1}}}};
    s.hyper_parameters = {{"units", 4}};
    s.saved_result_keys = {"model_id"};
    s.max_attempts = 1;
    return s;
  }

  void run_runner() {
    ASSERT_EQ(wait_exit(spawn({kTensorhub, "runner", "--hub", uri, "--project", "p", "--task-name", "t", "--poll",
                               "0.05", "--exit-when-idle", "0.5", "--threads", "1"},
                              log)),
              0)
        << read_text(log);
  }

  std::string cli(const std::vector<std::string>& words) {
    std::vector<std::string> args = {kTensorhub};
    args.insert(args.end(), words.begin(), words.end());
    for (const char* a : {"--hub", "--project"}) args.push_back(a), args.push_back(a[2] == 'h' ? uri : "p");
    const auto out = dir / ("cli-" + std::to_string(++calls) + ".log");
    EXPECT_EQ(wait_exit(spawn(args, out.string())), 0) << read_text(out);
    return read_text(out);
  }

  std::string uri;
  std::unique_ptr<Hub> hub;
  std::unique_ptr<TaskQueue> queue;
  std::int64_t dataset_id = 0, other_id = 0;
  TempDir dir;
  std::string log = (dir / "runner.log").string();
  int calls = 0;
};

TEST_P(LineageProcessTest, ASpecTasksModelRecordsItsTaskSpecAndDatasetAndTheCliFindsIt) {
  const auto task_id = queue->create_task(spec_task());
  run_runner();
  const Task t = queue->get_task(task_id);
  ASSERT_EQ(t.status, TaskStatus::kFinished) << t.error << "\n" << t.log_tail << "\n" << read_text(log);
  const std::int64_t model_id = t.result["model_id"].get<std::int64_t>();
  const Document m = hub->find_models({{"id", model_id}})[0];
  const Json& l = m.tags["lineage"];
  EXPECT_EQ(l["task_id"], task_id);
  EXPECT_EQ(l["attempt"], 1);
  EXPECT_EQ(l["task_name"], "t");
  EXPECT_EQ(l["hyper_parameters"], Json({{"units", 4}}));
  // The spec as the queue keeps it, hashed here from its stored JSON text.
  EXPECT_EQ(l["spec_sha256"], sha256_hex(t.spec.train_spec.dump()));
  EXPECT_FALSE(l.contains("command"));
  const auto dataset = hub->find_documents(Collection::kDatasets, {{"id", dataset_id}})[0];
  EXPECT_EQ(l["dataset_ids"], Json::array({dataset_id}));
  EXPECT_EQ(l["datasets"][0]["sha256"], dataset.parts.at("tensors.safetensors"));
  EXPECT_EQ(l["datasets"][0]["dataset_name"], "plane");
  EXPECT_EQ(l["tensorhub_version"], "0.1.0");
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(l["host"], host);

  // model list --filter on the lineage: the dataset read selects the model, the other none.
  const Json hits = Json::parse(cli({"model", "list", "--json", "--filter",
                                     R"({"lineage.dataset_ids": )" + std::to_string(dataset_id) + "}"}));
  ASSERT_EQ(hits.size(), 1u) << hits.dump();
  EXPECT_EQ(hits[0]["id"], model_id);
  EXPECT_EQ(Json::parse(cli({"model", "list", "--json", "--filter",
                             R"({"lineage.dataset_ids": )" + std::to_string(other_id) + "}"}))
                .size(),
            0u);
  EXPECT_EQ(Json::parse(cli({"model", "list", "--json", "--filter",
                             R"({"lineage.task_id": )" + std::to_string(task_id) + "}"}))
                .size(),
            1u);

  // model show --lineage: the chain back to the dataset, in words and as JSON.
  const std::string shown = cli({"model", "show", std::to_string(model_id), "--lineage"});
  EXPECT_NE(shown.find("task " + std::to_string(task_id) + " (attempt 1)"), std::string::npos) << shown;
  EXPECT_NE(shown.find("dataset " + std::to_string(dataset_id) + " \"plane\""), std::string::npos) << shown;
  EXPECT_NE(shown.find("in the hub, unchanged"), std::string::npos) << shown;
  const Json chain = Json::parse(cli({"model", "show", std::to_string(model_id), "--lineage", "--json"}));
  EXPECT_EQ(chain["task_id"], task_id);
  EXPECT_EQ(chain["datasets"][0]["in_hub"], true);
}

TEST_P(LineageProcessTest, ACommandTasksModelRecordsTheCommand) {
  // The model a spec task saved, fetched and saved again by a command task.
  const auto first = queue->create_task(spec_task());
  run_runner();
  ASSERT_EQ(queue->get_task(first).status, TaskStatus::kFinished) << read_text(log);
  TaskSpec copy;
  copy.task_name = "t";
  const auto model_dir = (dir / "copy").string();
  copy.command = kTensorhub + " model fetch --model-name tiny --output " + model_dir + " --hub \"$TENSORHUB_URI\" " +
                 "--project p && " + kTensorhub + " model save --model-name copied --path " + model_dir +
                 " --hub \"$TENSORHUB_URI\" --project p";
  copy.hyper_parameters = {{"note", "copy"}};
  copy.max_attempts = 1;
  const auto second = queue->create_task(copy);
  run_runner();
  const Task t = queue->get_task(second);
  ASSERT_EQ(t.status, TaskStatus::kFinished) << t.error << "\n" << t.log_tail;
  const auto models = hub->find_models({{"model_name", "copied"}});
  ASSERT_EQ(models.size(), 1u);
  const Json& l = models[0].tags["lineage"];
  EXPECT_EQ(l["task_id"], second);
  EXPECT_EQ(l["command"], copy.command);
  EXPECT_EQ(l["hyper_parameters"], Json({{"note", "copy"}}));
  EXPECT_EQ(l["dataset_ids"], Json::array()) << "model save read no dataset";
  EXPECT_FALSE(l.contains("spec_sha256"));
}

INSTANTIATE_TEST_SUITE_P(Backends, LineageProcessTest, ::testing::ValuesIn(backend_params()), backend_param_name);

}  // namespace
}  // namespace tensorhub
