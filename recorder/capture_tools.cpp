// Repair finds the recordings of a capture (the collection's streams, plus those of the
// capture on disk that the collection had not listed yet) and finishes each one exactly as
// a clean stop would have: the same finalize_recording().
#include "recorder/capture_tools.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "pipeline/units.hpp"
#include "recorder/journal.hpp"
#include "recorder/recording_writer.hpp"
#include "recorder/sigmf.hpp"

namespace sluice::recorder {
namespace {
namespace fs = std::filesystem;

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lane_of(const std::string& base) {
  std::ifstream in(base + std::string(kMetaSuffix));
  const nlohmann::json meta = nlohmann::json::parse(in, nullptr, false);
  if (meta.is_discarded() || !meta.contains("global") || !meta["global"].is_object()) return {};
  return meta["global"].value("sluice:lane", std::string());
}

// Removes the repaired recordings that never got a chunk (their data file is empty, which a
// reader that maps every data file cannot open), as a clean stop does: a lane keeps one
// only when it holds nothing else.
void remove_unwritten(const std::vector<std::string>& unwritten, const std::set<std::string>& bases,
                      RepairReport& report) {
  std::set<std::string> lanes_with_data;
  for (const auto& base : bases) {
    if (std::find(unwritten.begin(), unwritten.end(), base) == unwritten.end()) lanes_with_data.insert(lane_of(base));
  }
  for (const auto& base : unwritten) {
    if (lanes_with_data.insert(lane_of(base)).second) {  // the lane's only recording: kept, empty
      report.repaired.push_back(base);
      report.lines.push_back(base + ": kept 0 chunk(s), the lane recorded nothing");
      continue;
    }
    remove_recording(base);
    report.lines.push_back(base + ": removed, it holds no chunk (made ahead for the next file set)");
  }
}

// The recordings a repair covers: each recording's base path, the directories they (and their
// set-asides) lie in, the collection's name ("" for a single recording), and the recordings
// on disk the collection did not list.
struct CaptureFiles {
  std::set<std::string> bases;
  std::vector<std::string> directories;
  std::string collection_name;
  std::vector<UnlistedRecording> unlisted;
};

// A collection's streams, and the recordings of this capture it did not list yet (cut during
// a rotation, or before the collection was first written).
CaptureFiles collection_files(const std::string& collection_file, const std::string& base,
                              std::vector<UnlistedRecording> unlisted) {
  CaptureFiles files;
  const fs::path home = fs::path(collection_file).parent_path();
  files.collection_name = fs::path(base).filename().string();
  files.directories.push_back(home.empty() ? std::string(".") : home.string());
  if (fs::exists(collection_file)) {
    std::ifstream in(collection_file);
    const nlohmann::json document = nlohmann::json::parse(in, nullptr, false);
    if (document.is_discarded() || !document.contains("collection")) {
      throw std::runtime_error(collection_file + " is not a SigMF collection");
    }
    for (const auto& stream : document["collection"].value("core:streams", nlohmann::json::array())) {
      const std::string name = stream_name(stream);
      const fs::path stream_base = (home / name).lexically_normal();
      files.bases.insert(stream_base.string());
      const std::string parent = stream_base.parent_path().string();
      if (std::find(files.directories.begin(), files.directories.end(), parent) == files.directories.end()) {
        files.directories.push_back(parent);
      }
    }
  }
  for (const auto& recording : unlisted) {
    if (recording.journal || recording.meta) files.bases.insert(recording.base);
  }
  files.unlisted = std::move(unlisted);
  return files;
}

// `path` names a collection (or its base, when only the collection file is there, or only
// recordings of it) or one recording.
CaptureFiles capture_files(const std::string& path, const std::string& base) {
  const std::string collection_file = base + std::string(kCollectionSuffix);
  const bool recording_here =
      fs::exists(base + std::string(kMetaSuffix)) || fs::exists(base + std::string(kJournalSuffix));
  std::vector<UnlistedRecording> unlisted = find_unlisted_recordings(collection_file);
  const bool missing = ends_with(path, kCollectionSuffix)
                           ? !fs::exists(path) && unlisted.empty()
                           : !fs::exists(path) && !recording_here && !fs::exists(collection_file) && unlisted.empty();
  if (missing) throw std::runtime_error(path + " does not exist");
  if (ends_with(path, kCollectionSuffix) || ((fs::exists(collection_file) || !unlisted.empty()) && !recording_here)) {
    return collection_files(collection_file, base, std::move(unlisted));
  }
  if (!recording_here) throw std::runtime_error("no capture at " + path);
  CaptureFiles files;
  files.bases.insert(base);
  return files;
}

// Removes the unlisted data files that have neither journal nor meta: made an instant before
// the process was killed, they hold nothing (a longer one is left as it is, and said so).
void remove_bare_data_files(const CaptureFiles& files, RepairReport& report) {
  for (const auto& recording : files.unlisted) {
    if (recording.journal || recording.meta) continue;
    if (recording.data_bytes == 0) {
      remove_recording(recording.base);
      report.removed.push_back(recording.base);
      report.lines.push_back(recording.base +
                             ": removed, an empty data file without journal or meta (cut as it was made)");
    } else {
      report.lines.push_back(recording.base + ": left as it is, " + std::to_string(recording.data_bytes) +
                             " bytes of data without a journal or meta to say what they are");
    }
  }
}

// Says which unlisted recordings the rewritten collection now lists.
void note_listed(const CaptureFiles& files, RepairReport& report) {
  for (const auto& recording : files.unlisted) {
    if (!fs::exists(recording.base + std::string(kMetaSuffix))) continue;  // removed: it held no chunk
    report.listed.push_back(recording.base);
    report.lines.push_back(recording.base +
                           ": added to the collection (on disk, not listed when the recorder stopped)");
  }
}

// Finalizes every recording with a journal; a collection's journals without a chunk (spares
// made ahead of a rotation) are removed, or kept empty where they are the lane's only one.
void finalize_recordings(const CaptureFiles& files, RepairReport& report) {
  std::vector<std::string> unwritten;
  for (const auto& each : files.bases) {
    if (!fs::exists(each + std::string(kJournalSuffix))) continue;
    const FinalizeResult result = finalize_recording(each);
    if (result.records == 0 && result.discarded == 0 && !files.collection_name.empty()) {
      unwritten.push_back(each);
      continue;
    }
    report.repaired.push_back(each);
    report.bytes_kept += result.bytes;
    report.records_discarded += result.discarded;
    report.lines.push_back(each + ": kept " + std::to_string(result.records) + " chunk(s), " +
                           format_bytes(static_cast<double>(result.bytes)) +
                           (result.discarded > 0
                                ? ", dropped " + std::to_string(result.discarded) + " incomplete record(s)"
                                : std::string()));
  }
  remove_unwritten(unwritten, files.bases, report);
}

// The set-asides of this capture an interrupted overwrite left. A single recording's directory
// and capture name (NAME-LANE-NNNN) say where one lies; its directory joins `files`.
std::vector<std::string> set_asides(CaptureFiles& files, const std::string& base) {
  if (!files.collection_name.empty()) return find_replaced(files.directories, files.collection_name);
  const fs::path single(base);
  files.directories.push_back(single.parent_path().empty() ? std::string(".") : single.parent_path().string());
  const std::string file = single.filename().string();
  std::vector<std::string> found_here;
  for (const auto& found : find_replaced(files.directories, "")) {
    std::string stem = fs::path(found).filename().string();
    stem.resize(stem.size() - kReplacedSuffix.size());
    if (file.rfind(stem + "-", 0) == 0) found_here.push_back(found);
  }
  return found_here;
}

// Restores each set-aside when asked, else says how to.
void handle_set_asides(const std::string& path, bool restore_replaced, RepairReport& report) {
  for (const auto& aside : report.replaced) {
    std::size_t files = 0;
    for ([[maybe_unused]] const auto& item : fs::directory_iterator(aside)) ++files;
    if (restore_replaced) {
      const std::size_t back = swap_replaced(aside);
      report.replaced_lines.push_back("restored " + std::to_string(back) + " file(s) of the replaced capture from " +
                                      aside +
                                      "; the interrupted recording is kept there instead (remove it when not needed)");
    } else {
      report.replaced_lines.push_back(
          aside + ": " + std::to_string(files) +
          " file(s) of the capture an interrupted overwrite replaced; `sluice capture repair " + path +
          " --restore-replaced` brings them back, or remove the directory to keep "
          "the new recording");
    }
  }
}

// One line for each recording of `lane` on disk that the collection does not list (the
// finished ones past the first few summed up in one); returns how many there are.
std::size_t describe_unlisted(const Capture& capture, const CaptureLane& lane, std::ostringstream& out) {
  constexpr std::size_t kFinishedNamed = 4;
  const fs::path home = fs::path(strip_capture_suffix(capture.path)).parent_path();
  std::size_t count = 0;
  std::size_t finished = 0;
  std::uint64_t more_samples = 0;
  std::size_t more = 0;
  for (const auto& recording : capture.unlisted) {
    if (recording.lane != lane.name) continue;
    ++count;
    const std::string data_path = recording.base + std::string(kDataSuffix);
    std::uint64_t samples = 0;
    for (const auto& segment : lane.segments) {
      if (segment.data_path == data_path) samples += segment.sample_count;
    }
    const bool cut = recording.journal || !recording.meta;
    if (!cut && ++finished > kFinishedNamed) {
      ++more;
      more_samples += samples;
      continue;
    }
    out << "    recording " << fs::path(recording.base).lexically_relative(home.empty() ? "." : home).string()
        << " is on disk but not in the collection (the recorder stopped before listing it): ";
    if (recording.journal) {
      out << samples << " samples by its journal (cut off)\n";
    } else if (recording.meta) {
      out << samples << " samples\n";
    } else {
      out << "a data file of " << recording.data_bytes << " bytes without journal or meta\n";
    }
  }
  if (more > 0) {
    out << "    and " << more << " more finished recording(s) on disk but not in the collection: " << more_samples
        << " samples\n";
  }
  return count;
}

// What a lane's values are, and how often the sender's time base restarted.
void describe_format(const CaptureLane& lane, std::ostringstream& out) {
  out << "    format:   " << lane.datatype
      << (lane.fft_size > 0 ? " spectra (FFT " + std::to_string(lane.fft_size) + ", " + lane.window + " window, " +
                                  std::to_string(lane.averaging) + " averaged)"
                            : std::string())
      << "\n";
  const auto resyncs = std::count_if(lane.segments.begin(), lane.segments.end(),
                                     [](const CaptureSegment& segment) { return segment.time_jump; });
  if (resyncs > 0) {
    out << "    resyncs:  " << resyncs
        << " (the sender's time base restarted; each starts a segment with its own time)\n";
  }
}

// Rate, samples, the time they cover (recorded and, where holes lie between, spanned) and the start.
void describe_extent(const CaptureLane& lane, std::ostringstream& out) {
  const double duration = lane.sample_rate > 0 ? static_cast<double>(lane.total_samples) / lane.sample_rate : 0;
  std::uint64_t span = 0;
  if (!lane.segments.empty()) {
    const auto& last = lane.segments.back();
    span = last.global_index + last.sample_count - lane.segments.front().global_index;
  }
  out << "    rate:     " << (lane.sample_rate > 0 ? format_frequency(lane.sample_rate) : std::string("unknown"))
      << "\n";
  out << "    samples:  " << lane.total_samples << " (" << lane.segments.size() << " segment(s))\n";
  out << "    duration: " << format_duration(std::chrono::nanoseconds(static_cast<std::int64_t>(duration * 1e9)));
  if (lane.sample_rate > 0 && span != lane.total_samples) {
    out << " recorded, "
        << format_duration(
               std::chrono::nanoseconds(static_cast<std::int64_t>(static_cast<double>(span) / lane.sample_rate * 1e9)))
        << " spanned";
  }
  out << "\n";
  if (!lane.segments.empty() && lane.segments.front().time.valid) {
    out << "    start:    " << iso8601(lane.segments.front().time) << "\n";
  }
}

// Holes (samples absent from the data) and marked values (computed over a hole).
void describe_losses(const CaptureLane& lane, std::ostringstream& out) {
  const auto holes =
      std::count_if(lane.gaps.begin(), lane.gaps.end(), [](const CaptureGap& gap) { return !gap.in_data; });
  out << "    gaps:     " << holes << " (" << lane.lost_samples << " samples lost, absent from the data)";
  if (lane.marked_values > 0) {
    out << "; " << lane.gaps.size() - static_cast<std::size_t>(holes) << " marked (" << lane.marked_values
        << " values computed from input with lost samples)";
  }
  out << "\n";
}

// Complete, or what repair would do: list recordings on disk, or finish ones cut off.
void describe_state(const Capture& capture, const CaptureLane& lane, std::ostringstream& out) {
  const std::size_t unlisted = describe_unlisted(capture, lane, out);
  if (unlisted > 0) {
    out << "    state:    INCOMPLETE (the collection misses " << unlisted
        << " recording(s) on disk): run `sluice capture repair " << capture.path << "`\n";
  } else if (!lane.complete || !lane.journals.empty()) {
    out << "    state:    INCOMPLETE (recording was cut off): run `sluice capture repair " << capture.path << "`\n";
  } else {
    out << "    state:    complete\n";
  }
}

}  // namespace

RepairReport repair_capture(const std::string& path, bool restore_replaced) {
  RepairReport report;
  const std::string base = strip_capture_suffix(path);
  CaptureFiles files = capture_files(path, base);
  finalize_recordings(files, report);
  remove_bare_data_files(files, report);
  report.replaced = set_asides(files, base);
  handle_set_asides(path, restore_replaced, report);
  if (!files.collection_name.empty()) {
    refresh_collection(files.directories, files.collection_name);
    note_listed(files, report);
  }
  return report;
}

std::string describe_capture(const Capture& capture) {
  std::ostringstream out;
  out << capture.path << ": " << (capture.collection ? "SigMF collection" : "SigMF recording") << ", "
      << capture.lanes.size() << " lane(s)\n";
  for (const auto& lane : capture.lanes) {
    out << "  lane " << lane.name << ": " << lane.recordings.size() << " recording(s)\n";
    describe_format(lane, out);
    describe_extent(lane, out);
    describe_losses(lane, out);
    out << "    size:     " << format_bytes(static_cast<double>(lane.total_bytes)) << " (" << lane.total_bytes
        << " bytes)\n";
    describe_state(capture, lane, out);
  }
  return out.str();
}

}  // namespace sluice::recorder
