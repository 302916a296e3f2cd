// Hub::save_model's extra parts (a saved model's optimizer.safetensors and state.json, so
// training can resume from a hub model) and Hub::load_model_part.
#include <gtest/gtest.h>

#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

std::vector<std::byte> bytes(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

NamedTensors one_weight() {
  return {{"dense.bias", Tensor::from<float>(DType::kF32, {2}, {0.5f, -1.0f})}};
}

TEST(HubModelParts, ExtraPartsRoundTripAndOldModelsHaveNone) {
  testing::TempDir dir;
  Hub hub("sqlite://" + (dir.path() / "hub.db").string(), "p");
  const NamedTensors optimizer = {{"dense.bias.m", Tensor::from<float>(DType::kF32, {2}, {0.25f, 0.125f})}};
  const auto with = hub.save_model({{"layers", Json::array()}}, one_weight(), "mlp", {{"test_accuracy", 0.9}},
                                   {{"optimizer.safetensors", to_safetensors(optimizer)},
                                    {"state.json", bytes(R"({"epoch": 2, "step": 20, "learning_rate": 0.001})")}});
  const auto without = hub.save_model({{"layers", Json::array()}}, one_weight(), "mlp");

  const auto doc = hub.find_models({{"id", with}})[0];
  EXPECT_EQ(doc.parts.size(), 4u);  // model.json, weights, and the two extra parts
  const auto state = hub.load_model_part(doc, "state.json");
  ASSERT_TRUE(state);
  EXPECT_EQ(*state, bytes(R"({"epoch": 2, "step": 20, "learning_rate": 0.001})"));
  const auto opt = from_safetensors(*hub.load_model_part(doc, "optimizer.safetensors"), "optimizer");
  EXPECT_EQ(opt.at("dense.bias.m").as<float>()[1], 0.125f);
  // load_model is unchanged: architecture and weights.
  EXPECT_EQ(hub.load_model(doc).weights.at("dense.bias").as<float>()[0], 0.5f);

  const auto old_doc = hub.find_models({{"id", without}})[0];
  EXPECT_EQ(old_doc.parts.size(), 2u);
  EXPECT_FALSE(hub.load_model_part(old_doc, "state.json"));
}

TEST(HubModelParts, ReservedPartNamesAreRejected) {
  testing::TempDir dir;
  Hub hub("sqlite://" + (dir.path() / "hub.db").string(), "p");
  testing::expect_error([&] { hub.save_model(Json::object(), one_weight(), "m", {}, {{"weights.safetensors", bytes("x")}}); },
                        ErrorKind::kInvalidArgument, {"\"weights.safetensors\" is reserved"});
  EXPECT_TRUE(hub.find_models().empty());
}

}  // namespace
}  // namespace tensorhub
