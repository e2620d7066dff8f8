// `sluice capture plot` and `sluice capture export` on real recordings (the emulator's tone over
// UDP with two packets dropped; a generator tone's spectra), checked against the tone the source
// was told to send, its exact samples, and the SigMF schema.
#include "recorder/capture_tools.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "pipeline/units.hpp"
#include "recorder/capture_reader.hpp"
#include "tests/stages/record/record_test_support.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/process.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
const std::string kSluice = testing::path_from_env("SLUICE_BINARY", SLUICE_BINARY);
const std::string kEmulator = testing::path_from_env("SLUICE_EMULATOR", SLUICE_EMULATOR);
const std::string kSourceDir = testing::path_from_env("SLUICE_SOURCE_DIR", SLUICE_SOURCE_DIR);

constexpr double kToneHz = 3.7e6;
constexpr double kToneAmplitude = 0.4;
constexpr double kSampleRate = 25e6;

// Each test of the RecordedTone suite records on its own: CTest runs them as separate processes,
// side by side, so each takes a port nobody holds.
std::string write_config(const test::TempDir& dir) {
  const std::string path = dir.str("tone.yaml");
  const std::string address = "127.0.0.1:" + std::to_string(testing::free_port(SOCK_DGRAM));
  std::ofstream(path) << R"(
emulator:
  transport: udp
  streams: [{address: )" + address +
                             R"(, stream_id: 1}]
  sample_rate: 25Msps
  format: ci16
  payload: 1472
  rate: 100MB/s
  duration: 1s
  signal:
    tones: [{frequency: 3.7MHz, amplitude: 0.4}]
    noise_snr_db: 40
    seed: 3
  faults:
    drop: {packets: [5000, 10000]}  # early: a loaded sender may not reach later ones within 1 s
# 128 MiB of chunks hold the whole second: a loaded machine may stall the recorder, never drop.
pipeline: {name: tone, chunk: 1MiB, chunks: 128, progress_interval: 100ms}
lanes:
  - name: port0
    stages:
      - {name: source, type: udp, address: )" +
                             address + R"(, stream_id: 1, sample_rate: 25Msps, format: ci16}
      - {name: record, type: record, directory: )" +
                             dir.str() + R"(, overwrite: true}
      - {name: sink, type: "null"}
)";
  return path;
}

// Records one second of the emulator's tone; returns the collection's path.
std::string record_tone(const test::TempDir& dir) {
  const std::string config = write_config(dir);
  testing::Process sluice({kSluice, "run", config});
  EXPECT_TRUE(sluice.wait_for_stderr("port0", std::chrono::seconds(60)));
  const auto emulator = testing::run_process({kEmulator, config, "-q"});
  EXPECT_EQ(emulator.exit_code, 0) << emulator.err;
  sluice.send_signal(SIGINT);
  const auto result = sluice.wait(std::chrono::seconds(60));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return dir.str("tone.sigmf-collection");
}

testing::ProcessResult run_sluice(const std::vector<std::string>& arguments) {
  std::vector<std::string> argv{kSluice};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  return testing::run_process(argv);
}

void expect_valid_sigmf(const std::vector<std::string>& files) { SLUICE_EXPECT_SIGMF_VALID(files); }

// The line `sluice capture plot` prints for a lane: what it holds, what was averaged, the peak.
std::string plot_line(const recorder::CaptureSpectrum& spectrum, std::uint64_t held, std::uint64_t averaged) {
  const std::size_t peak = spectrum.peak_bin();
  std::ostringstream line;
  line << "  lane " << spectrum.lane << ": " << held << (spectrum.from_spectra ? " recorded rows, " : " FFT frames, ")
       << averaged << " averaged, peak " << format_frequency(spectrum.frequency_of(peak)) << " ("
       << spectrum.frequency_of(peak) << " Hz) at " << spectrum.average_db[peak] << " dB\n";
  return line.str();
}

class RecordedTone : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    collection_ = record_tone(*dir_);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static test::TempDir* dir_;
  static std::string collection_;
};
test::TempDir* RecordedTone::dir_ = nullptr;
std::string RecordedTone::collection_;

