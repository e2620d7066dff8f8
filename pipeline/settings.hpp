// Reading and validating settings from YAML (SettingsReader), with every error's position.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice {

// Reading a stage's (or the pipeline's) settings from YAML, validating each as it is read.
// A stage declares every setting in one place — its constructor — by calling the typed
// getters below; the same calls yield its documentation (`sluice stages TYPE`). Errors are
// collected, not thrown, so that one run of `sluice validate` reports all of them with
// file:line:column and the key path.

struct ConfigError {
  std::string location;  // "configs/demo.yaml:12:7" or "--set lanes.port0.source.rate=fast"
  std::string key_path;  // "lanes[1].source.rate"
  std::string message;
  std::string hint;
  [[nodiscard]] std::string to_string() const;
};

// Where YAML nodes came from: the file, plus nodes that --set put into the tree.
class ConfigSource {
 public:
  explicit ConfigSource(std::string file) : file_(std::move(file)) {}
  void add_override(const YAML::Node& node, std::string text) { overrides_.emplace_back(node, std::move(text)); }
  [[nodiscard]] std::string locate(const YAML::Node& node) const;
  [[nodiscard]] const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::vector<std::pair<YAML::Node, std::string>> overrides_;
};

class ConfigErrors {
 public:
  // The same error found twice (a template stage read once per lane) is kept once.
  void add(ConfigError error);
  [[nodiscard]] bool empty() const { return errors_.empty(); }
  [[nodiscard]] std::size_t size() const { return errors_.size(); }
  [[nodiscard]] const std::vector<ConfigError>& all() const { return errors_; }
  [[nodiscard]] std::string to_string() const;  // one error per line

 private:
  std::vector<ConfigError> errors_;
};

// Thrown once validation has collected every error.
class ConfigException : public std::runtime_error {
 public:
  explicit ConfigException(ConfigErrors errors);
  [[nodiscard]] const ConfigErrors& errors() const { return errors_; }

 private:
  ConfigErrors errors_;
};

// One documented setting, as collected for help output.
struct SettingDoc {
  std::string key;
  std::string type;
  std::string default_value;
  std::string doc;
};

// One YAML map that supplies settings, with the key path it sits at. Later layers win
// (a lane's override map over the lane template's stage map).
struct SettingsLayer {
  YAML::Node map;
  std::string path;
};

class SettingsReader {
 public:
  SettingsReader(std::vector<SettingsLayer> layers, const ConfigSource& source, ConfigErrors& errors);
  // A reader with no YAML that only collects documentation.
  static SettingsReader for_docs(std::vector<SettingDoc>& docs);

  std::uint64_t bytes(std::string_view key, std::uint64_t fallback, std::string_view doc, std::uint64_t minimum = 0,
                      std::uint64_t maximum = std::numeric_limits<std::uint64_t>::max());
  double byte_rate(std::string_view key, double fallback, std::string_view doc);
  double frequency(std::string_view key, double fallback, std::string_view doc, double minimum = 0,
                   double maximum = std::numeric_limits<double>::max());
  std::chrono::nanoseconds duration(std::string_view key, std::chrono::nanoseconds fallback, std::string_view doc);
  std::int64_t integer(std::string_view key, std::int64_t fallback, std::string_view doc,
                       std::int64_t minimum = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t maximum = std::numeric_limits<std::int64_t>::max());
  double number(std::string_view key, double fallback, std::string_view doc,
                double minimum = -std::numeric_limits<double>::max(),
                double maximum = std::numeric_limits<double>::max());
  bool boolean(std::string_view key, bool fallback, std::string_view doc);
  std::string string(std::string_view key, std::string fallback, std::string_view doc);
  // A required string: an error naming the key when absent.
  std::string required_string(std::string_view key, std::string_view doc);
  std::vector<double> numbers(std::string_view key, std::vector<double> fallback, std::string_view doc);
  std::vector<std::string> strings(std::string_view key, std::vector<std::string> fallback, std::string_view doc);
  // A set of cores: 3, "3-5", "3,7,9-10" or a list of those; -1 or absent: none (empty).
  std::vector<int> cores(std::string_view key, std::string_view doc, int maximum = 4095);
  // The same forms in the order written, each core once (an error names a repeat): a core for
  // each of several threads in turn.
  std::vector<int> core_sequence(std::string_view key, std::string_view doc, int maximum = 4095);

  // One of a fixed set of words; the error lists them.
  template <typename Enum>
  Enum choice(std::string_view key, Enum fallback, std::string_view doc,
              std::initializer_list<std::pair<std::string_view, Enum>> options) {
    std::string names;
    std::string fallback_name;
    for (const auto& [name, value] : options) {
      names += (names.empty() ? "" : ", ") + std::string(name);
      if (value == fallback) fallback_name = std::string(name);
    }
    std::string text = string_impl(key, fallback_name, doc, "one of: " + names);
    for (const auto& [name, value] : options) {
      if (text == name) return value;
    }
    if (text != fallback_name) error(key, "'" + text + "' is not one of: " + names);
    return fallback;
  }

  [[nodiscard]] bool has(std::string_view key) const;
  // An error tied to a key (or to the stage's map when the key is absent), for checks that
  // span several settings ("impossible combinations").
  void error(std::string_view key, const std::string& message, const std::string& hint = {});
  // Reports every key that no getter asked for, with a "did you mean" hint.
  void finish();
  [[nodiscard]] const std::string& path() const;
  [[nodiscard]] bool docs_only() const { return docs_ != nullptr; }
  // False for a stage that the file places on another node than the one this process runs
  // (sluice run --node): its settings are checked, but not against this host's files and
  // directories, which are not the ones it will use.
  [[nodiscard]] bool on_this_host() const { return on_this_host_; }
  void set_on_this_host(bool here) { on_this_host_ = here; }

 private:
  struct Found {
    YAML::Node node;
    std::string path;
  };
  SettingsReader() = default;
  std::optional<Found> find(std::string_view key);
  void document(std::string_view key, std::string_view type, std::string default_value, std::string_view doc);
  std::string string_impl(std::string_view key, const std::string& fallback, std::string_view doc,
                          std::string_view type);
  template <typename T, typename Parse>
  T scalar(std::string_view key, T fallback, std::string_view doc, std::string_view type, std::string default_text,
           std::string_view expected, Parse parse);
  void error_at(const Found& found, const std::string& message, const std::string& hint = {});
  std::vector<int> read_cores(std::string_view key, std::string_view doc, int maximum, bool in_order);

  std::vector<SettingsLayer> layers_;
  const ConfigSource* source_ = nullptr;
  ConfigErrors* errors_ = nullptr;
  std::vector<std::string> known_;
  std::vector<SettingDoc>* docs_ = nullptr;
  bool on_this_host_ = true;
  std::string empty_path_;
};

// Closest of `candidates` to `word` within a small edit distance, for "did you mean" hints.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);
std::string location_of(const ConfigSource& source, const YAML::Node& node);

}  // namespace sluice
