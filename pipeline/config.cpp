// Pipeline file loading: YAML syntax, --set overrides, lane template expansion, stage
// construction and role checks — every error collected with its location.
#include "pipeline/config.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "pipeline/errno_message.hpp"
#include "pipeline/gpu_placement.hpp"
#include "pipeline/http_endpoint.hpp"
#include "pipeline/placement.hpp"

namespace sluice {
namespace {

// What aliases may add to a document beyond the nodes it writes: the larger of a fixed
// allowance and a multiple of the nodes written. Walking the expanded tree then costs at most
// a small multiple of reading the file, however long the file, while an alias bomb (a few
// hundred bytes that expand to 10^9 nodes) is refused as soon as its expansion passes this.
constexpr std::uint64_t kAliasNodeAllowance = 100'000;
constexpr std::uint64_t kAliasExpansionRatio = 10;
// Maps and lists nested this deep are refused with their position; yaml-cpp itself gives up
// near 500 levels with "bad file" at the scanner's read-ahead position. A pipeline file nests
// a handful of levels (lanes, a stage, a setting's list).
constexpr std::size_t kMaxYamlDepth = 64;

struct TextPosition {
  std::size_t line = 0;    // from 0
  std::size_t column = 0;  // from 0, in bytes
};

// The position of the first byte that does not start or continue a valid UTF-8 sequence
// (overlong forms, surrogates and code points above U+10FFFF included), if any.
std::optional<TextPosition> first_invalid_utf8(std::string_view text) {
  TextPosition position;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    unsigned minimum = 0;
    unsigned code = 0;
    if (byte < 0x80) {
      length = 1;
      code = byte;
    } else if ((byte & 0xE0) == 0xC0) {
      length = 2;
      code = byte & 0x1FU;
      minimum = 0x80;
    } else if ((byte & 0xF0) == 0xE0) {
      length = 3;
      code = byte & 0x0FU;
      minimum = 0x800;
    } else if ((byte & 0xF8) == 0xF0) {
      length = 4;
      code = byte & 0x07U;
      minimum = 0x10000;
    } else {
      return position;
    }
    if (i + length > text.size()) return position;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return position;
      code = (code << 6) | (next & 0x3FU);
    }
    if (code < minimum || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return position;
    if (byte == '\n') {
      ++position.line;
      position.column = 0;
    } else {
      position.column += length;
    }
    i += length;
  }
  return std::nullopt;
}

// Follows the parser's events: knows the key path being parsed (for syntax errors), refuses
// maps and lists nested deeper than kMaxYamlDepth where the one too deep starts, and counts
// the nodes the document writes and those it expands to (an alias counting its anchor's
// whole tree), refusing the alias that makes the expansion add more than the rule allows.
class YamlPrecheck final : public YAML::EventHandler {
 public:
  struct TooLarge {
    YAML::Mark mark;
    std::string path;
    std::uint64_t written = 0;  // nodes the file writes, up to the alias refused
    std::uint64_t allowed = 0;  // what aliases could add to them
  };
  struct TooDeep {
    YAML::Mark mark;  // where the map or list past the limit starts
    std::string path;
  };

  // The nodes aliases may add to a document that writes `written` nodes.
  [[nodiscard]] static std::uint64_t allowed_addition(std::uint64_t written) {
    return std::max(kAliasNodeAllowance, kAliasExpansionRatio * written);
  }