TEST_F(RecordedTone, PlotPeaksAtTheEmulatorsTone) {
  const std::string svg_path = dir_->str("tone.svg");
  const auto plotted = run_sluice({"capture", "plot", collection_, "-o", svg_path});
  ASSERT_EQ(plotted.exit_code, 0) << plotted.err;

  // The numbers behind the picture: the averaged spectrum's peak is the tone's bin.
  const recorder::Capture capture = recorder::open_capture(collection_);
  const recorder::CaptureSpectrum spectrum = recorder::capture_spectrum(capture.lanes.at(0), 1024);
  // It says how many whole frames the lane holds (none across a hole) and how many it averaged:
  // 300 rows of 16.
  std::uint64_t held = 0;
  for (const auto& segment : capture.lanes.at(0).segments) held += segment.sample_count / 1024;
  EXPECT_EQ(plotted.out, "wrote " + svg_path + "\n" + plot_line(spectrum, held, 300 * 16));
  EXPECT_DOUBLE_EQ(spectrum.bin_hz, kSampleRate / 1024);
  const std::size_t peak = spectrum.peak_bin();
  EXPECT_NEAR(spectrum.frequency_of(peak), kToneHz, spectrum.bin_hz);
  EXPECT_NEAR(spectrum.average_db[peak], 20 * std::log10(kToneAmplitude), 1.5);  // Hann scalloping is < 1.5 dB
  // Far from the tone the spectrum is noise, at least 40 dB down.
  EXPECT_LT(spectrum.average_db[(peak + spectrum.bins / 2) % spectrum.bins], spectrum.average_db[peak] - 40);
  EXPECT_EQ(spectrum.rows_db.size(), 300U);
  EXPECT_EQ(spectrum.row_seconds.size(), 300U);
  EXPECT_TRUE(std::is_sorted(spectrum.row_seconds.begin(), spectrum.row_seconds.end()));

  // The picture says the same: its peak marker and an embedded spectrogram image.
  std::ifstream in(svg_path);
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::smatch match;
  ASSERT_TRUE(std::regex_search(svg, match, std::regex("data-peak-hz=\"([0-9.]+)\""))) << svg.substr(0, 2000);
  EXPECT_NEAR(std::stod(match.str(1)), kToneHz, spectrum.bin_hz);
  EXPECT_NE(svg.find("href=\"data:image/png;base64,iVBORw0KGgo"), std::string::npos);

  const std::string png_path = dir_->str("tone.png");
  ASSERT_EQ(run_sluice({"capture", "plot", collection_, "-o", png_path}).exit_code, 0);
  std::ifstream png(png_path, std::ios::binary);
  std::string signature(8, '\0');
  png.read(signature.data(), 8);
  EXPECT_EQ(signature, "\x89PNG\r\n\x1a\n");

  EXPECT_EQ(run_sluice({"capture", "plot", collection_, "-o", dir_->str("tone.jpg")}).exit_code, 2);
  EXPECT_EQ(run_sluice({"capture", "plot", collection_, "--lane", "nope"}).exit_code, 1);
}

// The samples of the source from stream index `first` to `end`, read straight from its data
// files at the offsets its segments give.
std::vector<char> source_bytes(const recorder::CaptureLane& lane, std::uint64_t first, std::uint64_t end) {
  std::vector<char> bytes;
  for (const auto& segment : lane.segments) {
    const std::uint64_t begin = std::max(first, segment.global_index);
    const std::uint64_t stop = std::min(end, segment.global_index + segment.sample_count);
    if (begin >= stop) continue;
    std::ifstream data(segment.data_path, std::ios::binary);
    data.seekg(static_cast<std::streamoff>(segment.file_offset + (begin - segment.global_index) * lane.sample_bytes));
    const std::size_t offset = bytes.size();
    bytes.resize(offset + (stop - begin) * lane.sample_bytes);
    data.read(bytes.data() + offset, static_cast<std::streamsize>((stop - begin) * lane.sample_bytes));
  }
  return bytes;
}

nlohmann::json read_meta(const std::string& base) {
  std::ifstream in(base + ".sigmf-meta");
  return nlohmann::json::parse(in);
}

