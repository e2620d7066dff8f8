// Test stages shared by stage tests: `feed` sends chunks a test wrote, `capture` keeps every chunk
// it sees (test only: both allocate on the hot path), `slow` passes chunks on late.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "pipeline/stage.hpp"

namespace sluice::test_support {

// One chunk for `feed` to send as written: bytes, stream position, gaps and a retune.
struct FeedChunk {
  std::vector<std::byte> bytes;
  std::uint64_t first_sample = 0;
  std::vector<Gap> gaps;
  bool context_change = false;  // the sender retuned from this chunk on
  StreamContext context{};
};

// What the next `feed` source sends, at 1 Msps, from a pool of the lane's memory kind.
struct Feed {
  SampleFormat format = SampleFormat::cf32;
  std::vector<FeedChunk> chunks;
};
Feed& feed();

// One chunk as `capture` saw it, its bytes copied to the host.
struct CapturedChunk {
  std::vector<std::byte> bytes;
  std::uint64_t sequence = 0;
  std::uint64_t first_sample = 0;
  std::uint64_t sample_count = 0;
  SampleFormat format = SampleFormat::cf32;
  Timestamp timestamp;
  std::vector<Gap> gaps;
  bool context_change = false;
  StreamContext context{};
};

struct Capture {
  std::mutex mutex;
  StreamInfo stream;  // as the sink saw it at start
  std::vector<CapturedChunk> chunks;
};

// Where a `capture` stage without `key:` writes (a test points it at its own Capture).
Capture*& current_capture();
// The store of a `capture` stage with `key: NAME`, one per name, created on first use.
Capture& keyed_capture(const std::string& key);

// `feed` (a source) and `capture` (a sink; `key:` picks its store, `poison: true` fills the
// chunks of the last pool upstream with NaN at start and after each one is copied, so an
// element a stage did not write shows).
StageType feed_source_type();
StageType capture_sink_type();
// `slow`: passes each chunk on after `delay` (1ms unless set), as a sink or as a transform.
StageType slow_stage_type(StageRole role);

}  // namespace sluice::test_support
