// Record stage: up to io_depth writes in flight, device chunks' bounce copies ahead of them; a
// chunk goes on (or ends) once its write completed and its journal record is down, in arrival
// order. A full disk ends the lane with the reason and what the capture holds, read from disk.
#include "stages/record/record_stage.hpp"

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <stdexcept>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/log.hpp"
#include "pipeline/units.hpp"
#include "recorder/capture_reader.hpp"
#include "recorder/volume_check.hpp"

namespace sluice {
namespace {

// Copies out of GPU memory that may be in flight ahead of the writer's chunks.
constexpr std::size_t kBounceCopies = 4;

}  // namespace

RecordStage::RecordStage(SettingsReader& reader, const PipelineSettings& pipeline) {
  settings_.directories = reader.strings("directory", {},
                                         "directory to record into; a list stripes the lane's chunks across them "
                                         "(one directory per drive)");
  settings_.name =
      reader.string("capture_name", pipeline.name, "capture name: NAME.sigmf-collection, NAME-LANE-....sigmf-*");
  settings_.overwrite = reader.boolean("overwrite", false,
                                       "replace an existing capture of this name (otherwise refuse to start); the old "
                                       "files are set aside until the new recording finishes");
  settings_.rotate_bytes =
      reader.bytes("rotate", 0, "start a new file set when a data file would pass this size (0: never)");
  settings_.preallocate_bytes =
      reader.bytes("preallocate", 1ULL << 30,
                   "fallocate data files this far ahead of the writes at first, then as far as the file reaches (up to "
                   "8 GiB), a rotating one whole (0: off)");
  settings_.queue_depth = static_cast<unsigned>(reader.integer(
      "io_depth", 8,
      "writes in the kernel at once, shared out over the directories (each its own io_uring); striped, the stage "
      "holds up to twice as many chunks (those written wait for older ones on slower volumes) where the lane's "
      "pools keep half their chunks",
      1, 4096));
  settings_.direct = reader.boolean("direct", true, "write with O_DIRECT (turn off for filesystems that refuse it)");
  if (settings_.directories.empty() && !reader.docs_only()) {
    reader.error("directory", "record needs a directory to write into", "directory: /data/captures");
  }
  join_ = reader.boolean("join", false,
                         "add this pipeline's lanes to an existing capture of this name (otherwise refuse to start "
                         "when NAME.sigmf-collection exists)");
  // This host's directories say nothing about a tap that runs on another node (--node).
  const bool here = reader.on_this_host();
  for (const auto& directory : settings_.directories) {
    if (directory.empty()) {
      reader.error("directory", "empty directory name");
    } else if (std::string why = here ? recorder::unwritable_reason(directory) : std::string(); !why.empty()) {
      reader.error("directory", why, "create it, or choose a directory this user may write");
    }
  }
  if (settings_.name.empty() || settings_.name.find('/') != std::string::npos) {
    reader.error("capture_name", "capture name must be a plain file name (no '/')");
  } else if (here && !settings_.directories.empty() && !settings_.directories.front().empty()) {
    // Checked before anything is created: a capture that exists now is not this run's.
    const std::string collection = recorder::collection_path(settings_);
    std::error_code error;
    joins_existing_ = std::filesystem::exists(collection, error);
    if (const auto replaced = recorder::find_replaced(settings_.directories, settings_.name); !replaced.empty()) {
      reader.error("capture_name",
                   "an earlier overwrite of capture " + settings_.name +
                       " was cut off: the capture it replaced is kept in " + replaced.front(),
                   "run `sluice capture repair " + collection +
                       "` (add --restore-replaced to bring it back), or remove " + replaced.front() +
                       " once the new capture is the one to keep");
    } else if (joins_existing_ && !join_ && !settings_.overwrite) {
      reader.error("capture_name",
                   "capture " + collection + " exists: a capture is never overwritten or added to unless asked",
                   "choose another capture_name, set join: true to add lanes to it, or overwrite: true to replace the "
                   "lanes this pipeline records");
    }
  }
}

std::vector<std::string> RecordStage::exclusive_outputs(const std::string& lane) const {
  std::vector<std::string> prefixes;
  for (const auto& directory : settings_.directories) {
    std::error_code error;
    std::filesystem::path path = std::filesystem::weakly_canonical(directory, error);
    if (error) path = std::filesystem::absolute(directory, error).lexically_normal();
    prefixes.push_back((path / (settings_.name + "-" + lane + "-")).string());
  }
  return prefixes;
}

void RecordStage::start(StageContext& context) {
  context_ = &context;
  // Past RLIMIT_FSIZE the kernel sends SIGXFSZ, which would kill the process mid-write;
  // ignored, the write fails with EFBIG and the recording stops cleanly like a full disk.
  struct sigaction current {};
  if (sigaction(SIGXFSZ, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) std::signal(SIGXFSZ, SIG_IGN);

  std::size_t device_chunk_bytes = 0;
  std::size_t fewest_chunks = SIZE_MAX;
  for (Pool* pool : context.lane_pools()) {
    if (pool->memory() == MemoryKind::device) device_chunk_bytes = std::max(device_chunk_bytes, pool->chunk_bytes());
    fewest_chunks = std::min(fewest_chunks, pool->chunk_count());
  }
  settings_.held_chunks = recorder::chunks_held(settings_, fewest_chunks);
  if (device_chunk_bytes > 0) {
    // GPU chunks are copied here on this stage's stream, then written like host chunks.
    const std::size_t bounces = settings_.held_chunks + kBounceCopies;
    bounce_ = &context.create_pool(
        "bounce", PoolSpec{device_chunk_bytes, bounces, MemoryKind::host_pinned, context.cuda_device()});
    // One event more than copies can be unfinished: a fence's event is never recorded again
    // while that fence is still looked at.
    gpu_ = GpuStream(context.cuda_device(), bounces + 1);
    arrived_.reserve(bounces);
    bounces_.reserve(bounces);
  }
  not_recorded_ = &context.metrics().drop_counter("not_recorded");
  longest_bounce_us_ = &context.metrics().counter("longest_bounce_us");
  longest_submit_us_ = &context.metrics().counter("longest_submit_us");
  most_bounces_in_flight_ = &context.metrics().counter("most_bounces_in_flight");
  if (settings_.directories.size() > 1) {
    for (std::size_t k = 0; k < settings_.directories.size(); ++k)
      volume_chunks_.push_back(&context.metrics().counter("volume_" + std::to_string(k) + "_chunks"));
    busy_volume_passed_ = &context.metrics().counter("busy_volume_passed");
  }
  for (const auto& directory : settings_.directories) {
    if (std::string warning = recorder::fresh_volume_warning(directory); !warning.empty()) {
      log::warn("lane {} stage {}: {}", context.lane_name(), context.stage_name(), warning);
      context.metrics().notes.push_back(warning);
    }
  }
  writer_ = std::make_unique<recorder::RecordingWriter>(settings_, context.stream, context.lane_name());
  const std::string note = writer_->open(context.lane_pools());
  if (!note.empty()) {
    log::info("lane {} stage {}: {}", context.lane_name(), context.stage_name(), note);
    context.metrics().notes.push_back(note);
  }
  context.metrics().notes.push_back("capture " + recorder::collection_path(settings_));
  if (joins_existing_ && !recorder::collection_has_lane(recorder::collection_path(settings_), context.lane_name())) {
    const std::string joining = "lane " + context.lane_name() + " joins the existing capture " +
                                recorder::collection_path(settings_) + " (its other lanes are kept)";
    log::warn("{}", joining);
    context.metrics().notes.push_back(joining);
  }
}

StageStatus RecordStage::stop_on_failure() {
  // Hand on what did reach the disk, then finish the files up to it.
  writer_->wait_all();
  while (ChunkPtr done = writer_->take_done()) context_->emit(std::move(done));
  std::size_t abandoned = 0;
  writer_->finish(&abandoned);
  finished_ = true;
  not_recorded_->add(abandoned);
  context_->fail(writer_->error() + "; " + state_on_disk());
  return StageStatus::error;
}

std::string RecordStage::state_on_disk() const {
  // Read back from the files, not taken from the writer's counts: what a reader will find.
  const std::string collection = recorder::collection_path(settings_);
  const std::string& lane_name = context_->lane_name();
  const std::string repair = ": run `sluice capture repair " + collection + "`";
  try {
    const recorder::Capture capture = recorder::open_capture(collection);
    const recorder::CaptureLane* lane = capture.lane(lane_name);
    if (lane == nullptr) return "the capture " + collection + " holds nothing of lane " + lane_name;
    const std::string held = format_bytes(static_cast<double>(lane->total_bytes)) + " (" +
                             std::to_string(lane->total_samples) + " samples) in " +
                             std::to_string(lane->recordings.size()) + " recording(s)";
    if (!lane->complete || !lane->journals.empty()) {
      return "lane " + lane_name + " of the capture " + collection + " holds " + held + " but is INCOMPLETE" + repair;
    }
    return "lane " + lane_name + " of the capture " + collection + " holds the " + held +
           " written before it, complete";
  } catch (const std::exception& error) {
    return "the capture " + collection + " cannot be read back (" + error.what() + ")" + repair;
  }
}

bool RecordStage::ready_for_input() {
  if (bounce_ == nullptr) return writer_->has_room();
  if (arrived_.full()) return false;
  if (!spare_bounce_) spare_bounce_ = bounce_->try_acquire();
  return spare_bounce_ != nullptr;
}

StageStatus RecordStage::take(ChunkPtr chunk) {
  if (chunk->size == 0 && chunk->gap_count == 0) {
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  // A chunk of gaps only (a loss at the end of a stream, a dropped chunk) is journaled
  // like any other: its gaps belong in the capture.
  if (bounce_ == nullptr) return submit(std::move(chunk), nullptr) ? StageStatus::ok : stop_on_failure();
  if (chunk->memory == MemoryKind::device && chunk->size > 0) {
    return start_bounce_copy(std::move(chunk)) ? StageStatus::ok : fail_copies();
  }
  arrived_.push(std::move(chunk), 0);  // behind the copies in flight, so that chunks keep their order
  bounces_.push(nullptr, 0);
  return StageStatus::ok;
}

bool RecordStage::start_bounce_copy(ChunkPtr chunk) {
  const std::uint64_t began = monotonic_ns();
  ChunkPtr bounce = std::move(spare_bounce_);
  if (bounce->capacity < chunk->size) {
    context_->fail("record: a device chunk of " + std::to_string(chunk->size) +
                   " bytes is larger than its bounce buffer");
    not_recorded_->add();
    return false;
  }
  // After the producer's GPU work, on this stage's stream; the thread goes on without waiting.
  if (!gpu_.wait_for(*chunk) || !gpu_.copy(bounce->data, chunk->data, chunk->size)) {
    not_recorded_->add();
    return false;
  }
  const std::uint64_t fence = gpu_.fence();
  if (!gpu_.error().empty()) {
    not_recorded_->add();
    return false;
  }
  bounce->copy_metadata_from(*chunk);
  arrived_.push(std::move(chunk), fence);
  bounces_.push(std::move(bounce), fence);
  longest_bounce_us_->keep_max((monotonic_ns() - began) / 1000);
  // Copies on one stream finish in order: those unfinished are the newest ones.
  std::uint64_t unfinished = 1;
  while (unfinished < fence && !gpu_.reached(fence - unfinished)) ++unfinished;
  most_bounces_in_flight_->keep_max(unfinished);
  return true;
}

StageStatus RecordStage::submit_copied(bool& progressed) {
  while (!arrived_.empty() && writer_->has_room() && gpu_.error().empty() && gpu_.reached(arrived_.front_fence())) {
    ChunkPtr bounce = bounces_.pop();
    if (!submit(arrived_.pop(), std::move(bounce))) return stop_on_failure();
    progressed = true;
  }
  return gpu_.error().empty() ? StageStatus::ok : fail_copies();
}

bool RecordStage::submit(ChunkPtr chunk, ChunkPtr bounce) {
  const std::uint64_t began = monotonic_ns();
  const bool submitted = writer_->submit(std::move(chunk), std::move(bounce));
  longest_submit_us_->keep_max((monotonic_ns() - began) / 1000);
  if (!submitted) not_recorded_->add();  // refused, so never written
  for (std::size_t k = 0; k < volume_chunks_.size(); ++k) volume_chunks_[k]->set(writer_->chunks_to(k));
  if (busy_volume_passed_ != nullptr) busy_volume_passed_->set(writer_->turns_passed());
  return submitted;
}

StageStatus RecordStage::fail_copies() {
  // The copies in flight have nothing to show for themselves: none of their chunks is written.
  for (; !arrived_.empty(); bounces_.pop()) {
    arrived_.pop();
    not_recorded_->add();
  }
  if (!gpu_.error().empty()) context_->fail("record: " + gpu_.error());
  return StageStatus::error;
}

StageStatus RecordStage::process() {
  if (writer_->failed()) return stop_on_failure();
  writer_->poll(std::chrono::microseconds(0));
  bool progressed = false;
  while (ChunkPtr done = writer_->take_done()) {
    context_->emit(std::move(done));
    progressed = true;
  }
  if (writer_->failed()) return stop_on_failure();
  if (const StageStatus copied = submit_copied(progressed); copied != StageStatus::ok) return copied;
  const bool writing = writer_->in_flight() > 0;
  if (ready_for_input()) {
    // While copies are unfinished and nothing is being written, waiting for input is waiting for them.
    ChunkPtr chunk = context_->input().pop(writing ? std::chrono::microseconds(0)
                                                   : std::chrono::microseconds(arrived_.empty() ? 10'000 : 200));
    if (chunk) return take(std::move(chunk));
    if (!writing && arrived_.empty()) {
      if (!context_->input().finished()) return progressed ? StageStatus::ok : StageStatus::idle;
      spare_bounce_.reset();
      writer_->finish();
      finished_ = true;
      if (writer_->failed()) {
        context_->fail(writer_->error());
        return StageStatus::error;
      }
      return StageStatus::end_of_stream;
    }
  }
  if (!writing && !arrived_.empty()) {
    // Nothing being written and no input taken: only the oldest copy can move the lane on.
    gpu_.wait(arrived_.front_fence());
    return StageStatus::ok;
  }
  writer_->poll(std::chrono::microseconds(progressed ? 0 : arrived_.empty() ? 1000 : 100));
  return progressed ? StageStatus::ok : StageStatus::idle;
}

void RecordStage::stop() noexcept {
  spare_bounce_.reset();
  if (!arrived_.empty()) {
    gpu_.finish();  // nothing may still read a chunk that goes back to its pool
    for (; !arrived_.empty(); bounces_.pop()) {
      arrived_.pop();
      if (not_recorded_ != nullptr) not_recorded_->add();
    }
  }
  if (!writer_ || finished_) return;
  std::size_t abandoned = 0;
  writer_->finish(&abandoned);
  finished_ = true;
  if (not_recorded_ != nullptr) not_recorded_->add(abandoned);
  if (writer_->failed()) log::error("record: {}", writer_->error());
}

void register_record_stage(StageRegistry& registry) {
  registry.add(StageType{"record", StageRole::tap,
                         "writes chunks to a SigMF capture (io_uring, O_DIRECT, rotation, striping); passes them on",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<RecordStage>(reader, pipeline);
                         }});
}

}  // namespace sluice
