// The main of every GoogleTest binary: exit 77, CTest's SKIP_RETURN_CODE and its only skip
// (cmake/SluiceTests.cmake), when the tests ran skipped and nothing failed. A failed
// SetUpTestSuite, after which GoogleTest prints its tests as skipped, exits 1: a failure.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (result == 0 && unit.successful_test_count() == 0 && unit.skipped_test_count() > 0) return 77;
  return result;
}