  // Where parsing got to, e.g. "lanes[1].source.rate"; never empty.
  [[nodiscard]] std::string path() const {
    if (frames_.empty()) return "(document)";
    const std::string inner = child_path();
    return inner.empty() ? "(top level)" : inner;
  }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor, 1, {}); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    leaf(mark, 0, anchor < anchor_sizes_.size() ? anchor_sizes_[anchor] : 1, {});
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string& value) override {
    leaf(mark, anchor, 1, value);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor, false);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor, true);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    bool map = false;
    std::string path;
    bool key_next = true;
    std::string key;
    std::size_t index = 0;
    std::uint64_t nodes = 1;  // this container and everything below it, aliases expanded
    YAML::anchor_t anchor = 0;
  };

  [[nodiscard]] std::string child_path() const {
    const Frame& top = frames_.back();
    if (top.map) {
      if (top.key_next) return top.path;
      return top.path.empty() ? top.key : top.path + "." + top.key;
    }
    return top.path + "[" + std::to_string(top.index) + "]";
  }
  // One node written, `nodes` once expanded. Every step is checked, so no count can grow
  // past a few times the limit (nor overflow).
  void count(const YAML::Mark& mark, std::uint64_t nodes) {
    ++written_;
    expanded_ += nodes;
    const std::uint64_t allowed = allowed_addition(written_);
    if (expanded_ - written_ > allowed) throw TooLarge{mark, path(), written_, allowed};
  }
  void remember(YAML::anchor_t anchor, std::uint64_t nodes) {
    if (anchor == 0) return;
    if (anchor >= anchor_sizes_.size()) anchor_sizes_.resize(anchor + 1, 1);
    anchor_sizes_[anchor] = nodes;
  }
  // A complete node of `nodes` expanded nodes has been read in the current container.
  void completed(std::uint64_t nodes, const std::string& scalar) {
    if (frames_.empty()) return;
    Frame& top = frames_.back();
    top.nodes += nodes;
    if (!top.map) {
      ++top.index;
    } else if (top.key_next) {
      top.key = scalar.empty() ? "?" : scalar;
      top.key_next = false;
    } else {
      top.key_next = true;
    }
  }
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor, std::uint64_t nodes, const std::string& scalar) {
    count(mark, nodes);
    remember(anchor, nodes);
    completed(nodes, scalar);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor, bool map) {
    if (frames_.size() == kMaxYamlDepth) throw TooDeep{mark, path()};
    count(mark, 1);
    Frame frame;
    frame.map = map;
    frame.path = frames_.empty() ? std::string() : child_path();
    frame.anchor = anchor;
    frames_.push_back(std::move(frame));
  }
  void close() {
    const Frame done = std::move(frames_.back());
    frames_.pop_back();
    remember(done.anchor, done.nodes);
    completed(done.nodes, {});
  }

  std::uint64_t written_ = 0;
  std::uint64_t expanded_ = 0;
  std::vector<Frame> frames_;
  std::vector<std::uint64_t> anchor_sizes_;
};

std::string join(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& word : words) text += (text.empty() ? "" : ", ") + word;
  return text;
}

// The element of a sequence that `segment` names: a number, or the element's name/type.
YAML::Node sequence_element(YAML::Node sequence, const std::string& segment) {
  if (!segment.empty() && std::all_of(segment.begin(), segment.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const std::size_t index = std::stoul(segment);
    return index < sequence.size() ? sequence[index] : YAML::Node(YAML::NodeType::Undefined);
  }
  for (std::size_t i = 0; i < sequence.size(); ++i) {
    YAML::Node element = sequence[i];
    if (!element.IsMap()) continue;
    const YAML::Node name = element["name"] ? element["name"] : element["type"];
    if (name && name.IsScalar() && name.Scalar() == segment) return element;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

void apply_override(YAML::Node& root, const std::string& text, ConfigSource& source, ConfigErrors& errors) {
  const auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0) {
    errors.add({"--set " + text, "", "expected key.path=value", "e.g. --set lanes.port0.source.rate=2GB/s"});
    return;
  }
  const std::string path = text.substr(0, equals);
  const std::string value_text = text.substr(equals + 1);
  std::vector<std::string> segments;
  std::stringstream stream(path);
  for (std::string segment; std::getline(stream, segment, '.');) segments.push_back(segment);
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& error) {
    errors.add({"--set " + text, path, "value is not valid YAML: " + error.msg, ""});
    return;
  }
  if (!value || value.IsNull()) value = YAML::Node(value_text);
  YAML::Node node = root;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const bool last = i + 1 == segments.size();
    const std::string& segment = segments[i];
    if (node.IsSequence()) {
      YAML::Node element = sequence_element(node, segment);
      if (!element.IsDefined()) {
        errors.add({"--set " + text, path, "no element '" + segment + "' in this list", "use its name or index"});
        return;
      }
      if (last) {
        errors.add({"--set " + text, path, "cannot replace a whole list element", ""});
        return;
      }
      node.reset(element);
      continue;
    }
    if (!node.IsMap() && !node.IsNull() && node.IsDefined()) {
      errors.add({"--set " + text, path, "'" + segment + "' is below a scalar", ""});
      return;
    }
    if (last) {
      node[segment] = value;
      source.add_override(node[segment], text);
      return;
    }
    YAML::Node child = node[segment];
    if (!child.IsDefined() || child.IsNull()) node[segment] = YAML::Node(YAML::NodeType::Map);
    YAML::Node next = node[segment];
    node.reset(next);
  }
}

