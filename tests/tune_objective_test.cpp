// Objective parsing and ranking (Keras Tuner's direction inference).
#include <cmath>

#include "tensorhub/tune/oracle.h"
#include "test_util.h"

namespace tensorhub {
namespace {

TEST(Objective, InfersDirectionAsKerasDoes) {
  EXPECT_FALSE(Objective::parse("val_loss").maximize);
  EXPECT_FALSE(Objective::parse("loss").maximize);
  EXPECT_TRUE(Objective::parse("val_accuracy").maximize);
  EXPECT_TRUE(Objective::parse("accuracy").maximize);
  EXPECT_TRUE(Objective::parse("val_acc").maximize);
  EXPECT_TRUE(Objective::parse("acc").maximize);
  EXPECT_EQ(Objective::parse("val_accuracy").name, "val_accuracy");
}

TEST(Objective, ExplicitDirectionWinsAndUnknownNamesNeedOne) {
  const auto o = Objective::parse("test_accuracy:min");
  EXPECT_EQ(o.name, "test_accuracy");
  EXPECT_FALSE(o.maximize);
  EXPECT_TRUE(Objective::parse("f1:max").maximize);
  EXPECT_EQ(Objective::parse("val_loss").to_string(), "val_loss:min");
  testing::error_message_of(ErrorKind::kInvalidArgument, [] { Objective::parse("f1"); }, "no direction");
  testing::error_message_of(ErrorKind::kInvalidArgument, [] { Objective::parse("f1:up"); }, "bad direction");
  testing::error_message_of(ErrorKind::kInvalidArgument, [] { Objective::parse(":max"); }, "empty name");
}

TEST(Objective, NanNeverRanks) {
  const auto max = Objective::parse("val_accuracy");
  const auto min = Objective::parse("val_loss");
  EXPECT_TRUE(max.better(0.9, 0.8));
  EXPECT_FALSE(max.better(0.8, 0.9));
  EXPECT_TRUE(min.better(0.1, 0.2));
  EXPECT_FALSE(max.better(NAN, 0.1));
  EXPECT_TRUE(max.better(0.1, NAN));
  EXPECT_FALSE(min.better(NAN, NAN));
}

}  // namespace
}  // namespace tensorhub
