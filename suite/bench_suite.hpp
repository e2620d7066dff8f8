// The measurements behind `sluice bench`: each stage alone, a whole lane, then two lanes, each
// next to a bare loop of the same work measured in the same run on the same machine. Stages run
// through the normal runtime from small embedded YAML, so the figures are what `sluice run` gets.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sluice::bench {

struct BenchOptions {
  double seconds = 60;  // total time, spread over the measurements
  // Where the disk rows write (empty: a new temp directory). The record and replay rows use the
  // first; of the two lanes, lane i records to directories i, i + 2, i + 4, ... (one directory:
  // both lanes share it).
  std::vector<std::string> directories;
  std::string emulator_program;                      // sluice-emulator; empty: locate_emulator_program()
  std::function<void(const std::string&)> progress;  // one line per step (stderr in the CLI)
};

// What one measurement saw over its window.
struct Rates {
  double bytes_per_second = 0;
  double samples_per_second = 0;
  double packets_per_second = 0;  // 0 where the stage has no packets
  double cpu_seconds_per_gb = 0;  // process CPU time (all threads) per GB moved
  double machine_busy = 0;  // pipeline rows: the whole machine's CPUs busy over the window (0–1), emulator included
  // Pipeline rows: the busiest single thread over the window (0–1), a stage's (its time in
  // process()) or one of the emulator's (its CPU time), and which ("port0's fft stage").
  double busiest_busy = 0;
  std::string busiest;
};

struct BenchRow {
  std::string stage;    // "udp ← emulator", ...
  std::string ceiling;  // "bare recvmmsg loop", ...
  Rates measured;
  Rates bound;
  double ratio = 0;  // measured.bytes_per_second / bound.bytes_per_second
  std::string note;  // fallbacks, the backend in use
};

struct BenchResult {
  std::vector<BenchRow> rows;
  double two_lane_scaling = 0;                             // two lanes' aggregate / one lane
  std::string directory;                                   // the first work directory (record and replay rows)
  std::vector<std::string> directories;                    // the work directories, one per --dir
  std::vector<std::vector<std::string>> lane_directories;  // where each of the two lanes records
  std::vector<std::string> notes;
  double seconds = 0;  // wall time the whole run took
};

// Runs every measurement; throws std::runtime_error naming what failed.
BenchResult run_bench(const BenchOptions& options);
std::string bench_table(const BenchResult& result);
nlohmann::json bench_json(const BenchResult& result);

}  // namespace sluice::bench