void check_duplicate_keys(const YAML::Node& node, const std::string& path, const ConfigSource& source,
                          ConfigErrors& errors) {
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      if (!seen.insert(key).second) {
        errors.add({source.locate(entry.first), path + "." + key, "duplicate key '" + key + "'",
                    "later ones would silently win"});
      }
      check_duplicate_keys(entry.second, path.empty() ? key : path + "." + key, source, errors);
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      check_duplicate_keys(node[i], path + "[" + std::to_string(i) + "]", source, errors);
    }
  }
}

// The queue between stages holds a power of two chunks; another depth would be rounded up
// silently, so it is an error that names the nearest depths.
void check_power_of_two(SettingsReader& reader, std::string_view key, std::uint64_t depth) {
  if (depth == 0 || (depth & (depth - 1)) == 0) return;
  const std::uint64_t above = std::bit_ceil(depth);
  reader.error(
      key, std::string(key) + " " + std::to_string(depth) + " is not a power of two",
      "use " + std::to_string(above / 2) + " or " + std::to_string(above) + " (the queue is a power-of-two ring)");
}

// A `gpu:` that names a GPU this host lacks is an error at its key (not for a stage placed on
// another node, whose GPUs are not this host's).
void check_gpu(SettingsReader& reader, int gpu, const GpuHost& host) {
  if (!reader.on_this_host()) return;
  std::string hint;
  if (std::string problem = host.problem(gpu, hint); !problem.empty()) reader.error("gpu", problem, hint);
}

// The settings only some roles can have are checked against the stage's role, then the stage
// is made from the rest of its settings.
void create_stage(SettingsReader& reader, const StageType& type, const PipelineSettings& pipeline,
                  StageDefinition& definition) {
  definition.role = type.role;
  if (!definition.enabled && type.role != StageRole::tap) {
    reader.error("enabled",
                 "only a tap (record) can be switched off: a lane without its " + std::string(to_string(type.role)) +
                     " would not carry data the same way",
                 "remove the stage from the lane instead");
  }
  // Settings of a queue the stage does not have would be accepted and do nothing.
  if (type.role == StageRole::source && reader.has("queue_depth")) {
    reader.error("queue_depth", "a source has no input queue",
                 "set queue_depth on the next stage: it sizes the queue in front of the stage it is set on");
  }
  if (type.role == StageRole::sink && reader.has("on_full")) {
    reader.error("on_full", "a sink has no output queue",
                 "set on_full on the stage before it: it says what that stage does when this stage's queue is full");
  }
  try {
    definition.stage = type.create(reader, pipeline);
  } catch (const std::exception& error) {
    reader.error("type", std::string("cannot create stage: ") + error.what());
  }
}

// `lane_node` is the node of the stage before (placement's default) and becomes this one's;
// `this_node` is the node this process runs ("" = every node).
StageDefinition make_stage(std::vector<SettingsLayer> layers, const std::string& default_name,
                           const ConfigSource& source, ConfigErrors& errors, const PipelineSettings& pipeline,
                           const StageRegistry& registry, const std::string& this_node, std::string& lane_node,
                           const GpuHost& host) {
  StageDefinition definition;
  SettingsReader reader(std::move(layers), source, errors);
  definition.type = reader.required_string("type", "stage type (sluice stages lists them)");
  definition.name =
      reader.string("name", default_name.empty() ? definition.type : default_name, "stage name, unique in its lane");
  definition.cpus =
      reader.cores("cpu", "cores to pin this stage's thread to: 3, 3-5, 3,7,9-10 or a list (-1: not pinned)");
  definition.gpu = static_cast<int>(
      reader.integer("gpu", -1, "GPU (CUDA device) of this stage's pools, FFT and copies (-1: its lane's)", -1, 1023));
  definition.on_full =
      reader.choice("on_full", OverflowPolicy::block,
                    "when the next stage's queue is full: block (backpressure) or drop (count and release)",
                    {{"block", OverflowPolicy::block}, {"drop", OverflowPolicy::drop}});
  definition.queue_depth =
      static_cast<std::uint64_t>(reader.integer("queue_depth", static_cast<std::int64_t>(pipeline.queue_depth),
                                                "chunks queued in front of this stage (a power of two)", 1, 65536));
  if (reader.has("queue_depth"))
    check_power_of_two(reader, "queue_depth", definition.queue_depth);  // else the pipeline's, checked there
  definition.node =
      reader.string("node", "", "node this stage runs on (sluice run --node NAME); default: the previous stage's");
  if (!definition.node.empty()) lane_node = definition.node;
  reader.set_on_this_host(this_node.empty() || lane_node.empty() || lane_node == this_node);
  check_gpu(reader, definition.gpu, host);
  definition.enabled =
      reader.boolean("enabled", true,
                     "false leaves this tap out of its lane (its settings are still checked): a switch for "
                     "an optional record tap, e.g. --set template.raw.enabled=false");
  if (!definition.type.empty()) {
    const StageType* type = registry.find(definition.type);
    if (type == nullptr) {
      std::string hint = "known types: " + join(registry.names());
      if (auto match = closest_match(definition.type, registry.names())) hint = "did you mean '" + *match + "'?";
      reader.error("type", "unknown stage type '" + definition.type + "'", hint);
    } else {
      create_stage(reader, *type, pipeline, definition);
    }
  }
  reader.finish();
  return definition;
}