TEST_F(RecordedTone, ExportHoldsExactlyTheRangeWithItsHoles) {
  const recorder::Capture capture = recorder::open_capture(collection_);
  const recorder::CaptureLane& lane = capture.lanes.at(0);
  ASSERT_EQ(lane.gaps.size(), 2U) << "the emulator dropped two packets";
  const std::uint64_t origin = lane.segments.front().global_index;
  // A range that contains the first dropped packet.
  const double from = static_cast<double>(lane.gaps[0].global_index - origin) / kSampleRate - 0.05;
  const double to = from + 0.1;
  const std::string base = dir_->str("slice");
  const auto exported = run_sluice({"capture", "export", collection_, "--from", std::to_string(from * 1e3) + "ms",
                                    "--to", std::to_string(to * 1e3) + "ms", "-o", base});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(exported.err, "");

  const std::uint64_t first = origin + static_cast<std::uint64_t>(std::ceil(from * kSampleRate - 1e-9));
  const std::uint64_t end = origin + static_cast<std::uint64_t>(std::ceil(to * kSampleRate - 1e-9));
  const std::vector<char> expected = source_bytes(lane, first, end);
  std::ifstream data(base + ".sigmf-data", std::ios::binary);
  const std::vector<char> actual((std::istreambuf_iterator<char>(data)), std::istreambuf_iterator<char>());
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_TRUE(actual == expected) << "exported samples differ from the source range";

  // Read back: the runs of the source inside the range, each hole between them kept as a
  // hole at the same stream index with the same length.
  const recorder::Capture slice = recorder::open_capture(base);
  const recorder::CaptureLane& part = slice.lanes.at(0);
  EXPECT_EQ(part.total_samples * 4, expected.size());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> expected_runs;  // global index, samples
  for (const auto& segment : lane.segments) {
    const std::uint64_t begin = std::max(first, segment.global_index);
    const std::uint64_t stop = std::min(end, segment.global_index + segment.sample_count);
    if (begin >= stop) continue;
    if (!expected_runs.empty() && expected_runs.back().first + expected_runs.back().second == begin) {
      expected_runs.back().second += stop - begin;
    } else {
      expected_runs.emplace_back(begin, stop - begin);
    }
  }
  ASSERT_GE(expected_runs.size(), 2U) << "the range holds the first dropped packet";
  ASSERT_EQ(part.segments.size(), expected_runs.size());
  for (std::size_t i = 0; i < expected_runs.size(); ++i) {
    EXPECT_EQ(part.segments[i].global_index, expected_runs[i].first) << i;
    EXPECT_EQ(part.segments[i].sample_count, expected_runs[i].second) << i;
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> expected_gaps;
  for (const auto& gap : lane.gaps) {
    if (gap.global_index > first && gap.global_index < end) expected_gaps.emplace_back(gap.global_index, gap.length);
  }
  EXPECT_GE(expected_gaps.size(), 1U);
  ASSERT_EQ(part.gaps.size(), expected_gaps.size());
  std::uint64_t lost = 0;
  for (std::size_t i = 0; i < expected_gaps.size(); ++i) {
    EXPECT_EQ(part.gaps[i].global_index, expected_gaps[i].first);
    EXPECT_EQ(part.gaps[i].length, expected_gaps[i].second);
    lost += expected_gaps[i].second;
  }
  // The slice's totals are its own (the source lost more: its second dropped packet).
  const nlohmann::json global = read_meta(base)["global"];
  EXPECT_EQ(global["sluice:lost_samples"], lost);
  EXPECT_LT(lost, lane.lost_samples);
  EXPECT_EQ(global["sluice:first_sample"], first);
  EXPECT_EQ(exported.out,
            "wrote " + base + ".sigmf-data and " + base + ".sigmf-meta: lane port0, stream samples " +
                std::to_string(first) + " to " + std::to_string(end - 1) + ": " + std::to_string(expected.size() / 4) +
                " samples in " + std::to_string(expected_runs.size()) + " segment(s), " +
                std::to_string(expected_gaps.size()) + " gap(s) (" + std::to_string(lost) + " samples lost)\n");
  // Times kept: every exported run starts at the source's time for that stream index.
  for (const auto& run : part.segments) {
    for (const auto& segment : lane.segments) {
      if (segment.global_index <= run.global_index && run.global_index < segment.global_index + segment.sample_count) {
        const Timestamp expected_time = recorder::time_of_sample(segment, run.global_index, kSampleRate);
        EXPECT_TRUE(run.time.valid);
        EXPECT_EQ(run.time.seconds, expected_time.seconds);
        EXPECT_EQ(run.time.picoseconds, expected_time.picoseconds);
      }
    }
  }
  expect_valid_sigmf({base + ".sigmf-meta"});

  // Bad ranges and names are errors with a message, and write nothing.
  const auto reversed =
      run_sluice({"capture", "export", collection_, "--from", "0.5s", "--to", "0.2s", "-o", dir_->str("bad")});
  EXPECT_EQ(reversed.exit_code, 1);
  EXPECT_NE(reversed.err.find("--from < --to"), std::string::npos) << reversed.err;
  EXPECT_FALSE(fs::exists(dir_->str("bad.sigmf-data")));
  EXPECT_EQ(
      run_sluice({"capture", "export", collection_, "--from", "soon", "--to", "1s", "-o", dir_->str("bad")}).exit_code,
      1);
  EXPECT_EQ(run_sluice({"capture", "export", collection_, "--from", "0s", "--to", "1s", "-o", base}).exit_code, 1)
      << "an existing capture is never overwritten";
}

// `sluice-emulator --check`: every recorded sample is the emulator's signal at its stream index,
// and one changed byte, or another seed, is found and named.
TEST_F(RecordedTone, EmulatorCheckComparesEveryRecordedSampleWithItsSignal) {
  const recorder::Capture capture = recorder::open_capture(collection_);
  const recorder::CaptureLane& lane = capture.lanes.at(0);
  ASSERT_GE(lane.segments.size(), 2U);
  const std::string config = dir_->str("tone.yaml");
  const auto checked = testing::run_process({kEmulator, config, "--check", collection_});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_EQ(checked.out, "lane port0: " + std::to_string(lane.total_samples) + " samples in " +
                             std::to_string(lane.segments.size()) + " segment(s) are the emulator's signal (" +
                             std::to_string(lane.lost_samples) + " lost, not compared)\n");

  const auto other_seed =
      testing::run_process({kEmulator, config, "--set", "emulator.signal.seed=99", "--check", collection_});
  EXPECT_EQ(other_seed.exit_code, 1) << other_seed.out;

  // One byte of the second segment changed on disk, then put back.
  const recorder::CaptureSegment& segment = lane.segments[1];
  const std::uint64_t offset = segment.file_offset + 100 * lane.sample_bytes + 1;
  std::fstream data(segment.data_path, std::ios::in | std::ios::out | std::ios::binary);
  data.seekg(static_cast<std::streamoff>(offset));
  const char original = static_cast<char>(data.get());
  data.seekp(static_cast<std::streamoff>(offset));
  data.put(static_cast<char>(original ^ 0x10));
  data.flush();
  const auto changed = testing::run_process({kEmulator, config, "--check", collection_});
  data.seekp(static_cast<std::streamoff>(offset));
  data.put(original);
  data.flush();
  EXPECT_EQ(changed.exit_code, 1) << changed.out;
  const std::uint64_t before = lane.segments[0].sample_count + 100;
  EXPECT_EQ(changed.out, "lane port0: stream sample " + std::to_string(segment.global_index + 100) +
                             " differs from the emulator's signal (" + std::to_string(before) +
                             " samples before it match)\n");
}

// The holes of the source as its data files show them: where one segment's samples end and
// the next segment's begin further on in the stream (not taken from its gap annotations).
std::vector<std::pair<std::uint64_t, std::uint64_t>> holes_between_segments(const recorder::CaptureLane& lane) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> holes;  // first missing stream index, end
  for (std::size_t i = 1; i < lane.segments.size(); ++i) {
    const std::uint64_t end = lane.segments[i - 1].global_index + lane.segments[i - 1].sample_count;
    if (lane.segments[i].global_index > end) holes.emplace_back(end, lane.segments[i].global_index);
  }
  return holes;
}

