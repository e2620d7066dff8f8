// Replay: each chunk is filled from one segment only, so a chunk's samples are contiguous in
// the stream and its timestamp and gaps are exact; gaps are attached to the first chunk
// that reaches past them. Reads complete in any order and leave in capture order.
#include "stages/replay/replay_stage.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <map>
#include <stdexcept>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"
#include "recorder/sigmf.hpp"

namespace sluice {
namespace {

constexpr std::uint64_t kBlock = 4096;

}  // namespace

ReplayStage::ReplayStage(SettingsReader& reader, const PipelineSettings& pipeline) {
  settings_.capture =
      reader.required_string("capture", "capture to replay: NAME.sigmf-collection, .sigmf-meta or base path");
  settings_.lane = reader.string(
      "lane", "", "lane of the capture to replay (default: this lane's name if recorded, else the first)");
  settings_.pace =
      reader.choice("pace", ReplayPace::recorded, "recorded: at the capture's sample rate; fast: as fast as possible",
                    {{"recorded", ReplayPace::recorded}, {"fast", ReplayPace::fast}});
  settings_.loop =
      reader.boolean("loop", false, "start again at the end (stream indices and timestamps keep increasing)");
  settings_.read_ahead = static_cast<unsigned>(
      reader.integer("read_ahead", 4, "reads in flight on each volume of the capture (fewer than chunks)", 1, 1024));
  settings_.direct = reader.boolean("direct", true, "read with O_DIRECT (off for filesystems that refuse it)");
  settings_.realtime = reader.boolean(
      "realtime", false,
      "paced: run this stage's thread under SCHED_FIFO while it keeps its times, so that busy cores cannot "
      "hold a chunk past its time (root or CAP_SYS_NICE)");
  if (settings_.realtime && settings_.pace != ReplayPace::recorded) {
    reader.error("realtime", "realtime applies to pace: recorded (a fast replay would hold a core from others)");
  }
  settings_.pool = read_pool_settings(reader, pipeline, PoolWriter::host_writes);
  if (settings_.pool.chunk_count < settings_.read_ahead + 1) {
    reader.error("read_ahead", "read_ahead must be smaller than chunks (the pool also feeds downstream)");
  }
}

void ReplayStage::start(StageContext& context) {
  context_ = &context;
  const recorder::Capture capture = recorder::open_capture(settings_.capture);
  const std::string wanted = !settings_.lane.empty()                        ? settings_.lane
                             : capture.lane(context.lane_name()) != nullptr ? context.lane_name()
                                                                            : capture.lanes.front().name;
  const recorder::CaptureLane* lane = capture.lane(wanted);
  if (lane == nullptr) throw std::runtime_error("capture " + settings_.capture + " has no lane '" + wanted + "'");
  lane_ = *lane;
  if (lane_.segments.empty())
    throw std::runtime_error("capture " + settings_.capture + " lane " + wanted + " holds no samples");
  if (!lane_.journals.empty()) {
    throw std::runtime_error("capture " + settings_.capture + " was cut off: run `sluice capture repair " +
                             settings_.capture + "` first");
  }
  if (settings_.pace == ReplayPace::recorded && lane_.sample_rate <= 0) {
    throw std::runtime_error("capture has no core:sample_rate: replay it with pace: fast");
  }
  if (settings_.pool.chunk_bytes < lane_.sample_bytes) throw std::runtime_error("chunk smaller than one sample");
  const auto& last = lane_.segments.back();
  span_ = last.global_index + last.sample_count - lane_.segments.front().global_index;
  first_index_ = lane_.segments.front().global_index;

  pool_ = &context.create_pool("out", settings_.pool.spec(context.cuda_device()));
  open_files(context);
  // Every chunk but one may sit in the ring (done, waiting for an older read to finish).
  reads_.resize(std::max<std::size_t>(settings_.pool.chunk_count - 1, settings_.read_ahead));
  if (const std::size_t reads_wanted = volumes_.size() * settings_.read_ahead; reads_wanted > reads_.size()) {
    const std::string note = "read_ahead " + std::to_string(settings_.read_ahead) + " on each of " +
                             std::to_string(volumes_.size()) +
                             " volumes needs chunks: " + std::to_string(reads_wanted + 1) + " or more; with " +
                             std::to_string(settings_.pool.chunk_count) + " chunks, " + std::to_string(reads_.size()) +
                             " reads are in flight at most";
    log::warn("lane {} stage {}: {}", context.lane_name(), context.stage_name(), note);
    context.metrics().notes.push_back(note);
  }

  late_ = &context.metrics().counter("late_chunks");
  late_reads_ = &context.metrics().counter("late_reads");
  late_downstream_ = &context.metrics().counter("late_downstream");
  late_wakeups_ = &context.metrics().counter("late_wakeups");
  late_most_us_ = &context.metrics().counter("late_most_us");
  late_latest_us_ = &context.metrics().counter("late_latest_us");
  late_latest_chunk_ = &context.metrics().counter("late_latest_chunk");
  context.stream.sample_rate = lane_.sample_rate;
  context.stream.format = *lane_.format;
  context.stream.center_frequency = lane_.frequency;
  context.stream.description = "replay of " + settings_.capture + " lane " + lane_.name;
  context.stream.fft_size = lane_.fft_size;
  context.stream.window = lane_.window;
  context.stream.averaging = lane_.averaging;
  context.stream.start_time = lane_.segments.front().time;
}

// Opens each data file twice (O_DIRECT and buffered, for reads off block boundaries) and gives
// each filesystem the files lie on (a stripe's volume) its own io_uring, with the pool's
// chunks registered as fixed buffers in each.
void ReplayStage::open_files(StageContext& context) {
  std::map<std::string, std::size_t> file_index;
  std::map<dev_t, std::size_t> volume_index;
  for (const auto& segment : lane_.segments) {
    auto [it, added] = file_index.emplace(segment.data_path, files_.size());
    if (added) {
      Files files;
      files.buffered = recorder::open_file(segment.data_path, O_RDONLY);
      files.direct = settings_.direct ? recorder::open_file(segment.data_path, O_RDONLY | O_DIRECT)
                                      : recorder::open_file(segment.data_path, O_RDONLY);
      struct stat status {};
      if (::fstat(files.buffered.get(), &status) != 0)
        throw std::runtime_error(errno_message("fstat(" + segment.data_path + ")"));
      auto [volume, new_volume] = volume_index.emplace(status.st_dev, volume_index.size());
      files.volume = volume->second;
      files_.push_back(std::move(files));
      if (new_volume) {
        Volume& added_volume = volumes_.emplace_back();
        added_volume.ring = recorder::Uring(settings_.read_ahead * 2);
        if (std::string why = added_volume.ring.register_pools({pool_}); !why.empty()) {
          context.metrics().notes.push_back("fixed buffers off on volume " + std::to_string(volumes_.size() - 1) +
                                            " (" + why + ")");
        }
      }
    }
    segment_file_.push_back(it->second);
  }
  poll_fds_.resize(volumes_.size());
}

bool ReplayStage::plan_next(Chunk& chunk) noexcept {
  if (segment_ >= lane_.segments.size()) {
    if (!settings_.loop) return false;
    segment_ = 0;
    segment_offset_ = 0;
    gap_ = 0;
    loop_shift_ += span_;
  }
  const recorder::CaptureSegment& segment = lane_.segments[segment_];
  const std::uint64_t capacity_samples = chunk.capacity / lane_.sample_bytes;
  const std::uint64_t count = std::min(capacity_samples, segment.sample_count - segment_offset_);
  const std::uint64_t first = segment.global_index + segment_offset_;
  chunk.format = *lane_.format;
  chunk.first_sample = first + loop_shift_;
  chunk.sample_count = count;
  chunk.size = static_cast<std::size_t>(count * lane_.sample_bytes);
  chunk.sequence = sequence_++;
  chunk.time_jump = segment_offset_ == 0 && segment.time_jump;            // a recorded resync stays one
  chunk.context_change = segment_offset_ == 0 && segment.context_change;  // and a recorded retune
  if (chunk.context_change) chunk.context = segment.context;
  chunk.timestamp =
      recorder::time_after(recorder::time_of_sample(segment, first, lane_.sample_rate), loop_shift_, lane_.sample_rate);
  while (gap_ < lane_.gaps.size() && lane_.gaps[gap_].global_index < first + count) {
    const recorder::CaptureGap& gap = lane_.gaps[gap_];
    if (!chunk.add_gap(gap.global_index + loop_shift_, gap.length, gap.in_data)) break;  // next chunk
    ++gap_;
  }
  Read& read = reads_[(head_ + filled_) % reads_.size()];
  read.file = segment_file_[segment_];
  read.offset = segment.file_offset + segment_offset_ * lane_.sample_bytes;
  read.direct = settings_.direct && read.offset % kBlock == 0;
  // O_DIRECT reads whole blocks: the rounded-up length fits (chunks are whole pages) and
  // anything past the wanted bytes is ignored.
  read.length = read.direct ? (chunk.size + kBlock - 1) / kBlock * kBlock : chunk.size;
  read.done = 0;
  segment_offset_ += count;
  if (segment_offset_ >= segment.sample_count) {
    ++segment_;
    segment_offset_ = 0;
  }
  return true;
}

bool ReplayStage::queue(std::size_t index) noexcept {
  Read& read = reads_[index];
  Volume& volume = volume_of(read);
  io_uring_sqe* sqe = io_uring_get_sqe(volume.ring.get());
  if (sqe == nullptr) {
    error_ = "io_uring submission queue full";
    return false;
  }
  const std::uint64_t offset = read.offset + read.done;
  const bool direct = read.direct && offset % kBlock == 0 && read.done % kBlock == 0;
  const int fd = direct ? files_[read.file].direct.get() : files_[read.file].buffered.get();
  std::byte* destination = read.chunk->data + read.done;
  const auto length = static_cast<unsigned>(read.length - read.done);
  const int buffer = volume.ring.buffer_index(*read.chunk);
  if (buffer >= 0) {
    io_uring_prep_read_fixed(sqe, fd, destination, length, offset, buffer);
  } else {
    io_uring_prep_read(sqe, fd, destination, length, offset);
  }
  io_uring_sqe_set_data64(sqe, index);
  read.pending = true;
  ++pending_;
  ++volume.pending;
  return true;
}

void ReplayStage::reap(Volume& volume, std::chrono::microseconds timeout) noexcept {
  auto handle = [this, &volume](std::uint64_t index, int result) {
    Read& read = reads_[index];
    read.pending = false;
    --pending_;
    --volume.pending;
    if (result == -EAGAIN || result == -EINTR) {
      queue(index);
      return;
    }
    if (result < 0) {
      error_ = errno_message("read(" + files_[read.file].direct.path() + ")", -result);
      return;
    }
    read.done += static_cast<std::uint64_t>(result);
    if (read.done >= read.chunk->size) {
      read.done_ns = monotonic_ns();
      return;
    }
    if (result == 0) {
      error_ = "data file ends early (truncated capture?): run `sluice capture info " + settings_.capture + "`";
      return;
    }
    queue(index);  // short read: the rest
  };
  // -EAGAIN / -EBUSY / -EINTR leave the reads queued for the next submit; anything else fails.
  const int submitted = volume.ring.reap(timeout, volume.pending > 0, handle);
  if (submitted < 0 && submitted != -EAGAIN && submitted != -EBUSY && submitted != -EINTR && error_.empty()) {
    error_ = errno_message("io_uring_submit", -submitted);
  }
}

// Waits up to 10 ms for a completion on any volume, then takes what completed: a slow
// volume at the head does not keep the others' finished reads from being replaced.
void ReplayStage::wait_for_reads() noexcept {
  if (volumes_.size() == 1) {
    reap(volumes_.front(), std::chrono::milliseconds(10));
    return;
  }
  nfds_t count = 0;
  for (Volume& volume : volumes_) {
    if (volume.pending == 0) continue;
    // An io_uring's fd polls readable while its completion queue holds entries.
    poll_fds_[count++] = pollfd{volume.ring.get()->ring_fd, POLLIN, 0};
  }
  if (count > 0 && ::poll(poll_fds_.data(), count, 10) < 0 && errno != EINTR && error_.empty()) {
    error_ = errno_message("poll(io_uring)");
  }
  reap_all();
}

void ReplayStage::reap_all() noexcept {
  for (Volume& volume : volumes_) {
    if (volume.pending > 0) reap(volume, std::chrono::microseconds(0));
  }
}

void ReplayStage::drain() noexcept {
  for (Volume& volume : volumes_) {
    while (volume.pending > 0) reap(volume, std::chrono::milliseconds(10));
  }
  for (auto& read : reads_) {
    read.chunk.reset();
    read.waiting = false;
  }
  filled_ = 0;
  waiting_ = 0;
}

// Plans reads in capture order while fewer than read_ahead per volume are planned or at a
// disk: a volume at its limit does not stop the others' reads from being planned behind it.
void ReplayStage::plan_reads() noexcept {
  const std::size_t limit = volumes_.size() * settings_.read_ahead;
  while (!exhausted_ && error_.empty() && pending_ + waiting_ < limit && filled_ < reads_.size()) {
    // Wait for a free chunk only when the ring is empty: downstream holds them all (once
    // paced, reads planned then count as waiting for downstream).
    if (filled_ == 0 && start_ns_ != 0) short_of_chunks_ = true;
    ChunkPtr chunk =
        context_->acquire(*pool_, filled_ == 0 ? std::chrono::microseconds(10'000) : std::chrono::microseconds(0));
    pool_empty_ = !chunk;
    if (!chunk) {
      short_of_chunks_ = true;
      break;
    }
    if (!plan_next(*chunk)) {
      exhausted_ = true;
      break;
    }
    const std::size_t index = (head_ + filled_) % reads_.size();
    reads_[index].chunk = std::move(chunk);
    reads_[index].waiting = true;
    reads_[index].starved = short_of_chunks_;
    ++waiting_;
    ++filled_;
  }
  if (filled_ == reads_.size()) short_of_chunks_ = false;
}

// Sends planned reads, oldest first, to each volume that has fewer than read_ahead at its
// disk; each volume's new reads go to the kernel in one submit.
void ReplayStage::send_waiting_reads() noexcept {
  for (std::size_t i = 0; waiting_ > 0 && i < filled_ && error_.empty(); ++i) {
    const std::size_t index = (head_ + i) % reads_.size();
    Read& read = reads_[index];
    if (!read.waiting || volume_of(read).pending >= settings_.read_ahead) continue;
    read.waiting = false;
    --waiting_;
    if (!queue(index)) break;
  }
  for (Volume& volume : volumes_) {
    if (io_uring_sq_ready(volume.ring.get()) == 0) continue;
    const int submitted = io_uring_submit(volume.ring.get());
    if (submitted < 0 && submitted != -EAGAIN && submitted != -EBUSY && submitted != -EINTR && error_.empty()) {
      error_ = errno_message("io_uring_submit", -submitted);
    }
  }
}

// Every read the ring can hold has finished (or the capture or the pool ran out first).
bool ReplayStage::primed() const noexcept {
  return pending_ == 0 && waiting_ == 0 && (filled_ == reads_.size() || exhausted_ || pool_empty_);
}

// Holds the head chunk until its first sample's recorded time: ok once it is due. The clock
// starts when the ring is primed, not when the first read lands: started with one chunk in
// hand, any read slower than a chunk's duration in the first round would make a chunk late.
// The wait is to an absolute deadline and the chunk leaves right after it, with the reads'
// bookkeeping done before the sleep, not between the wake and the hand-off. A late chunk is
// counted with how late it was and why (late_reads, late_downstream or late_wakeups).
StageStatus ReplayStage::pace(const Read& read) noexcept {
  if (start_ns_ == 0) {
    if (!primed()) {
      wait_for_reads();
      return StageStatus::idle;
    }
    start_ns_ = monotonic_ns();
  }
  const Pacer pacer(lane_.sample_rate);
  const std::uint64_t before = read.chunk->first_sample - first_index_;
  const std::uint64_t due_ns = start_ns_ + pacer.wait_ns(before, 0);
  std::uint64_t now = monotonic_ns();
  if (now < due_ns) {
    static_cast<void>(set_fifo(true));  // allowed since enter_realtime()
    // At most 10 ms at a time, so that a stop request is seen.
    const std::uint64_t until = std::min(due_ns, now + 10'000'000);
    const timespec wake{static_cast<time_t>(until / 1'000'000'000), static_cast<long>(until % 1'000'000'000)};
    ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, nullptr);
    now = monotonic_ns();
    if (now < due_ns) return StageStatus::idle;
  }
  // Late: it leaves after a live source would have delivered its last sample, so the lane
  // falls behind the recorded rate.
  const std::uint64_t end_ns = start_ns_ + pacer.wait_ns(before + read.chunk->sample_count, 0);
  if (now > end_ns) {
    static_cast<void>(set_fifo(false));  // behind: catch up as an ordinary thread
    const std::uint64_t late_us = (now - end_ns) / 1000;
    late_->add();
    NamedCounter* cause = late_wakeups_;
    if (read.done_ns > end_ns) {
      cause = read.starved ? late_downstream_ : late_reads_;
    } else if (handed_off_ns_ > end_ns && handing_off_ns_ < end_ns) {
      cause = late_downstream_;
    } else if (handed_off_ns_ > end_ns && last_late_cause_ != nullptr) {
      cause = last_late_cause_;
    }
    cause->add();
    last_late_cause_ = cause;
    late_most_us_->keep_max(late_us);
    late_latest_us_->set(late_us);
    late_latest_chunk_->set(read.chunk->sequence);
  }
  return StageStatus::ok;
}

// The runtime starts the stage's thread after start(), so the first process() checks that
// the thread may take SCHED_FIFO (lowest priority: ahead of ordinary threads, behind other
// real-time work). From then on the thread holds it only while on time: it takes it before
// sleeping to a deadline and gives it up when a chunk leaves late, so a replay held back by
// its downstream competes for the cores as an ordinary thread, not ahead of the lane it waits on.
bool ReplayStage::enter_realtime() noexcept {
  thread_ready_ = true;
  if (!settings_.realtime) return true;
  if (const int error = set_fifo(true); error != 0) {
    error_ = errno_message("pthread_setschedparam(SCHED_FIFO)", error) +
             ": realtime needs root, CAP_SYS_NICE or an rtprio limit (ulimit -r); or set realtime: false";
    return false;
  }
  return true;
}

int ReplayStage::set_fifo(bool on) noexcept {
  if (!settings_.realtime || on == fifo_) return 0;
  sched_param parameters{};
  parameters.sched_priority = on ? ::sched_get_priority_min(SCHED_FIFO) : 0;
  const int error = ::pthread_setschedparam(::pthread_self(), on ? SCHED_FIFO : SCHED_OTHER, &parameters);
  if (error == 0) fifo_ = on;
  return error;
}

StageStatus ReplayStage::process() {
  if (!thread_ready_ && !enter_realtime()) {
    context_->fail(error_);
    return StageStatus::error;
  }
  if (context_->stop_requested()) {
    drain();
    return StageStatus::end_of_stream;
  }
  // Take what completed, then keep read_ahead reads at each volume's disk.
  reap_all();
  plan_reads();
  send_waiting_reads();
  if (!error_.empty()) {
    drain();
    context_->fail(error_);
    return StageStatus::error;
  }
  if (filled_ == 0) return exhausted_ ? StageStatus::end_of_stream : StageStatus::idle;
  Read& read = reads_[head_];
  if (read.waiting || read.pending || read.done < read.chunk->size) {
    wait_for_reads();
    if (!error_.empty()) {
      drain();
      context_->fail(error_);
      return StageStatus::error;
    }
    if (read.waiting || read.pending || read.done < read.chunk->size) return StageStatus::idle;
  }
  if (settings_.pace == ReplayPace::recorded) {
    if (const StageStatus status = pace(read); status != StageStatus::ok) return status;
  }
  ChunkPtr chunk = std::move(read.chunk);
  head_ = (head_ + 1) % reads_.size();
  --filled_;
  if (settings_.pace == ReplayPace::recorded) handing_off_ns_ = monotonic_ns();
  context_->emit(std::move(chunk));
  if (settings_.pace == ReplayPace::recorded) handed_off_ns_ = monotonic_ns();
  return StageStatus::ok;
}

void ReplayStage::stop() noexcept { drain(); }

void register_replay_stage(StageRegistry& registry) {
  registry.add(StageType{"replay", StageRole::source,
                         "reads a SigMF capture back into a lane (io_uring, O_DIRECT, paced or fast, once or looped)",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<ReplayStage>(reader, pipeline);
                         }});
}

}  // namespace sluice
