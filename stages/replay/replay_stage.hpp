// `replay` source: reads one lane of a capture back into a pipeline through io_uring
// (O_DIRECT, several reads ahead on each volume of a striped capture), paced at the recorded
// rate or as fast as possible, once or looped, with the recorded gaps and timestamps restored.
#pragma once

#include <poll.h>

#include <memory>
#include <string>
#include <vector>

#include "pipeline/stage.hpp"
#include "recorder/capture_reader.hpp"
#include "recorder/uring.hpp"

namespace sluice {

enum class ReplayPace { recorded, fast };

struct ReplaySettings {
  std::string capture;  // .sigmf-collection, .sigmf-meta or base path
  std::string lane;     // lane of the capture; empty: the pipeline lane's name if recorded, else the first
  ReplayPace pace = ReplayPace::recorded;
  bool loop = false;
  unsigned read_ahead = 4;  // reads each volume (filesystem) of the capture has at once
  bool direct = true;       // O_DIRECT reads
  bool realtime = false;    // paced: the stage's thread under SCHED_FIFO while it keeps its times
  PoolSettings pool;
};

class ReplayStage final : public Stage {
 public:
  ReplayStage(SettingsReader& reader, const PipelineSettings& pipeline);
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;

 private:
  struct Read {
    ChunkPtr chunk;
    std::size_t file = 0;      // index into files_
    std::uint64_t offset = 0;  // in the file
    std::uint64_t length = 0;  // bytes to request (block-rounded for O_DIRECT)
    std::uint64_t done = 0;
    bool direct = false;
    bool waiting = false;       // planned, not yet at the disk: its volume has read_ahead reads
    bool pending = false;       // at the disk
    std::uint64_t done_ns = 0;  // when its last bytes arrived (monotonic), for late_reads
    bool starved = false;       // planned while short_of_chunks_: it waited for downstream
  };
  struct Files {
    recorder::FileDescriptor direct;
    recorder::FileDescriptor buffered;
    std::size_t volume = 0;  // index into volumes_
  };
  // One filesystem of the capture (a stripe's drive): its own io_uring and its own reads in flight.
  struct Volume {
    recorder::Uring ring;
    std::size_t pending = 0;
  };

  void open_files(StageContext& context);
  bool plan_next(Chunk& chunk) noexcept;
  void plan_reads() noexcept;
  void send_waiting_reads() noexcept;
  bool queue(std::size_t index) noexcept;
  void reap(Volume& volume, std::chrono::microseconds timeout) noexcept;
  void reap_all() noexcept;
  void wait_for_reads() noexcept;
  void drain() noexcept;
  [[nodiscard]] bool primed() const noexcept;
  bool enter_realtime() noexcept;
  int set_fifo(bool on) noexcept;  // SCHED_FIFO on or off for this thread (realtime only); 0 or errno
  StageStatus pace(const Read& read) noexcept;
  [[nodiscard]] Volume& volume_of(const Read& read) noexcept { return volumes_[files_[read.file].volume]; }

  ReplaySettings settings_;
  StageContext* context_ = nullptr;
  Pool* pool_ = nullptr;
  recorder::CaptureLane lane_;
  std::vector<Files> files_;
  std::vector<std::size_t> segment_file_;  // segment -> files_ index
  std::vector<Volume> volumes_;
  std::vector<pollfd> poll_fds_;  // one per volume, for wait_for_reads()
  // Reads leave in capture order but complete in any order. The ring holds reads from the
  // oldest not yet emitted (head_) on, filled_ of them; pending_ of those are at a disk and
  // waiting_ more are planned for a volume that has read_ahead reads already. read_ahead
  // bounds each volume's reads, not filled_, so a slow read at the head (or a slow volume)
  // does not stop the reads behind it: each disk always has read_ahead requests, as with fio.
  std::vector<Read> reads_;
  std::size_t head_ = 0;
  std::size_t filled_ = 0;
  std::size_t pending_ = 0;
  std::size_t waiting_ = 0;
  // Cursor into the capture.
  std::size_t segment_ = 0;
  std::uint64_t segment_offset_ = 0;  // samples into the current segment
  std::size_t gap_ = 0;
  std::uint64_t loop_shift_ = 0;  // added to stream indices on each loop
  std::uint64_t span_ = 0;        // stream samples from first to last recorded sample
  std::uint64_t sequence_ = 0;
  bool exhausted_ = false;
  bool thread_ready_ = false;  // realtime checked on the stage's thread (its first process())
  bool fifo_ = false;          // the thread runs under SCHED_FIFO now
  bool pool_empty_ = false;    // the last plan_reads found no free chunk (downstream holds them)
  // The pool ran dry since the ring was last full: reads planned meanwhile waited for
  // downstream to give chunks back.
  bool short_of_chunks_ = false;
  // Pacing: the clock starts once the ring is full of finished reads (primed()), so the first
  // deadlines have as many chunks in hand as every later one.
  std::uint64_t start_ns_ = 0;
  std::uint64_t first_index_ = 0;
  std::uint64_t handing_off_ns_ = 0;  // when the last hand-off downstream began
  std::uint64_t handed_off_ns_ = 0;   // and when it returned
  NamedCounter* late_ = nullptr;      // paced chunks that left after their last sample's recorded time
  // Why each late chunk was late: its read finished after its last sample's time (downstream's
  // doing if its chunk had to come back from downstream first); else the hand-off before it,
  // begun in time, waited past that time for room downstream; else the replay thread itself ran
  // late (woke or got a CPU late). A chunk late only because the one before it left late takes
  // that one's cause.
  NamedCounter* late_reads_ = nullptr;
  NamedCounter* late_downstream_ = nullptr;
  NamedCounter* late_wakeups_ = nullptr;
  NamedCounter* last_late_cause_ = nullptr;
  NamedCounter* late_most_us_ = nullptr;       // the most any chunk was late, µs past its last sample's time
  NamedCounter* late_latest_us_ = nullptr;     // how late the latest late chunk was
  NamedCounter* late_latest_chunk_ = nullptr;  // its index in the replayed stream (0: the first chunk)
  std::string error_;
};

void register_replay_stage(StageRegistry& registry);

}  // namespace sluice
