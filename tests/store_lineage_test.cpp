// Lineage (store/lineage.h) on both backends, in one process: what Hub::save_model records of
// the datasets this process read and of the runner's TENSORHUB_LINEAGE, the filters that
// select on it, and lineage_chain's look back at the datasets. The runner's half (a real
// runner setting TENSORHUB_LINEAGE for spec and command tasks) is process_lineage_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "backend_factory.h"
#include "tensorhub/core/hash.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/store/dataset_shards.h"
#include "tensorhub/store/hub.h"
#include "tensorhub/store/lineage.h"
#include "test_util.h"

namespace tensorhub {
namespace {

NamedTensors one(float v) { return {{"x", Tensor::from<float>(DType::kF32, {1}, {v})}}; }

std::string host() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

class LineageTest : public testing::BackendTest {
 protected:
  void set_up() override {
    clear_datasets_read();
    env_.set(kLineageEnv, nullptr);
    hub_ = std::make_unique<Hub>(db_->uri(), "p");
  }
  void TearDown() override { clear_datasets_read(); }
  testing::EnvVars env_;
  std::unique_ptr<Hub> hub_;
  testing::TempDir dir_;
};

TEST_P(LineageTest, ASavedModelRecordsTheDatasetsReadBeforeItWithTheirContentHashes) {
  const auto mnist = hub_->save_dataset(one(1), "mnist");
  const auto other = hub_->save_dataset(one(2), "other");
  ASSERT_TRUE(hub_->find_top_dataset("mnist"));
  ASSERT_TRUE(hub_->find_top_dataset("mnist"));  // read twice: recorded once
  const auto id = hub_->save_model(Json::object(), one(3), "mlp", {{"test_accuracy", 0.9}});

  const Document m = hub_->find_models({{"id", id}})[0];
  const Json& l = m.tags["lineage"];
  // The content hash is the SHA-256 of the dataset's tensors blob: the safetensors file the
  // hub stored, which to_safetensors makes byte for byte from the same tensors.
  const std::string sha = sha256_hex(to_safetensors(one(1)));
  EXPECT_EQ(l["datasets"], Json::parse(R"([{"id": )" + std::to_string(mnist) + R"(, "dataset_name": "mnist", "sha256": ")" +
                                       sha + R"("}])"));
  EXPECT_EQ(l["dataset_ids"], Json::array({mnist}));
  EXPECT_EQ(l["dataset_sha256"], Json::array({sha}));
  EXPECT_EQ(l["tensorhub_version"], "0.1.0");  // CMakeLists.txt's project(VERSION)
  EXPECT_EQ(l["host"], host());
  EXPECT_FALSE(l.contains("task_id")) << "no runner: no task";
  EXPECT_EQ(m.tags["test_accuracy"], 0.9);

  // A filter selects by element of the flat arrays, on both backends.
  EXPECT_EQ(hub_->find_models({{"lineage.dataset_ids", mnist}}).size(), 1u);
  EXPECT_EQ(hub_->find_models({{"lineage.dataset_ids", other}}).size(), 0u);
  EXPECT_EQ(hub_->find_models({{"lineage.dataset_sha256", sha}}).size(), 1u);
  EXPECT_EQ(hub_->find_models({{"lineage.host", host()}}).size(), 1u);
}

