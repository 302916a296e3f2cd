// A task's command line with {name} placeholders, and how a value reaches it without ever
// being read as shell syntax.
//
// A command task runs under `/bin/sh -c COMMAND` (so redirections, pipes and `&&` work).
// Pasting a hyperparameter's text into COMMAND, even quoted, lets a value such as
// `$(touch /tmp/x)` become code wherever the quoting guess is wrong (inside "...", inside
// '...'). So values are never pasted: each hyperparameter travels in an environment variable
// TENSORHUB_HP_<name>, and each placeholder is rewritten into a reference to that variable
// that fits the quoting context it stands in:
//
//   where {lr} stands       becomes              the program receives
//   unquoted: --lr {lr}     --lr "${TENSORHUB_HP_lr}"     one argument, exactly the value
//   in "...": "lr={lr}"     "lr=${TENSORHUB_HP_lr}"       the value inside the string
//   in '...': '{"lr": {lr}}' '{"lr": '"${TENSORHUB_HP_lr}"'}'  the value inside the string
//
// The shell substitutes a variable's value as data: it is never parsed again for commands,
// quotes or expansions, so no value runs as code in this shell, whatever it holds. A
// placeholder where no such reference is possible (inside `backticks`, $((arithmetic)), after
// a here-document `<<`) or whose word a second shell would parse as code (the script of
// `sh -c SCRIPT` or `bash -c`, the words after `eval`) is refused when the task is created,
// with the variable to use there instead (the variables are in the task's environment, so
// `sh -c 'train --lr "$TENSORHUB_HP_lr"'` and `sh -c '... "$1"' sh {lr}` are the safe forms).
// A program that runs an argument as code of its own (python -c, awk programs) receives the
// exact value inside that code: pass values to such programs as separate arguments.
//
// Syntax: a placeholder is `{name}`, name = a letter, `_` or a UTF-8 byte, then those, digits
// and `_ . / -` (Keras Tuner's `tuner/epochs` included). Not placeholders: `${NAME}` (a shell
// variable), `{}` and braces holding anything else (`{print $1}`, JSON such as `{"a": 1}`),
// and a brace escaped with a backslash outside single quotes (`\{lr}`). `{{name}}` is the
// literal text `{name}` (as in Python's str.format), e.g. awk '{{print}}'.
// Values: a JSON string as its text, any other JSON value as JSON writes it (0.01, 800, true).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensorhub/store/document.h"

namespace tensorhub {

/// Where a placeholder stands, as /bin/sh parses the command.
enum class QuoteContext { kUnquoted, kDoubleQuoted, kSingleQuoted };

/// One `{name}` in a command: `offset` and `length` locate the braces in the command text.
struct Placeholder {
  std::string name;
  std::size_t offset = 0;
  std::size_t length = 0;
  QuoteContext context = QuoteContext::kUnquoted;
};

/// The placeholders of `command`, in order (repeats included). Throws InvalidArgument, naming
/// the placeholder and its position, for one inside backticks, $((...)), after `<<`, or in the
/// script of `sh -c` / the words after `eval`.
std::vector<Placeholder> find_placeholders(const std::string& command);

/// Throws InvalidArgument when `command` has a placeholder that is not a key of
/// `hyper_parameters` (a JSON object), listing the known names and how to write a literal
/// brace, or one find_placeholders() refuses; or when a value cannot travel in an environment
/// variable (a NUL byte) or two names map to one variable. `what` names the command in the message
/// (e.g. "task \"mnist\"").
void check_placeholders(const std::string& command, const Json& hyper_parameters, const std::string& what);

/// Same, against a list of the names that will exist when the command runs (a search space's
/// hyperparameters, for a tuner's trials).
void check_placeholders(const std::string& command, const std::vector<std::string>& names, const std::string& what);

/// The environment variable that carries hyperparameter `name`: "TENSORHUB_HP_" + name, with
/// every byte other than [A-Za-z0-9_] written as "_" + two uppercase hex digits
/// ("tuner/epochs" -> "TENSORHUB_HP_tuner_2Fepochs").
std::string hyper_parameter_env_name(const std::string& name);

/// What the runner executes for a command task.
struct ShellCommand {
  std::string script;  ///< for /bin/sh -c: the command with placeholders turned into variable references
  std::vector<std::pair<std::string, std::string>> env;  ///< TENSORHUB_HP_* = value, one per hyperparameter
};

/// Rewrites `command` as described above and lists the variables for every key of
/// `hyper_parameters` (a JSON object). Throws InvalidArgument for an unknown or refused
/// placeholder, a value holding a NUL byte (an environment variable cannot) or two names
/// that map to one variable.
ShellCommand render_command(const std::string& command, const Json& hyper_parameters);

}  // namespace tensorhub
