// The generator precomputes one exact period of its signal (tone frequencies are rounded
// to a whole number of cycles per period) so that filling a chunk is a single memcpy:
// the source then runs at memory speed and the lane benchmark measures the runtime.
#include "stages/generator/generator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <thread>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/log.hpp"

namespace sluice {
namespace {

constexpr std::size_t kPeriod = 65536;  // samples; tone resolution is sample_rate / kPeriod

double tone_frequency(const GeneratorSettings& settings) {
  const double wanted = settings.frequency > 0 ? settings.frequency : settings.sample_rate / 16;
  const double cycles = std::round(wanted / settings.sample_rate * kPeriod);
  return cycles * settings.sample_rate / kPeriod;
}

// A sample's (I, Q) in [-1, 1] before scaling to the format.
void sample_value(const GeneratorSettings& settings, std::uint64_t index, double cycles_per_period,
                  std::mt19937_64* noise, double& in_phase, double& quadrature) {
  switch (settings.signal) {
    case GeneratorSignal::tone: {
      const double phase = 2.0 * std::numbers::pi * cycles_per_period * static_cast<double>(index % kPeriod) / kPeriod;
      in_phase = settings.amplitude * std::cos(phase);
      quadrature = settings.amplitude * std::sin(phase);
      break;
    }
    case GeneratorSignal::ramp: {
      // A counter: I counts up, Q counts down; lost or reordered samples are visible at once.
      const double position = static_cast<double>(index % kPeriod) / kPeriod;
      in_phase = settings.amplitude * (2.0 * position - 1.0);
      quadrature = -in_phase;
      break;
    }
    case GeneratorSignal::noise: {
      std::normal_distribution<double> gaussian(0.0, settings.amplitude / 3.0);
      in_phase = std::clamp(gaussian(*noise), -1.0, 1.0);
      quadrature = std::clamp(gaussian(*noise), -1.0, 1.0);
      break;
    }
  }
}

}  // namespace

void generate_signal(const GeneratorSettings& settings, std::uint64_t first, std::size_t samples, std::byte* out) {
  const double cycles = tone_frequency(settings) / settings.sample_rate * kPeriod;
  const std::size_t size = bytes_per_sample(settings.format);
  // Noise is one seeded period, repeated, so any sample index has one defined value.
  std::vector<std::pair<double, double>> noise_period;
  if (settings.signal == GeneratorSignal::noise) {
    std::mt19937_64 random(settings.seed);
    noise_period.resize(kPeriod);
    for (std::size_t i = 0; i < kPeriod; ++i) {
      sample_value(settings, i, cycles, &random, noise_period[i].first, noise_period[i].second);
    }
  }
  for (std::size_t i = 0; i < samples; ++i) {
    const std::uint64_t index = first + i;
    double in_phase = 0;
    double quadrature = 0;
    if (settings.signal == GeneratorSignal::noise) {
      std::tie(in_phase, quadrature) = noise_period[index % kPeriod];
    } else {
      sample_value(settings, index, cycles, nullptr, in_phase, quadrature);
    }
    quantise_sample(settings.format, in_phase, quadrature, out + i * size);
  }
}

GeneratorStage::GeneratorStage(SettingsReader& reader, const PipelineSettings& pipeline) {
  settings_.format =
      reader.choice("format", SampleFormat::ci16, "sample format",
                    {{"ci8", SampleFormat::ci8}, {"ci16", SampleFormat::ci16}, {"cf32", SampleFormat::cf32}});
  settings_.sample_rate = reader.frequency("sample_rate", 100e6, "nominal sample rate (timestamps, metadata)", 1, 1e12);
  settings_.rate = reader.byte_rate("rate", 0, "pace output at this many bytes/s; 0 = as fast as possible");
  settings_.signal = reader.choice(
      "signal", GeneratorSignal::tone, "test signal",
      {{"tone", GeneratorSignal::tone}, {"ramp", GeneratorSignal::ramp}, {"noise", GeneratorSignal::noise}});
  settings_.frequency = reader.frequency("frequency", 0, "tone frequency (0: sample_rate/16)", 0, 1e12);
  settings_.amplitude = reader.number("amplitude", 0.5, "amplitude as a fraction of full scale", 0, 1);
  settings_.seed = static_cast<std::uint64_t>(reader.integer("seed", 1, "noise seed (signal: noise only)", 0));
  settings_.stop_after = reader.bytes("stop_after", 0, "end the stream after this many bytes (0: never)");
  settings_.pool = read_pool_settings(reader, pipeline);
  // A tone and a ramp are fixed functions of the sample index: a seed would change nothing, and
  // a ramp or noise has no frequency. Accepting them would let two lanes look different and not be.
  if (settings_.signal != GeneratorSignal::noise && reader.has("seed")) {
    reader.error("seed", "seed only shapes signal: noise; this signal is deterministic without one",
                 "remove it, or set frequency or amplitude to tell lanes apart");
  }
  if (settings_.signal != GeneratorSignal::tone && reader.has("frequency")) {
    reader.error("frequency", "frequency only applies to signal: tone", "remove it, or use signal: tone");
  }
  if (settings_.frequency * 2 > settings_.sample_rate) {
    reader.error("frequency", "tone frequency is above Nyquist (sample_rate / 2)");
  }
  if (settings_.pool.chunk_bytes % bytes_per_sample(settings_.format) != 0) {
    reader.error("chunk",
                 "chunk size is not a whole number of " + std::string(to_string(settings_.format)) + " samples");
  }
}

void GeneratorStage::start(StageContext& context) {
  context_ = &context;
  pool_ = &context.create_pool("out", settings_.pool.spec(context.cuda_device()));
  const std::size_t size = bytes_per_sample(settings_.format);
  const std::size_t chunk_samples = settings_.pool.chunk_bytes / size;
  pattern_period_ = kPeriod;
  pattern_ = MemoryRegion(MemoryKind::host, (kPeriod + chunk_samples) * size);
  generate_signal(settings_, 0, kPeriod + chunk_samples, pattern_.data());
  if (pool_->memory() == MemoryKind::device) {
    // Chunks are filled by copies on this stage's stream and handed on with an event: the
    // generator never waits for them, and a pinned pattern lets each copy run asynchronously.
    pattern_.pin_for_device();
    gpu_ = GpuStream(context.cuda_device(), pool_->chunk_count() + 1);
  }

  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now);
  start_time_ = Timestamp{
      static_cast<std::uint64_t>(seconds.count()),
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - seconds).count()) * 1000,
      true};
  context.stream.sample_rate = settings_.sample_rate;
  context.stream.format = settings_.format;
  context.stream.start_time = start_time_;
  context.stream.description = "generator " + std::string(settings_.signal == GeneratorSignal::tone   ? "tone"
                                                          : settings_.signal == GeneratorSignal::ramp ? "ramp"
                                                                                                      : "noise");
  start_ns_ = 0;
}