// Consecutive gaps that touch are one hole (a hole can be reported in two chunks).
std::vector<std::pair<std::uint64_t, std::uint64_t>> merged_holes(const std::vector<recorder::CaptureGap>& gaps) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> holes;  // first missing stream index, end
  for (const auto& gap : gaps) {
    if (gap.in_data) continue;
    if (!holes.empty() && holes.back().second == gap.global_index) {
      holes.back().second += gap.length;
    } else {
      holes.emplace_back(gap.global_index, gap.global_index + gap.length);
    }
  }
  return holes;
}

// A range that starts inside one hole and ends inside the next: the slice begins
// and ends with the parts of those holes that lie in the range, annotated as gaps, and its
// totals and message say so.
TEST_F(RecordedTone, ExportOfARangeStartingAndEndingInHolesAnnotatesBothParts) {
  const recorder::Capture capture = recorder::open_capture(collection_);
  const recorder::CaptureLane& lane = capture.lanes.at(0);
  const auto holes = holes_between_segments(lane);
  // The emulator dropped two packets; a loaded kernel may drop more. The range runs between
  // the first two holes, whatever they are.
  ASSERT_GE(holes.size(), 2U);
  ASSERT_EQ(merged_holes(lane.gaps), holes) << "each hole between segments is annotated";
  const std::uint64_t origin = lane.segments.front().global_index;
  const std::uint64_t first = (holes[0].first + holes[0].second) / 2;
  const std::uint64_t end = (holes[1].first + holes[1].second) / 2;
  ASSERT_GT(first, holes[0].first);
  ASSERT_LT(end, holes[1].second);
  // One sample is 40 ns at 25 Msps: the range in whole nanoseconds is exact.
  const auto at = [&](std::uint64_t index) { return std::to_string((index - origin) * 40) + "ns"; };
  const std::string base = dir_->str("from-a-hole");
  const auto exported =
      run_sluice({"capture", "export", collection_, "--from", at(first), "--to", at(end), "-o", base});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;

  // The data: exactly the source's samples between the two holes.
  const std::vector<char> expected = source_bytes(lane, holes[0].second, holes[1].first);
  std::ifstream data(base + ".sigmf-data", std::ios::binary);
  const std::vector<char> actual((std::istreambuf_iterator<char>(data)), std::istreambuf_iterator<char>());
  ASSERT_EQ(actual.size(), (holes[1].first - holes[0].second) * 4);
  EXPECT_TRUE(actual == expected) << "exported samples differ from the source range";

  const std::uint64_t leading = holes[0].second - first;
  const std::uint64_t trailing = end - holes[1].first;
  const recorder::Capture slice = recorder::open_capture(base);
  const recorder::CaptureLane& part = slice.lanes.at(0);
  ASSERT_EQ(part.segments.size(), 1U);
  EXPECT_EQ(part.segments[0].global_index, holes[0].second);
  EXPECT_EQ(part.segments[0].sample_count, holes[1].first - holes[0].second);
  using Holes = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(merged_holes(part.gaps), (Holes{{first, holes[0].second}, {holes[1].first, end}}));
  EXPECT_EQ(part.lost_samples, leading + trailing);

  // As written: the leading gap where the data begins, the trailing one at its end.
  const nlohmann::json meta = read_meta(base);
  EXPECT_EQ(meta["global"]["sluice:lost_samples"], leading + trailing);
  EXPECT_EQ(meta["global"]["sluice:first_sample"], first);
  std::uint64_t leading_annotated = 0;
  std::uint64_t trailing_annotated = 0;
  for (const auto& annotation : meta["annotations"]) {
    EXPECT_EQ(annotation["core:label"], "gap");
    EXPECT_EQ(annotation["core:sample_count"], 0);
    const auto index = annotation["sluice:global_index"].get<std::uint64_t>();
    if (index < holes[0].second) {
      EXPECT_EQ(annotation["core:sample_start"], 0);
      leading_annotated += annotation["sluice:lost_samples"].get<std::uint64_t>();
    } else {
      EXPECT_EQ(annotation["core:sample_start"], actual.size() / 4);
      trailing_annotated += annotation["sluice:lost_samples"].get<std::uint64_t>();
    }
  }
  EXPECT_EQ(leading_annotated, leading);
  EXPECT_EQ(trailing_annotated, trailing);
  const std::size_t gaps = meta["annotations"].size();
  EXPECT_EQ(exported.out, "wrote " + base + ".sigmf-data and " + base + ".sigmf-meta: lane port0, stream samples " +
                              std::to_string(first) + " to " + std::to_string(end - 1) + ": " +
                              std::to_string(actual.size() / 4) + " samples in 1 segment(s), " + std::to_string(gaps) +
                              " gap(s) (" + std::to_string(leading + trailing) + " samples lost)\n");
  EXPECT_EQ(exported.err, "");
  expect_valid_sigmf({base + ".sigmf-meta"});

  // A range wholly inside a hole holds nothing: an error, and nothing written.
  const std::string empty = dir_->str("in-a-hole");
  const auto nothing =
      run_sluice({"capture", "export", collection_, "--from", at(first), "--to", at(first + 1), "-o", empty});
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_EQ(nothing.out, "");
  EXPECT_EQ(nothing.err, "sluice: nothing was recorded in stream samples " + std::to_string(first) + " to " +
                             std::to_string(first) + " of lane port0 (the range lies in a hole)\n");
  EXPECT_FALSE(fs::exists(empty + ".sigmf-data"));
  EXPECT_FALSE(fs::exists(empty + ".sigmf-meta"));
}

