// RecordingWriter on real volumes (ext4 and tmpfs loop mounts, real io_uring): striping over
// several volumes, many rotations, one volume filling while the others have room, checked
// against the ramp written and the data files' own bytes, not the writer's counts.
#include "recorder/recording_writer.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "recorder/capture_reader.hpp"
#include "recorder/sigmf.hpp"
#include "tests/stages/record/record_test_support.hpp"
#include "tests/support/io_throttle.hpp"

namespace sluice {
namespace {
namespace fs = std::filesystem;
using test::lane_bytes;
using test::LoopVolume;
using test::TempDir;

constexpr double kRate = 10e6;
constexpr std::size_t kChunkBytes = 256 << 10;
constexpr std::uint64_t kChunkSamples = kChunkBytes / 4;  // ci16

StreamInfo ramp_stream() {
  StreamInfo stream;
  stream.sample_rate = kRate;
  stream.format = SampleFormat::ci16;
  return stream;
}

// The bytes of chunk `index`: what a generator with signal: ramp sends, its first 8 bytes
// replaced by the index (the ramp repeats every few chunks; the index tells every chunk apart).
std::vector<std::byte> chunk_truth(std::uint64_t index) {
  std::vector<std::byte> bytes = test::ramp_bytes(SampleFormat::ci16, kRate, index * kChunkSamples, kChunkSamples);
  std::memcpy(bytes.data(), &index, sizeof(index));
  return bytes;
}

// Chunks [0, chunks) one after another: the stream the writer was given.
std::vector<std::byte> stream_truth(std::uint64_t chunks) {
  std::vector<std::byte> bytes;
  for (std::uint64_t index = 0; index < chunks; ++index) {
    const std::vector<std::byte> chunk = chunk_truth(index);
    bytes.insert(bytes.end(), chunk.begin(), chunk.end());
  }
  return bytes;
}

// `settings` with the chunks a writer may hold when fed from a pool of `pool_chunks`.
recorder::RecorderSettings holding(recorder::RecorderSettings settings, std::size_t pool_chunks) {
  settings.held_chunks = recorder::chunks_held(settings, pool_chunks);
  return settings;
}

// A writer fed with ramp chunks from its own pool (four times its writes in the kernel), the way
// the record stage feeds it.
struct RampWriter {
  RampWriter(const recorder::RecorderSettings& settings, const std::string& lane)
      : pool("ramp", PoolSpec{kChunkBytes, 4 * recorder::writes_in_flight(settings), MemoryKind::host, 0}),
        writer(holding(settings, pool.chunk_count()), ramp_stream(), lane) {
    writer.open({&pool});
  }

  // Submits the next chunk when there is room; takes back what is done. False once failed
  // or when all `chunks` were written.
  bool step(std::uint64_t chunks) {
    writer.poll(std::chrono::microseconds(0));
    while (ChunkPtr done = writer.take_done()) ++taken;
    if (writer.failed()) return false;
    if (submitted < chunks && writer.has_room()) {
      if (ChunkPtr chunk = pool.try_acquire()) {
        const auto bytes = chunk_truth(submitted);
        std::memcpy(chunk->data, bytes.data(), bytes.size());
        chunk->size = kChunkBytes;
        chunk->first_sample = submitted * kChunkSamples;
        chunk->sample_count = kChunkSamples;
        ++submitted;
        return writer.submit(std::move(chunk), nullptr);
      }
    }
    if (submitted == chunks && writer.in_flight() == 0) return false;
    writer.poll(std::chrono::microseconds(1000));
    return true;
  }

  void write(std::uint64_t chunks) {
    while (step(chunks)) {
    }
    writer.finish();
  }

