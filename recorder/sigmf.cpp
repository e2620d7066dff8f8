// SigMF writing. Lost samples are never spliced silently: every hole opens a new capture segment
// (core:global_index and core:datetime say where and when it resumes) and becomes a "gap"
// annotation with sluice:lost_samples; nothing is described as filled.
#include "recorder/sigmf.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "pipeline/stage.hpp"
#include "pipeline/unique_fd.hpp"

namespace sluice::recorder {
namespace {

void write_all(int fd, const std::string& path, const std::string& text) {
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t result = ::write(fd, text.data() + written, text.size() - written);
    if (result < 0 && errno == EINTR) continue;
    if (result < 0) throw errno_error("write", path, errno);
    written += static_cast<std::size_t>(result);
  }
}

}  // namespace

std::string sigmf_datatype(SampleFormat format) {
  switch (format) {
    case SampleFormat::ci8:
      return "ci8";  // one byte per component: no byte order
    case SampleFormat::ci16:
      return "ci16_le";
    case SampleFormat::cf32:
      return "cf32_le";
    case SampleFormat::rf32:
      return "rf32_le";
  }
  return "ci16_le";
}

std::optional<SampleFormat> format_from_datatype(std::string_view datatype) {
  if (datatype == "ci8") return SampleFormat::ci8;
  if (datatype == "ci16_le") return SampleFormat::ci16;
  if (datatype == "cf32_le") return SampleFormat::cf32;
  if (datatype == "rf32_le") return SampleFormat::rf32;
  return std::nullopt;
}

std::string iso8601(const Timestamp& timestamp) {
  const auto seconds = static_cast<std::time_t>(timestamp.seconds);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:012d}Z", utc.tm_year + 1900, utc.tm_mon + 1,
                     utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, timestamp.picoseconds % 1'000'000'000'000ULL);
}

