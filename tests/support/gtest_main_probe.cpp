// Tests whose outcome is known, for gtest_main_test: one passes, one skips, and one sits in a
// fixture whose SetUpTestSuite fails. Not a CTest test itself.
#include <gtest/gtest.h>

TEST(Probe, Passes) { EXPECT_EQ(1 + 1, 2); }

TEST(Probe, Skips) { GTEST_SKIP() << "skipped on purpose"; }

class BrokenSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { FAIL() << "the suite's set-up failed on purpose"; }
};

TEST_F(BrokenSuite, NeverRuns) { EXPECT_TRUE(true); }
