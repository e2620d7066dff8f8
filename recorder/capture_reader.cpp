// Capture reading: each recording's captures become segments (a capture runs to the next
// one or the end of the data file); core:global_index places them in the stream, which is
// how stripes and rotated segments of one lane interleave back into one sequence.
#include "recorder/capture_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "recorder/journal.hpp"
#include "recorder/sigmf.hpp"
#include "recorder/uring.hpp"

namespace sluice::recorder {
namespace {
namespace fs = std::filesystem;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(errno_message("cannot open " + path));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(path + ": not valid JSON: " + error.what());
  }
}

// A recording's annotations: resyncs and context changes mark their segment; holes and values
// computed over one become the lane's gaps.
void add_annotations(CaptureLane& lane, const nlohmann::json& meta) {
  for (const auto& annotation : meta.value("annotations", nlohmann::json::array())) {
    if (annotation.value("sluice:resync", false)) {
      const auto at = annotation.value("sluice:global_index", std::uint64_t{0});
      for (auto it = lane.segments.rbegin(); it != lane.segments.rend(); ++it) {
        if (it->global_index == at) {
          it->time_jump = true;
          break;
        }
      }
      continue;
    }
    if (annotation.value("core:label", std::string()) == "context" && annotation.contains("sluice:global_index")) {
      const auto at = annotation.value("sluice:global_index", std::uint64_t{0});
      for (auto it = lane.segments.rbegin(); it != lane.segments.rend(); ++it) {
        if (it->global_index != at) continue;
        it->context_change = true;
        const auto value = [&](const char* key) { return annotation.value(key, StreamContext::kAbsent); };
        it->context =
            StreamContext{value("sluice:rf_frequency"), value("sluice:sample_rate"), value("sluice:bandwidth"),
                          value("sluice:reference_level_dbm"), value("sluice:gain_db")};
        break;
      }
      continue;
    }
    // A hole gives sluice:lost_samples; values computed over one (sluice:in_data) give sluice:marked_values.
    const bool in_data = annotation.value("sluice:in_data", false);
    const char* length_key = in_data ? "sluice:marked_values" : "sluice:lost_samples";
    if (!annotation.contains(length_key)) continue;
    CaptureGap gap;
    gap.global_index = annotation.value("sluice:global_index", std::uint64_t{0});
    gap.length = annotation.value(length_key, std::uint64_t{0});
    gap.in_data = in_data;
    (gap.in_data ? lane.marked_values : lane.lost_samples) += gap.length;
    lane.gaps.push_back(gap);
  }
}

// The lane's sample format and settings from its first recording's global object; every later
// recording must have the same datatype.
void read_lane_format(CaptureLane& lane, const std::string& meta_path, const nlohmann::json& global) {
  const std::string datatype = global.value("core:datatype", std::string());
  if (datatype.empty()) throw std::runtime_error(meta_path + ": no core:datatype");
  if (lane.recordings.empty()) {
    lane.datatype = datatype;
    lane.format = format_from_datatype(datatype);
    lane.sample_rate = global.value("core:sample_rate", 0.0);
    lane.description = global.value("core:description", std::string());
    lane.fft_size = global.value("sluice:fft_size", std::size_t{0});
    lane.window = global.value("sluice:window", std::string());
    lane.averaging = global.value("sluice:averaging", std::size_t{0});
    if (lane.format) {
      lane.sample_bytes = bytes_per_sample(*lane.format);
    } else {
      throw std::runtime_error(meta_path + ": core:datatype " + datatype +
                               " is not one Sluice reads (ci8, ci16_le, cf32_le, rf32_le)");
    }
  } else if (datatype != lane.datatype) {
    throw std::runtime_error(meta_path + ": core:datatype " + datatype + " differs from the lane's " + lane.datatype);
  }
}

// A recording's meta as a reader should take it: a recording with a journal was cut off while
// being written, and its meta is the provisional one; the journal says what it holds, and
// the meta built from it is the one repair will write. `journaled`: the bytes the journal
// vouches for then.
struct RecordingMeta {
  nlohmann::json meta;
  std::optional<std::uint64_t> journaled;
};

RecordingMeta journal_meta(const JournalContents& contents) {
  RecordingMeta recording{build_meta(contents.global, contents.records, false), 0};
  for (const JournalRecord& record : contents.records) *recording.journaled += record.bytes;
  return recording;
}

RecordingMeta recording_meta(const std::string& base) {
  const std::string journal = base + std::string(kJournalSuffix);
  if (!fs::exists(journal)) return {read_json(base + std::string(kMetaSuffix)), std::nullopt};
  return journal_meta(read_journal(journal));
}