std::optional<Timestamp> parse_iso8601(std::string_view text) {
  std::tm utc{};
  int year = 0;
  int consumed = 0;
  const std::string copy(text);
  if (std::sscanf(copy.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &utc.tm_mon, &utc.tm_mday, &utc.tm_hour,
                  &utc.tm_min, &utc.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  utc.tm_year = year - 1900;
  utc.tm_mon -= 1;
  Timestamp result;
  result.seconds = static_cast<std::uint64_t>(timegm(&utc));
  std::size_t position = static_cast<std::size_t>(consumed);
  if (position < copy.size() && (copy[position] == '.' || copy[position] == ',')) {
    std::uint64_t scale = 100'000'000'000ULL;
    for (++position; position < copy.size() && std::isdigit(static_cast<unsigned char>(copy[position])); ++position) {
      result.picoseconds += static_cast<std::uint64_t>(copy[position] - '0') * scale;
      scale /= 10;
    }
  }
  result.valid = true;
  return result;
}

nlohmann::json make_global(const StreamInfo& stream, const std::string& lane, const std::string& recorder_name,
                           std::uint32_t stripe, std::uint32_t stripes, std::uint32_t segment) {
  nlohmann::json global;
  global["core:datatype"] = sigmf_datatype(stream.format);
  global["core:version"] = std::string(kSigmfVersion);
  if (stream.sample_rate >= 1) global["core:sample_rate"] = stream.sample_rate;
  global["core:recorder"] = recorder_name;
  global["core:num_channels"] = 1;
  global["core:extensions"] = nlohmann::json::array(
      {{{"name", std::string(kExtensionName)}, {"version", std::string(kExtensionVersion)}, {"optional", true}}});
  std::string description = stream.description.empty() ? "sluice lane " + lane : stream.description;
  if (stream.fft_size > 0) {
    // Spectra: say exactly what a row is so nobody reads them as time-domain samples.
    description += "; power spectra: each row is " + std::to_string(stream.fft_size) + " " +
                   sigmf_datatype(stream.format) + " values from a " + std::to_string(stream.fft_size) +
                   "-point FFT, " + (stream.window.empty() ? std::string("unknown") : stream.window) + " window, " +
                   std::to_string(stream.averaging) +
                   " transform(s) averaged per row; core:sample_rate counts values (rows x FFT size) per second";
    global["sluice:fft_size"] = stream.fft_size;
    global["sluice:window"] = stream.window;
    global["sluice:averaging"] = stream.averaging;
  }
  global["core:description"] = description;
  global["sluice:lane"] = lane;
  global["sluice:stripe"] = stripe;
  global["sluice:stripes"] = stripes;
  global["sluice:segment"] = segment;
  global["sluice:center_frequency"] = stream.center_frequency;
  if (stream.bandwidth) global["sluice:bandwidth"] = *stream.bandwidth;
  if (stream.reference_level_dbm) global["sluice:reference_level_dbm"] = *stream.reference_level_dbm;
  if (stream.gain_db) global["sluice:gain_db"] = *stream.gain_db;
  if (stream.start_time.valid) global["sluice:start_time"] = iso8601(stream.start_time);
  return global;
}

namespace {

// One record's samples as runs contiguous in both the file and the stream.
struct Run {
  std::uint64_t file_sample;
  std::uint64_t stream_index;
  std::uint64_t count;
};

// Splits a record's samples at its absent gaps: gaps from the record's first sample on lie between
// its samples (or after the last one), where the stream jumps. `holes` is scratch.
void split_into_runs(const JournalRecord& record, std::uint64_t file_sample, std::vector<Gap>& holes,
                     std::vector<Run>& runs) {
  holes.clear();
  for (std::uint32_t g = 0; g < record.gap_count; ++g) {
    const Gap& gap = record.gaps[g];
    if (!gap.in_data && gap.length > 0 && gap.first_sample >= record.first_sample) holes.push_back(gap);
  }
  std::sort(holes.begin(), holes.end(), [](const Gap& a, const Gap& b) { return a.first_sample < b.first_sample; });
  runs.clear();
  std::uint64_t stream = record.first_sample;
  std::uint64_t file = file_sample;
  std::uint64_t left = record.sample_count;
  for (const Gap& hole : holes) {
    if (left == 0) break;
    const std::uint64_t before = hole.first_sample > stream ? std::min(hole.first_sample - stream, left) : 0;
    if (before > 0) runs.push_back(Run{file, stream, before});
    file += before;
    stream += before;
    left -= before;
    stream = std::max(stream, hole.first_sample + hole.length);
  }
  if (left > 0) runs.push_back(Run{file, stream, left});
}

// A zero-length annotation at a run's first sample.
nlohmann::json boundary_annotation(const Run& run, const char* label) {
  nlohmann::json annotation;
  annotation["core:label"] = label;
  annotation["core:generator"] = "sluice";
  annotation["core:sample_start"] = run.file_sample;
  annotation["core:sample_count"] = 0;
  annotation["sluice:global_index"] = run.stream_index;
  return annotation;
}

// Where the sender's IF Context changed: the values the segment starting at `run` has.
nlohmann::json context_annotation(const Run& run, const StreamContext& values) {
  nlohmann::json annotation = boundary_annotation(run, "context");
  std::string comment = "the sender's IF Context changed here; the capture segment starting here has its values:";
  const auto add = [&](const char* key, const char* name, double value, const char* unit) {
    if (std::isnan(value)) return;
    annotation[key] = value;
    comment += std::string(" ") + name + " " + fmt::format("{}", value) + unit + ",";
  };
  add("sluice:rf_frequency", "RF", values.rf_frequency, " Hz");
  add("sluice:sample_rate", "sample rate", values.sample_rate, " Hz");
  add("sluice:bandwidth", "bandwidth", values.bandwidth, " Hz");
  add("sluice:reference_level_dbm", "reference level", values.reference_level_dbm, " dBm");
  add("sluice:gain_db", "gain", values.gain_db, " dB");
  comment.back() = '.';
  annotation["core:comment"] = comment;
  return annotation;
}

nlohmann::json resync_annotation(const Run& run) {
  nlohmann::json annotation = boundary_annotation(run, "resync");
  annotation["core:comment"] =
      "the sender's time base restarted (its clock or counter went back, and the source resynchronised "
      "onto it): the capture segment starting here has its own core:datetime, not one that follows the "
      "segment before";
  annotation["sluice:resync"] = true;
  return annotation;
}

// The metadata of a recording, record by record: captures where the stream jumps, restarts or
// is retuned, and an annotation per gap, resync and retune.
class MetaBuilder {
 public:
  explicit MetaBuilder(const nlohmann::json& global) : global_(global) {
    const auto format = format_from_datatype(global.value("core:datatype", std::string("ci16_le")));
    sample_bytes_ = bytes_per_sample(format.value_or(SampleFormat::ci16));
    frequency_ = global.value("sluice:center_frequency", 0.0);  // until the sender's context changes it
    rate_ = global.value("core:sample_rate", 0.0);
  }

  void add(const JournalRecord& record) {
    const std::uint64_t file_sample = record.file_offset / sample_bytes_;
    const bool context_change = (record.timestamp_valid & kRecordContextChange) != 0;
    if (context_change && !std::isnan(record.context.rf_frequency)) frequency_ = record.context.rf_frequency;
    split_into_runs(record, file_sample, holes_, runs_);
    for (const Run& run : runs_) add_run(record, run, &run == &runs_.front() && context_change);
    for (std::uint32_t g = 0; g < record.gap_count; ++g) add_gap(record, record.gaps[g], file_sample);
  }

  nlohmann::json finish(const std::vector<JournalRecord>& records, bool complete) {
    global_["sluice:complete"] = complete;
    if (captures_.empty()) captures_.push_back({{"core:sample_start", 0}, {"core:frequency", frequency_}});
    if (!records.empty()) global_["sluice:first_sample"] = records.front().first_sample;
    global_["sluice:lost_samples"] = lost_total_;
    if (marked_total_ > 0) global_["sluice:marked_values"] = marked_total_;
    // SigMF wants annotations ordered by core:sample_start.
    std::stable_sort(annotations_.begin(), annotations_.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      return a["core:sample_start"].get<std::uint64_t>() < b["core:sample_start"].get<std::uint64_t>();
    });
    return nlohmann::json{{"global", global_}, {"captures", captures_}, {"annotations", annotations_}};
  }

 private:
  // A new capture segment where the stream jumps, its time base restarts or it was retuned.
  void add_run(const JournalRecord& record, const Run& run, bool retuned) {
    const bool restarts = (record.timestamp_valid & kRecordTimeJump) != 0 && &run == &runs_.front();
    if (retuned && any_sample_) annotations_.push_back(context_annotation(run, record.context));
    if (restarts && any_sample_) annotations_.push_back(resync_annotation(run));
    if (!any_sample_ || run.stream_index != expected_next_ || restarts || retuned) {
      nlohmann::json capture;
      capture["core:sample_start"] = run.file_sample;
      capture["core:global_index"] = run.stream_index;
      capture["core:frequency"] = frequency_;
      const Timestamp record_time{record.timestamp_seconds, record.timestamp_picoseconds,
                                  (record.timestamp_valid & 1U) != 0};
      const Timestamp time = time_after(record_time, run.stream_index - record.first_sample, rate_);
      if (time.valid) capture["core:datetime"] = iso8601(time);
      captures_.push_back(std::move(capture));
    }
    any_sample_ = true;
    expected_next_ = run.stream_index + run.count;
  }

  // File position of stream index `index` of the current record: in the run holding it, else
  // where the next sample after it lies (the end of the record's bytes when none does).
  [[nodiscard]] std::uint64_t file_position(std::uint64_t index, std::uint64_t record_end) const {
    for (const Run& run : runs_) {
      if (index < run.stream_index) return run.file_sample;
      if (index < run.stream_index + run.count) return run.file_sample + (index - run.stream_index);
    }
    return record_end;
  }

  void add_gap(const JournalRecord& record, const Gap& gap, std::uint64_t file_sample) {
    const std::uint64_t record_end = file_sample + record.sample_count;
    const std::uint64_t last = gap.first_sample + gap.length - 1;
    const std::string range =
        " (stream samples " + std::to_string(gap.first_sample) + " to " + std::to_string(last) + ")";
    nlohmann::json annotation;
    annotation["core:label"] = "gap";
    annotation["core:generator"] = "sluice";
    annotation["sluice:global_index"] = gap.first_sample;
    if (gap.in_data) {
      // Values that are in the file but were computed from input with lost samples.
      const std::uint64_t start = file_position(gap.first_sample, record_end);
      const std::uint64_t end = std::min(file_position(gap.first_sample + gap.length, record_end), record_end);
      annotation["core:sample_start"] = start;
      annotation["core:sample_count"] = std::max(end, start + 1) - start;
      annotation["core:comment"] = std::to_string(gap.length) + " values computed from input with lost samples" +
                                   range + ": present in the data file, marked";
      annotation["sluice:in_data"] = true;
      annotation["sluice:marked_values"] = gap.length;
      marked_total_ += gap.length;
    } else {
      const std::uint64_t resume = file_position(gap.first_sample + gap.length, record_end);
      annotation["core:sample_start"] = resume;
      annotation["core:sample_count"] = 0;
      annotation["core:comment"] = std::to_string(gap.length) + " samples lost" + range +
                                   ": absent from the data file, which goes on at file sample " +
                                   std::to_string(resume);
      annotation["sluice:lost_samples"] = gap.length;
      lost_total_ += gap.length;
    }
    annotations_.push_back(std::move(annotation));
  }

  nlohmann::json global_;
  std::uint64_t sample_bytes_ = 4;
  double frequency_ = 0;
  double rate_ = 0;
  nlohmann::json captures_ = nlohmann::json::array();
  nlohmann::json annotations_ = nlohmann::json::array();
  bool any_sample_ = false;
  std::uint64_t expected_next_ = 0;  // stream index after the last sample written so far
  std::uint64_t lost_total_ = 0;
  std::uint64_t marked_total_ = 0;
  std::vector<Run> runs_;   // the current record's
  std::vector<Gap> holes_;  // scratch for split_into_runs
};

}  // namespace

nlohmann::json build_meta(const nlohmann::json& global, const std::vector<JournalRecord>& records, bool complete) {
  MetaBuilder builder(global);
  for (const JournalRecord& record : records) builder.add(record);
  return builder.finish(records, complete);
}

std::uint64_t meta_bytes_bound(const Chunk& chunk) noexcept {
  // build_meta's output, indented by 2 with numbers of up to 20 digits: a capture object
  // takes under 256 bytes, a gap annotation under 768, a resync annotation under 768 and a
  // context annotation under 1024 (sigmf_test checks these against build_meta).
  std::uint64_t bytes = 256;                                           // the capture a record may open
  bytes += static_cast<std::uint64_t>(chunk.gap_count) * (768 + 256);  // each gap: its annotation, a capture after it
  if (chunk.time_jump) bytes += 768;
  if (chunk.context_change) bytes += 1024;
  return bytes;
}

void write_file_durably(const std::string& path, const std::string& text, bool sync) {
  const std::string temporary = path + std::string(kTemporarySuffix);
  // No O_TRUNC: blocks set aside in an existing temporary file are reused, the rest cut off.
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw errno_error("open", temporary, errno);
  {
    const UniqueFd closer(fd);
    write_all(fd, temporary, text);
    if (::ftruncate(fd, static_cast<off_t>(text.size())) != 0) throw errno_error("ftruncate", temporary, errno);
    if (sync && ::fsync(fd) != 0) throw errno_error("fsync", temporary, errno);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) throw errno_error("rename", temporary, errno);
  if (!sync) return;
  const std::string directory = std::filesystem::path(path).parent_path().empty()
                                    ? std::string(".")
                                    : std::filesystem::path(path).parent_path().string();
  const int directory_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd < 0) throw errno_error("open", directory, errno);
  const UniqueFd closer(directory_fd);
  if (::fsync(directory_fd) != 0) throw errno_error("fsync", directory, errno);
}