StageStatus GeneratorStage::process() {
  if (context_->stop_requested()) return StageStatus::end_of_stream;
  if (settings_.stop_after != 0 && produced_bytes_ >= settings_.stop_after) return StageStatus::end_of_stream;
  if (start_ns_ == 0) start_ns_ = monotonic_ns();

  if (settings_.rate > 0) {
    // Pace by the bytes already sent: the next chunk may leave once they are due.
    if (const std::uint64_t wait = Pacer(settings_.rate).wait_ns(produced_bytes_, monotonic_ns() - start_ns_);
        wait > 0) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<std::uint64_t>(wait, 10'000'000)));
      return StageStatus::idle;
    }
  }

  ChunkPtr chunk = context_->acquire(*pool_, std::chrono::milliseconds(100));
  if (!chunk) return StageStatus::idle;
  const std::size_t size = bytes_per_sample(settings_.format);
  std::size_t bytes = chunk->capacity / size * size;
  if (settings_.stop_after != 0) {
    const std::uint64_t remaining = (settings_.stop_after - produced_bytes_) / size * size;
    bytes = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, std::max<std::uint64_t>(remaining, size)));
  }
  const std::size_t offset = static_cast<std::size_t>(next_sample_ % pattern_period_) * size;
  if (chunk->memory != MemoryKind::device) {
    std::memcpy(chunk->data, pattern_.data() + offset, bytes);
  } else if (!gpu_.copy(chunk->data, pattern_.data() + offset, bytes) || !gpu_.hand_off(*chunk)) {
    context_->fail("generator: " + gpu_.error());
    return StageStatus::error;
  }
  chunk->size = bytes;
  chunk->format = settings_.format;
  chunk->sequence = sequence_++;
  chunk->first_sample = next_sample_;
  chunk->sample_count = bytes / size;
  chunk->timestamp = time_after(start_time_, next_sample_, settings_.sample_rate);
  next_sample_ += chunk->sample_count;
  produced_bytes_ += bytes;
  context_->emit(std::move(chunk));
  return StageStatus::ok;
}

void GeneratorStage::stop() noexcept {
  // The last copies finish before the pools they write go (the lane frees them after its stages stop).
  if (gpu_ && !gpu_.finish()) log::warn("generator: {}", gpu_.error());
}

void register_generator_stage(StageRegistry& registry) {
  registry.add(StageType{"generator", StageRole::source, "deterministic test signal (tone, ramp, noise) at a set rate",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<GeneratorStage>(reader, pipeline);
                         }});
}

}  // namespace sluice
