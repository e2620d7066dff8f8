// The main of every GoogleTest binary CTest runs. CTest runs one test per process; this main
// exits 77, CTest's SKIP_RETURN_CODE, only when the test skipped and nothing failed. A failure
// outside any test (a fixture's SetUpTestSuite) makes GoogleTest skip the tests it guards and
// exit 1, which stays a failure: no skip message in the output can turn it into a skip.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (result == 0 && unit.successful_test_count() == 0 && unit.skipped_test_count() > 0) return 77;
  return result;
}
