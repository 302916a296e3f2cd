// {name} placeholders in task commands (command_template.h): a small lexer of /bin/sh's
// quoting (POSIX Shell Command Language, 2.2 Quoting and 2.6 Word Expansions), enough to know
// in which quoting context each placeholder stands.
#include "tensorhub/queue/command_template.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

// Names are ASCII identifiers with . / - allowed after the first character, or hold UTF-8
// letters (bytes >= 0x80), so that {é} is a placeholder and not silently left as text.
bool is_name_start(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalpha(u) || c == '_' || u >= 0x80;
}
bool is_name_char(char c) {
  return is_name_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '/' || c == '-';
}

// Programs that run one of their arguments as shell code: a placeholder in that argument would
// reach a second shell's parser, which no quoting by this one can prevent.
bool is_shell(const std::string& word) {
  const std::string base = word.substr(word.rfind('/') == std::string::npos ? 0 : word.rfind('/') + 1);
  for (const char* s : {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})
    if (base == s) return true;
  return false;
}

// Length of the name in "{name}" starting at `open` (the '{'), or 0 if none is there.
std::size_t name_length_at(const std::string& s, std::size_t open) {
  std::size_t i = open + 1;
  if (i >= s.size() || !is_name_start(s[i])) return 0;
  while (i < s.size() && is_name_char(s[i])) ++i;
  return i < s.size() && s[i] == '}' ? i - open - 1 : 0;
}

// Whether "{{name}}" (the escape for a literal "{name}") starts at `open`; its name length.
std::size_t escaped_name_length_at(const std::string& s, std::size_t open) {
  if (open + 1 >= s.size() || s[open + 1] != '{') return 0;
  const std::size_t n = name_length_at(s, open + 1);
  return n > 0 && open + n + 3 < s.size() && s[open + n + 3] == '}' ? n : 0;
}

// A nesting level of the lexer: the whole command, or the inside of $(...), `...` or
// $((...)), each with its own quoting state (the shell parses them afresh).
enum class Level { kTop, kCommandSubstitution, kBackticks, kArithmetic };

struct Frame {
  Level level = Level::kTop;
  QuoteContext quote = QuoteContext::kUnquoted;
  int parens = 0;  // unquoted '(' not yet closed inside $(...) or $((...))
  // The words of the simple command being read, to spot `eval ...` and `sh -c SCRIPT`, whose
  // script a second shell parses: a placeholder there could become code whatever we quote.
  std::string word;           // the word being read ("" between words)
  bool shell_word = false;    // the last word named a shell: a -c option makes the next word code
  bool code_next = false;     // the next word is a script (after sh -c)
  bool eval = false;          // after `eval`: every word up to the command's end is code
  bool in_code_word = false;  // the word being read is such a script
};

// What one pass over the command found: placeholders and "{{name}}" escapes.
struct Scan {
  std::vector<Placeholder> placeholders;
  std::vector<std::pair<std::size_t, std::size_t>> escapes;  // offset, length of "{{name}}"
};

std::string position(const std::string& command, std::size_t offset) {
  return "at offset " + std::to_string(offset) + " of the command `" + command + "`";
}