void add_recording(CaptureLane& lane, const std::string& base, const RecordingMeta& recording) {
  const std::string meta_path = base + std::string(kMetaSuffix);
  const std::string data_path = base + std::string(kDataSuffix);
  const std::optional<std::uint64_t>& journaled = recording.journaled;
  const nlohmann::json& meta = recording.meta;
  if (!meta.contains("global") || !meta["global"].is_object())
    throw std::runtime_error(meta_path + ": no global object");
  const auto& global = meta["global"];
  read_lane_format(lane, meta_path, global);
  lane.recordings.push_back(base);
  lane.complete = lane.complete && global.value("sluice:complete", true);
  std::error_code error;
  std::uint64_t file_bytes = fs::file_size(data_path, error);
  if (error) throw std::runtime_error("cannot stat " + data_path + ": " + error.message());
  if (journaled) {
    lane.journals.push_back(base + std::string(kJournalSuffix));
    // Cut off while recording: the data file runs on past its data (writes never journaled,
    // the preallocated zero tail); only what the journal vouches for is samples.
    file_bytes = std::min(file_bytes, *journaled);
  }
  const std::uint64_t file_samples = file_bytes / lane.sample_bytes;
  lane.total_bytes += file_bytes;

  const auto& captures = meta.value("captures", nlohmann::json::array());
  std::vector<nlohmann::json> sorted(captures.begin(), captures.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.value("core:sample_start", std::uint64_t{0}) < b.value("core:sample_start", std::uint64_t{0});
  });
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const std::uint64_t start = sorted[i].value("core:sample_start", std::uint64_t{0});
    const std::uint64_t end =
        i + 1 < sorted.size() ? sorted[i + 1].value("core:sample_start", std::uint64_t{0}) : file_samples;
    if (start >= end || start >= file_samples) continue;  // an empty capture (a provisional meta)
    CaptureSegment segment;
    segment.data_path = data_path;
    segment.file_offset = start * lane.sample_bytes;
    segment.sample_count = std::min(end, file_samples) - start;
    segment.global_index = sorted[i].value("core:global_index", start);
    if (sorted[i].contains("core:datetime")) {
      if (auto time = parse_iso8601(sorted[i]["core:datetime"].get<std::string>())) segment.time = *time;
    }
    segment.frequency = sorted[i].value("core:frequency", 0.0);
    if (lane.segments.empty() && lane.recordings.size() == 1) lane.frequency = segment.frequency;
    lane.total_samples += segment.sample_count;
    lane.segments.push_back(std::move(segment));
  }
  add_annotations(lane, meta);
}

// What a collection lists: the bases of its recordings, their lanes, and the directories
// they lie in (its own first). Nothing but its own directory when it cannot be read.
struct Listing {
  std::set<std::string> bases;
  std::set<std::string> lanes;
  std::vector<fs::path> directories;
};

fs::path directory_of(const fs::path& path) {
  return path.parent_path().empty() ? fs::path(".") : path.parent_path().lexically_normal();
}