std::string sha512_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha512(), nullptr) != 1) {
    throw std::runtime_error("EVP_DigestInit_ex(sha512) failed");
  }
  std::array<char, 65536> buffer{};
  while (in) {
    in.read(buffer.data(), buffer.size());
    if (in.gcount() > 0 && EVP_DigestUpdate(context.get(), buffer.data(), static_cast<std::size_t>(in.gcount())) != 1) {
      throw std::runtime_error("EVP_DigestUpdate failed");
    }
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context.get(), digest.data(), &length) != 1)
    throw std::runtime_error("EVP_DigestFinal_ex failed");
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) fmt::format_to(std::back_inserter(hex), "{:02x}", digest[i]);
  return hex;
}

std::string stream_name(const nlohmann::json& stream) {
  return stream.is_object() ? stream.value("name", std::string()) : stream.at(0).get<std::string>();
}

void write_collection(const std::string& collection_path, const std::vector<std::string>& stream_bases,
                      const nlohmann::json& lanes, const std::string& description,
                      const std::vector<std::string>* hashes) {
  namespace fs = std::filesystem;
  const fs::path directory = fs::path(collection_path).parent_path();
  nlohmann::json streams = nlohmann::json::array();
  for (std::size_t i = 0; i < stream_bases.size(); ++i) {
    const std::string& base = stream_bases[i];
    const std::string name = fs::relative(fs::path(base), directory.empty() ? fs::path(".") : directory).string();
    const std::string hash = hashes != nullptr ? (*hashes)[i] : sha512_of_file(base + std::string(kMetaSuffix));
    streams.push_back({{"name", name}, {"hash", hash}});
  }
  nlohmann::json collection;
  collection["core:version"] = std::string(kSigmfVersion);
  collection["core:description"] = description;
  collection["core:extensions"] = nlohmann::json::array(
      {{{"name", std::string(kExtensionName)}, {"version", std::string(kExtensionVersion)}, {"optional", true}}});
  collection["core:streams"] = streams;
  collection["sluice:lanes"] = lanes;
  write_file_durably(collection_path, nlohmann::json{{"collection", collection}}.dump(2) + "\n");
}

std::string strip_capture_suffix(const std::string& path) {
  for (std::string_view suffix : {kMetaSuffix, kDataSuffix, kCollectionSuffix, kJournalSuffix}) {
    if (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return path.substr(0, path.size() - suffix.size());
    }
  }
  return path;
}

}  // namespace sluice::recorder
