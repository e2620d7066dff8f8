// Latency histogram arithmetic and named-counter registration.
#include "pipeline/metrics.hpp"

#include <bit>

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

StageMetrics::StageMetrics(std::string lane, std::string stage, std::string type)
    : lane_(std::move(lane)), stage_(std::move(stage)), type_(std::move(type)) {}

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

std::uint64_t StageMetrics::total_drops() const {
  std::uint64_t total = 0;
  for (const auto& counter : drops_) total += counter.get();
  return total;
}

}  // namespace sluice
