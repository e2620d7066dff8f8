// tests/support/gtest_main.cpp decides what CTest records: exit 77 (skipped) only when the
// tests ran skipped and nothing failed. A failed SetUpTestSuite, after which GoogleTest skips
// the suite's tests and prints their skip, stays a failure.
#include <gtest/gtest.h>

#include "tests/support/process.hpp"

namespace sluice {
namespace {

int exit_of(const std::string& filter) {
  return testing::run_process({GTEST_MAIN_PROBE, "--gtest_filter=" + filter}).exit_code;
}

TEST(GtestMain, APassingTestExitsZero) { EXPECT_EQ(exit_of("Probe.Passes"), 0); }

TEST(GtestMain, ASkippedTestExits77) { EXPECT_EQ(exit_of("Probe.Skips"), 77); }

TEST(GtestMain, APassAndASkipTogetherExitZero) { EXPECT_EQ(exit_of("Probe.*"), 0); }

TEST(GtestMain, AFailedSuiteSetUpIsAFailureNotASkip) {
  const testing::ProcessResult result = testing::run_process({GTEST_MAIN_PROBE, "--gtest_filter=BrokenSuite.*"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.out.find("[  SKIPPED ] BrokenSuite.NeverRuns"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace sluice
