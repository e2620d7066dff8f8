// SettingsReader: typed, validated, documented reads of YAML settings with collected errors.
#include "pipeline/settings.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "pipeline/gpu_placement.hpp"
#include "pipeline/units.hpp"

namespace sluice {

std::string ConfigError::to_string() const {
  std::string text = location + ": " + key_path + ": " + message;
  if (!hint.empty()) text += " (hint: " + hint + ")";
  return text;
}

std::string ConfigSource::locate(const YAML::Node& node) const {
  for (const auto& [override_node, text] : overrides_) {
    if (override_node.is(node)) return "--set " + text;
  }
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return file_;
  return file_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string location_of(const ConfigSource& source, const YAML::Node& node) { return source.locate(node); }

void ConfigErrors::add(ConfigError error) {
  for (const auto& existing : errors_) {
    if (existing.location == error.location && existing.key_path == error.key_path && existing.message == error.message)
      return;
  }
  errors_.push_back(std::move(error));
}

std::string ConfigErrors::to_string() const {
  std::string text;
  for (const auto& error : errors_) text += error.to_string() + "\n";
  return text;
}

ConfigException::ConfigException(ConfigErrors errors)
    : std::runtime_error(errors.to_string()), errors_(std::move(errors)) {}

std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::size_t> previous(b.size() + 1);
    std::vector<std::size_t> current(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      current[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
        current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
      }
      std::swap(previous, current);
    }
    return previous[b.size()];
  };
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& candidate : candidates) {
    const std::size_t d = distance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

SettingsReader::SettingsReader(std::vector<SettingsLayer> layers, const ConfigSource& source, ConfigErrors& errors)
    : layers_(std::move(layers)), source_(&source), errors_(&errors) {}

SettingsReader SettingsReader::for_docs(std::vector<SettingDoc>& docs) {
  SettingsReader reader;
  reader.docs_ = &docs;
  return reader;
}

const std::string& SettingsReader::path() const { return layers_.empty() ? empty_path_ : layers_.front().path; }

std::optional<SettingsReader::Found> SettingsReader::find(std::string_view key) {
  known_.emplace_back(key);
  for (auto layer = layers_.rbegin(); layer != layers_.rend(); ++layer) {
    if (!layer->map || !layer->map.IsMap()) continue;
    for (const auto& entry : layer->map) {
      if (entry.first.as<std::string>() == key) {
        return Found{entry.second, layer->path + "." + std::string(key)};
      }
    }
  }
  return std::nullopt;
}

bool SettingsReader::has(std::string_view key) const {
  for (const auto& layer : layers_) {
    if (layer.map && layer.map.IsMap() && layer.map[std::string(key)]) return true;
  }
  return false;
}

void SettingsReader::document(std::string_view key, std::string_view type, std::string default_value,
                              std::string_view doc) {
  if (docs_ != nullptr)
    docs_->push_back(SettingDoc{std::string(key), std::string(type), std::move(default_value), std::string(doc)});
}

void SettingsReader::error_at(const Found& found, const std::string& message, const std::string& hint) {
  if (errors_ == nullptr) return;
  errors_->add(ConfigError{source_->locate(found.node), found.path, message, hint});
}

void SettingsReader::error(std::string_view key, const std::string& message, const std::string& hint) {
  if (errors_ == nullptr) return;
  for (auto layer = layers_.rbegin(); layer != layers_.rend(); ++layer) {
    if (layer->map && layer->map.IsMap()) {
      for (const auto& entry : layer->map) {
        if (entry.first.as<std::string>() == key) {
          error_at(Found{entry.second, layer->path + "." + std::string(key)}, message, hint);
          return;
        }
      }
    }
  }
  const YAML::Node anchor = layers_.empty() ? YAML::Node() : layers_.back().map;
  errors_->add(ConfigError{anchor ? source_->locate(anchor) : (source_ ? source_->file() : ""),
                           path() + (key.empty() ? "" : "." + std::string(key)), message, hint});
}

template <typename T, typename Parse>
T SettingsReader::scalar(std::string_view key, T fallback, std::string_view doc, std::string_view type,
                         std::string default_text, std::string_view expected, Parse parse) {
  document(key, type, std::move(default_text), doc);
  if (docs_only()) return fallback;
  auto found = find(key);
  if (!found) return fallback;
  if (!found->node.IsScalar() && !found->node.IsNull()) {
    error_at(*found, "expected " + std::string(expected) + ", got a " + (found->node.IsMap() ? "map" : "list"));
    return fallback;
  }
  // YAML reads a bare `null` (as in `type: null`) as a null node; keep it as the word.
  const std::string text = found->node.IsNull() ? "null" : found->node.Scalar();
  std::string problem;
  std::optional<T> value = parse(text, problem);
  if (!value) {
    error_at(*found, problem.empty() ? "expected " + std::string(expected) + ", got '" + text + "'" : problem);
    return fallback;
  }
  return *value;
}

namespace {
std::string number_text(double value) {
  std::ostringstream stream;
  stream << value;
  return stream.str();
}
}  // namespace

std::uint64_t SettingsReader::bytes(std::string_view key, std::uint64_t fallback, std::string_view doc,
                                    std::uint64_t minimum, std::uint64_t maximum) {
  return scalar<std::uint64_t>(
      key, fallback, doc, "size", format_bytes(static_cast<double>(fallback)), "a size like 4MiB or 1472",
      [&](const std::string& text, std::string& problem) -> std::optional<std::uint64_t> {
        auto value = parse_bytes(text);
        if (!value) return std::nullopt;
        if (*value < minimum || *value > maximum) {
          problem = "'" + text + "' is out of range [" + format_bytes(static_cast<double>(minimum)) + ", " +
                    format_bytes(static_cast<double>(maximum)) + "]";
          return std::nullopt;
        }
        return value;
      });
}

double SettingsReader::byte_rate(std::string_view key, double fallback, std::string_view doc) {
  return scalar<double>(key, fallback, doc, "rate", fallback == 0 ? "0" : format_byte_rate(fallback),
                        "a rate like 2.5GB/s or 25Gb/s",
                        [](const std::string& text, std::string&) { return parse_byte_rate(text); });
}

double SettingsReader::frequency(std::string_view key, double fallback, std::string_view doc, double minimum,
                                 double maximum) {
  return scalar<double>(key, fallback, doc, "frequency", format_frequency(fallback),
                        "a frequency like 100MHz or 250Msps",
                        [&](const std::string& text, std::string& problem) -> std::optional<double> {
                          auto value = parse_frequency(text);
                          if (!value) return std::nullopt;
                          if (*value < minimum || *value > maximum) {
                            problem = "'" + text + "' is out of range [" + format_frequency(minimum) + ", " +
                                      format_frequency(maximum) + "]";
                            return std::nullopt;
                          }
                          return value;
                        });
}

std::chrono::nanoseconds SettingsReader::duration(std::string_view key, std::chrono::nanoseconds fallback,
                                                  std::string_view doc) {
  return scalar<std::chrono::nanoseconds>(key, fallback, doc, "duration", format_duration(fallback),
                                          "a duration like 10s or 500ms",
                                          [](const std::string& text, std::string&) { return parse_duration(text); });
}

std::int64_t SettingsReader::integer(std::string_view key, std::int64_t fallback, std::string_view doc,
                                     std::int64_t minimum, std::int64_t maximum) {
  return scalar<std::int64_t>(key, fallback, doc, "integer", std::to_string(fallback), "an integer",
                              [&](const std::string& text, std::string& problem) -> std::optional<std::int64_t> {
                                std::int64_t value = 0;
                                const char* end = text.data() + text.size();
                                auto [ptr, error] = std::from_chars(text.data(), end, value);
                                if (error != std::errc{} || ptr != end) return std::nullopt;
                                if (value < minimum || value > maximum) {
                                  problem = std::to_string(value) + " is out of range [" + std::to_string(minimum) +
                                            ", " + std::to_string(maximum) + "]";
                                  return std::nullopt;
                                }
                                return value;
                              });
}

double SettingsReader::number(std::string_view key, double fallback, std::string_view doc, double minimum,
                              double maximum) {
  return scalar<double>(key, fallback, doc, "number", number_text(fallback), "a number",
                        [&](const std::string& text, std::string& problem) -> std::optional<double> {
                          double value = 0;
                          const char* end = text.data() + text.size();
                          auto [ptr, error] = std::from_chars(text.data(), end, value);
                          if (error != std::errc{} || ptr != end || !std::isfinite(value)) return std::nullopt;
                          if (value < minimum || value > maximum) {
                            problem =
                                text + " is out of range [" + number_text(minimum) + ", " + number_text(maximum) + "]";
                            return std::nullopt;
                          }
                          return value;
                        });
}

bool SettingsReader::boolean(std::string_view key, bool fallback, std::string_view doc) {
  return scalar<bool>(key, fallback, doc, "bool", fallback ? "true" : "false", "true or false",
                      [](const std::string& text, std::string&) -> std::optional<bool> {
                        if (text == "true" || text == "yes" || text == "on") return true;
                        if (text == "false" || text == "no" || text == "off") return false;
                        return std::nullopt;
                      });
}

std::string SettingsReader::string_impl(std::string_view key, const std::string& fallback, std::string_view doc,
                                        std::string_view type) {
  return scalar<std::string>(key, fallback, doc, type, fallback, "a string",
                             [](const std::string& text, std::string&) -> std::optional<std::string> { return text; });
}

std::string SettingsReader::string(std::string_view key, std::string fallback, std::string_view doc) {
  return string_impl(key, fallback, doc, "string");
}

std::string SettingsReader::required_string(std::string_view key, std::string_view doc) {
  if (!docs_only() && !has(key)) {
    known_.emplace_back(key);
    error(key, "required setting '" + std::string(key) + "' is missing");
    return {};
  }
  return string_impl(key, "", doc, "string (required)");
}

std::vector<double> SettingsReader::numbers(std::string_view key, std::vector<double> fallback, std::string_view doc) {
  std::string default_text;
  for (double value : fallback) default_text += (default_text.empty() ? "" : ", ") + number_text(value);
  document(key, "list of numbers", "[" + default_text + "]", doc);
  if (docs_only()) return fallback;
  auto found = find(key);
  if (!found) return fallback;
  std::vector<double> values;
  auto parse_one = [&](const YAML::Node& node, const std::string& path) -> bool {
    double value = 0;
    const std::string text = node.IsScalar() ? node.Scalar() : "";
    const char* end = text.data() + text.size();
    auto [ptr, error] = std::from_chars(text.data(), end, value);
    if (!node.IsScalar() || error != std::errc{} || ptr != end) {
      // Frequencies in lists may carry units ("1MHz").
      if (auto frequency = parse_frequency(text); node.IsScalar() && frequency) {
        values.push_back(*frequency);
        return true;
      }
      error_at(Found{node, path}, "expected a number, got '" + text + "'");
      return false;
    }
    values.push_back(value);
    return true;
  };
  if (found->node.IsSequence()) {
    for (std::size_t i = 0; i < found->node.size(); ++i) {
      if (!parse_one(found->node[i], found->path + "[" + std::to_string(i) + "]")) return fallback;
    }
  } else if (!parse_one(found->node, found->path)) {
    return fallback;
  }
  return values;
}

std::vector<std::string> SettingsReader::strings(std::string_view key, std::vector<std::string> fallback,
                                                 std::string_view doc) {
  std::string default_text;
  for (const auto& value : fallback) default_text += (default_text.empty() ? "" : ", ") + value;
  document(key, "list of strings", "[" + default_text + "]", doc);
  if (docs_only()) return fallback;
  auto found = find(key);
  if (!found) return fallback;
  std::vector<std::string> values;
  if (found->node.IsScalar()) return {found->node.Scalar()};
  if (!found->node.IsSequence()) {
    error_at(*found, "expected a list of strings");
    return fallback;
  }
  for (std::size_t i = 0; i < found->node.size(); ++i) {
    if (!found->node[i].IsScalar()) {
      error_at(Found{found->node[i], found->path + "[" + std::to_string(i) + "]"}, "expected a string");
      return fallback;
    }
    values.push_back(found->node[i].Scalar());
  }
  return values;
}

std::vector<int> SettingsReader::cores(std::string_view key, std::string_view doc, int maximum) {
  return read_cores(key, doc, maximum, false);
}

std::vector<int> SettingsReader::core_sequence(std::string_view key, std::string_view doc, int maximum) {
  return read_cores(key, doc, maximum, true);
}

std::vector<int> SettingsReader::read_cores(std::string_view key, std::string_view doc, int maximum, bool in_order) {
  document(key, "cores", "-1 (not pinned)", doc);
  if (docs_only()) return {};
  auto found = find(key);
  if (!found || (found->node.IsScalar() && found->node.Scalar() == "-1")) return {};
  std::string text;
  if (found->node.IsScalar()) {
    text = found->node.Scalar();
  } else if (found->node.IsSequence() && found->node.size() > 0) {
    for (std::size_t i = 0; i < found->node.size(); ++i) {
      text += (i == 0 ? "" : ",") + (found->node[i].IsScalar() ? found->node[i].Scalar() : std::string("?"));
    }
  }
  const auto cores = in_order ? parse_core_sequence(text) : parse_core_list(text);
  if (!cores || cores->empty()) {
    error_at(*found, "expected cores like 3, 3-5, 3,7,9-10 or a list of them, got '" + text + "'",
             "-1 leaves the thread unpinned");
    return {};
  }
  const int highest = *std::max_element(cores->begin(), cores->end());
  if (highest > maximum) {
    error_at(*found, "core " + std::to_string(highest) + " is out of range [0, " + std::to_string(maximum) + "]");
    return {};
  }
  for (auto core = cores->begin(); in_order && core != cores->end(); ++core) {
    if (std::find(cores->begin(), core, *core) == core) continue;
    error_at(*found, "core " + std::to_string(*core) + " is named twice in '" + text + "'",
             "the cores are taken in the order written, one for each thread: name each once");
    return {};
  }
  return *cores;
}

void SettingsReader::finish() {
  if (docs_only() || errors_ == nullptr) return;
  for (const auto& layer : layers_) {
    if (!layer.map || !layer.map.IsMap()) continue;
    for (const auto& entry : layer.map) {
      const std::string key = entry.first.as<std::string>();
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string hint;
      if (auto match = closest_match(key, known_)) hint = "did you mean '" + *match + "'?";
      errors_->add(
          ConfigError{source_->locate(entry.first), layer.path + "." + key, "unknown setting '" + key + "'", hint});
    }
  }
}

}  // namespace sluice