// The lane-wide settings of a lane entry: `gpu` (its stages' GPU unless they name one) and
// `cpu` (the cores of its stages that name none). The other keys are the lane loop's.
void read_lane_settings(const YAML::Node& entry, const std::string& lane_path, const ConfigSource& source,
                        ConfigErrors& errors, const GpuHost& host, LaneDefinition& lane) {
  SettingsReader reader({SettingsLayer{entry, lane_path}}, source, errors);
  lane.gpu = static_cast<int>(reader.integer("gpu", -1, "GPU of this lane's stages (-1: nearest its NIC)", -1, 1023));
  lane.cpus = reader.cores("cpu", "cores of this lane's stages that name none");
  check_gpu(reader, lane.gpu, host);
}

// Each lane's GPU (its gpu:, the pipeline's, or the nearest to the NIC its source receives
// on), each stage's (its own gpu: or its lane's), and the cores each stage's thread runs on.
void place_on_gpus(PipelineDefinition& definition, const GpuHost& host) {
  std::vector<LaneRequest> requests;
  for (const auto& lane : definition.lanes) {
    LaneRequest request;
    if (!lane.stages.empty() && lane.stages.front().stage) {
      request.interface = interface_holding(lane.stages.front().stage->receive_address());
    }
    request.gpu = lane.gpu >= 0 ? lane.gpu : definition.settings.gpu;
    request.gpu_setting = lane.gpu >= 0 ? "lanes." + lane.name + ".gpu" : "pipeline.gpu";
    requests.push_back(std::move(request));
  }
  const std::vector<LaneGpu> placed = place_lanes(requests, host.gpus, host.topology);
  for (std::size_t i = 0; i < definition.lanes.size(); ++i) {
    LaneDefinition& lane = definition.lanes[i];
    lane.placement = placed[i];
    for (auto& stage : lane.stages) {
      stage.cuda_device = stage.gpu >= 0 ? stage.gpu : lane.placement.gpu;
      const LaneGpu gpu = stage.cuda_device == lane.placement.gpu
                              ? lane.placement
                              : describe_gpu(stage.cuda_device, host.gpus, host.topology);
      if (!stage.cpus.empty()) {
        stage.cores = stage.cpus;
        stage.cores_reason = "cpu:";
      } else if (!lane.cpus.empty()) {
        stage.cores = lane.cpus;
        stage.cores_reason = "lane cpu:";
      } else if (!gpu.cores.empty()) {
        stage.cores = gpu.cores;
        stage.cores_reason = "NUMA node " + std::to_string(gpu.numa_node) + " of GPU " + std::to_string(gpu.gpu);
      }
    }
  }
}

}  // namespace

