// bench/pipeline/core_pairs, which run.sh lanes-topology uses to find the cores that share a cache:
// real threads pinned to real cores passing a real cache line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "pipeline/thread_cores.hpp"
#include "tests/support/process.hpp"

namespace sluice {
namespace {

using testing::path_from_env;
using testing::run_process;

const std::string kCorePairs = path_from_env("SLUICE_CORE_PAIRS", SLUICE_CORE_PAIRS);

TEST(CorePairs, TimesATripBetweenEveryPairAndGroupsEveryCoreOnce) {
  const auto cores = allowed_cores(getpid());
  ASSERT_GE(cores.size(), 2U) << "this test needs two cores";
  const std::string json = ::testing::TempDir() + "core_pairs_test.json";
  const auto result = run_process({kCorePairs, "--trips", "2000", "--json", json});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream file(json);
  const auto report = nlohmann::json::parse(file);
  ASSERT_EQ(report["cores"].get<std::vector<int>>(), cores);
  const auto trip = report["round_trip_ns"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(trip.size(), cores.size());
  for (std::size_t i = 0; i < cores.size(); ++i) {
    ASSERT_EQ(trip[i].size(), cores.size());
    EXPECT_EQ(trip[i][i], 0.0);
    for (std::size_t j = 0; j < cores.size(); ++j) {
      if (i == j) continue;
      EXPECT_EQ(trip[i][j], trip[j][i]) << "cores " << cores[i] << " and " << cores[j];
      // A trip is two transfers of a line between caches: more than a nanosecond, and far less
      // than a millisecond unless a thread lost its core, which the fastest of three runs rules out.
      EXPECT_GT(trip[i][j], 1.0) << "cores " << cores[i] << " and " << cores[j];
      EXPECT_LT(trip[i][j], 1e6) << "cores " << cores[i] << " and " << cores[j];
    }
  }
  std::multiset<int> grouped;
  for (const auto& group : report["groups"]) {
    EXPECT_FALSE(group.empty());
    for (const int core : group) grouped.insert(core);
  }
  EXPECT_EQ(grouped, std::multiset<int>(cores.begin(), cores.end())) << "each core in one group exactly";
  EXPECT_NE(result.out.find("group"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("median"), std::string::npos) << result.out;
}

TEST(CorePairs, CoresItCannotMeasureAreAnErrorThatSaysWhy) {
  const auto cores = allowed_cores(getpid());
  const int missing = cores.back() + 1;
  for (const auto& [argument, says] :
       {std::pair{std::to_string(cores.front()) + "," + std::to_string(missing), "is not one this process may use"},
        std::pair{std::string("two"), "is not a core list"},
        std::pair{std::to_string(cores.front()), "needs two cores at least"}}) {
    const auto result = run_process({kCorePairs, "--cores", argument});
    EXPECT_EQ(result.exit_code, 2) << argument;
    EXPECT_NE(result.err.find(says), std::string::npos) << argument << ": " << result.err;
  }
}

}  // namespace
}  // namespace sluice
