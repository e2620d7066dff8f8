// What `sluice capture repair|info|plot|export` do, as functions the CLI and the tests share.
#pragma once

#include <string>
#include <vector>

#include "recorder/capture_reader.hpp"

namespace sluice::recorder {

struct RepairReport {
  std::vector<std::string> repaired;  // bases rebuilt from their journal
  std::uint64_t bytes_kept = 0;
  std::size_t records_discarded = 0;        // torn or out-of-order journal records at the end
  std::vector<std::string> lines;           // human-readable, one per recording
  std::vector<std::string> listed;          // bases on disk that the collection did not list, now in it
  std::vector<std::string> removed;         // empty data files without journal or meta (cut as they were made)
  std::vector<std::string> replaced;        // set-aside directories of a cut-off overwrite (see find_replaced)
  std::vector<std::string> replaced_lines;  // what was found or restored there
};

// Rebuilds every recording of the capture at `path` that still has a journal (cut by
// kill -9 or a crash): data truncated to the last chunk that reached the disk, final meta,
// then the collection, which then lists every recording of the capture on disk (also those
// the recorder made but had not listed yet: find_unlisted_recordings), even when the
// collection file itself was never written. A recording of a collection whose journal holds no chunk (the next
// file set a rotation made ahead) is removed, unless it is all its lane has: the collection
// then lists exactly the recordings that hold data. Reports the files an overwrite cut off
// by a kill had set aside; `restore_replaced` swaps them back in (the cut-off recording goes
// into the set-aside directory in their place: renames only, nothing is removed). Throws
// std::runtime_error when nothing there is a capture.
RepairReport repair_capture(const std::string& path, bool restore_replaced = false);

// Format, duration, rate, gaps and size of every lane, as text.
std::string describe_capture(const Capture& capture);

// The numbers behind `sluice capture plot` for one lane: an averaged power spectrum and a
// spectrogram. Raw complex (or real) samples are transformed here (FFTW, Hann window,
// normalised like the fft stage so a full-scale tone reads 0 dB); a capture of spectra is
// drawn as recorded, rows merged in power where there are more than `max_rows`.
struct CaptureSpectrum {
  std::string lane;
  bool from_spectra = false;                // the capture holds fft rows
  std::size_t bins = 0;                     // per row, fftshifted: DC at bins/2
  double first_hz = 0;                      // frequency of bin 0 (centre − rate/2)
  double bin_hz = 0;                        // 0 when the capture has no sample rate
  std::vector<double> average_db;           // mean power over every frame (or row) used, per bin
  std::vector<std::vector<float>> rows_db;  // spectrogram, oldest first
  std::vector<double> row_seconds;          // start of each spectrogram row, from the lane's first sample
  double duration_seconds = 0;              // first to last sample, holes included
  std::uint64_t available = 0;              // FFT frames (or recorded rows) the lane holds, no frame across a hole
  std::uint64_t frames = 0;                 // of those, the ones that went into the picture
  std::size_t gaps = 0;
  [[nodiscard]] std::size_t peak_bin() const;  // of average_db
  [[nodiscard]] double frequency_of(std::size_t bin) const { return first_hz + static_cast<double>(bin) * bin_hz; }
};

// Reads the lane (at most `max_rows` × 16 frames, spread evenly over the capture, so a
// huge capture still plots in seconds). Throws std::runtime_error for a format it cannot draw.
CaptureSpectrum capture_spectrum(const CaptureLane& lane, std::size_t fft_size = 1024, std::size_t max_rows = 300);

// One SVG picture of every lane given: averaged spectrum above, spectrogram below (an
// embedded PNG, with time and frequency axes and a dB colour bar).
std::string capture_plot_svg(const std::string& title, const std::vector<CaptureSpectrum>& lanes);
// The spectrogram alone as PNG bytes (one pixel per bin and row; newest row at the bottom).
std::string spectrogram_png(const CaptureSpectrum& lane);

// What `sluice capture export` wrote.
struct ExportReport {
  std::string base;       // output path without suffix
  std::string data_path;  // the files written
  std::string meta_path;
  std::uint64_t first_index = 0;  // stream index of the range's first sample (inclusive)
  std::uint64_t end_index = 0;    // stream index after its last one (exclusive; at most the lane's end)
  std::uint64_t samples = 0;      // written (holes are not samples)
  std::size_t segments = 0;
  std::size_t gaps = 0;             // annotated, holes cut at the range's ends included
  std::uint64_t lost_samples = 0;   // of the range, absent from the data
  std::uint64_t marked_values = 0;  // of the range, present but computed from input with lost samples
};

// Copies the samples of `lane` whose time since the lane's first sample lies in
// [from_seconds, to_seconds) into a new SigMF recording at `output_base` (.sigmf-data and
// .sigmf-meta): same datatype, rate and frequency, one capture segment per recorded run,
// stream indices and datetimes kept. Every gap of the source that overlaps the range is
// annotated for its part inside it (a range that starts in a hole begins with that gap), and
// the global totals (sluice:lost_samples, sluice:marked_values, sluice:first_sample) are the
// slice's. For spectra the range is whole rows. Throws std::runtime_error for a range with no
// recorded sample or an existing output.
ExportReport export_capture(const CaptureLane& lane, double from_seconds, double to_seconds,
                            const std::string& output_base);

}  // namespace sluice::recorder