PipelineSettings read_pipeline_settings(SettingsReader& reader) {
  PipelineSettings settings;
  settings.name = reader.string("name", settings.name, "pipeline name, shown in reports");
  settings.duration =
      reader.duration("duration", settings.duration, "stop after this long (0: run until end of stream or Ctrl-C)");
  settings.chunk_bytes =
      reader.bytes("chunk", settings.chunk_bytes, "default chunk size for every pool", 4096, 1ULL << 30);
  settings.chunk_count = static_cast<std::uint64_t>(reader.integer(
      "chunks", static_cast<std::int64_t>(settings.chunk_count), "default number of chunks in each pool", 2, 65536));
  settings.queue_depth = static_cast<std::uint64_t>(
      reader.integer("queue_depth", static_cast<std::int64_t>(settings.queue_depth),
                     "default depth of the queue between stages (a power of two)", 1, 65536));
  check_power_of_two(reader, "queue_depth", settings.queue_depth);
  settings.progress_interval = reader.duration("progress_interval", settings.progress_interval,
                                               "period of progress lines when not on a terminal");
  settings.gpu = static_cast<int>(reader.integer(
      "gpu", -1, "GPU of every lane and stage that names none (-1: the one nearest the lane's NIC, else round-robin)",
      -1, 1023));
  if (reader.has("cuda_device")) {
    static_cast<void>(reader.integer("cuda_device", 0, "replaced by gpu", 0, 1023));
    reader.error("cuda_device", "cuda_device is replaced by gpu:",
                 "write gpu: N here for every lane, or per lane (lanes: [{name: port0, gpu: 1}]) or per stage; "
                 "without it each lane takes the GPU nearest its NIC");
  }
  settings.http = reader.string(
      "http", "", "serve /metrics (Prometheus) and the live dashboard at ADDR:PORT, e.g. 127.0.0.1:9100 (empty: off)");
  if (!settings.http.empty() && !parse_http_endpoint(settings.http)) {
    reader.error("http", "http: '" + settings.http + "' is not ADDR:PORT",
                 "write e.g. 127.0.0.1:9100, [::1]:9100 or :9100 (port 0: any free port)");
  }
  if (settings.chunk_bytes % 4096 != 0) {
    reader.error("chunk", "chunk size " + std::to_string(settings.chunk_bytes) + " is not a multiple of 4096",
                 "O_DIRECT recording and RDMA registration need page-sized chunks");
  }
  return settings;
}

YAML::Node parse_yaml(const std::string& text, ConfigSource& source, const std::vector<std::string>& overrides) {
  ConfigErrors errors;
  auto at = [&](std::size_t line, std::size_t column) {
    return source.file() + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1);
  };
  // yaml-cpp takes any bytes, and a file that is not UTF-8 would fail only when its strings
  // reach the JSON of a capture's metadata, after the recording has started.
  if (const auto bad = first_invalid_utf8(text)) {
    errors.add({at(bad->line, bad->column), "(file)", "not UTF-8: invalid byte sequence",
                "save the file as UTF-8 (YAML files are UTF-8)"});
    throw ConfigException(std::move(errors));
  }
  // One pass over the parser's events first: syntax errors get the key path they occur at,
  // and aliases are expanded by count only, so that a small alias bomb is refused at once
  // instead of being walked node by node.
  YamlPrecheck precheck;
  try {
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    while (parser.HandleNextDocument(precheck)) {
    }
  } catch (const YAML::ParserException& error) {
    errors.add({at(static_cast<std::size_t>(error.mark.line), static_cast<std::size_t>(error.mark.column)),
                precheck.path(), "YAML syntax error: " + error.msg, ""});
    throw ConfigException(std::move(errors));
  } catch (const YamlPrecheck::TooLarge& error) {
    errors.add({at(static_cast<std::size_t>(error.mark.line), static_cast<std::size_t>(error.mark.column)), error.path,
                "aliases expand the document by more than " + std::to_string(error.allowed) + " nodes (it writes " +
                    std::to_string(error.written) + " up to here)",
                "aliases may add " + std::to_string(kAliasExpansionRatio) + " times the nodes a file writes, or " +
                    std::to_string(kAliasNodeAllowance) +
                    " to a small one; write the repeated settings in a lane template instead"});
    throw ConfigException(std::move(errors));
  } catch (const YamlPrecheck::TooDeep& error) {
    errors.add({at(static_cast<std::size_t>(error.mark.line), static_cast<std::size_t>(error.mark.column)), error.path,
                "maps and lists nested deeper than " + std::to_string(kMaxYamlDepth) + " levels",
                "a pipeline file nests a few levels (lanes, stages, settings); look for brackets or indentation that "
                "keep opening"});
    throw ConfigException(std::move(errors));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& error) {
    errors.add({at(static_cast<std::size_t>(error.mark.line), static_cast<std::size_t>(error.mark.column)),
                "(document)", "YAML syntax error: " + error.msg, ""});
    throw ConfigException(std::move(errors));
  }
  if (!root.IsMap()) {
    errors.add(
        {source.file() + ":1:1", "(document)", "expected a YAML map with 'pipeline', 'template' and 'lanes'", ""});
    throw ConfigException(std::move(errors));
  }
  check_duplicate_keys(root, "", source, errors);
  for (const auto& text_override : overrides) apply_override(root, text_override, source, errors);
  if (!errors.empty()) throw ConfigException(std::move(errors));
  return root;
}

