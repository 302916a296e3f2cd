// {name} placeholders in task commands (command_template.h). The values a program receives
// are checked by running the rendered command with the real /bin/sh: whatever a value holds,
// it arrives as exactly that text and never runs as shell code.
#include "tensorhub/queue/command_template.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "tensorhub/core/error.h"
#include "test_util.h"

extern char** environ;

namespace tensorhub {
namespace {

using testing::expect_error;
using testing::TempDir;

// Runs `cmd` as the runner does (/bin/sh -c script, values in the environment); its stdout.
std::string run_rendered(const ShellCommand& cmd) {
  int out[2];
  if (pipe(out) != 0) throw std::runtime_error("pipe");
  std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
  for (const auto& [k, v] : cmd.env) env.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    execle("/bin/sh", "sh", "-c", cmd.script.c_str(), static_cast<char*>(nullptr), envp.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd.script;
  return text;
}

std::string run(const std::string& command, const Json& hp) { return run_rendered(render_command(command, hp)); }

TEST(CommandTemplate, FindsPlaceholdersAndTheirQuoting) {
  const auto ps = find_placeholders(R"(train --lr {lr} --name "run {name}" --json '{"u": {units}}' $(echo {x}))");
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[0].name, "lr");
  EXPECT_EQ(ps[0].offset, 11u);
  EXPECT_EQ(ps[0].length, 4u);
  EXPECT_EQ(ps[0].context, QuoteContext::kUnquoted);
  EXPECT_EQ(ps[1].name, "name");
  EXPECT_EQ(ps[1].context, QuoteContext::kDoubleQuoted);
  EXPECT_EQ(ps[2].name, "units");
  EXPECT_EQ(ps[2].context, QuoteContext::kSingleQuoted);
  // Inside $(...) the shell starts quoting afresh.
  EXPECT_EQ(ps[3].name, "x");
  EXPECT_EQ(ps[3].context, QuoteContext::kUnquoted);
  // Keras Tuner's keys are names too.
  EXPECT_EQ(find_placeholders("fit --epochs {tuner/epochs}").at(0).name, "tuner/epochs");
}

TEST(CommandTemplate, ShellSyntaxWithBracesIsNotAPlaceholder) {
  for (const std::string cmd : {"echo ${HOME}", "find . -exec true {} +", "awk '{print $1}'", R"(echo '{"a": 1}')",
                                R"(echo \{lr})", "echo {{lr}}", "echo {1x}", "echo # {lr} in a comment"})
    EXPECT_TRUE(find_placeholders(cmd).empty()) << cmd;
}

TEST(CommandTemplate, ValuesArriveExactlyInEveryQuotingContext) {
  const Json hp = {{"lr", 0.01}, {"units", 800}, {"flag", true}, {"name", "it's a \"test\""}};
  EXPECT_EQ(run("printf '%s|' {lr} {units} {flag} {name}", hp), "0.01|800|true|it's a \"test\"|");
  EXPECT_EQ(run(R"(printf '%s' "lr={lr} name={name}")", hp), "lr=0.01 name=it's a \"test\"");
  EXPECT_EQ(run(R"(printf '%s' '{"lr": {lr}, "name": "{name}"}')", hp), R"({"lr": 0.01, "name": "it's a "test""})");
  EXPECT_EQ(run(R"~(printf '%s' "$(printf '%s' {name})")~", hp), "it's a \"test\"");
  // {{name}} is the literal text {name}.
  EXPECT_EQ(run("printf '%s' {{lr}}={lr}", hp), "{lr}=0.01");
}

// The two commands of the report (issue 15), and values built to break out of each context.
TEST(CommandTemplate, NoValueRunsAsShellCode) {
  TempDir dir;
  const auto marker = (dir.path() / "pwned").string();
  EXPECT_EQ(run(R"(echo "{v}")", {{"v", "$(touch " + marker + ")"}}), "$(touch " + marker + ")\n");
  EXPECT_EQ(run(R"(echo "{\"lr\": {lr}}")", {{"lr", 0.01}}), "{\"lr\": 0.01}\n");
  const std::vector<std::string> attacks = {
      "$(touch " + marker + ")", "`touch " + marker + "`", "'; touch " + marker + "; '",
      "\"; touch " + marker + "; \"", "x\ntouch " + marker, "\\'; touch " + marker + " #", "${IFS}; touch " + marker};
  const std::vector<std::string> commands = {"printf '%s' {v}", R"(printf '%s' "{v}")", "printf '%s' '{v}'",
                                             "printf '%s' \"$(printf '%s' {v})\"", "printf '%s' x{v}y"};
  for (const auto& value : attacks) {
    for (const auto& command : commands) {
      const std::string got = run(command, {{"v", value}});
      const std::string want = command.find("x{v}y") != std::string::npos ? "x" + value + "y" : value;
      EXPECT_EQ(got, want) << command << " with " << value;
      EXPECT_FALSE(std::filesystem::exists(marker)) << command << " ran code from " << value;
    }
  }
}

TEST(CommandTemplate, NonFiniteValuesArriveAsTheTokensPythonAndStrtodRead) {
  const Json hp = {{"a", std::nan("")}, {"b", HUGE_VAL}, {"c", -HUGE_VAL}};
  EXPECT_EQ(run("printf '%s|' {a} {b} {c}", hp), "NaN|Infinity|-Infinity|");
}

TEST(CommandTemplate, EveryHyperParameterIsInTheEnvironment) {
  const auto cmd = render_command("true", {{"lr", 0.5}, {"tuner/epochs", 3}, {"name", "a b"}});
  EXPECT_EQ(cmd.script, "true");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"TENSORHUB_HP_lr", "0.5"}, {"TENSORHUB_HP_name", "a b"}, {"TENSORHUB_HP_tuner_2Fepochs", "3"}};
  EXPECT_EQ(cmd.env, want);
  EXPECT_EQ(hyper_parameter_env_name("learning-rate.v2"), "TENSORHUB_HP_learning_2Drate_2Ev2");
}

TEST(CommandTemplate, PlaceholdersTheShellCannotReceiveSafelyAreRefused) {
  const Json hp = {{"lr", 0.1}};
  expect_error([&] { find_placeholders("echo `echo {lr}`"); }, ErrorKind::kInvalidArgument,
               {"{lr}", "backticks", "$TENSORHUB_HP_lr"});
  expect_error([&] { find_placeholders("echo $(( {lr} * 2 ))"); }, ErrorKind::kInvalidArgument,
               {"{lr}", "arithmetic", "$TENSORHUB_HP_lr"});
  expect_error([&] { find_placeholders("cat <<EOF\n{lr}\nEOF"); }, ErrorKind::kInvalidArgument,
               {"{lr}", "here-document"});
  // Arithmetic without placeholders is fine, and does not taint what follows.
  EXPECT_EQ(run("echo $((1 << 2)) {lr}", hp), "4 0.1\n");
}

// A second shell would parse the script of `sh -c` or `eval`'s words (the reviewer's
// `sh -c 'echo {x}'` ran x's value as code): refused, naming the variable to use instead.
TEST(CommandTemplate, PlaceholdersInAScriptForAnotherShellAreRefused) {
  for (const std::string cmd : {"sh -c 'echo {x}'", "bash -c \"echo {x}\"", "/bin/sh -ec 'echo {x}'",
                                "timeout 5 bash -e -c 'echo {x}'", "sh -c {x}", "eval echo {x}",
                                "echo \"$(sh -c 'echo {x}')\""})
    expect_error([&] { find_placeholders(cmd); }, ErrorKind::kInvalidArgument,
                 {"{x}", "sh -c", "\"$TENSORHUB_HP_x\""});
  // Positional arguments of sh -c are data: the documented safe form, and after the command ends.
  EXPECT_EQ(find_placeholders("sh -c 'printf %s \"$1\"' sh {x}").size(), 1u);
  EXPECT_EQ(find_placeholders("sh -c 'true'; echo {x}").size(), 1u);
  EXPECT_EQ(find_placeholders("sh train.sh {x}").size(), 1u);
  TempDir dir;
  const auto marker = (dir.path() / "pwned").string();
  const std::string value = "hi; touch " + marker;
  EXPECT_EQ(run("sh -c 'printf %s \"$1\"' sh {x}", {{"x", value}}), value);
  EXPECT_EQ(run("sh -c 'printf %s \"$TENSORHUB_HP_x\"'", {{"x", value}}), value);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(CommandTemplate, NamesMayHoldUtf8) {
  const auto ps = find_placeholders("echo {\xc3\xa9t\xc3\xa9}");
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].name, "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(hyper_parameter_env_name("\xc3\xa9"), "TENSORHUB_HP__C3_A9");
  EXPECT_EQ(run("printf %s {\xc3\xa9}", {{"\xc3\xa9", 1}}), "1");
}

TEST(CommandTemplate, UnknownPlaceholderNamesTheKnownOnes) {
  expect_error([] { check_placeholders("echo {lr}", Json::object(), "task \"t\""); }, ErrorKind::kInvalidArgument,
               {"task \"t\"", "{lr}", "known hyperparameters: (none)", "{{lr}}"});
  expect_error([] { check_placeholders("train {units} {lr}", Json{{"units", 8}, {"learning_rate", 1}}, "task"); },
               ErrorKind::kInvalidArgument, {"{lr}", "learning_rate, units"});
  EXPECT_NO_THROW(check_placeholders("train {units}", std::vector<std::string>{"units"}, "search"));
  expect_error([] { render_command("echo {x}", {{"y", 1}}); }, ErrorKind::kInvalidArgument, {"{x}"});
}

TEST(CommandTemplate, ValuesAnEnvironmentCannotCarryAreRefused) {
  // At creation already (check_placeholders), not only when a runner starts the task.
  expect_error([] { check_placeholders("true", Json{{"v", std::string("a\0b", 3)}}, "task"); },
               ErrorKind::kInvalidArgument, {"\"v\"", "NUL"});
  expect_error([] { render_command("echo {v}", {{"v", std::string("a\0b", 3)}}); }, ErrorKind::kInvalidArgument,
               {"\"v\"", "NUL"});
  expect_error([] { render_command("true", {{"a/b", 1}, {"a_2Fb", 2}}); }, ErrorKind::kInvalidArgument,
               {"TENSORHUB_HP_a_2Fb", "rename"});
}

}  // namespace
}  // namespace tensorhub
