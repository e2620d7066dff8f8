// The recording journal (`BASE.sluice-journal`): the SigMF global object, then a fixed-size
// record per chunk once its bytes are on the disk, in file order. It makes a capture cut by
// kill -9 repairable: the metadata is rebuilt from it, up to the last whole record.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "pipeline/chunk.hpp"

namespace sluice::recorder {

inline constexpr std::size_t kJournalHeaderBytes = 64 * 1024;
inline constexpr std::string_view kJournalSuffix = ".sluice-journal";
inline constexpr std::uint32_t kRecordTimeJump = 2;       // in JournalRecord::timestamp_valid
inline constexpr std::uint32_t kRecordContextChange = 4;  // in JournalRecord::timestamp_valid

// One chunk as it reached the data file. Plain old data, written as it is in memory
// (the journal is read back on the machine that wrote it).
struct JournalRecord {
  std::uint64_t magic = 0;
  std::uint64_t file_offset = 0;  // byte offset of the chunk in the data file
  std::uint64_t bytes = 0;
  std::uint64_t first_sample = 0;  // absolute stream index of its first sample
  std::uint64_t sample_count = 0;
  std::uint64_t sequence = 0;
  std::uint64_t timestamp_seconds = 0;
  std::uint64_t timestamp_picoseconds = 0;
  std::uint32_t timestamp_valid = 0;  // bit 0: timestamp valid; bit 1 (kRecordTimeJump): Chunk::time_jump;
                                      // bit 2 (kRecordContextChange): Chunk::context_change
  std::uint32_t gap_count = 0;
  std::array<Gap, Chunk::kMaxGaps> gaps{};
  StreamContext context{};     // Chunk::context (journal version 2, "SLUICEJ2"; a version-1 journal has none)
  std::uint64_t checksum = 0;  // over every field before it: a torn record is detected, not trusted
};

static_assert(std::is_trivially_copyable_v<JournalRecord>, "journal records are written and read as bytes");

JournalRecord make_journal_record(const Chunk& chunk, std::uint64_t file_offset, std::uint64_t bytes) noexcept;

// Appends records with write(2) on an O_APPEND descriptor (one small syscall per chunk,
// no allocation). Owns the descriptor.
class JournalWriter {
 public:
  JournalWriter() = default;
  // Creates the journal (fails if it exists) and writes the header. Throws naming the call.
  JournalWriter(const std::string& path, const nlohmann::json& global);
  JournalWriter(JournalWriter&& other) noexcept;
  JournalWriter& operator=(JournalWriter&& other) noexcept;
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;
  ~JournalWriter();

  // 0 on success, else the errno. A record cut short (a full disk mid-record) is cut off
  // again, so the journal ends at its last whole record and a later append may retry. Hot path.
  int append(const JournalRecord& record) noexcept;
  [[nodiscard]] const std::string& path() const { return path_; }
  void close() noexcept;

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;  // header and whole records: where the next record starts
  bool torn_ = false;       // a torn record could not be cut off
};

struct JournalContents {
  nlohmann::json global;
  std::vector<JournalRecord> records;  // the valid prefix: contiguous in the file, checksums good
  std::size_t discarded = 0;           // records after the first bad or non-contiguous one
};

// Throws std::runtime_error when the file cannot be read or its header is not a journal's.
JournalContents read_journal(const std::string& path);

}  // namespace sluice::recorder
