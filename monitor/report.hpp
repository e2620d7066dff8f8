// What people see: the live progress line per lane, the end-of-run summary table and the
// JSON report (the same numbers, for scripts and CI).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/metrics.hpp"
#include "pipeline/runtime.hpp"

namespace sluice {

// One line per lane: source rate, samples, drops, queue fill.
std::vector<std::string> progress_lines(const Pipeline& pipeline);
// The per-stage table printed at the end of a run.
std::string summary_table(const Pipeline& pipeline);
nlohmann::json report_json(const Pipeline& pipeline, int exit_code);
// An SVG chart of each lane's rate over time (from Pipeline::timeline()).
std::string rate_plot_svg(const Pipeline& pipeline);

// What the dashboard polls: every stage's counters, average rates and queue fill now. Safe from any thread.
nlohmann::json live_status_json(const Pipeline& pipeline);
// The latest row of every fft stage (in dB, at most `max_points` points: bins are merged by
// their maximum so a narrow peak survives), with its frequency axis. Safe from any thread.
nlohmann::json live_spectra_json(const Pipeline& pipeline, std::size_t max_points = 1024);

// A stage's rates over the time data flowed through it (flow_seconds), and its active time.
struct StageRates {
  double seconds = 0;       // started to stopped (or now)
  double flow_seconds = 0;  // first chunk to last chunk
  double bytes_per_second = 0;
  double samples_per_second = 0;
  double busy_fraction = 0;  // busy time over `seconds`, the stage's whole life
  // Busy time over the span data flowed, one chunk's time wider (the first chunk's work comes
  // before first_ns): near 1.0 for a stage that was saturated while it had data, however long
  // it waited for its sender. busy_fraction where there was no span (fewer than two chunks).
  double busy_flowing_fraction = 0;
  std::uint64_t bytes = 0;
  std::uint64_t chunks = 0;
  std::uint64_t samples = 0;
};
StageRates stage_rates(const StageMetrics& metrics);

// A udp stage's receive threads' work a datagram: their CPU time less their spin
// (receive_thread_cpu_ns, receive_thread_spin_ns) over the datagrams the stage took; nullopt for
// a stage without receive threads or without datagrams.
std::optional<double> receive_ns_per_datagram(const StageMetrics& metrics);
// A receive core this many times slower a datagram than the median of the run's is named.
inline constexpr double kSlowerReceiveCore = 1.25;
// Stages whose receive threads worked less than this in all are left out of the comparison.
inline constexpr double kLeastReceiveWorkNs = 100e6;
// One entry per stage, in order: a note for each whose receive work a datagram is
// kSlowerReceiveCore or more times the median of the stages that have one and worked
// kLeastReceiveWorkNs or more (three such stages or more, so that a median says what the others
// did), else empty. The lanes do the same work a datagram, so a lane far above the others has a
// slower or shared core.
// The receive threads' interrupts (CoreWait::interrupts()) on their cores join the note where the
// stages have pinned receive threads.
std::vector<std::string> slower_receive_core_notes(const std::vector<const StageMetrics*>& stages);
// The note's words on interrupts: a receive core's count against the compared cores' median, and
// the source of most of them ("" where none).
std::string receive_interrupts_text(std::uint64_t interrupts, double median, const std::string& top);

// Where progress goes: redrawn in place on a terminal, periodic log lines off one, or nowhere (-q).
enum class ProgressOutput { none, terminal, log };

// Keeps progress output on a terminal in place (redraws) and off one as periodic log lines.
class ProgressPrinter {
 public:
  ProgressPrinter(const Pipeline& pipeline, ProgressOutput output, double log_interval_seconds);
  void tick();
  void finish();  // leaves the last lines on screen

 private:
  const Pipeline* pipeline_;
  ProgressOutput output_;
  double log_interval_;
  double last_print_ = -1;
  std::size_t lines_on_screen_ = 0;
};

}  // namespace sluice
