// Latency histogram arithmetic, named-counter registration and the spectrum snapshot.
#include "pipeline/metrics.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "pipeline/clock.hpp"

namespace sluice {

std::size_t LatencyHistogram::bucket_of(std::uint64_t nanoseconds) noexcept {
  if (nanoseconds < kSubBuckets) return static_cast<std::size_t>(nanoseconds);
  const auto exponent = static_cast<std::size_t>(std::bit_width(nanoseconds) - 1);  // >= 3
  const auto sub = static_cast<std::size_t>((nanoseconds >> (exponent - 3)) & (kSubBuckets - 1));
  const std::size_t bucket = (exponent - 2) * kSubBuckets + sub;
  return bucket < kBuckets ? bucket : kBuckets - 1;
}

std::uint64_t LatencyHistogram::bucket_upper_bound(std::size_t bucket) noexcept {
  if (bucket < kSubBuckets) return bucket;
  const std::size_t exponent = bucket / kSubBuckets + 2;
  const std::size_t sub = bucket % kSubBuckets;
  const std::uint64_t base = std::uint64_t{1} << exponent;
  const std::uint64_t step = std::uint64_t{1} << (exponent - 3);
  return base + (sub + 1) * step - 1;
}

void LatencyHistogram::record(std::uint64_t nanoseconds) noexcept {
  buckets_[bucket_of(nanoseconds)].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(nanoseconds, std::memory_order_relaxed);
  std::uint64_t previous = max_.load(std::memory_order_relaxed);
  while (nanoseconds > previous && !max_.compare_exchange_weak(previous, nanoseconds, std::memory_order_relaxed)) {
  }
}

std::uint64_t LatencyHistogram::count() const noexcept {
  std::uint64_t total = 0;
  for (const auto& bucket : buckets_) total += bucket.load(std::memory_order_relaxed);
  return total;
}

std::uint64_t LatencyHistogram::percentile(double quantile) const noexcept {
  const std::uint64_t total = count();
  if (total == 0) return 0;
  auto rank = static_cast<std::uint64_t>(quantile * static_cast<double>(total));
  if (rank >= total) rank = total - 1;
  std::uint64_t seen = 0;
  for (std::size_t bucket = 0; bucket < kBuckets; ++bucket) {
    seen += buckets_[bucket].load(std::memory_order_relaxed);
    if (seen > rank) {
      const std::uint64_t bound = bucket_upper_bound(bucket);
      const std::uint64_t maximum = max();
      return bound < maximum ? bound : maximum;
    }
  }
  return max();
}

void SpectrumSnapshot::configure(std::size_t bins, SpectrumScale scale, double sample_rate, double center_frequency,
                                 std::size_t averaging) {
  const std::lock_guard lock(mutex_);
  staging_.assign(bins * (scale == SpectrumScale::complex_bins ? 8 : 4), std::byte{0});
  bins_ = bins;
  scale_ = scale;
  sample_rate_ = sample_rate;
  center_frequency_ = center_frequency;
  averaging_ = averaging == 0 ? 1 : averaging;
  sequence_ = 0;
}

void SpectrumSnapshot::offer(const std::byte* rows, std::size_t count, std::size_t row_bytes, MemoryKind memory,
                             void* cuda_stream) noexcept {
  // Once per chunk, not per row: a 4 MiB chunk of complex rows is 512 rows, and a call and a
  // clock read for each was measurable on the GPU path's per-chunk budget of a few microseconds.
  rows_offered_ += count;
  if (count == 0 || staging_.empty()) return;
  const std::uint64_t now = monotonic_ns();
  if (now < next_due_ns_) return;
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // a reader is copying: skip this chunk rather than wait
  const std::byte* last = rows + (count - 1) * row_bytes;
  if (!copy_memory(staging_.data(), MemoryKind::host, last, memory, staging_.size(), cuda_stream).empty()) return;
  next_due_ns_ = now + kIntervalNs;
  row_ = rows_offered_ - 1;
  ++sequence_;
}

std::optional<SpectrumSnapshot::Copy> SpectrumSnapshot::read() const {
  const std::lock_guard lock(mutex_);
  if (sequence_ == 0) return std::nullopt;
  Copy copy;
  copy.sample_rate = sample_rate_;
  copy.center_frequency = center_frequency_;
  copy.averaging = averaging_;
  copy.sequence = sequence_;
  copy.row = row_;
  copy.decibels.resize(bins_);
  for (std::size_t bin = 0; bin < copy.decibels.size(); ++bin) {
    float value = 0;
    if (scale_ == SpectrumScale::complex_bins) {
      std::array<float, 2> complex{};
      std::memcpy(complex.data(), staging_.data() + bin * 8, 8);
      value = 10.0F * std::log10(std::max(complex[0] * complex[0] + complex[1] * complex[1], 1e-30F));
    } else {
      std::memcpy(&value, staging_.data() + bin * 4, 4);
      if (scale_ == SpectrumScale::linear_power) value = 10.0F * std::log10(std::max(value, 1e-30F));
    }
    copy.decibels[bin] = value;
  }
  return copy;
}

StageMetrics::StageMetrics(std::string lane, std::string stage, std::string type)
    : lane_(std::move(lane)), stage_(std::move(stage)), type_(std::move(type)) {
  threads_.emplace_back("stage");
}

CoreWait& StageMetrics::thread(const std::string& name) {
  for (auto& thread : threads_) {
    if (thread.name() == name) return thread;
  }
  return threads_.emplace_back(name);
}

NamedCounter& StageMetrics::drop_counter(const std::string& reason) {
  for (auto& counter : drops_) {
    if (counter.name == reason) return counter;
  }
  auto& counter = drops_.emplace_back();
  counter.name = reason;
  return counter;
}

NamedCounter& StageMetrics::counter(const std::string& name) {
  for (auto& counter : counters_) {
    if (counter.name == name) return counter;
  }
  auto& counter = counters_.emplace_back();
  counter.name = name;
  return counter;
}

const NamedCounter* StageMetrics::find_counter(std::string_view name) const {
  for (const auto& counter : counters_) {
    if (counter.name == name) return &counter;
  }
  return nullptr;
}

std::uint64_t StageMetrics::lost_samples() const {
  const NamedCounter* lost = find_counter("lost_samples");
  return lost == nullptr ? 0 : lost->get();
}

std::uint64_t StageMetrics::total_drops() const {
  std::uint64_t total = 0;
  for (const auto& counter : drops_) total += counter.get();
  return total;
}

}  // namespace sluice
