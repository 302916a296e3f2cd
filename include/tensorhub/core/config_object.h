// tensorhub::ConfigObject: one JSON object of a user-written config (model.json, a spec task,
// a search space entry) read field by field with type checks.
//
// Every config of tensorhub follows one rule: fields are typed, and a field the reader does not
// know is an error (a typo such as "learning_rte" must not be silently ignored). The errors name
// the field by its path in the document ("spec.fit.epochs", "layers[2].units") and, for an
// unknown field, list the allowed ones. All errors are tensorhub::Error of kind
// kInvalidArgument.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tensorhub {

/// A JSON object whose fields are read by name and type. The object is only referenced, not
/// copied: it must outlive the ConfigObject.
///
/// A field that is absent or null counts as absent: its reader returns the fallback.
class ConfigObject {
 public:
  /// How the unknown-field error joins the path and the words "unknown field": `: ` gives
  /// `spec.fit: unknown field "epoch"; allowed: ...`, ` has ` gives `optimizer has unknown
  /// field "beta_1"; allowed: ...` (model.json's wording, kept for scripts that match it).
  enum class Wording { kColon, kHas };

  /// Checks that `j` is an object (else "<path> must be a JSON object, got <j>") and has no key
  /// outside `allowed` (else "<path>: unknown field \"k\"; allowed: <allowed in the given
  /// order>"). Throws InvalidArgument.
  ConfigObject(const nlohmann::json& j, std::string path, const std::vector<std::string>& allowed,
               Wording wording = Wording::kColon);

  /// Whether the field is present and not null.
  bool has(const std::string& key) const;
  /// The field's raw value; throws nlohmann::json's out_of_range when absent (check has()).
  const nlohmann::json& at(const std::string& key) const { return j_.at(key); }
  /// The field's path for messages: "<path>.<key>".
  std::string name(const std::string& key) const { return path_ + "." + key; }
  /// The object's own path, as given.
  const std::string& path() const { return path_; }

  /// A string field. Absent: `fallback`, or when `required` the error "<name> is required (a
  /// string)". Not a string: "<name> must be a string, got <value>".
  std::string string(const std::string& key, const std::string& fallback, bool required = false) const;
  /// An integer field in [min, max] (absent: `fallback`, which is not range-checked). Errors:
  /// "<name> must be an integer, got v", "<name> must be in [min, max], got v" (or "must be at
  /// most max" for an unsigned value beyond int64).
  std::int64_t integer(const std::string& key, std::int64_t fallback, std::int64_t min,
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  /// A finite number (integers included); absent: `fallback`. Error: "<name> must be a finite
  /// number, got v".
  double number(const std::string& key, double fallback) const;
  /// true or false; absent: `fallback`. Error: "<name> must be true or false, got v".
  bool boolean(const std::string& key, bool fallback) const;
  /// A nested object (absent: an empty object). Error: "<name> must be a JSON object, got v".
  nlohmann::json object(const std::string& key) const;

 private:
  const nlohmann::json& j_;
  std::string path_;
};

/// "a, b, c": names joined for "allowed: ..." lists in messages.
std::string join_names(const std::vector<std::string>& names);

}  // namespace tensorhub
