// Data preallocation as the kernel sees it: a RecordingWriter on a real ext4 loop volume,
// its io_uring writes counted by the kernel's own io_uring tracepoints (perf_event_open on
// this thread), its fallocate calls counted by the thread that made them, its bytes read back.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "recorder/capture_reader.hpp"
#include "recorder/recording_writer.hpp"
#include "tests/stages/record/record_test_support.hpp"

namespace {

std::atomic<std::thread::id> g_writer_thread;
std::atomic<int> g_writer_calls{0};  // data-file fallocate calls on the writer's thread
std::atomic<int> g_other_calls{0};   // on any other thread

bool is_data_file(int fd) {
  char link[64];
  char target[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t length = ::readlink(link, target, sizeof target - 1);
  return length > 0 && std::string_view(target, static_cast<std::size_t>(length)).ends_with(".sigmf-data");
}

int counted(int fd, int mode, off64_t offset, off64_t length, const char* name) {
  using Real = int (*)(int, int, off64_t, off64_t);
  static const auto real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, name));
  if (is_data_file(fd)) ++(std::this_thread::get_id() == g_writer_thread.load() ? g_writer_calls : g_other_calls);
  return real(fd, mode, offset, length);
}

}  // namespace

// Every fallocate the recorder makes goes through these, wherever it calls it from.
extern "C" int fallocate(int fd, int mode, off_t offset, off_t length) {
  return counted(fd, mode, offset, length, "fallocate");
}
extern "C" int fallocate64(int fd, int mode, off64_t offset, off64_t length) {
  return counted(fd, mode, offset, length, "fallocate64");
}

namespace sluice {
namespace {
namespace fs = std::filesystem;

constexpr double kRate = 10e6;
constexpr std::size_t kChunkBytes = 1 << 20;
constexpr std::uint64_t kChunkSamples = kChunkBytes / 4;  // ci16
constexpr std::uint64_t kChunks = 192;

// Counts one io_uring tracepoint on the calling thread, where io_uring_enter submits and,
// when a write cannot be issued without blocking, hands it to an io-wq worker.
class TracepointCounter {
 public:
  explicit TracepointCounter(const std::string& event) {
    for (const char* root : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
      std::ifstream in(std::string(root) + "/events/io_uring/" + event + "/id");
      std::uint64_t id = 0;
      if (!(in >> id)) continue;
      perf_event_attr attr{};
      attr.type = PERF_TYPE_TRACEPOINT;
      attr.size = sizeof attr;
      attr.config = id;
      attr.disabled = 1;
      fd_ = static_cast<int>(::syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
      if (fd_ < 0) why_ = "perf_event_open(io_uring:" + event + "): " + std::strerror(errno);
      return;
    }
    why_ = "no tracefs with the io_uring:" + event + " event (scripts/setup.sh mounts it as root)";
  }
  TracepointCounter(const TracepointCounter&) = delete;
  TracepointCounter& operator=(const TracepointCounter&) = delete;
  ~TracepointCounter() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] bool usable() const { return fd_ >= 0; }
  [[nodiscard]] const std::string& why() const { return why_; }
  void enable() const { EXPECT_EQ(::ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0), 0) << std::strerror(errno); }
  [[nodiscard]] std::uint64_t count() const {
    std::uint64_t value = 0;
    EXPECT_EQ(::read(fd_, &value, sizeof value), static_cast<ssize_t>(sizeof value)) << std::strerror(errno);
    return value;
  }