namespace {

// The keys a pipeline file may have at its top; any other is an error naming the closest.
void check_top_level_keys(const YAML::Node& root, const ConfigSource& source, ConfigErrors& errors) {
  static const std::vector<std::string> kTopLevel{"pipeline", "template", "lanes", "emulator"};
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    if (std::find(kTopLevel.begin(), kTopLevel.end(), key) == kTopLevel.end()) {
      auto match = closest_match(key, kTopLevel);
      errors.add({source.locate(entry.first), key, "unknown top-level key '" + key + "'",
                  match ? "did you mean '" + *match + "'?" : "top-level keys: " + join(kTopLevel)});
    }
  }
}

PipelineSettings read_pipeline_section(const YAML::Node& root, const ConfigSource& source, ConfigErrors& errors,
                                       const GpuHost& host) {
  YAML::Node section = root["pipeline"];
  if (section && !section.IsMap()) errors.add({source.locate(section), "pipeline", "expected a map", ""});
  SettingsReader reader({SettingsLayer{section && section.IsMap() ? section : YAML::Node(), "pipeline"}}, source,
                        errors);
  PipelineSettings settings = read_pipeline_settings(reader);
  check_gpu(reader, settings.gpu, host);
  reader.finish();
  return settings;
}

// The `template:` list (null when absent or not a list) and the name of each of its stages (its
// name, else its type, else #index): the keys by which a lane overrides a template stage.
struct LaneTemplate {
  YAML::Node stages;
  std::vector<std::string> names;
};

LaneTemplate read_template(const YAML::Node& root, const ConfigSource& source, ConfigErrors& errors) {
  LaneTemplate lane_template{root["template"], {}};
  if (lane_template.stages && !lane_template.stages.IsSequence()) {
    errors.add({source.locate(lane_template.stages), "template", "expected a list of stages",
                "each item a map with at least 'type'"});
    lane_template.stages = YAML::Node();
  }
  if (!lane_template.stages) return lane_template;
  for (std::size_t i = 0; i < lane_template.stages.size(); ++i) {
    const YAML::Node stage = lane_template.stages[i];
    const YAML::Node label = stage.IsMap() ? (stage["name"] ? stage["name"] : stage["type"]) : YAML::Node();
    lane_template.names.push_back(label && label.IsScalar() ? label.Scalar() : "#" + std::to_string(i));
  }
  return lane_template;
}

// What reading a lane needs from the rest of the file and from the caller.
struct LaneContext {
  const ConfigSource& source;
  ConfigErrors& errors;
  const PipelineSettings& settings;
  const StageRegistry& registry;
  const std::string& node;  // the node this process runs ("" = every node)
  const GpuHost& host;
  const LaneTemplate& lane_template;
};

// A lane entry's keys besides its own settings each name a template stage and hold a map
// overriding that stage's settings.
void check_lane_keys(const YAML::Node& entry, const std::string& lane_path, const LaneContext& context) {
  const std::vector<std::string>& template_names = context.lane_template.names;
  for (const auto& item : entry) {
    const std::string key = item.first.Scalar();
    if (key == "name" || key == "stages" || key == "gpu" || key == "cpu") continue;
    if (std::find(template_names.begin(), template_names.end(), key) == template_names.end()) {
      auto match = closest_match(key, template_names);
      context.errors.add(
          {context.source.locate(item.first), lane_path + "." + key, "'" + key + "' is not a stage of the template",
           match
               ? "did you mean '" + *match + "'?"
               : "lane entries take name, stages, gpu, cpu, or a template stage name (" + join(template_names) + ")"});
    } else if (!item.second.IsMap()) {
      context.errors.add({context.source.locate(item.second), lane_path + "." + key,
                          "expected a map of settings overriding stage '" + key + "'", ""});
    }
  }
}

