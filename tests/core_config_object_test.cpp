// ConfigObject (tensorhub/core/config_object.h): typed fields, unknown keys refused, paths in errors.
#include "tensorhub/core/config_object.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

using Json = nlohmann::json;

std::string message_of(const std::function<void()>& f) {
  return testing::error_message_of(ErrorKind::kInvalidArgument, f, "config");
}

TEST(ConfigObjectTest, ReadsTypedFieldsAndFallsBackWhenAbsentOrNull) {
  const Json j = {{"epochs", 3}, {"lr", 0.5}, {"name", "m"}, {"shuffle", false}, {"seed", nullptr},
                  {"data", {{"x", "a"}}}};
  const ConfigObject c(j, "spec.fit", {"epochs", "lr", "name", "shuffle", "seed", "data", "absent"});
  EXPECT_EQ(c.integer("epochs", 1, 1), 3);
  EXPECT_EQ(c.integer("seed", 7, 0), 7);  // null counts as absent
  EXPECT_FALSE(c.has("seed"));
  EXPECT_DOUBLE_EQ(c.number("lr", 1.0), 0.5);
  EXPECT_DOUBLE_EQ(c.number("epochs", 1.0), 3.0);  // an integer is a number
  EXPECT_EQ(c.string("name", "x"), "m");
  EXPECT_EQ(c.string("absent", "x"), "x");
  EXPECT_FALSE(c.boolean("shuffle", true));
  EXPECT_EQ(c.object("data"), (Json{{"x", "a"}}));
  EXPECT_EQ(c.object("absent"), Json::object());
  EXPECT_EQ(c.name("lr"), "spec.fit.lr");
}

TEST(ConfigObjectTest, UnknownKeysAreRefusedNamingTheAllowedOnesInEitherWording) {
  const Json j = {{"epoch", 3}};
  EXPECT_EQ(message_of([&] { ConfigObject(j, "spec.fit", {"batch_size", "epochs"}); }),
            "spec.fit: unknown field \"epoch\"; allowed: batch_size, epochs");
  EXPECT_EQ(message_of([&] {
              ConfigObject(j, "optimizer", {"type", "epochs"}, ConfigObject::Wording::kHas);
            }),
            "optimizer has unknown field \"epoch\"; allowed: type, epochs");
  EXPECT_EQ(message_of([&] { ConfigObject(Json::array(), "spec.data", {}); }),
            "spec.data must be a JSON object, got []");
}

TEST(ConfigObjectTest, WrongTypesAndRangesNameTheFieldsPath) {
  const Json j = {{"n", 0}, {"f", "x"}, {"b", 1}, {"s", 2}, {"big", 18446744073709551615u}, {"o", 1}};
  const ConfigObject c(j, "spec.fit", {"n", "f", "b", "s", "big", "o", "need"});
  EXPECT_EQ(message_of([&] { c.integer("n", 1, 1, 10); }), "spec.fit.n must be in [1, 10], got 0");
  EXPECT_EQ(message_of([&] { c.integer("f", 1, 1); }), "spec.fit.f must be an integer, got \"x\"");
  EXPECT_EQ(message_of([&] { c.integer("big", 1, 1, 100); }),
            "spec.fit.big must be at most 100, got 18446744073709551615");
  EXPECT_EQ(message_of([&] { c.number("f", 1); }), "spec.fit.f must be a finite number, got \"x\"");
  EXPECT_EQ(message_of([&] { c.boolean("b", true); }), "spec.fit.b must be true or false, got 1");
  EXPECT_EQ(message_of([&] { c.string("s", ""); }), "spec.fit.s must be a string, got 2");
  EXPECT_EQ(message_of([&] { c.string("need", "", true); }), "spec.fit.need is required (a string)");
  EXPECT_EQ(message_of([&] { c.object("o"); }), "spec.fit.o must be a JSON object, got 1");
}

}  // namespace
}  // namespace tensorhub