class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) { stack_.push_back(Frame{}); }

  Scan run() {
    while (i_ < s_.size()) step();
    return std::move(scan_);
  }

 private:
  // Follows the words of the current simple command (see Frame).
  void word_char(char c) {
    Frame& f = top();
    if (std::isspace(static_cast<unsigned char>(c)) || c == ';' || c == '&' || c == '|' || c == '(' || c == ')') {
      end_word();
      if (c != ' ' && c != '\t') f.shell_word = f.code_next = f.eval = false;  // the command ended
      return;
    }
    if (f.word.empty()) f.in_code_word = f.code_next || f.eval;
    f.word += c;
  }

  void end_word() {
    Frame& f = top();
    if (f.word.empty()) return;
    if (f.in_code_word) f.code_next = f.in_code_word = false;
    else if (f.word == "eval") f.eval = true;
    else if (f.shell_word && f.word.size() > 1 && f.word[0] == '-' && f.word.find('c') != std::string::npos)
      f.code_next = true;
    if (is_shell(f.word)) f.shell_word = true;
    else if (f.word[0] != '-') f.shell_word = false;
    f.word.clear();
  }

  // Whether a placeholder here is inside a script of `eval` or `sh -c`.
  bool in_code() const {
    const Frame& f = top();
    return f.in_code_word || (f.word.empty() && (f.code_next || f.eval));
  }

  Frame& top() { return stack_.back(); }
  const Frame& top() const { return stack_.back(); }
  bool at(const char* text) const { return s_.compare(i_, std::char_traits<char>::length(text), text) == 0; }

  void step() {
    const char c = s_[i_];
    if (c == '{' && brace()) return;
    switch (top().quote) {
      case QuoteContext::kSingleQuoted:
        if (c == '\'') top().quote = QuoteContext::kUnquoted;
        ++i_;
        return;
      case QuoteContext::kDoubleQuoted:
        double_quoted(c);
        return;
      case QuoteContext::kUnquoted:
        unquoted(c);
        return;
    }
  }

  // A '{' that starts a placeholder or an escape: records it and moves past it.
  bool brace() {
    if (const std::size_t n = escaped_name_length_at(s_, i_); n > 0) {
      scan_.escapes.emplace_back(i_, n + 4);
      i_ += n + 4;
      return true;
    }
    const std::size_t n = name_length_at(s_, i_);
    if (n == 0) return false;
    Placeholder p{s_.substr(i_ + 1, n), i_, n + 2, top().quote};
    refuse_if_unreachable(p);
    if (p.context == QuoteContext::kUnquoted) word_char('{');  // the placeholder is (part of) a word
    scan_.placeholders.push_back(std::move(p));
    i_ += n + 2;
    return true;
  }

  void refuse_if_unreachable(const Placeholder& p) const {
    const std::string var = "$" + hyper_parameter_env_name(p.name);
    const std::string where = "placeholder {" + p.name + "} " + position(s_, p.offset);
    if (top().level == Level::kBackticks)
      throw InvalidArgument(where + " stands inside `backticks`, where its value cannot be passed safely: "
                            "write $(...) instead of backticks, or use " + var + " there");
    if (top().level == Level::kArithmetic)
      throw InvalidArgument(where + " stands inside $((arithmetic)), where the shell would evaluate its value: "
                            "use " + var + " there");
    if (in_code())
      throw InvalidArgument(where + " is part of a script that `eval` or `sh -c` hands to a shell, which would "
                            "parse its value as code: write \"" + var + "\" in that script instead (the variable "
                            "is in the task's environment)");
    if (after_heredoc_)
      throw InvalidArgument(where + " follows a here-document (<<), whose body the shell expands "
                            "differently: use " + var + " there");
  }

  // Backslash, $(, $((, ${ and ` work alike unquoted and inside double quotes.
  bool expansion_start() {
    if (s_[i_] == '\\') {
      i_ += 2;  // an escaped character is never a placeholder
      return true;
    }
    if (at("$((")) return push(Level::kArithmetic, 3);
    if (at("$(")) return push(Level::kCommandSubstitution, 2);
    if (at("${")) {
      i_ += 2;  // a shell variable, not a placeholder
      return true;
    }
    if (s_[i_] == '`') {
      if (top().level == Level::kBackticks && top().quote == QuoteContext::kUnquoted) pop();
      else push(Level::kBackticks, 0);
      ++i_;
      return true;
    }
    return false;
  }

  void double_quoted(char c) {
    if (expansion_start()) return;
    if (c == '"') top().quote = QuoteContext::kUnquoted;
    ++i_;
  }

  void unquoted(char c) {
    word_char(c);
    if (expansion_start()) return;
    if (c == '\'') top().quote = QuoteContext::kSingleQuoted;
    else if (c == '"') top().quote = QuoteContext::kDoubleQuoted;
    else if (c == '#' && (i_ == 0 || std::isspace(static_cast<unsigned char>(s_[i_ - 1])))) return comment();
    else if (at("<<") && top().level != Level::kArithmetic) after_heredoc_ = true;
    else if (c == '(' && top().level != Level::kTop) ++top().parens;
    else if (c == ')' && top().level != Level::kTop) return close_paren();
    ++i_;
  }

  void comment() {
    const std::size_t end = s_.find('\n', i_);
    i_ = end == std::string::npos ? s_.size() : end;
  }

  void close_paren() {
    if (top().parens > 0) {
      --top().parens;
      ++i_;
      return;
    }
    const bool arithmetic = top().level == Level::kArithmetic;
    pop();
    i_ += arithmetic && i_ + 1 < s_.size() && s_[i_ + 1] == ')' ? 2 : 1;
  }

  bool push(Level level, std::size_t skip) {
    Frame frame;  // unquoted, no words yet: the shell parses the inside afresh
    frame.level = level;
    stack_.push_back(frame);
    i_ += skip;
    return true;
  }

  void pop() {
    if (stack_.size() > 1) stack_.pop_back();
  }

  const std::string& s_;
  std::size_t i_ = 0;
  std::vector<Frame> stack_;
  bool after_heredoc_ = false;
  Scan scan_;
};