// The settings layers of each stage of a lane: its own `stages:` list, else the template's
// stages under the lane's overrides. None (after an error) when the lane has neither.
std::optional<std::vector<std::vector<SettingsLayer>>> lane_stage_layers(const YAML::Node& entry,
                                                                         const std::string& lane_path,
                                                                         const LaneContext& context) {
  std::vector<std::vector<SettingsLayer>> stage_layers;
  const LaneTemplate& lane_template = context.lane_template;
  if (entry["stages"]) {
    const YAML::Node stages = entry["stages"];
    if (!stages.IsSequence()) {
      context.errors.add({context.source.locate(stages), lane_path + ".stages", "expected a list of stages", ""});
      return std::nullopt;
    }
    for (std::size_t i = 0; i < stages.size(); ++i) {
      stage_layers.push_back({SettingsLayer{stages[i], lane_path + ".stages[" + std::to_string(i) + "]"}});
    }
  } else if (lane_template.stages) {
    for (std::size_t i = 0; i < lane_template.stages.size(); ++i) {
      std::vector<SettingsLayer>& layers = stage_layers.emplace_back();
      layers.push_back(SettingsLayer{lane_template.stages[i], "template." + lane_template.names[i]});
      const YAML::Node override_map = entry[lane_template.names[i]];
      if (override_map && override_map.IsMap())
        layers.push_back(SettingsLayer{override_map, lane_path + "." + lane_template.names[i]});
    }
  } else {
    context.errors.add({context.source.locate(entry), lane_path, "lane has no stages",
                        "add a 'template' list or give the lane 'stages'"});
    return std::nullopt;
  }
  return stage_layers;
}

// A lane runs a source first, a sink last and transforms and taps between them.
void check_stage_position(const StageDefinition& stage, const std::string& stage_path, std::size_t index,
                          std::size_t count, ConfigErrors& errors) {
  const bool first = index == 0;
  const bool last = index + 1 == count;
  const std::string what =
      "stage '" + stage.name + "' (" + stage.type + ", a " + std::string(to_string(stage.role)) + ")";
  if (first && stage.role != StageRole::source) {
    errors.add({stage.location, stage_path, what + " cannot start a lane", "the first stage must be a source"});
  } else if (!first && stage.role == StageRole::source) {
    errors.add({stage.location, stage_path, what + " can only be the first stage of a lane", ""});
  } else if (last && stage.role == StageRole::transform) {
    errors.add({stage.location, stage_path, what + " cannot end a lane", "add a sink after it (null, file, record)"});
  } else if (!last && stage.role == StageRole::sink) {
    errors.add({stage.location, stage_path, what + " must be the last stage of its lane", ""});
  } else if (count == 1) {
    errors.add({stage.location, stage_path, "a lane needs a source and a sink", ""});
  }
}

// Makes and checks each stage of a lane; a tap switched off with enabled: false is checked like
// any stage, then left out, and the lane must still end in a sink without it.
void read_lane_stages(const std::vector<std::vector<SettingsLayer>>& stage_layers, const std::string& lane_path,
                      const LaneContext& context, LaneDefinition& lane) {
  std::set<std::string> stage_names;
  std::string lane_node;  // where the stage being read runs (placement: the previous stage's unless it names one)
  bool left_out = false;
  for (std::size_t i = 0; i < stage_layers.size(); ++i) {
    const YAML::Node anchor = stage_layers[i].front().map;
    const std::string stage_path = stage_layers[i].front().path;
    if (!anchor.IsMap()) {
      context.errors.add({context.source.locate(anchor), stage_path, "expected a stage map with at least 'type'", ""});
      continue;
    }
    StageDefinition stage = make_stage(stage_layers[i], "", context.source, context.errors, context.settings,
                                       context.registry, context.node, lane_node, context.host);
    stage.location = context.source.locate(anchor);
    if (!stage_names.insert(stage.name).second) {
      context.errors.add({stage.location, stage_path,
                          "two stages in lane '" + lane.name + "' are named '" + stage.name + "'",
                          "give each a distinct 'name'"});
    }
    if (!stage.type.empty() && context.registry.find(stage.type) != nullptr) {
      check_stage_position(stage, stage_path, i, stage_layers.size(), context.errors);
    }
    if (!stage.enabled) {
      left_out = true;
      continue;
    }
    lane.stages.push_back(std::move(stage));
  }
  if (left_out && !lane.stages.empty() && lane.stages.back().role == StageRole::transform &&
      context.registry.find(lane.stages.back().type) != nullptr) {
    context.errors.add({lane.stages.back().location, lane_path,
                        "with its switched-off taps left out, lane '" + lane.name + "' ends in stage '" +
                            lane.stages.back().name + "', which cannot end a lane",
                        "keep a sink after it (null, file, record)"});
  }
}

