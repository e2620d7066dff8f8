// Reading captures back: a SigMF recording or a Sluice collection (lanes, stripes, rotated
// segments) as, per lane, an ordered list of contiguous sample runs plus the gaps between and
// inside them. Used by `replay`, `sluice capture` and the emulator's `--capture`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/chunk.hpp"

namespace sluice::recorder {

// A run of samples that are contiguous both in one data file and in the stream.
struct CaptureSegment {
  std::string data_path;
  std::uint64_t file_offset = 0;  // bytes
  std::uint64_t sample_count = 0;
  std::uint64_t global_index = 0;  // stream index of its first sample
  Timestamp time;                  // of its first sample (invalid when the capture has none)
  bool time_jump = false;          // the sender's time base restarted here (a `resync` annotation)
  double frequency = 0;            // its core:frequency
  bool context_change = false;     // the sender's context changed here (a `context` annotation)
  StreamContext context{};         // the values that annotation gives (NaN where it gives none)
};

struct CaptureGap {
  std::uint64_t global_index = 0;  // first lost stream sample
  std::uint64_t length = 0;
  bool in_data = false;  // values for these indices are in the file, computed from input
                         // with lost samples (spectra rows over a hole); else absent
};

struct CaptureLane {
  std::string name;
  std::vector<std::string> recordings;  // bases (path without .sigmf-meta)
  std::string datatype;                 // core:datatype as written
  std::optional<SampleFormat> format;   // when Sluice can replay it
  std::size_t sample_bytes = 0;
  double sample_rate = 0;
  double frequency = 0;
  std::string description;
  std::size_t fft_size = 0;
  std::string window;
  std::size_t averaging = 0;
  bool complete = true;                  // every recording finished (not provisional)
  std::vector<CaptureSegment> segments;  // ordered by global_index
  std::vector<CaptureGap> gaps;          // ordered by global_index
  std::uint64_t total_samples = 0;       // in the data files
  std::uint64_t total_bytes = 0;
  std::uint64_t lost_samples = 0;     // absent from the files
  std::uint64_t marked_values = 0;    // in the files, computed from input with lost samples
  std::vector<std::string> journals;  // leftover journals: the capture needs `sluice capture repair`
};

// A recording of a collection's capture that is on disk but not in the collection: the
// recorder was stopped (kill -9, a crash) between making its files and rewriting the
// collection. `sluice capture repair` adds it.
struct UnlistedRecording {
  std::string base;              // path without suffix
  std::string lane;              // from its journal or meta, else the listed lane its name gives
  bool meta = false;             // BASE.sigmf-meta is there
  bool journal = false;          // BASE.sluice-journal is there: it was being written
  std::uint64_t data_bytes = 0;  // the size of BASE.sigmf-data (0 also when there is none)
};

struct Capture {
  std::string path;
  bool collection = false;
  std::vector<CaptureLane> lanes;
  // Read into `lanes` like the listed ones where a journal or meta says what they hold.
  std::vector<UnlistedRecording> unlisted;
  [[nodiscard]] const CaptureLane* lane(const std::string& name) const;
};

// Opens PATH.sigmf-collection, PATH.sigmf-meta, PATH.sigmf-data or a base path. A
// collection's lanes also hold its unlisted recordings (see find_unlisted_recordings). A
// recording with a journal is read as its journal describes it (what repair will keep).
// Throws std::runtime_error naming the file and what is wrong with it.
Capture open_capture(const std::string& path);

// The recordings of the capture DIR/NAME.sigmf-collection that the collection does not list:
// files named as the recorder names them (NAME-LANE[-sSTRIPE]-SEGMENT.sigmf-data, -meta or
// .sluice-journal) in DIR and in every directory the collection lists a recording in (a
// striped capture's volumes). The collection file need not exist. Sorted by base.
std::vector<UnlistedRecording> find_unlisted_recordings(const std::string& collection_file);

// Reads `count` samples of `segment` starting `sample_offset` samples into it (pread; for
// tools and the emulator, not the hot path). Returns the samples read.
std::uint64_t read_segment(const CaptureLane& lane, const CaptureSegment& segment, std::uint64_t sample_offset,
                           std::uint64_t count, std::byte* out);

// The time of stream sample `index` given its segment's start time and the sample rate.
Timestamp time_of_sample(const CaptureSegment& segment, std::uint64_t index, double sample_rate);

}  // namespace sluice::recorder
