// Journal writing and reading: "SLUICEJ2" + length + global JSON, padded to a fixed offset, then
// records valid when magic and checksum match. Version 1 ("SLUICEJ1", no stream context) is
// still read: its records end after the gap table with the checksum over everything before it.
#include "recorder/journal.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"

namespace sluice::recorder {
namespace {

constexpr std::uint64_t kRecordMagic = 0x31524a45434955'4cULL;  // arbitrary, fixed
constexpr std::string_view kHeaderMagic = "SLUICEJ2";
constexpr std::string_view kHeaderMagicV1 = "SLUICEJ1";
// A version-1 record: today's fields up to the gap table, then its checksum.
constexpr std::size_t kV1Fields = offsetof(JournalRecord, context);
constexpr std::size_t kV1RecordBytes = kV1Fields + sizeof(std::uint64_t);

// FNV-1a over the record's first `bytes` bytes: cheap and enough to spot a torn write.
std::uint64_t checksum_over(const JournalRecord& record, std::size_t bytes) noexcept {
  const auto* data = reinterpret_cast<const unsigned char*>(&record);
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < bytes; ++i) {
    hash ^= data[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::uint64_t checksum_of(const JournalRecord& record) noexcept {
  return checksum_over(record, offsetof(JournalRecord, checksum));
}

}  // namespace

JournalRecord make_journal_record(const Chunk& chunk, std::uint64_t file_offset, std::uint64_t bytes) noexcept {
  JournalRecord record;
  record.magic = kRecordMagic;
  record.file_offset = file_offset;
  record.bytes = bytes;
  record.first_sample = chunk.first_sample;
  record.sample_count = chunk.sample_count;
  record.sequence = chunk.sequence;
  record.timestamp_seconds = chunk.timestamp.seconds;
  record.timestamp_picoseconds = chunk.timestamp.picoseconds;
  record.timestamp_valid = (chunk.timestamp.valid ? 1U : 0U) | (chunk.time_jump ? kRecordTimeJump : 0U) |
                           (chunk.context_change ? kRecordContextChange : 0U);
  record.gap_count = chunk.gap_count;
  record.gaps = chunk.gaps;
  record.context = chunk.context;
  record.checksum = checksum_of(record);
  return record;
}

JournalWriter::JournalWriter(const std::string& path, const nlohmann::json& global) : path_(path) {
  const std::string text = global.dump();
  if (text.size() + 16 > kJournalHeaderBytes) throw std::runtime_error("journal header too large for " + path);
  std::string header(kJournalHeaderBytes, '\0');
  std::memcpy(header.data(), kHeaderMagic.data(), kHeaderMagic.size());
  const auto length = static_cast<std::uint64_t>(text.size());
  std::memcpy(header.data() + 8, &length, sizeof(length));
  std::memcpy(header.data() + 16, text.data(), text.size());
  // The header is written to a hidden file beside the journal, which is then renamed into place
  // (never over an existing one): a journal on disk always has its whole header, even after kill -9.
  const std::filesystem::path final_path(path);
  const std::string partial = (final_path.parent_path() / ("." + final_path.filename().string() + ".partial")).string();
  fd_ = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw errno_error("open", partial, errno);
  const auto fail = [&](const char* call, const std::string& name, int error) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(partial.c_str());
    return errno_error(call, name, error);
  };
  std::size_t written = 0;
  while (written < header.size()) {
    const ssize_t result = ::write(fd_, header.data() + written, header.size() - written);
    if (result < 0 && errno == EINTR) continue;
    if (result < 0) throw fail("write", partial, errno);
    written += static_cast<std::size_t>(result);
  }
  if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
    // A file system without RENAME_NOREPLACE: link() refuses an existing name the same way.
    if (errno != EINVAL || ::link(partial.c_str(), path.c_str()) != 0) throw fail("rename", path, errno);
    ::unlink(partial.c_str());
  }
  size_ = header.size();
}

JournalWriter::JournalWriter(JournalWriter&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_), torn_(other.torn_) {
  other.fd_ = -1;
}

JournalWriter& JournalWriter::operator=(JournalWriter&& other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    size_ = other.size_;
    torn_ = other.torn_;
    other.fd_ = -1;
  }
  return *this;
}

JournalWriter::~JournalWriter() { close(); }

void JournalWriter::close() noexcept {
  if (fd_ >= 0 && ::close(fd_) != 0) log::warn("{}", errno_message("close(" + path_ + ")"));
  fd_ = -1;
}

int JournalWriter::append(const JournalRecord& record) noexcept {
  if (torn_) return EIO;
  const auto* data = reinterpret_cast<const char*>(&record);
  std::size_t written = 0;
  while (written < sizeof(record)) {
    const ssize_t result = ::write(fd_, data + written, sizeof(record) - written);
    if (result < 0 && errno == EINTR) continue;
    if (result < 0) {
      const int error = errno;
      // Appended after a torn record, the next one would be read as broken too: when the
      // torn bytes cannot be cut off, no later record is appended.
      if (written > 0 && ::ftruncate(fd_, static_cast<off_t>(size_)) != 0) torn_ = true;
      return error;
    }
    written += static_cast<std::size_t>(result);
  }
  size_ += sizeof(record);
  return 0;
}

JournalContents read_journal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open journal " + path);
  std::string header(kJournalHeaderBytes, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header.size()));
  const bool version1 =
      in.gcount() == static_cast<std::streamsize>(header.size()) && header.compare(0, 8, kHeaderMagicV1) == 0;
  if (in.gcount() != static_cast<std::streamsize>(header.size()) ||
      (header.compare(0, 8, kHeaderMagic) != 0 && !version1)) {
    throw std::runtime_error(path + " is not a Sluice journal (bad or short header)");
  }
  std::uint64_t length = 0;
  std::memcpy(&length, header.data() + 8, sizeof(length));
  if (length + 16 > kJournalHeaderBytes) throw std::runtime_error(path + ": journal header length is corrupt");
  JournalContents contents;
  contents.global = nlohmann::json::parse(header.substr(16, length));
  JournalRecord record;
  std::uint64_t expected_offset = 0;
  bool broken = false;
  const std::size_t record_bytes = version1 ? kV1RecordBytes : sizeof(JournalRecord);
  std::string buffer(record_bytes, '\0');
  while (in.read(buffer.data(), static_cast<std::streamsize>(record_bytes))) {
    record = JournalRecord{};
    bool valid = false;
    if (version1) {
      std::memcpy(static_cast<void*>(&record), buffer.data(), kV1Fields);  // trivially copyable
      std::uint64_t checksum = 0;
      std::memcpy(&checksum, buffer.data() + kV1Fields, sizeof(checksum));
      valid = checksum == checksum_over(record, kV1Fields);
      record.timestamp_valid &= ~kRecordContextChange;  // reserved in version 1
      record.checksum = checksum_of(record);
    } else {
      std::memcpy(static_cast<void*>(&record), buffer.data(), sizeof(record));
      valid = record.checksum == checksum_of(record);
    }
    if (broken || record.magic != kRecordMagic || !valid || record.file_offset != expected_offset ||
        record.gap_count > Chunk::kMaxGaps) {
      broken = true;
      ++contents.discarded;
      continue;
    }
    expected_offset += record.bytes;
    contents.records.push_back(record);
  }
  return contents;
}

}  // namespace sluice::recorder