// One entry of `lanes:`; none when it is not a map or has no stages to read (the error says
// which). `lane_names` collects the names so far, which must differ.
std::optional<LaneDefinition> read_lane(const YAML::Node& entry, std::size_t lane_index,
                                        std::set<std::string>& lane_names, const LaneContext& context) {
  std::string lane_path = "lanes[" + std::to_string(lane_index) + "]";
  if (!entry.IsMap()) {
    context.errors.add({context.source.locate(entry), lane_path, "expected a map with at least 'name'", ""});
    return std::nullopt;
  }
  LaneDefinition lane;
  if (!entry["name"] || !entry["name"].IsScalar()) {
    context.errors.add({context.source.locate(entry), lane_path + ".name", "every lane needs a name", "name: port0"});
  } else {
    lane.name = entry["name"].Scalar();
    lane_path = "lanes." + lane.name;
    if (!lane_names.insert(lane.name).second) {
      context.errors.add(
          {context.source.locate(entry["name"]), lane_path, "two lanes are named '" + lane.name + "'", ""});
    }
  }
  read_lane_settings(entry, lane_path, context.source, context.errors, context.host, lane);
  check_lane_keys(entry, lane_path, context);
  const auto stage_layers = lane_stage_layers(entry, lane_path, context);
  if (!stage_layers) return std::nullopt;
  read_lane_stages(*stage_layers, lane_path, context, lane);
  place_lane_stages(lane, lane_path, context.errors);
  return lane;
}

// Two stages writing the same files would destroy each other's output (a second record tap
// with the same capture name): refused here, before anything is opened.
void check_exclusive_outputs(const PipelineDefinition& definition, ConfigErrors& errors) {
  std::map<std::string, std::string> claimed;
  for (const auto& lane : definition.lanes) {
    for (const auto& stage : lane.stages) {
      if (!stage.stage) continue;
      for (const auto& output : stage.stage->exclusive_outputs(lane.name)) {
        const std::string who = "lanes." + lane.name + "." + stage.name;
        auto [it, added] = claimed.emplace(output, who);
        if (!added) {
          errors.add({stage.location, who, "stages " + it->second + " and " + who + " would both write " + output + "*",
                      "give one of them its own capture_name (or directory)"});
        }
      }
    }
  }
}

}  // namespace

PipelineDefinition load_pipeline_text(const std::string& yaml, const std::string& name,
                                      const std::vector<std::string>& overrides, const StageRegistry& registry,
                                      const std::string& node, const GpuHost* gpus) {
  ConfigSource source(name);
  YAML::Node root = parse_yaml(yaml, source, overrides);
  ConfigErrors errors;
  const GpuHost& host = gpus != nullptr ? *gpus : GpuHost::this_machine();
  PipelineDefinition definition;
  definition.file = name;
  definition.root = root;
  check_top_level_keys(root, source, errors);
  definition.settings = read_pipeline_section(root, source, errors, host);
  const LaneTemplate lane_template = read_template(root, source, errors);

  YAML::Node lanes = root["lanes"];
  if (!lanes || !lanes.IsSequence() || lanes.size() == 0) {
    errors.add({lanes ? source.locate(lanes) : source.file() + ":1:1", "lanes",
                "a pipeline needs a non-empty list of lanes", "lanes: [{name: port0}]"});
    throw ConfigException(std::move(errors));
  }
  const LaneContext context{source, errors, definition.settings, registry, node, host, lane_template};
  std::set<std::string> lane_names;
  for (std::size_t lane_index = 0; lane_index < lanes.size(); ++lane_index) {
    std::optional<LaneDefinition> lane = read_lane(lanes[lane_index], lane_index, lane_names, context);
    if (!lane) continue;
    lane->index = static_cast<std::uint32_t>(definition.lanes.size());
    definition.lanes.push_back(std::move(*lane));
  }
  place_on_gpus(definition, host);
  check_exclusive_outputs(definition, errors);
  if (!errors.empty()) throw ConfigException(std::move(errors));
  return definition;
}

PipelineDefinition load_pipeline_file(const std::string& path, const std::vector<std::string>& overrides,
                                      const StageRegistry& registry, const std::string& node) {
  std::ifstream file(path);
  if (!file) {
    ConfigErrors errors;
    errors.add({path, "", errno_message("cannot open pipeline file", errno), ""});
    throw ConfigException(std::move(errors));
  }
  std::stringstream text;
  text << file.rdbuf();
  return load_pipeline_text(text.str(), path, overrides, registry, node);
}

}  // namespace sluice
