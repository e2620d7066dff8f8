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
#include <thread>

#include "recorder/capture_reader.hpp"
#include "stages/generator/generator.hpp"
#include "tests/stages/stage_test_util.hpp"
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

std::vector<std::byte> lane_bytes(const recorder::CaptureLane& lane) {
  std::vector<std::byte> bytes(lane.total_samples * lane.sample_bytes);
  std::uint64_t at = 0;
  for (const auto& segment : lane.segments) {
    at += recorder::read_segment(lane, segment, 0, segment.sample_count, bytes.data() + at * lane.sample_bytes);
  }
  bytes.resize(at * lane.sample_bytes);
  return bytes;
}

LoopVolume::LoopVolume(const TempDir& dir, const std::string& type, const std::string& size, const std::string& name) {
  const std::string label = name.empty() ? type : name;
  mount_ = dir.str("mnt-" + label);
  std::filesystem::create_directories(mount_);
  const std::string image = dir.str(label + ".img");
  std::string command;
  if (type == "tmpfs") {
    command = "mount -t tmpfs -o size=" + size + " tmpfs '" + mount_ + "'";
  } else {
    const std::string mkfs = type == "ext4" ? "mkfs.ext4 -q -F -m 0" : "mkfs.xfs -q -f";
    command = "truncate -s " + size + " '" + image + "' && " + mkfs + " '" + image + "' && mount -o loop '" + image +
              "' '" + mount_ + "'";
  }
  command = "{ " + command + "; } 2>'" + dir.str(label + ".err") + "'";  // every step's stderr, a missing mkfs's too
  mounted_ = std::system(command.c_str()) == 0;
  if (!mounted_) {
    const auto error = read_file(dir.str(label + ".err"));
    why_ = command + ": " + std::string(reinterpret_cast<const char*>(error.data()), error.size());
  }
}

LoopVolume::~LoopVolume() {
  if (mounted_) static_cast<void>(std::system(("umount '" + mount_ + "'").c_str()));
}

SigmfValidation validate_sigmf(const std::vector<std::string>& files) {
  // A packed tree on a GPU machine names its own source directory.
  const std::string source = testing::path_from_env("SLUICE_SOURCE_DIR", SLUICE_SOURCE_DIR);
  std::vector<std::string> argv{"python3", source + "/tests/recorder/validate_sigmf.py",
                                source + "/tests/recorder/sigmf"};
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

namespace {

constexpr std::uint64_t kStartSeconds = 1'700'000'000;

Timestamp time_of(std::uint64_t index, double sample_rate) {
  const auto rate = static_cast<std::uint64_t>(sample_rate);
  return Timestamp{kStartSeconds + index / rate, (index % rate) * (1'000'000'000'000ULL / rate), true};
}

// Chunk k: after a hole of 1000 absent samples when k % 3 == 1; with a 50-sample hole
// between two of its samples when k % 4 == 2; chunk 5 has three holes inside (5, 7 and 1
// samples), one of them right before its last sample. Holes are absent: the bytes hold
// only the samples that arrived, each the ramp value of its true stream index.
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
    chunk.timestamp = time_of(next, sample_rate);
    // Holes inside: {offset in the chunk's samples, length}.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> inside;
    if (k % 4 == 2) inside.push_back({100, 50});
    if (k == 5) inside = {{10, 5}, {20, 7}, {count - 1, 1}};
    std::uint64_t done = 0;
    for (const auto& [offset, length] : inside) {
      const auto run = ramp_bytes(SampleFormat::ci16, sample_rate, next, offset - done);
      chunk.bytes.insert(chunk.bytes.end(), run.begin(), run.end());
      next += offset - done;
      done = offset;
      chunk.gaps.push_back(Gap{next, length});
      next += length;
    }
    const auto rest = ramp_bytes(SampleFormat::ci16, sample_rate, next, count - done);
    chunk.bytes.insert(chunk.bytes.end(), rest.begin(), rest.end());
    next += count - done;
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
    for (const auto& gap : planned.gaps) chunk->add_gap(gap.first_sample, gap.length, gap.in_data);
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

}  // namespace

std::vector<SeenChunk> gappy_expected(std::uint64_t chunk_bytes, std::uint64_t chunks, double sample_rate) {
  return plan_gappy(chunk_bytes, chunks, sample_rate);
}

const StageRegistry& test_registry() {
  static const StageRegistry registry = testing::builtin_registry_with(
      {test_support::slow_stage_type(StageRole::transform),
       testing::stage_type_of<GappySource>("gappy", StageRole::source, "test source with gaps"),
       test_support::capture_sink_type()});
  return registry;
}

}  // namespace sluice::test

