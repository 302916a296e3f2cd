// A hub model deleted while it is served, on both backends: the ModelManager's HubSource keeps
// its hub connection open (as `tensorhub serve --hub_model` does), another connection deletes
// the model (as `tensorhub model delete` does), and the next poll serves the query's next best
// model in its place; when none is left the model stops being served, as TF Serving unloads a
// version directory removed with nothing to replace it.
#include <gtest/gtest.h>

#include "backend_factory.h"
#include "tensorhub/serve/hub_source.h"
#include "tensorhub/serve/model_manager.h"
#include "tensorhub/store/hub.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::backend_param_name;
using testing::backend_params;
using testing::BackendTest;
using testing::error_message_of;

// TF Serving's half_plus_two as model.json layers (no weights): y = scale x + offset.
Json rescaling(double scale, double offset) {
  return {{"input_shape", Json::array()},
          {"loss", nullptr},
          {"layers", {{{"type", "Rescaling"}, {"scale", scale}, {"offset", offset}}}},
          {"signature", {{"inputs", "x"}, {"outputs", "y"}}}};
}

// The served model's answer for x = 2.
float answer(const ModelManager& manager) {
  const auto out = manager.get("m")->predict(kDefaultSignature, {{"x", Tensor::from<float>(DType::kF32, {1}, {2.0f})}});
  return out.at("y").as<float>()[0];
}

class HubDeleteTest : public BackendTest {};

TEST_P(HubDeleteTest, ADeletedModelStopsBeingServedAtTheNextPoll) {
  const std::string uri = db_->uri();
  Hub writer(uri, "p");
  const auto worse = writer.save_model(rescaling(1, 0), {}, "mlp", {{"test_accuracy", 0.7}, {"n", 1}});
  const auto best = writer.save_model(rescaling(0.5, 2), {}, "mlp", {{"test_accuracy", 0.9}, {"n", 2}});
  std::vector<std::string> logs;
  ManagerOptions o;
  o.log = [&](const std::string& line) { logs.push_back(line); };
  ModelManager manager(o);
  HubModelQuery q;
  q.hub_uri = uri;
  q.project = "p";
  q.model_name = "mlp";
  q.sort = {{"test_accuracy", -1}};
  manager.add_model("m", std::make_unique<HubSource>(q));
  manager.poll();
  EXPECT_EQ(manager.resolve_version("m", {}, {}), best);
  EXPECT_EQ(answer(manager), 3.0f);

  // The best model deleted: the next best takes its place at the next poll.
  EXPECT_EQ(writer.delete_models({{"n", 2}}), 1);
  manager.poll();
  EXPECT_EQ(manager.resolve_version("m", {}, {}), worse);
  EXPECT_EQ(answer(manager), 2.0f);
  const auto states = manager.status("m");
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].version, best);
  EXPECT_EQ(states[0].state, ServableState::kEnd);
  EXPECT_EQ(states[1].state, ServableState::kAvailable);
  error_message_of(ErrorKind::kNotFound, [&] { manager.get("m", best); }, "the deleted version");

  // The last one deleted: nothing is served any more (404, saying the query matches nothing).
  EXPECT_EQ(writer.delete_models({{"n", 1}}), 1);
  manager.poll();
  const std::string why = error_message_of(ErrorKind::kNotFound, [&] { manager.get("m"); }, "nothing left");
  EXPECT_NE(why.find("matched no model"), std::string::npos) << why;
  for (const auto& s : manager.status("m")) EXPECT_EQ(s.state, ServableState::kEnd) << s.version;
  const auto unloaded = std::count_if(logs.begin(), logs.end(), [&](const std::string& l) {
    return l == "model m version " + std::to_string(worse) + " unloaded";
  });
  EXPECT_EQ(unloaded, 1);

  // A model saved again is served again.
  const auto again = writer.save_model(rescaling(2, 0), {}, "mlp", {{"test_accuracy", 0.5}});
  manager.poll();
  EXPECT_EQ(manager.resolve_version("m", {}, {}), again);
  EXPECT_EQ(answer(manager), 4.0f);
}

INSTANTIATE_TEST_SUITE_P(Backends, HubDeleteTest, ::testing::ValuesIn(backend_params()), backend_param_name);

}  // namespace
}  // namespace tensorhub