// Spectra recorded after the fft stage are drawn as recorded: the peak is the generator's tone.
TEST(CaptureTools, PlotOfRecordedSpectraPeaksAtTheGeneratorTone) {
  test::TempDir dir;
  const std::string config = dir.str("spectra.yaml");
  std::ofstream(config) << R"(
pipeline: {name: spectra, chunk: 256KiB, chunks: 8}
lanes:
  - name: port0
    stages:
      - {name: source, type: generator, signal: tone, format: ci16, sample_rate: 250Msps, frequency: 10MHz, amplitude: 0.5, stop_after: 64MiB}
      - {name: fft, type: fft, size: 1024, window: hann, average: 4, output: power_db}
      - {name: record, type: record, directory: )" +
                               dir.str() + R"(, overwrite: true}
      - {name: sink, type: "null"}
)";
  const auto run = run_sluice({"run", config, "-q"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const recorder::Capture capture = recorder::open_capture(dir.str("spectra.sigmf-collection"));
  const recorder::CaptureSpectrum spectrum = recorder::capture_spectrum(capture.lanes.at(0));
  EXPECT_TRUE(spectrum.from_spectra);
  EXPECT_EQ(spectrum.bins, 1024U);
  EXPECT_EQ(spectrum.frames, (64U << 20) / 4 / (1024 * 4));  // every recorded row: 4096 rows fit 300 × 16
  EXPECT_NEAR(spectrum.frequency_of(spectrum.peak_bin()), 10e6, 250e6 / 1024);
  EXPECT_NEAR(spectrum.average_db[spectrum.peak_bin()], 20 * std::log10(0.5), 1.5);
  const auto plotted =
      run_sluice({"capture", "plot", dir.str("spectra.sigmf-collection"), "-o", dir.str("spectra.svg")});
  EXPECT_EQ(plotted.exit_code, 0) << plotted.err;
  EXPECT_EQ(plotted.out, "wrote " + dir.str("spectra.svg") + "\n" + plot_line(spectrum, 4096, 4096));

  // 100 spectrogram rows of at most 16 recorded rows each: 1600 of the 4096 on disk are averaged.
  const std::uint64_t on_disk = fs::file_size(capture.lanes.at(0).segments.at(0).data_path) / (1024 * 4);
  ASSERT_EQ(on_disk, 4096U);
  const auto fewer =
      run_sluice({"capture", "plot", dir.str("spectra.sigmf-collection"), "--rows", "100", "-o", dir.str("fewer.svg")});
  EXPECT_EQ(fewer.exit_code, 0) << fewer.err;
  EXPECT_EQ(fewer.out, "wrote " + dir.str("fewer.svg") + "\n" +
                           plot_line(recorder::capture_spectrum(capture.lanes.at(0), 1024, 100), on_disk, 100 * 16));
}

// Spectra of a source with holes: rows computed over a hole are in the file, marked
// (sluice:in_data). The reader reads those marks as the meta writes them, and an export keeps
// the part of each mark inside its range, with the slice's own sluice:marked_values.
TEST(CaptureTools, MarkedRowsAreReadAndExportedWithTheSlicesOwnTotals) {
  test::TempDir dir;
  const std::string yaml =
      "pipeline: {name: marked, chunk: 64KiB, chunks: 8}\n"
      "template:\n"
      "  - {name: source, type: gappy, count: 12, sample_rate: 1MHz}\n"
      "  - {name: fft, type: fft, size: 256, window: hann, average: 1, output: power_db}\n"
      "  - {name: rec, type: record, directory: " +
      dir.str() +
      "}\n"
      "lanes:\n  - name: port0\n";
  ASSERT_EQ(test::run_pipeline(yaml, test::test_registry()), std::vector<std::string>{});
  const recorder::Capture capture = recorder::open_capture(dir.str("marked.sigmf-collection"));
  const recorder::CaptureLane& lane = capture.lanes.at(0);
  ASSERT_EQ(lane.recordings.size(), 1U);

  // What the meta on disk marks, read as JSON: [stream index, end) of each in_data annotation.
  using Runs = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  Runs written;
  const nlohmann::json source_meta = read_meta(lane.recordings.front());
  for (const auto& annotation : source_meta["annotations"]) {
    if (!annotation.value("sluice:in_data", false)) continue;
    const auto first = annotation["sluice:global_index"].get<std::uint64_t>();
    written.emplace_back(first, first + annotation["sluice:marked_values"].get<std::uint64_t>());
  }
  ASSERT_FALSE(written.empty()) << "rows over the source's holes are marked";
  Runs read;
  std::uint64_t marked = 0;
  for (const auto& gap : lane.gaps) {
    if (gap.in_data) read.emplace_back(gap.global_index, gap.global_index + gap.length);
  }
  for (const auto& [first, end] : written) marked += end - first;
  EXPECT_EQ(read, written);
  EXPECT_EQ(lane.marked_values, marked);
  EXPECT_NE(recorder::describe_capture(capture).find("marked (" + std::to_string(marked) + " values computed"),
            std::string::npos)
      << recorder::describe_capture(capture);

  // From one row into the first mark (or its start) to the lane's end.
  const std::uint64_t origin = lane.segments.front().global_index;
  const std::uint64_t from_row =
      (written[0].first - origin) / 256 + ((written[0].second - written[0].first) > 256 ? 1 : 0);
  const std::uint64_t first = origin + from_row * 256;
  const std::string base = dir.str("slice");
  // A row is 256 µs (1 Msps, 256 values a row): whole microseconds are exact.
  const auto exported = run_sluice({"capture", "export", dir.str("marked.sigmf-collection"), "--from",
                                    std::to_string(from_row * 256) + "us", "--to", "10s", "-o", base});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const recorder::CaptureLane part = recorder::open_capture(base).lanes.at(0);
  const std::uint64_t end = part.segments.back().global_index + part.segments.back().sample_count;
  Runs expected;
  std::uint64_t expected_marked = 0;
  for (const auto& [mark_first, mark_end] : written) {
    if (mark_end <= first) continue;
    expected.emplace_back(std::max(mark_first, first), mark_end);
    expected_marked += mark_end - std::max(mark_first, first);
  }
  Runs sliced;
  for (const auto& gap : part.gaps) {
    if (gap.in_data) sliced.emplace_back(gap.global_index, gap.global_index + gap.length);
  }
  EXPECT_EQ(sliced, expected);
  EXPECT_EQ(part.marked_values, expected_marked);
  EXPECT_EQ(read_meta(base)["global"]["sluice:marked_values"], expected_marked);
  std::ifstream data(base + ".sigmf-data", std::ios::binary);
  const std::vector<char> actual((std::istreambuf_iterator<char>(data)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(actual == source_bytes(lane, first, end)) << "exported rows differ from the source's";
  std::uint64_t range_end = end;  // the lane's end: its last sample or the end of a hole after it
  for (const auto& gap : lane.gaps) range_end = std::max(range_end, gap.global_index + gap.length);
  EXPECT_EQ(exported.out, "wrote " + base + ".sigmf-data and " + base + ".sigmf-meta: lane port0, stream samples " +
                              std::to_string(first) + " to " + std::to_string(range_end - 1) + ": " +
                              std::to_string(actual.size() / 4) + " samples in " +
                              std::to_string(part.segments.size()) + " segment(s), " +
                              std::to_string(part.gaps.size()) + " gap(s) (" + std::to_string(part.lost_samples) +
                              " samples lost, " + std::to_string(expected_marked) + " values marked)\n");
  expect_valid_sigmf({base + ".sigmf-meta"});
}

// The README's demo, configs/dual_port.yaml as shipped (its ports moved to free ones, its
// captures into a temporary directory, 2 s of emulator): sluice starts the emulator itself, both
// lanes record raw samples and spectra losslessly, both captures open, the picture of the spectra
// peaks at the emulator's tone, and the raw tap switches off with one --set.
class DualPortDemo : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(fs::path(kSourceDir) / "configs/dual_port.yaml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text = std::regex_replace(text, std::regex("50100"), std::to_string(testing::free_udp_port()));
    text = std::regex_replace(text, std::regex("50101"), std::to_string(testing::free_udp_port()));
    config_ = dir_.str("dual_port.yaml");
    std::ofstream(config_) << text;
  }
  testing::ProcessResult run(const std::string& capture_dir, std::vector<std::string> extra) {
    std::vector<std::string> argv{kSluice,    "run",
                                  config_,    "-q",
                                  "--set",    "emulator.duration=2s",
                                  "--set",    "template.record.directory=" + capture_dir,
                                  "--set",    "template.raw.directory=" + capture_dir,
                                  "--report", capture_dir + "/report.json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    fs::create_directories(capture_dir);
    return testing::run_process(argv, std::chrono::seconds(120));
  }
  test::TempDir dir_;
  std::string config_;
};

TEST_F(DualPortDemo, RecordsBothLanesLosslesslyAndItsPicturePeaksAtTheTone) {
  const std::string captures = dir_.str("captures");
  const auto result = run(captures, {});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE((result.out + result.err).find("emulator: sent"), std::string::npos)
      << "the emulator's summary joins sluice's: " << result.out;
  std::ifstream report_file(captures + "/report.json");
  const auto report = nlohmann::json::parse(report_file);
  ASSERT_EQ(report["lanes"].size(), 2U);
  for (const auto& lane : report["lanes"]) {
    const auto& source = lane["stages"][0];
    EXPECT_GT(source["out"]["samples"].get<std::uint64_t>(), 0U) << lane["name"];
    EXPECT_EQ(source["counters"].value("lost_samples", 1U), 0U) << lane["name"];
    EXPECT_EQ(lane["stages"][1]["name"], "raw");
  }

  const recorder::Capture spectra = recorder::open_capture(captures + "/dual_port.sigmf-collection");
  ASSERT_EQ(spectra.lanes.size(), 2U);
  for (const auto& lane : spectra.lanes) {
    const recorder::CaptureSpectrum spectrum = recorder::capture_spectrum(lane);
    EXPECT_TRUE(spectrum.from_spectra);
    EXPECT_NEAR(spectrum.frequency_of(spectrum.peak_bin()), 5e6, 12.5e6 / 1024);
  }
  const recorder::Capture raw = recorder::open_capture(captures + "/dual_port-raw.sigmf-collection");
  EXPECT_EQ(raw.lanes.size(), 2U);

  const auto plotted =
      run_sluice({"capture", "plot", captures + "/dual_port.sigmf-collection", "-o", captures + "/spectra.svg"});
  ASSERT_EQ(plotted.exit_code, 0) << plotted.err;
  std::ifstream svg_file(captures + "/spectra.svg");
  const std::string svg((std::istreambuf_iterator<char>(svg_file)), std::istreambuf_iterator<char>());
  std::smatch match;
  ASSERT_TRUE(std::regex_search(svg, match, std::regex("data-peak-hz=\"([0-9.]+)\""))) << svg.substr(0, 2000);
  EXPECT_NEAR(std::stod(match[1]), 5e6, 12.5e6 / 1024);

  // The raw tap off: spectra only, no raw capture at all.
  const std::string spectra_only = dir_.str("spectra-only");
  const auto without_raw = run(spectra_only, {"--set", "template.raw.enabled=false"});
  ASSERT_EQ(without_raw.exit_code, 0) << without_raw.err;
  EXPECT_TRUE(fs::exists(spectra_only + "/dual_port.sigmf-collection"));
  EXPECT_FALSE(fs::exists(spectra_only + "/dual_port-raw.sigmf-collection"));
}

// `enabled: false` is a switch for taps only: a lane without its link would carry other data.
TEST(DualPortDemoConfig, OnlyATapCanBeSwitchedOff) {
  const auto result = testing::run_process(
      {kSluice, "validate", kSourceDir + "/configs/dual_port.yaml", "--set", "template.link.enabled=false"});
  EXPECT_EQ(result.exit_code, 2) << result.err;  // the usage / configuration exit code
  EXPECT_NE(result.err.find("only a tap"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace sluice