Listing read_listing(const std::string& collection_file) {
  Listing listing;
  const fs::path home = directory_of(collection_file);
  listing.directories.push_back(home);
  std::ifstream in(collection_file);
  const nlohmann::json document = nlohmann::json::parse(in, nullptr, false);
  if (!in || document.is_discarded() || !document.contains("collection")) return listing;
  const auto& collection = document["collection"];
  for (const auto& stream : collection.value("core:streams", nlohmann::json::array())) {
    const std::string name = stream_name(stream);
    const fs::path base = (home / name).lexically_normal();
    listing.bases.insert(base.string());
    if (std::find(listing.directories.begin(), listing.directories.end(), directory_of(base)) ==
        listing.directories.end()) {
      listing.directories.push_back(directory_of(base));
    }
  }
  const auto& lanes = collection.value("sluice:lanes", nlohmann::json::object());
  if (lanes.is_object()) {
    for (const auto& [lane, names] : lanes.items()) listing.lanes.insert(lane);
  }
  return listing;
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Whether `stem` is NAME-LANE[-sSTRIPE]-SEGMENT, as file_set_base() names a recording.
bool named_as_recording(std::string_view stem, const std::string& name, const std::string& lane) {
  const std::string prefix = name + "-" + lane + "-";
  if (lane.empty() || !stem.starts_with(prefix)) return false;
  std::string_view rest = stem.substr(prefix.size());
  if (rest.starts_with('s')) {
    const std::size_t dash = rest.find('-');
    if (dash == std::string_view::npos || !all_digits(rest.substr(1, dash - 1))) return false;
    rest = rest.substr(dash + 1);
  }
  return rest.size() >= 4 && all_digits(rest);
}

// An unlisted recording with what was read of it to find its lane: its journal when the
// header reads, else its meta, so that opening it reads neither a second time.
struct UnlistedRead {
  UnlistedRecording recording;
  std::optional<JournalContents> journal;
  nlohmann::json meta;  // without a readable journal: the parsed meta, discarded when it does not parse
};

UnlistedRead read_unlisted(UnlistedRecording recording) {
  UnlistedRead read{std::move(recording), std::nullopt, nlohmann::json()};
  if (read.recording.journal) {
    try {
      read.journal = read_journal(read.recording.base + std::string(kJournalSuffix));
      return read;
    } catch (const std::runtime_error&) {  // a header cut off as it was written: the meta may say
    }
  }
  if (read.recording.meta) {
    std::ifstream in(read.recording.base + std::string(kMetaSuffix));
    read.meta = nlohmann::json::parse(in, nullptr, false);
  }
  return read;
}

// The lane its journal or meta names ("" when neither says).
std::string recorded_lane(const UnlistedRead& read) {
  if (read.journal) return read.journal->global.value("sluice:lane", std::string());
  if (!read.meta.is_object() || !read.meta.contains("global") || !read.meta["global"].is_object()) return {};
  return read.meta["global"].value("sluice:lane", std::string());
}

// Its meta from what was read; read again only where that failed, to throw the reason.
RecordingMeta recording_meta(const UnlistedRead& read) {
  if (read.journal) return journal_meta(*read.journal);
  if (!read.recording.journal && read.meta.is_object()) return {read.meta, std::nullopt};
  return recording_meta(read.recording.base);
}

// Files of capture `name` in `directory` by base, each with what of it is there.
void gather_files(const fs::path& directory, const std::string& name, std::map<std::string, UnlistedRecording>& found) {
  std::error_code error;
  for (const auto& item : fs::directory_iterator(directory, error)) {
    const std::string file = item.path().filename().string();
    if (!file.starts_with(name + "-") || !item.is_regular_file(error)) continue;
    const bool data = file.ends_with(kDataSuffix);
    const bool meta = file.ends_with(kMetaSuffix);
    const bool journal = file.ends_with(kJournalSuffix);
    if (!data && !meta && !journal) continue;
    const std::string base = strip_capture_suffix((directory / file).lexically_normal().string());
    UnlistedRecording& recording = found[base];
    recording.base = base;
    recording.meta = recording.meta || meta;
    recording.journal = recording.journal || journal;
    if (data) {
      const std::uintmax_t size = item.file_size(error);
      recording.data_bytes = error ? 0 : size;
    }
  }
}

void sort_lane(CaptureLane& lane) {
  std::stable_sort(lane.segments.begin(), lane.segments.end(),
                   [](const auto& a, const auto& b) { return a.global_index < b.global_index; });
  std::stable_sort(lane.gaps.begin(), lane.gaps.end(),
                   [](const auto& a, const auto& b) { return a.global_index < b.global_index; });
}

}  // namespace

const CaptureLane* Capture::lane(const std::string& name) const {
  for (const auto& each : lanes) {
    if (each.name == name) return &each;
  }
  return nullptr;
}

