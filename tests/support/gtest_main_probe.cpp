// Tests whose outcome is known, for gtest_main_test: one passes, one skips, one sits in a fixture
// whose SetUpTestSuite fails, and one fails after printing a line that reads like a skip.
#include <gtest/gtest.h>

#include <iostream>

TEST(Probe, Passes) { EXPECT_EQ(1 + 1, 2); }

TEST(Probe, Skips) { GTEST_SKIP() << "skipped on purpose"; }

class BrokenSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { FAIL() << "the suite's set-up failed on purpose"; }
};

TEST_F(BrokenSuite, NeverRuns) { EXPECT_TRUE(true); }

// As a test that shows a child GoogleTest program's output when it fails.
TEST(Echo, FailsAfterPrintingASkipLine) {
  std::cout << "[  SKIPPED ] Child.Test (0 ms)\n";
  FAIL() << "failed on purpose";
}
