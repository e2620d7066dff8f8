// Which cores share a cache: the time a cache line takes to go from one core to another and
// back, for every pair of cores. Two threads, one pinned to each core, take turns writing one
// line, so each trip is two transfers of that line between the cores' caches. Two hyperthreads of
// one physical core answer in tens of nanoseconds, cores on one mesh or CCX in about a hundred,
// and across a chiplet or socket link it takes longer still: differences a VM's flat topology
// (one socket, one thread a core) hides. On a VM whose vCPUs move between the host's cores, a
// vCPU that answers fast to two others that do not to each other has moved while it was measured.
// The udp stage's receive thread and its placing thread pass every byte between them this way
// (run.sh lanes-topology).
//   core_pairs [--cores 2-17] [--trips 5000] [--json pairs.json]
// Prints, per core, its fastest, median and slowest trip to the others, and the groups of cores
// whose trips to each other are short; --json writes the whole matrix too.
#include <sched.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/gpu_placement.hpp"
#include "pipeline/thread_cores.hpp"

namespace {

using sluice::monotonic_ns;

struct alignas(64) Line {
  std::atomic<std::uint64_t> value{0};
};

// The fastest of `rounds` runs of `trips` round trips between cores `a` and `b`, in ns a trip.
double round_trip_ns(int a, int b, int trips, int rounds) {
  Line line;
  const auto total = static_cast<std::uint64_t>(trips) * static_cast<std::uint64_t>(rounds + 1);
  std::thread responder([&] {
    sluice::pin_thread(pthread_self(), {b}, "responder");
    for (std::uint64_t i = 1; i <= total; ++i) {
      while (line.value.load(std::memory_order_acquire) != 2 * i - 1) sluice::cpu_relax();
      line.value.store(2 * i, std::memory_order_release);
    }
  });
  double best = std::numeric_limits<double>::infinity();
  std::thread asker([&] {
    sluice::pin_thread(pthread_self(), {a}, "asker");
    std::uint64_t i = 0;
    for (int round = 0; round <= rounds; ++round) {  // round 0 warms up both threads and the line
      const std::uint64_t begin = monotonic_ns();
      for (int trip = 0; trip < trips; ++trip) {
        ++i;
        line.value.store(2 * i - 1, std::memory_order_release);
        while (line.value.load(std::memory_order_acquire) != 2 * i) sluice::cpu_relax();
      }
      if (round > 0) best = std::min(best, static_cast<double>(monotonic_ns() - begin) / trips);
    }
  });
  asker.join();
  responder.join();
  return best;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Groups of cores joined by trips shorter than the geometric mean of the fastest and slowest
// trip, when the slowest takes 1.5 times the fastest or more; else one group.
std::vector<std::vector<int>> groups_of(const std::vector<int>& cores, const std::vector<std::vector<double>>& trip) {
  const std::size_t n = cores.size();
  double fastest = std::numeric_limits<double>::infinity();
  double slowest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      fastest = std::min(fastest, trip[i][j]);
      slowest = std::max(slowest, trip[i][j]);
    }
  }
  const double cut = slowest >= 1.5 * fastest ? std::sqrt(fastest * slowest) : std::numeric_limits<double>::infinity();
  std::vector<std::size_t> root(n);
  std::iota(root.begin(), root.end(), 0);
  const auto find = [&](std::size_t i) {
    while (root[i] != i) i = root[i] = root[root[i]];
    return i;
  };
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j)
      if (trip[i][j] < cut) root[find(j)] = find(i);
  std::vector<std::vector<int>> groups;
  std::vector<std::size_t> group_of_root(n, n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t r = find(i);
    if (group_of_root[r] == n) {
      group_of_root[r] = groups.size();
      groups.emplace_back();
    }
    groups[group_of_root[r]].push_back(cores[i]);
  }
  return groups;
}

// The cores `text` names (every core this process may use when empty), or an error to print.
std::vector<int> cores_to_measure(const std::string& text, std::string& error) {
  const std::vector<int> allowed = sluice::allowed_cores(getpid());
  if (text.empty()) return allowed;
  const auto parsed = sluice::parse_core_list(text);
  if (!parsed) {
    error = "--cores " + text + " is not a core list (e.g. 2-17,20)";
    return {};
  }
  for (const int core : *parsed) {
    if (std::find(allowed.begin(), allowed.end(), core) == allowed.end()) {
      error = "core " + std::to_string(core) + " is not one this process may use (" +
              sluice::format_core_list(allowed) + ")";
      return {};
    }
  }
  return *parsed;
}

void print_table(const std::vector<int>& cores, const std::vector<std::vector<double>>& trip,
                 const std::vector<std::vector<int>>& groups) {
  std::printf("%6s %10s %10s %10s   ns a round trip to the other cores\n", "core", "fastest", "median", "slowest");
  for (std::size_t i = 0; i < cores.size(); ++i) {
    std::vector<double> others;
    for (std::size_t j = 0; j < cores.size(); ++j)
      if (j != i) others.push_back(trip[i][j]);
    std::printf("%6d %10.0f %10.0f %10.0f\n", cores[i], *std::min_element(others.begin(), others.end()), median(others),
                *std::max_element(others.begin(), others.end()));
  }
  std::printf("%zu group%s of cores with short trips between them:", groups.size(), groups.size() == 1 ? "" : "s");
  for (const auto& group : groups) std::printf(" %s", sluice::format_core_list(group).c_str());
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"core_pairs: a cache line's round trip between every pair of cores"};
  std::string core_text;
  int trips = 5000;
  int rounds = 3;
  std::string json_path;
  app.add_option("--cores", core_text, "cores to measure, e.g. 2-17,20 (default: every core this process may use)");
  app.add_option("--trips", trips, "round trips a run")->check(CLI::Range(10, 10'000'000));
  app.add_option("--rounds", rounds, "runs a pair; the fastest counts")->check(CLI::Range(1, 100));
  app.add_option("--json", json_path, "write the matrix and the groups here");
  CLI11_PARSE(app, argc, argv);

  std::string error;
  const std::vector<int> cores = cores_to_measure(core_text, error);
  if (!error.empty()) {
    std::fprintf(stderr, "core_pairs: %s\n", error.c_str());
    return 2;
  }
  if (cores.size() < 2) {
    std::fprintf(stderr, "core_pairs: needs two cores at least, has %zu\n", cores.size());
    return 2;
  }

  const std::size_t n = cores.size();
  std::vector<std::vector<double>> trip(n, std::vector<double>(n, 0.0));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) trip[i][j] = trip[j][i] = round_trip_ns(cores[i], cores[j], trips, rounds);
    std::fprintf(stderr, "\rcore_pairs: %zu of %zu cores", i + 1, n);
  }
  std::fprintf(stderr, "\n");
  const auto groups = groups_of(cores, trip);
  print_table(cores, trip, groups);

  if (!json_path.empty()) {
    nlohmann::json report{{"cores", cores}, {"trips", trips}, {"rounds", rounds}, {"round_trip_ns", trip}};
    report["groups"] = nlohmann::json::array();
    for (const auto& group : groups) report["groups"].push_back(group);
    std::ofstream out(json_path);
    out << report.dump(1) << '\n';
    if (!out) {
      std::fprintf(stderr, "core_pairs: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