namespace {

// The recordings of the collection on disk that it does not list, each with what was read of it.
std::vector<UnlistedRead> find_unlisted(const std::string& collection_file) {
  const Listing listing = read_listing(collection_file);
  const std::string name = fs::path(strip_capture_suffix(collection_file)).filename().string();
  std::map<std::string, UnlistedRecording> found;
  for (const auto& directory : listing.directories) gather_files(directory, name, found);
  std::vector<UnlistedRead> unlisted;
  for (auto& [base, recording] : found) {
    if (listing.bases.contains(base)) continue;
    const std::string stem = fs::path(base).filename().string();
    UnlistedRead read = read_unlisted(std::move(recording));
    std::string& lane = read.recording.lane;
    lane = recorded_lane(read);
    // A data file alone (cut as it was made) belongs to a listed lane its name gives; one of
    // a capture whose name extends this one (NAME-raw beside NAME) matches no such lane.
    if (lane.empty()) {
      for (const auto& listed : listing.lanes) {
        if (named_as_recording(stem, name, listed)) lane = listed;
      }
    }
    if (named_as_recording(stem, name, lane)) unlisted.push_back(std::move(read));
  }
  return unlisted;
}

// A collection's lanes as its recordings are read: in the order the collection names them, then
// in the order recordings bring new ones.
struct LaneSet {
  std::map<std::string, CaptureLane> by_name;
  std::vector<std::string> order;
  CaptureLane& lane(const std::string& name) {
    CaptureLane& lane = by_name[name];
    lane.name = name;
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
    return lane;
  }
  // Each lane's segments and gaps in stream order, the lanes in theirs.
  std::vector<CaptureLane> sorted() {
    std::vector<CaptureLane> lanes;
    for (const auto& name : order) {
      sort_lane(by_name[name]);
      lanes.push_back(std::move(by_name[name]));
    }
    return lanes;
  }
};

// The lanes of a collection: its listed recordings, then those on disk it does not list.
Capture open_collection(const std::string& path, const std::string& collection_file) {
  Capture capture;
  capture.path = path;
  capture.collection = true;
  std::vector<UnlistedRead> unlisted = find_unlisted(collection_file);
  for (const UnlistedRead& read : unlisted) capture.unlisted.push_back(read.recording);
  if (!fs::exists(collection_file) && !capture.unlisted.empty()) {
    throw std::runtime_error(collection_file + " does not exist, but " + std::to_string(capture.unlisted.size()) +
                             " recording(s) of it are on disk (the recorder stopped before writing it): run "
                             "`sluice capture repair " +
                             collection_file + "`");
  }
  const nlohmann::json document = read_json(collection_file);
  if (!document.contains("collection")) throw std::runtime_error(collection_file + ": no collection object");
  const auto& collection = document["collection"];
  const fs::path home = fs::path(collection_file).parent_path();
  std::map<std::string, std::string> lane_of;  // stream name -> lane
  LaneSet lanes;
  if (collection.contains("sluice:lanes")) {
    for (const auto& [lane, names] : collection["sluice:lanes"].items()) {
      lanes.order.push_back(lane);
      for (const auto& name : names) lane_of[name.get<std::string>()] = lane;
    }
  }
  for (const auto& stream : collection.value("core:streams", nlohmann::json::array())) {
    const std::string name = stream_name(stream);
    const std::string base = (home / name).lexically_normal().string();
    add_recording(lanes.lane(lane_of.count(name) != 0 ? lane_of[name] : "0"), base, recording_meta(base));
  }
  // On disk but not listed yet: read like the listed ones, never skipped (`capture info`
  // names them, replay refuses the ones with a journal as it does any cut recording).
  for (const UnlistedRead& read : unlisted) {
    const UnlistedRecording& recording = read.recording;
    if (!recording.meta && !recording.journal) continue;  // an empty data file: nothing says what it holds
    add_recording(lanes.lane(recording.lane), recording.base, recording_meta(read));
  }
  capture.lanes = lanes.sorted();
  if (capture.lanes.empty()) throw std::runtime_error(collection_file + ": lists no recordings");
  return capture;
}

}  // namespace

Capture open_capture(const std::string& path) {
  std::string base = strip_capture_suffix(path);
  const std::string collection_file =
      path.ends_with(kCollectionSuffix)
          ? path
          : (fs::exists(base + std::string(kCollectionSuffix)) && !fs::exists(base + std::string(kMetaSuffix))
                 ? base + std::string(kCollectionSuffix)
                 : std::string());
  if (!collection_file.empty()) return open_collection(path, collection_file);
  if (!fs::exists(base + std::string(kMetaSuffix))) {
    throw std::runtime_error("no capture at " + path + " (expected " + base + std::string(kMetaSuffix) + " or " + base +
                             std::string(kCollectionSuffix) + ")");
  }
  Capture capture;
  capture.path = path;
  CaptureLane lane;
  const RecordingMeta recording = recording_meta(base);
  add_recording(lane, base, recording);
  lane.name = recording.meta["global"].value("sluice:lane", std::string("0"));
  sort_lane(lane);
  capture.lanes.push_back(std::move(lane));
  return capture;
}

std::vector<UnlistedRecording> find_unlisted_recordings(const std::string& collection_file) {
  std::vector<UnlistedRecording> unlisted;
  for (UnlistedRead& read : find_unlisted(collection_file)) unlisted.push_back(std::move(read.recording));
  return unlisted;
}

std::uint64_t read_segment(const CaptureLane& lane, const CaptureSegment& segment, std::uint64_t sample_offset,
                           std::uint64_t count, std::byte* out) {
  if (sample_offset >= segment.sample_count) return 0;
  count = std::min(count, segment.sample_count - sample_offset);
  FileDescriptor fd = open_file(segment.data_path, O_RDONLY);
  const std::uint64_t bytes = count * lane.sample_bytes;
  std::uint64_t done = 0;
  while (done < bytes) {
    const ssize_t result = ::pread(fd.get(), out + done, bytes - done,
                                   static_cast<off_t>(segment.file_offset + sample_offset * lane.sample_bytes + done));
    if (result < 0 && errno == EINTR) continue;
    if (result < 0) throw std::runtime_error(errno_message("pread(" + segment.data_path + ")", errno));
    if (result == 0) break;
    done += static_cast<std::uint64_t>(result);
  }
  return done / lane.sample_bytes;
}

Timestamp time_of_sample(const CaptureSegment& segment, std::uint64_t index, double sample_rate) {
  return time_after(segment.time, index >= segment.global_index ? index - segment.global_index : 0, sample_rate);
}

}  // namespace sluice::recorder
