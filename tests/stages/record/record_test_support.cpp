// Record/replay test helpers (see the header).
#include "tests/stages/record/record_test_support.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "stages/generator/generator.hpp"
#include "tests/support/process.hpp"

namespace sluice::test {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "sluice-record-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::vector<std::string> run_pipeline(const std::string& yaml, const StageRegistry& registry) {
  Pipeline pipeline(load_pipeline_text(yaml, "test", {}, registry));
  pipeline.start();
  pipeline.run();
  std::vector<std::string> failures;
  for (const auto& failure : pipeline.failures()) failures.push_back(failure.stage + ": " + failure.message);
  return failures;
}

std::vector<std::byte> ramp_bytes(SampleFormat format, double sample_rate, std::uint64_t first, std::uint64_t count) {
  GeneratorSettings settings;
  settings.format = format;
  settings.sample_rate = sample_rate;
  settings.signal = GeneratorSignal::ramp;
  std::vector<std::byte> bytes(count * bytes_per_sample(format));
  generate_signal(settings, first, count, bytes.data());
  return bytes;
}

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

SigmfValidation validate_sigmf(const std::vector<std::string>& files) {
  // A packed tree on the lent GPU machine names its own source directory.
  const std::string source = testing::path_from_env("SLUICE_SOURCE_DIR", SLUICE_SOURCE_DIR);
  std::vector<std::string> argv{"python3", source + "/tests/recorder/validate_sigmf.py", source + "/tests/recorder/sigmf"};
  argv.insert(argv.end(), files.begin(), files.end());
  const testing::ProcessResult result = testing::run_process(argv);
  return SigmfValidation{result.exit_code, result.err};
}

bool in_ci() {
  const char* value = std::getenv("CI");
  return value != nullptr && (std::string_view(value) == "true" || std::string_view(value) == "1");
}

std::vector<std::string> sigmf_files(const std::string& directory) {
  std::vector<std::string> files;
  for (const auto& item : fs::directory_iterator(directory)) {
    const auto extension = item.path().extension();
    if (extension == ".sigmf-meta" || extension == ".sigmf-collection") files.push_back(item.path().string());
  }
  return files;
}

Collected& collected(const std::string& key) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Collected>> stores;
  std::lock_guard lock(mutex);
  auto& store = stores[key];
  if (!store) store = std::make_unique<Collected>();
  return *store;
}

namespace {

constexpr std::uint64_t kStartSeconds = 1'700'000'000;

Timestamp time_of(std::uint64_t index, double sample_rate) {
  const auto rate = static_cast<std::uint64_t>(sample_rate);
  return Timestamp{kStartSeconds + index / rate, (index % rate) * (1'000'000'000'000ULL / rate), true};
}

// Chunk k: after a hole of 1000 absent samples when k % 3 == 1; with a 50-sample hole the
// source filled (samples present, marked lost) when k % 4 == 2.
std::vector<SeenChunk> plan_gappy(std::uint64_t chunk_bytes, std::uint64_t chunks, double sample_rate) {
  std::vector<SeenChunk> plan;
  const std::uint64_t count = chunk_bytes / 4;
  std::uint64_t next = 0;
  for (std::uint64_t k = 0; k < chunks; ++k) {
    SeenChunk chunk;
    if (k % 3 == 1) {
      chunk.gaps.push_back(Gap{next, 1000});
      next += 1000;
    }
    chunk.first_sample = next;
    chunk.sample_count = count;
    if (k % 4 == 2) chunk.gaps.push_back(Gap{next + 100, 50});
    chunk.timestamp = time_of(next, sample_rate);
    chunk.bytes = ramp_bytes(SampleFormat::ci16, sample_rate, next, count);
    next += count;
    plan.push_back(std::move(chunk));
  }
  return plan;
}

class GappySource final : public Stage {
 public:
  GappySource(SettingsReader& reader, const PipelineSettings& pipeline) {
    chunks_ = static_cast<std::uint64_t>(reader.integer("count", 8, "chunks to emit", 1));
    sample_rate_ = reader.frequency("sample_rate", 1e6, "sample rate", 1);
    pool_settings_ = read_pool_settings(reader, pipeline);
  }
  void start(StageContext& context) override {
    context_ = &context;
    pool_ = &context.create_pool("out", pool_settings_.spec(0));
    plan_ = plan_gappy(pool_settings_.chunk_bytes, chunks_, sample_rate_);
    context.stream.sample_rate = sample_rate_;
    context.stream.format = SampleFormat::ci16;
    context.stream.description = "gappy test source";
    context.stream.start_time = time_of(0, sample_rate_);
  }
  StageStatus process() override {
    if (next_ >= plan_.size() || context_->stop_requested()) return StageStatus::end_of_stream;
    ChunkPtr chunk = context_->acquire(*pool_, std::chrono::milliseconds(100));
    if (!chunk) return StageStatus::idle;
    const SeenChunk& planned = plan_[next_];
    std::memcpy(chunk->data, planned.bytes.data(), planned.bytes.size());
    chunk->size = planned.bytes.size();
    chunk->format = SampleFormat::ci16;
    chunk->sequence = next_++;
    chunk->first_sample = planned.first_sample;
    chunk->sample_count = planned.sample_count;
    chunk->timestamp = planned.timestamp;
    for (const auto& gap : planned.gaps) chunk->add_gap(gap.first_sample, gap.length);
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  std::uint64_t chunks_ = 8;
  double sample_rate_ = 1e6;
  PoolSettings pool_settings_;
  StageContext* context_ = nullptr;
  Pool* pool_ = nullptr;
  std::vector<SeenChunk> plan_;
  std::size_t next_ = 0;
};

class CollectSink final : public Stage {
 public:
  CollectSink(SettingsReader& reader, const PipelineSettings&) { key_ = reader.required_string("key", "store name"); }
  void start(StageContext& context) override { context_ = &context; }
  StageStatus process() override {
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    SeenChunk seen;
    seen.first_sample = chunk->first_sample;
    seen.sample_count = chunk->sample_count;
    seen.timestamp = chunk->timestamp;
    seen.gaps.assign(chunk->gaps.begin(), chunk->gaps.begin() + chunk->gap_count);
    seen.bytes.assign(chunk->data, chunk->data + chunk->size);
    Collected& store = collected(key_);
    {
      std::lock_guard lock(store.mutex);
      store.chunks.push_back(std::move(seen));
    }
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  std::string key_;
  StageContext* context_ = nullptr;
};

}  // namespace

std::vector<SeenChunk> gappy_expected(std::uint64_t chunk_bytes, std::uint64_t chunks, double sample_rate) {
  return plan_gappy(chunk_bytes, chunks, sample_rate);
}

const StageRegistry& test_registry() {
  static const StageRegistry registry = [] {
    StageRegistry built;
    register_builtin_stages(built);
    built.add(StageType{"gappy", StageRole::source, "test source with gaps",
                        [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                          return std::make_unique<GappySource>(reader, pipeline);
                        }});
    built.add(StageType{"collect", StageRole::sink, "test sink that keeps chunks",
                        [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                          return std::make_unique<CollectSink>(reader, pipeline);
                        }});
    return built;
  }();
  return registry;
}

}  // namespace sluice::test