// The text that replaces a placeholder: a reference to its variable that yields exactly
// the value in that quoting context.
std::string reference(const Placeholder& p) {
  const std::string var = "${" + hyper_parameter_env_name(p.name) + "}";
  switch (p.context) {
    case QuoteContext::kUnquoted: return "\"" + var + "\"";
    case QuoteContext::kDoubleQuoted: return var;
    case QuoteContext::kSingleQuoted: return "'\"" + var + "\"'";
  }
  return var;
}

std::string joined(const std::vector<std::string>& names) {
  if (names.empty()) return "(none)";
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A value as a program reads it: a string's text, a number as JSON writes it, and the
// non-finite numbers (which JSON cannot write) as NaN, Infinity, -Infinity, the tokens
// Python's float() and C's strtod accept.
std::string value_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float() && !std::isfinite(v.get<double>()))
    return std::isnan(v.get<double>()) ? "NaN" : v.get<double>() > 0 ? "Infinity" : "-Infinity";
  return v.dump();
}


// Throws InvalidArgument for the first of `found` (placeholders of `command`) not in `names`.
void check_names(const std::string& command, const std::vector<Placeholder>& found,
                 const std::vector<std::string>& names, const std::string& what) {
  const std::set<std::string> known(names.begin(), names.end());
  for (const auto& p : found) {
    if (known.count(p.name)) continue;
    throw InvalidArgument(what + ": the command has the placeholder {" + p.name + "} " + position(command, p.offset) +
                          ", but no hyperparameter is named " + p.name + "; known hyperparameters: " +
                          joined(names) + " (write {{" + p.name + "}} for the literal text {" + p.name + "})");
  }
}

std::vector<std::string> names_of(const Json& hyper_parameters) {
  std::vector<std::string> names;
  if (hyper_parameters.is_object())
    for (const auto& [k, v] : hyper_parameters.items()) names.push_back(k);
  return names;
}

// The TENSORHUB_HP_* variables of `hyper_parameters`. Throws InvalidArgument for a value an
// environment variable cannot carry (a NUL byte) or two names that map to one variable.
std::vector<std::pair<std::string, std::string>> environment_of(const Json& hyper_parameters) {
  std::vector<std::pair<std::string, std::string>> env;
  std::map<std::string, std::string> owner;  // variable -> hyperparameter, to catch collisions
  for (const auto& [name, value] : hyper_parameters.items()) {
    const std::string var = hyper_parameter_env_name(name);
    if (auto [it, fresh] = owner.emplace(var, name); !fresh)
      throw InvalidArgument("hyperparameters \"" + it->second + "\" and \"" + name +
                            "\" would share the environment variable " + var + "; rename one");
    std::string text = value_text(value);
    if (text.find('\0') != std::string::npos)
      throw InvalidArgument("hyperparameter \"" + name + "\" holds a NUL byte, which no command line or "
                            "environment variable can carry");
    env.emplace_back(var, std::move(text));
  }
  return env;
}

}  // namespace

std::vector<Placeholder> find_placeholders(const std::string& command) { return Lexer(command).run().placeholders; }

void check_placeholders(const std::string& command, const std::vector<std::string>& names, const std::string& what) {
  check_names(command, find_placeholders(command), names, what);
}

void check_placeholders(const std::string& command, const Json& hyper_parameters, const std::string& what) {
  check_placeholders(command, names_of(hyper_parameters), what);
  environment_of(hyper_parameters);
}

std::string hyper_parameter_env_name(const std::string& name) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "TENSORHUB_HP_";
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '_') {
      out += ch;
    } else {
      out += '_';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

ShellCommand render_command(const std::string& command, const Json& hyper_parameters) {
  const Scan scan = Lexer(command).run();
  check_names(command, scan.placeholders, names_of(hyper_parameters), "command");
  ShellCommand out;
  out.env = environment_of(hyper_parameters);
  // Splice references and unescaped literals in order of position.
  std::vector<std::pair<std::size_t, std::pair<std::size_t, std::string>>> edits;
  for (const auto& p : scan.placeholders) edits.push_back({p.offset, {p.length, reference(p)}});
  for (const auto& [offset, length] : scan.escapes)
    edits.push_back({offset, {length, command.substr(offset + 1, length - 2)}});
  std::sort(edits.begin(), edits.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::size_t i = 0;
  for (const auto& [offset, edit] : edits) {
    out.script += command.substr(i, offset - i) + edit.second;
    i = offset + edit.first;
  }
  out.script += command.substr(i);
  return out;
}

}  // namespace tensorhub
