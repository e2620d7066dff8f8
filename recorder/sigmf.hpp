// SigMF metadata: datatypes, ISO-8601 times, the `.sigmf-meta` built from a recording's
// journal, and `.sigmf-collection` files that tie lanes, stripes and rotated segments together.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/chunk.hpp"
#include "recorder/journal.hpp"

namespace sluice {
struct StreamInfo;
}

namespace sluice::recorder {

inline constexpr std::string_view kSigmfVersion = "1.2.5";
inline constexpr std::string_view kExtensionName = "sluice";  // our namespace: sluice:*
inline constexpr std::string_view kExtensionVersion = "1.0.0";
inline constexpr std::string_view kMetaSuffix = ".sigmf-meta";
inline constexpr std::string_view kDataSuffix = ".sigmf-data";
inline constexpr std::string_view kCollectionSuffix = ".sigmf-collection";

std::string sigmf_datatype(SampleFormat format);  // "ci16_le", "cf32_le", "ci8", "rf32_le"
std::optional<SampleFormat> format_from_datatype(std::string_view datatype);

// "2026-11-22T14:47:18.123456789012Z" (UTC, picosecond digits kept).
std::string iso8601(const Timestamp& timestamp);
std::optional<Timestamp> parse_iso8601(std::string_view text);

using ::sluice::time_after;  // pipeline/chunk.hpp

// The global object of a recording of `stream` on `lane` (provisional until finished).
nlohmann::json make_global(const StreamInfo& stream, const std::string& lane, const std::string& recorder_name,
                           std::uint32_t stripe, std::uint32_t stripes, std::uint32_t segment);

// A whole `.sigmf-meta` document from the global object and the journal's valid records:
// a capture segment at every hole, also one inside a chunk (core:global_index and
// core:datetime those of the first sample after it), an annotation for every gap saying
// what was lost and where.
nlohmann::json build_meta(const nlohmann::json& global, const std::vector<JournalRecord>& records, bool complete);

// An upper bound on what one chunk's journal record adds to its recording's final meta
// (captures and annotations as build_meta writes them), so that room for the meta can be
// set aside before the chunk is written.
std::uint64_t meta_bytes_bound(const Chunk& chunk) noexcept;

// Writes `text` to `path` through a temporary file (PATH.tmp), fsync and rename, then fsyncs
// the directory: a reader sees the old file or the new one, never half of one. Throws naming
// the call. A PATH.tmp that exists already is written over in place and cut to the text's
// length: room set aside there (reserve_bytes) is what the text lands in, even on a full disk.
// `sync` false: the same rename (never half a file) without the fsyncs, for files that
// something else can rebuild after a crash (a provisional meta beside its journal).
inline constexpr std::string_view kTemporarySuffix = ".tmp";
void write_file_durably(const std::string& path, const std::string& text, bool sync = true);

std::string sha512_of_file(const std::string& path);  // lowercase hex; throws when unreadable

// The name of one entry of a collection's core:streams: a Recording Object per the spec text,
// or the schema's [name, hash] tuple.
std::string stream_name(const nlohmann::json& stream);

// Writes `collection_path` listing `stream_bases` (paths without suffix). Names are written
// relative to the collection's directory. `lanes` maps lane names to their stream names.
// `hashes`, when given, holds the sha512 of each stream's .sigmf-meta (else they are computed).
void write_collection(const std::string& collection_path, const std::vector<std::string>& stream_bases,
                      const nlohmann::json& lanes, const std::string& description,
                      const std::vector<std::string>* hashes = nullptr);

// `dir/name` without the suffix that `path` ends with (.sigmf-meta, -data, -collection, journal).
std::string strip_capture_suffix(const std::string& path);

}  // namespace sluice::recorder
