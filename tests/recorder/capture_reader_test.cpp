// CaptureReader on real files: a collection's recordings that it does not list yet are found
// and read, each file that says what a recording holds opened once (counted by inotify).
#include "recorder/capture_reader.hpp"

#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "pipeline/stage.hpp"
#include "recorder/journal.hpp"
#include "recorder/sigmf.hpp"
#include "tests/stages/record/record_test_support.hpp"

namespace sluice::recorder {
namespace {

constexpr std::uint64_t kChunkSamples = 1000;
constexpr double kRate = 1e6;

// Counts the times any process opens the watched files, as the kernel reports them.
class OpenCounter {
 public:
  OpenCounter() : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ < 0) ADD_FAILURE() << "inotify_init1: " << std::strerror(errno);
  }
  OpenCounter(const OpenCounter&) = delete;
  OpenCounter& operator=(const OpenCounter&) = delete;
  ~OpenCounter() { ::close(fd_); }
  void watch(const std::string& path) {
    if (::inotify_add_watch(fd_, path.c_str(), IN_OPEN) < 0)
      ADD_FAILURE() << "inotify_add_watch(" << path << "): " << std::strerror(errno);
  }
  // The opens reported since the last call (the events were queued as they happened).
  int opens() {
    alignas(inotify_event) char buffer[4096];
    int count = 0;
    for (ssize_t bytes = 0; (bytes = ::read(fd_, buffer, sizeof(buffer))) > 0;) {
      for (ssize_t at = 0; at < bytes;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
        if ((event->mask & IN_OPEN) != 0) ++count;
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
    return count;
  }

 private:
  int fd_;
};

// Recording `base` of lane port0 as a recorder leaves it: its data file, and a journal of its
// `chunks` chunks (cut off while being written) or else its finished meta.
std::vector<std::byte> write_recording(const std::string& base, std::uint64_t first_chunk, std::uint64_t chunks,
                                       bool journal) {
  StreamInfo stream;
  stream.sample_rate = kRate;
  const nlohmann::json global = make_global(stream, "port0", "sluice", 0, 1, 0);
  const std::vector<std::byte> bytes =
      test::ramp_bytes(SampleFormat::ci16, kRate, first_chunk * kChunkSamples, chunks * kChunkSamples);
  std::vector<JournalRecord> records;
  for (std::uint64_t i = 0; i < chunks; ++i) {
    Chunk chunk;
    chunk.first_sample = (first_chunk + i) * kChunkSamples;
    chunk.sample_count = kChunkSamples;
    records.push_back(make_journal_record(chunk, i * kChunkSamples * 4, kChunkSamples * 4));
  }
  std::ofstream(base + std::string(kDataSuffix), std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (journal) {
    JournalWriter writer(base + std::string(kJournalSuffix), global);
    for (const auto& record : records) EXPECT_EQ(writer.append(record), 0);
  } else {
    std::ofstream(base + std::string(kMetaSuffix)) << build_meta(global, records, true).dump(2);
  }
  return bytes;
}

TEST(CaptureReader, AnUnlistedRecordingIsReadWholeWithItsJournalAndMetaEachOpenedOnce) {
  test::TempDir dir;
  write_collection(dir.str("cap.sigmf-collection"), {}, nlohmann::json::object(), "");
  std::vector<std::byte> expected = write_recording(dir.str("cap-port0-0000"), 0, 3, false);
  const std::vector<std::byte> cut = write_recording(dir.str("cap-port0-0001"), 3, 2, true);
  expected.insert(expected.end(), cut.begin(), cut.end());
  OpenCounter counter;
  counter.watch(dir.str("cap-port0-0000.sigmf-meta"));
  counter.watch(dir.str("cap-port0-0001.sluice-journal"));

  const Capture capture = open_capture(dir.str("cap.sigmf-collection"));

  EXPECT_EQ(counter.opens(), 2) << "the finished recording's meta and the cut one's journal, once each";
  ASSERT_EQ(capture.unlisted.size(), 2U);
  ASSERT_EQ(capture.lanes.size(), 1U);
  const CaptureLane& lane = capture.lanes[0];
  EXPECT_EQ(lane.name, "port0");
  EXPECT_EQ(lane.journals, std::vector<std::string>{dir.str("cap-port0-0001.sluice-journal")});
  EXPECT_EQ(lane.total_samples, 5 * kChunkSamples);
  EXPECT_EQ(test::lane_bytes(lane), expected);
}

}  // namespace
}  // namespace sluice::recorder
