// `generator` source: a deterministic test signal (tone, ramp or noise) written into
// chunks at a set byte rate or as fast as possible.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/gpu_stream.hpp"
#include "pipeline/stage.hpp"

namespace sluice {

enum class GeneratorSignal { tone, ramp, noise };

struct GeneratorSettings {
  SampleFormat format = SampleFormat::ci16;
  double sample_rate = 100e6;  // nominal, for timestamps and the stream description
  double rate = 0;             // bytes/s to pace at; 0 = as fast as possible
  GeneratorSignal signal = GeneratorSignal::tone;
  double frequency = 0;          // tone frequency in Hz (0: sample_rate / 16)
  double amplitude = 0.5;        // of full scale
  std::uint64_t seed = 1;        // noise seed
  std::uint64_t stop_after = 0;  // bytes, then end of stream; 0 = unlimited
  PoolSettings pool;
};

// Fills `samples` samples starting at absolute stream index `first` (exposed for tests:
// the generator's output must equal this).
void generate_signal(const GeneratorSettings& settings, std::uint64_t first, std::size_t samples, std::byte* out);

class GeneratorStage final : public Stage {
 public:
  GeneratorStage(SettingsReader& reader, const PipelineSettings& pipeline);
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;
  [[nodiscard]] const GeneratorSettings& settings() const { return settings_; }

 private:
  GeneratorSettings settings_;
  StageContext* context_ = nullptr;
  Pool* pool_ = nullptr;
  std::size_t pattern_period_ = 0;  // samples after which the signal repeats exactly
  MemoryRegion pattern_;            // one period plus one chunk, so any chunk is one copy; pinned for a device pool
  GpuStream gpu_;                   // copies into a device pool (made in start() for one)
  std::uint64_t produced_bytes_ = 0;
  std::uint64_t next_sample_ = 0;
  std::uint64_t sequence_ = 0;
  std::uint64_t start_ns_ = 0;
  Timestamp start_time_;
};

void register_generator_stage(StageRegistry& registry);

}  // namespace sluice