TEST_P(LineageTest, TheRunnersLineageIsKeptAndACallersOwnLineageTagWins) {
  env_.set(kLineageEnv, R"({"task_id": 7, "attempt": 2, "hyper_parameters": {"lr": {"$numberDouble": "NaN"}},
                            "command": "./train.sh"})");
  const auto id = hub_->save_model(Json::object(), one(1), "mlp");
  const Json l = hub_->find_models({{"id", id}})[0].tags["lineage"];
  EXPECT_EQ(l["task_id"], 7);
  EXPECT_EQ(l["attempt"], 2);
  EXPECT_EQ(l["command"], "./train.sh");
  EXPECT_TRUE(std::isnan(l["hyper_parameters"]["lr"].get<double>())) << l.dump();
  EXPECT_EQ(hub_->find_models({{"lineage.task_id", 7}}).size(), 1u);

  const auto own = hub_->save_model(Json::object(), one(1), "mlp", {{"lineage", {{"source", "imported"}}}});
  EXPECT_EQ(hub_->find_models({{"id", own}})[0].tags["lineage"], Json({{"source", "imported"}}));

  env_.set(kLineageEnv, "not json");  // a broken variable never fails the save
  const auto broken = hub_->save_model(Json::object(), one(1), "mlp");
  EXPECT_EQ(hub_->find_models({{"id", broken}})[0].tags["lineage"]["runner_lineage_error"],
            "TENSORHUB_LINEAGE is not a JSON object");
}

TEST_P(LineageTest, AShardedDatasetIsRecordedByTheHashOfItsShardsHashes) {
  const auto a = dir_ / "a.tfrecord";
  const auto b = dir_ / "b.tfrecord";
  std::ofstream(a, std::ios::binary) << "first shard";
  std::ofstream(b, std::ios::binary) << "second shard";
  ShardedDatasetSpec spec;
  spec.files = {ShardFile{a, 1}, ShardFile{b, 1}};
  const auto id = save_sharded_dataset(*hub_, "clicks", spec);
  ASSERT_TRUE(find_sharded_dataset(*hub_, "clicks"));
  const auto model = hub_->save_model(Json::object(), one(1), "ctr");
  // "name sha256\n" per shard part, in name order (lineage.h), each sha the file's own.
  const std::string expected = sha256_hex("shard-00000 " + sha256_hex(std::string("first shard")) + "\nshard-00001 " +
                                          sha256_hex(std::string("second shard")) + "\n");
  const Json l = hub_->find_models({{"id", model}})[0].tags["lineage"];
  EXPECT_EQ(l["dataset_ids"], Json::array({id}));
  EXPECT_EQ(l["dataset_sha256"], Json::array({expected}));
}

TEST_P(LineageTest, TheChainSaysWhetherEachDatasetIsStillInTheHubUnchanged) {
  const auto kept = hub_->save_dataset(one(1), "kept");
  const auto gone = hub_->save_dataset(one(2), "gone");
  hub_->find_top_dataset("kept");
  hub_->find_top_dataset("gone");
  const auto id = hub_->save_model(Json::object(), one(3), "mlp");
  hub_->delete_documents(Collection::kDatasets, {{"id", gone}});

  const Json chain = lineage_chain(*hub_, hub_->find_models({{"id", id}})[0]);
  EXPECT_EQ(chain["model"]["id"], id);
  EXPECT_EQ(chain["model"]["model_name"], "mlp");
  ASSERT_EQ(chain["datasets"].size(), 2u) << chain.dump();
  EXPECT_EQ(chain["datasets"][0]["id"], kept);
  EXPECT_EQ(chain["datasets"][0]["in_hub"], true);
  EXPECT_EQ(chain["datasets"][0]["unchanged"], true);
  EXPECT_EQ(chain["datasets"][1]["id"], gone);
  EXPECT_EQ(chain["datasets"][1]["in_hub"], false);
  EXPECT_EQ(chain["datasets"][1]["unchanged"], false);

  // A model saved before lineage existed (or with none): said, not invented.
  const auto bare = hub_->save_model(Json::object(), one(4), "mlp", {{"lineage", nullptr}});
  EXPECT_EQ(lineage_chain(*hub_, hub_->find_models({{"id", bare}})[0])["recorded"], false);
}

INSTANTIATE_TEST_SUITE_P(Backends, LineageTest, ::testing::ValuesIn(testing::backend_params()),
                         testing::backend_param_name);

}  // namespace
}  // namespace tensorhub
