// "{name}" in a task's command is replaced by the shell-quoted hyperparameter (DESIGN.md).
#include "tensorhub/queue/runner.h"
#include "test_util.h"

namespace tensorhub {
namespace {

TEST(SubstituteHyperParameters, QuotesValuesForTheShell) {
  const Json hp = {{"lr", 0.01}, {"name", "it's"}, {"units", 800}, {"flag", true}, {"tuner/epochs", 3}};
  EXPECT_EQ(substitute_hyper_parameters("train --lr {lr} --units {units}", hp), "train --lr '0.01' --units '800'");
  EXPECT_EQ(substitute_hyper_parameters("echo {name}", hp), "echo 'it'\\''s'");
  EXPECT_EQ(substitute_hyper_parameters("x {flag} {tuner/epochs}", hp), "x 'true' '3'");
  // Unknown names and unclosed braces stay as they are.
  EXPECT_EQ(substitute_hyper_parameters("a {missing} {lr", hp), "a {missing} {lr");
}

TEST(SubstituteHyperParameters, FindsNamesInsideJsonBraces) {
  const Json hp = {{"x", 3}};
  // The innermost {x}, not '"loss": {x', is the placeholder.
  EXPECT_EQ(substitute_hyper_parameters(R"(echo '{"loss": '{x}'}')", hp), R"(echo '{"loss": ''3''}')");
  EXPECT_EQ(substitute_hyper_parameters(R"({"a": {"b": {x}}})", hp), R"({"a": {"b": '3'}})");
}

}  // namespace
}  // namespace tensorhub
