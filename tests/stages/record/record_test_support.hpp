// Shared helpers for the record/replay tests: temp directories, small loop volumes, running a YAML pipeline,
// the expected ramp bytes, SigMF schema validation and test-only stages (a source that
// produces gaps, a sink that keeps what it saw).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/stage.hpp"
#include "recorder/capture_reader.hpp"
#include "tests/support/test_stages.hpp"

namespace sluice::test {

class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string str(const std::string& child = {}) const { return (path_ / child).string(); }

 private:
  std::filesystem::path path_;
};

// Runs the pipeline to its end; returns the failure messages (empty: success).
std::vector<std::string> run_pipeline(const std::string& yaml,
                                      const StageRegistry& registry = StageRegistry::builtin());

// The bytes a `generator` with `signal: ramp` and `format` emits for samples [first, first + count).
std::vector<std::byte> ramp_bytes(SampleFormat format, double sample_rate, std::uint64_t first, std::uint64_t count);

std::vector<std::byte> read_file(const std::string& path);

// Every sample of a lane, in stream order, read back through CaptureReader.
std::vector<std::byte> lane_bytes(const recorder::CaptureLane& lane);

// A small file system of `type` (ext4, xfs, tmpfs) of `size` (as mount and truncate take it)
// in a loop-mounted image file under `dir`, mounted at dir/mnt-NAME (NAME: `type` unless
// given); unmounted when destroyed. mounted() is false (with why()) where this process
// cannot mount.
class LoopVolume {
 public:
  LoopVolume(const TempDir& dir, const std::string& type, const std::string& size, const std::string& name = {});
  LoopVolume(const LoopVolume&) = delete;
  LoopVolume& operator=(const LoopVolume&) = delete;
  ~LoopVolume();
  [[nodiscard]] bool mounted() const { return mounted_; }
  [[nodiscard]] const std::string& why() const { return why_; }
  [[nodiscard]] const std::string& path() const { return mount_; }

 private:
  std::string mount_;
  bool mounted_ = false;
  std::string why_;
};

// Fails the test under CI, else skips it, when `volume` could not be mounted.
#define SLUICE_REQUIRE_MOUNTED(volume)                                                                \
  do {                                                                                                \
    if (!(volume).mounted()) {                                                                        \
      if (::sluice::test::in_ci()) FAIL() << "cannot mount a volume in CI: " << (volume).why();       \
      GTEST_SKIP() << "cannot mount a volume here (needs root and loop devices): " << (volume).why(); \
    }                                                                                                 \
  } while (false)

// What tests/recorder/validate_sigmf.py said about some files, against the schemas in
// tests/recorder/sigmf/.
struct SigmfValidation {
  int exit_code = -1;  // 0 valid, 1 invalid, 77 no python3-jsonschema or schemas, 127 no python3
  std::string errors;  // the validator's stderr
  [[nodiscard]] bool valid() const { return exit_code == 0; }
  [[nodiscard]] bool invalid() const { return exit_code == 1; }
  [[nodiscard]] bool could_not_run() const { return !valid() && !invalid(); }
};
SigmfValidation validate_sigmf(const std::vector<std::string>& files);

// True under CI=true (or 1): a check that cannot run there fails instead of skipping.
bool in_ci();

// Passes only when the validator ran and found every file valid. A validator that could not
// run fails the test under CI and skips the rest of it elsewhere (GTEST_SKIP returns).
#define SLUICE_EXPECT_SIGMF_VALID(files)                                                                 \
  do {                                                                                                   \
    const ::sluice::test::SigmfValidation sluice_validation = ::sluice::test::validate_sigmf(files);     \
    if (sluice_validation.could_not_run() && !::sluice::test::in_ci()) {                                 \
      GTEST_SKIP() << "SigMF validator could not run (exit " << sluice_validation.exit_code              \
                   << "): " << sluice_validation.errors;                                                 \
    }                                                                                                    \
    EXPECT_TRUE(sluice_validation.valid())                                                               \
        << "validate_sigmf.py exit " << sluice_validation.exit_code << ": " << sluice_validation.errors; \
  } while (false)

// Every .sigmf-meta and .sigmf-collection under `directory`.
std::vector<std::string> sigmf_files(const std::string& directory);

// What a `capture` stage saw of one chunk, and the store a `capture` with `key:` fills.
using SeenChunk = test_support::CapturedChunk;
using Collected = test_support::Capture;
inline Collected& collected(const std::string& key) { return test_support::keyed_capture(key); }

// The builtin stages plus `gappy` (a ramp source that loses samples: some chunks start after
// a hole, some have holes between their samples), `slow` (passes chunks on after `delay`)
// and `capture` (a sink; `key:` names its store).
const StageRegistry& test_registry();

// The chunks `gappy` emits with the given settings (the same function builds them).
std::vector<SeenChunk> gappy_expected(std::uint64_t chunk_bytes, std::uint64_t chunks, double sample_rate);

// The bytes the source sent for stream samples [first, first + count): ground truth that
// does not come from Sluice's bookkeeping (the generator's ramp, the emulator's signal).
using SampleTruth = std::function<std::vector<std::byte>(std::uint64_t first, std::uint64_t count)>;
SampleTruth ramp_truth(SampleFormat format, double sample_rate);

// Compares EVERY sample of `lane` with `truth` at the stream index the capture's metadata
// gives it (segment core:global_index + offset), checks that the holes between segments
// are the annotated gaps (a segment that starts the next file of a rotation may go on
// without one) and that each segment's core:datetime follows from the previous
// one at the sample rate. Appends what is wrong to `problems`; returns the samples checked.
std::uint64_t check_every_sample(const recorder::CaptureLane& lane, const SampleTruth& truth,
                                 std::vector<std::string>& problems);

}  // namespace sluice::test