namespace sluice::test {

std::uint64_t check_every_sample(const recorder::CaptureLane& lane, const SampleTruth& truth,
                                 std::vector<std::string>& problems) {
  std::uint64_t checked = 0;
  std::vector<std::byte> got;
  for (const auto& segment : lane.segments) {
    got.resize(segment.sample_count * lane.sample_bytes);
    const std::uint64_t read = recorder::read_segment(lane, segment, 0, segment.sample_count, got.data());
    if (read != segment.sample_count) {
      problems.push_back(segment.data_path + ": segment at stream " + std::to_string(segment.global_index) +
                         " short read");
      continue;
    }
    const std::vector<std::byte> want = truth(segment.global_index, segment.sample_count);
    for (std::uint64_t i = 0; i < segment.sample_count; ++i) {
      if (std::memcmp(got.data() + i * lane.sample_bytes, want.data() + i * lane.sample_bytes, lane.sample_bytes) !=
          0) {
        problems.push_back("segment at stream " + std::to_string(segment.global_index) + ": sample " +
                           std::to_string(i) + " (stream " + std::to_string(segment.global_index + i) + ", file byte " +
                           std::to_string(segment.file_offset + i * lane.sample_bytes) +
                           ") is not the source's sample at that index");
        break;
      }
    }
    checked += segment.sample_count;
  }
  // Each hole between two segments is exactly covered by the absent gaps annotated in it.
  for (std::size_t i = 1; i < lane.segments.size(); ++i) {
    const auto& previous = lane.segments[i - 1];
    const std::uint64_t end = previous.global_index + previous.sample_count;
    const std::uint64_t next = lane.segments[i].global_index;
    if (next == end && lane.segments[i].data_path != previous.data_path) continue;  // the next file of a rotation
    if (next <= end) {
      problems.push_back("segment at stream " + std::to_string(next) +
                         (next == end ? " continues the previous one: no hole there" : " overlaps the previous one"));
      continue;
    }
    std::uint64_t annotated = 0;
    for (const auto& gap : lane.gaps) {
      if (!gap.in_data && gap.global_index >= end && gap.global_index < next) annotated += gap.length;
    }
    if (annotated != next - end) {
      problems.push_back("hole of " + std::to_string(next - end) + " samples at stream " + std::to_string(end) +
                         " but annotations there count " + std::to_string(annotated));
    }
  }
  // Every segment's time is its first sample's (checked against the previous: the rate holds).
  for (std::size_t i = 1; i < lane.segments.size() && lane.sample_rate > 0; ++i) {
    const auto& a = lane.segments[i - 1];
    const auto& b = lane.segments[i];
    if (!a.time.valid || !b.time.valid) continue;
    const Timestamp expected = recorder::time_of_sample(a, b.global_index, lane.sample_rate);
    if (expected.seconds != b.time.seconds || expected.picoseconds != b.time.picoseconds) {
      problems.push_back("segment at stream " + std::to_string(b.global_index) + " has core:datetime " +
                         std::to_string(b.time.seconds) + "." + std::to_string(b.time.picoseconds) + ", expected " +
                         std::to_string(expected.seconds) + "." + std::to_string(expected.picoseconds));
    }
  }
  return checked;
}

SampleTruth ramp_truth(SampleFormat format, double sample_rate) {
  return [format, sample_rate](std::uint64_t first, std::uint64_t count) {
    return ramp_bytes(format, sample_rate, first, count);
  };
}

}  // namespace sluice::test