 private:
  int fd_ = -1;
  std::string why_;
};

struct Written {
  std::uint64_t submitted_writes = 0;  // io_uring:io_uring_submit_req on the writer's thread
  std::uint64_t punted_writes = 0;     // io_uring:io_uring_queue_async_work on the writer's thread
};

// Writes kChunks ramp chunks on this thread the way the record stage does, counting what
// the kernel did with them; then checks the capture holds exactly the ramp.
Written write_ramp(const recorder::RecorderSettings& settings, const TracepointCounter& submits,
                   const TracepointCounter& punts) {
  StreamInfo stream;
  stream.sample_rate = kRate;
  stream.format = SampleFormat::ci16;
  Pool pool("ramp", PoolSpec{kChunkBytes, 2 * recorder::writes_in_flight(settings), MemoryKind::host, 0});
  recorder::RecordingWriter writer(settings, stream, "port0");
  writer.open({&pool});  // the first reservation is setup's, on this thread
  g_writer_thread = std::this_thread::get_id();
  submits.enable();
  punts.enable();
  std::uint64_t submitted = 0;
  std::uint64_t taken = 0;
  while (taken < kChunks && !writer.failed()) {
    if (submitted < kChunks && writer.has_room()) {
      ChunkPtr chunk = pool.try_acquire();
      EXPECT_TRUE(chunk);
      if (!chunk) break;
      const auto bytes = test::ramp_bytes(SampleFormat::ci16, kRate, submitted * kChunkSamples, kChunkSamples);
      std::memcpy(chunk->data, bytes.data(), bytes.size());
      chunk->size = kChunkBytes;
      chunk->first_sample = submitted * kChunkSamples;
      chunk->sample_count = kChunkSamples;
      ++submitted;
      EXPECT_TRUE(writer.submit(std::move(chunk), nullptr)) << writer.error();
      continue;
    }
    writer.poll(std::chrono::milliseconds(100));
    while (ChunkPtr done = writer.take_done()) ++taken;
  }
  const Written written{submits.count(), punts.count()};
  writer.finish();
  g_writer_thread = std::thread::id();
  EXPECT_FALSE(writer.failed()) << writer.error();
  const recorder::Capture capture = recorder::open_capture(recorder::collection_path(settings));
  EXPECT_EQ(capture.lanes.size(), 1U);
  if (capture.lanes.size() == 1) {
    EXPECT_TRUE(capture.lanes[0].complete);
    EXPECT_TRUE(test::lane_bytes(capture.lanes[0]) ==
                test::ramp_bytes(SampleFormat::ci16, kRate, 0, kChunks * kChunkSamples))
        << "the capture does not hold the ramp written";
  }
  return written;
}

// A recording on a fresh ext4 loop volume, with the writer thread's io_uring events counted.
class Preallocation : public testing::Test {
 protected:
  void SetUp() override {
    std::string why = !volume_.mounted() ? "cannot mount an ext4 volume (needs root and loop devices): " + volume_.why()
                      : !submits_.usable() ? "cannot count io_uring events: " + submits_.why()
                      : !punts_.usable()   ? "cannot count io_uring events: " + punts_.why()
                                           : std::string();
    if (!why.empty() && test::in_ci()) FAIL() << why;
    if (!why.empty()) GTEST_SKIP() << why;
    settings_.directories = {volume_.path() + "/cap"};
    settings_.name = "cap";
  }

  test::TempDir dir_;
  test::LoopVolume volume_{dir_, "ext4", "320M", "vol"};
  const TracepointCounter submits_{"io_uring_submit_req"};
  const TracepointCounter punts_{"io_uring_queue_async_work"};
  recorder::RecorderSettings settings_;
};

// ext4 cannot issue a direct write past the file's size without blocking, so io_uring hands
// each such write to an io-wq worker, which runs the writes of one file one at a time. The
// recorder's writes land inside the file's size: io_uring issues them inline, while the
// volume's thread grows the file ahead (16 MiB at a time here, so it grows many times).
TEST_F(Preallocation, DirectWritesOnExt4AreIssuedInlineNotHandedToIoWorkers) {
  settings_.preallocate_bytes = 16 << 20;
  const Written written = write_ramp(settings_, submits_, punts_);
  std::printf("%llu of %llu io_uring writes handed to io-wq workers\n",
              static_cast<unsigned long long>(written.punted_writes),
              static_cast<unsigned long long>(written.submitted_writes));
  EXPECT_GE(written.submitted_writes, kChunks) << "the kernel saw fewer writes than chunks";
  // A write meets the volume's thread growing the same file now and then (the inode's lock
  // is taken): that one is handed off. Before, every write was.
  EXPECT_LE(written.punted_writes * 4, written.submitted_writes)
      << written.punted_writes << " of " << written.submitted_writes << " writes went to io-wq workers";
}

// The record stage's thread only submits: the data files' fallocate calls after setup all
// run on the volume's thread, and the file grew well past its first reservation.
TEST_F(Preallocation, TheWritersThreadNeverFallocatesDataFiles) {
  settings_.preallocate_bytes = 8 << 20;
  g_writer_calls = 0;
  g_other_calls = 0;
  write_ramp(settings_, submits_, punts_);
  EXPECT_EQ(g_writer_calls.load(), 0) << "data-file fallocate calls on the writer's thread";
  // 192 MiB written from 8 MiB ahead: the volume's thread grew the file several times.
  EXPECT_GE(g_other_calls.load(), 3) << "the volume's thread hardly preallocated";
}

// On ext4 a growth waits for every direct write of the file in flight and holds back those
// submitted meanwhile, which io_uring hands to io-wq workers. Growing by a fixed 2 MiB, a
// 192 MiB recording grew its file dozens of times; reserved ahead as far as the file already
// reaches, it grows about fifteen times, and far fewer writes meet a growth.
TEST_F(Preallocation, GrowthsGetRarerAsTheFileGrows) {
  settings_.preallocate_bytes = 2 << 20;
  g_writer_calls = 0;
  g_other_calls = 0;
  const Written written = write_ramp(settings_, submits_, punts_);
  const int growths = g_writer_calls.load() + g_other_calls.load();
  std::printf("%d growths; %llu of %llu io_uring writes handed to io-wq workers\n", growths,
              static_cast<unsigned long long>(written.punted_writes),
              static_cast<unsigned long long>(written.submitted_writes));
  EXPECT_GE(growths, 3) << "the file was never grown";
  // From 2 MiB to 192 MiB by a third or more each time: about 15 (the first reservation
  // counted), where growing 1 MiB at a time from 2 MiB ahead would take about 95.
  EXPECT_LE(growths, 20) << "the data file grew " << growths << " times";
}

}  // namespace
}  // namespace sluice