  Pool pool;
  recorder::RecordingWriter writer;
  std::uint64_t submitted = 0;
  std::uint64_t taken = 0;
};

// "" when `got` equals `want`, else where they first differ (gtest would print every byte).
std::string difference(const std::vector<std::byte>& got, const std::vector<std::byte>& want) {
  if (got == want) return {};
  const auto [at, other] = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
  return std::to_string(got.size()) + " bytes where " + std::to_string(want.size()) +
         " were expected, first difference at byte " + std::to_string(at - got.begin());
}

// The data files of one stripe in `directory`, in segment order, read straight from disk.
std::vector<std::byte> stripe_bytes(const std::string& directory, const std::string& prefix) {
  std::vector<std::string> files;
  for (const auto& item : fs::directory_iterator(directory)) {
    const std::string name = item.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.ends_with(".sigmf-data")) files.push_back(item.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::byte> bytes;
  for (const auto& file : files) {
    const auto more = test::read_file(file);
    bytes.insert(bytes.end(), more.begin(), more.end());
  }
  return bytes;
}

// The ramp chunks that `bytes` (one stripe's data files, read from disk) hold, by index, in
// the order they lie there; a run of bytes that is not the ramp chunk of some index in
// [0, chunks) after the one before it ends the list with `chunks` (as if past the stream).
std::vector<std::uint64_t> chunks_on_stripe(const std::vector<std::byte>& bytes, std::uint64_t chunks) {
  std::vector<std::uint64_t> found;
  std::uint64_t next = 0;
  for (std::size_t at = 0; at < bytes.size(); at += kChunkBytes) {
    const std::vector<std::byte> piece(
        bytes.begin() + static_cast<std::ptrdiff_t>(at),
        bytes.begin() + static_cast<std::ptrdiff_t>(std::min(at + kChunkBytes, bytes.size())));
    while (next < chunks && chunk_truth(next) != piece) ++next;
    found.push_back(next);
    if (next == chunks) break;
    ++next;
  }
  return found;
}

// The stripes' data files hold chunks [0, chunks) whole, each stripe its chunks in stream order
// and every chunk on exactly one stripe (which one is the writer's choice: the next in turn
// whose volume has a write free); "" when they do, else what is wrong.
std::string stripes_hold(const std::vector<std::vector<std::byte>>& stripes, std::uint64_t chunks) {
  std::vector<int> copies(chunks, 0);
  for (std::size_t stripe = 0; stripe < stripes.size(); ++stripe) {
    if (stripes[stripe].size() % kChunkBytes != 0) return "stripe " + std::to_string(stripe) + " holds a partial chunk";
    for (const std::uint64_t index : chunks_on_stripe(stripes[stripe], chunks)) {
      if (index == chunks) return "stripe " + std::to_string(stripe) + " holds bytes out of order or not the ramp's";
      ++copies[index];
    }
  }
  for (std::uint64_t index = 0; index < chunks; ++index) {
    if (copies[index] != 1)
      return "chunk " + std::to_string(index) + " is on " + std::to_string(copies[index]) + " stripes";
  }
  return {};
}

TEST(RecordingWriter, StripesOverFourVolumesEachByteInOrderOnItsOwnVolume) {
  TempDir dir;
  std::vector<std::unique_ptr<LoopVolume>> volumes;
  recorder::RecorderSettings settings;
  for (int i = 0; i < 4; ++i) {
    volumes.push_back(std::make_unique<LoopVolume>(dir, "ext4", "48M", "vol" + std::to_string(i)));
    SLUICE_REQUIRE_MOUNTED(*volumes.back());
    settings.directories.push_back(volumes.back()->path() + "/cap");
  }
  settings.name = "cap";
  settings.queue_depth = 8;
  settings.preallocate_bytes = 8 << 20;
  constexpr std::uint64_t kChunks = 101;  // not a multiple of the stripes: the last round is short
  RampWriter ramp(settings, "port0");
  ramp.write(kChunks);
  ASSERT_FALSE(ramp.writer.failed()) << ramp.writer.error();
  EXPECT_EQ(ramp.taken, kChunks);
  std::vector<std::vector<std::byte>> stripes;
  for (std::uint64_t stripe = 0; stripe < 4; ++stripe) {
    stripes.push_back(stripe_bytes(settings.directories[stripe], "cap-port0-s" + std::to_string(stripe) + "-"));
    EXPECT_GT(stripes.back().size(), 0U) << "stripe " << stripe;
  }
  EXPECT_EQ(stripes_hold(stripes, kChunks), "");
  const recorder::Capture capture = recorder::open_capture(recorder::collection_path(settings));
  ASSERT_EQ(capture.lanes.size(), 1U);
  EXPECT_TRUE(capture.lanes[0].complete);
  EXPECT_EQ(difference(lane_bytes(capture.lanes[0]), stream_truth(kChunks)), "");
}

// What a writer may hold: its writes in the kernel (io_depth, rounded up to a share a volume),
// and striped as many again, as far as that leaves the pool half its chunks.
TEST(RecordingWriter, AStripedWriterHoldsTwiceItsWritesWhereThePoolHasRoomForThem) {
  recorder::RecorderSettings settings;
  settings.queue_depth = 8;
  settings.directories = {"a"};
  EXPECT_EQ(recorder::chunks_held(settings, 64), 8U);
  settings.directories = {"a", "b", "c"};  // 3 a volume
  EXPECT_EQ(recorder::writes_in_flight(settings), 9U);
  EXPECT_EQ(recorder::chunks_held(settings, 64), 18U);
  EXPECT_EQ(recorder::chunks_held(settings, 24), 12U);
  EXPECT_EQ(recorder::chunks_held(settings, 8), 9U);
}

// One volume's writes held back by the kernel (its write throttle at 4 kB/s: a chunk takes a
// minute): the chunks whose turn it is go to the other volume meanwhile, up to what the writer
// may hold (twice its writes in the kernel, striped: those written wait for the held one, since
// chunks leave in order). Once the throttle is lifted every chunk reaches the disk and the
// capture reads back as the stream.
TEST(RecordingWriter, AVolumeWhoseWritesAreHeldBackDoesNotHoldUpTheOther) {
  TempDir dir;
  LoopVolume fast(dir, "ext4", "48M", "fast");
  SLUICE_REQUIRE_MOUNTED(fast);
  LoopVolume slow(dir, "ext4", "48M", "slow");
  SLUICE_REQUIRE_MOUNTED(slow);
  recorder::RecorderSettings settings;
  settings.directories = {fast.path() + "/cap", slow.path() + "/cap"};
  settings.name = "cap";
  settings.queue_depth = 2;  // one write in the kernel a volume
  settings.preallocate_bytes = 8 << 20;
  ASSERT_EQ(recorder::chunks_held(settings, 8), 4U);
  RampWriter ramp(settings, "port0");
  test::IoThrottle throttle(slow.path(), 4096, test::IoThrottle::Direction::write);
  SLUICE_REQUIRE_THROTTLED(throttle);
  constexpr std::uint64_t kChunks = 24;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < until) ramp.step(kChunks);
  // Chunk 0 on the fast volume and taken back; chunk 1 held on the slow one; chunks 2, 3 and 4
  // on the fast one (3 and 4 in the slow one's turn), written, waiting behind chunk 1.
  EXPECT_EQ(ramp.submitted, 5U);
  EXPECT_EQ(ramp.taken, 1U);
  EXPECT_EQ(ramp.writer.chunks_to(0), 4U);
  EXPECT_EQ(ramp.writer.chunks_to(1), 1U);
  EXPECT_EQ(ramp.writer.turns_passed(), 2U);
  throttle.lift();
  ramp.write(kChunks);
  ASSERT_FALSE(ramp.writer.failed()) << ramp.writer.error();
  EXPECT_EQ(ramp.taken, kChunks);
  const std::vector<std::byte> on_slow = stripe_bytes(settings.directories[1], "cap-port0-s1-");
  EXPECT_EQ(stripes_hold({stripe_bytes(settings.directories[0], "cap-port0-s0-"), on_slow}, kChunks), "");
  EXPECT_EQ(chunks_on_stripe(on_slow, kChunks).front(), 1U) << "the held chunk is on the slow volume";
  const recorder::Capture capture = recorder::open_capture(recorder::collection_path(settings));
  ASSERT_EQ(capture.lanes.size(), 1U);
  EXPECT_TRUE(capture.lanes[0].complete);
  EXPECT_EQ(difference(lane_bytes(capture.lanes[0]), stream_truth(kChunks)), "");
}

TEST(RecordingWriter, RotatesManyTimesOnEveryStripeAndLosesNothing) {
  TempDir dir;
  recorder::RecorderSettings settings;
  settings.directories = {dir.str("a"), dir.str("b")};
  settings.name = "cap";
  settings.rotate_bytes = 1 << 20;  // four chunks a file set
  settings.preallocate_bytes = 1 << 20;
  constexpr std::uint64_t kChunks = 2 * 4 * 6;  // six file sets a stripe: five rotations each
  RampWriter ramp(settings, "port0");
  ramp.write(kChunks);
  ASSERT_FALSE(ramp.writer.failed()) << ramp.writer.error();
  // Each stripe rotates on its own: every file set but a stripe's last holds exactly rotate_bytes.
  std::vector<std::vector<std::byte>> stripes;
  std::size_t file_sets = 0;
  for (std::uint64_t stripe = 0; stripe < 2; ++stripe) {
    const std::string prefix = "cap-port0-s" + std::to_string(stripe) + "-";
    stripes.push_back(stripe_bytes(settings.directories[stripe], prefix));
    const std::size_t sets = (stripes.back().size() + settings.rotate_bytes - 1) / settings.rotate_bytes;
    file_sets += sets;
    for (std::size_t segment = 0; segment < sets; ++segment) {
      const std::string number = std::to_string(segment);
      const std::string data =
          settings.directories[stripe] + "/" + prefix + std::string(4 - number.size(), '0') + number + ".sigmf-data";
      ASSERT_TRUE(fs::exists(data)) << data;
      if (segment + 1 < sets) {
        EXPECT_EQ(fs::file_size(data), settings.rotate_bytes) << data;
      }
    }
  }
  EXPECT_EQ(stripes_hold(stripes, kChunks), "");
  EXPECT_EQ(ramp.writer.bases().size(), file_sets);
  const recorder::Capture capture = recorder::open_capture(recorder::collection_path(settings));
  ASSERT_EQ(capture.lanes.size(), 1U);
  EXPECT_EQ(capture.lanes[0].recordings.size(), file_sets);
  EXPECT_EQ(difference(lane_bytes(capture.lanes[0]), stream_truth(kChunks)), "");
}

// One lane striped over a small tmpfs and a roomy directory, another lane on the roomy one:
// the small volume fills. The striped lane stops naming that volume and why, keeps every
// chunk before the first one that did not fit, and the other lane loses nothing.
TEST(RecordingWriter, OneVolumeFillsWhileTheOthersHaveRoom) {
  TempDir dir;
  LoopVolume small(dir, "tmpfs", "8M", "small");
  SLUICE_REQUIRE_MOUNTED(small);
  recorder::RecorderSettings striped;
  striped.directories = {dir.str("roomy"), small.path() + "/cap"};
  striped.name = "cap";
  striped.queue_depth = 4;
  striped.preallocate_bytes = 4 << 20;
  recorder::RecorderSettings alone = striped;
  alone.directories = {dir.str("roomy")};
  constexpr std::uint64_t kChunks = 96;  // 24 MiB: the small volume takes about a third of its half
  RampWriter filling(striped, "port0");
  RampWriter other(alone, "port1");
  bool filling_runs = true;
  bool other_runs = true;
  while (filling_runs || other_runs) {
    if (filling_runs) filling_runs = filling.step(kChunks);
    if (other_runs) other_runs = other.step(kChunks);
  }
  filling.writer.finish();
  other.writer.finish();
  ASSERT_TRUE(filling.writer.failed());
  EXPECT_EQ(filling.writer.error_code(), ENOSPC) << filling.writer.error();
  EXPECT_NE(filling.writer.error().find("disk full"), std::string::npos) << filling.writer.error();
  EXPECT_NE(filling.writer.error().find(small.path()), std::string::npos)
      << "names the volume: " << filling.writer.error();
  EXPECT_FALSE(other.writer.failed()) << other.writer.error();

  const recorder::Capture capture = recorder::open_capture(recorder::collection_path(striped));
  ASSERT_EQ(capture.lanes.size(), 2U);
  const recorder::CaptureLane& kept = *capture.lane("port0");
  EXPECT_TRUE(kept.complete);
  EXPECT_EQ(kept.journals, std::vector<std::string>{});
  ASSERT_EQ(kept.total_bytes % kChunkBytes, 0U);
  const std::uint64_t chunks_kept = kept.total_bytes / kChunkBytes;
  EXPECT_GT(chunks_kept, 8U);
  EXPECT_LT(chunks_kept, kChunks);
  // From the data files themselves: a prefix of the stream, each chunk on one stripe.
  EXPECT_EQ(stripes_hold({stripe_bytes(striped.directories[0], "cap-port0-s0-"),
                          stripe_bytes(striped.directories[1], "cap-port0-s1-")},
                         chunks_kept),
            "");
  EXPECT_EQ(difference(lane_bytes(kept), stream_truth(chunks_kept)), "");
  const recorder::CaptureLane& whole = *capture.lane("port1");
  EXPECT_TRUE(whole.complete);
  EXPECT_EQ(stripes_hold({stripe_bytes(dir.str("roomy"), "cap-port1-")}, kChunks), "");
}

TEST(RecordingWriter, TheCollectionForgetsMetasThatAreGone) {
  TempDir dir;
  recorder::RecorderSettings settings;
  settings.directories = {dir.str()};
  settings.name = "forget";
  settings.rotate_bytes = 1 << 20;
  settings.preallocate_bytes = 1 << 20;
  {
    RampWriter ramp(settings, "port0");
    ramp.write(4 * 8);  // eight file sets
    ASSERT_FALSE(ramp.writer.failed()) << ramp.writer.error();
  }
  recorder::refresh_collection(settings.directories, settings.name);
  const std::size_t with_all = recorder::meta_cache_entries();
  for (int segment = 0; segment < 6; ++segment)
    recorder::remove_recording(dir.str("forget-port0-000" + std::to_string(segment)));
  recorder::refresh_collection(settings.directories, settings.name);
  EXPECT_EQ(recorder::meta_cache_entries() + 6, with_all);
  EXPECT_EQ(recorder::open_capture(recorder::collection_path(settings)).lanes.at(0).recordings.size(), 2U);
}

}  // namespace
}  // namespace sluice
