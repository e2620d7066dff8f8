// What CTest records for a GoogleTest program: tests/support/gtest_main.cpp exits 77 (a skip)
// only when the tests ran skipped and nothing failed, and cmake/SluiceTests.cmake registers each
// test so that exit 77 is the only skip: a failure that prints a skip line stays a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "tests/support/process.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;

// The probe is built beside this test, and packed beside it for the GPU machine.
std::string probe() { return (fs::read_symlink("/proc/self/exe").parent_path() / "gtest_main_probe").string(); }

int exit_of(const std::string& filter) { return testing::run_process({probe(), "--gtest_filter=" + filter}).exit_code; }

TEST(GtestMain, APassingTestExitsZero) { EXPECT_EQ(exit_of("Probe.Passes"), 0); }

TEST(GtestMain, ASkippedTestExits77) { EXPECT_EQ(exit_of("Probe.Skips"), 77); }

TEST(GtestMain, APassAndASkipTogetherExitZero) { EXPECT_EQ(exit_of("Probe.*"), 0); }

TEST(GtestMain, AFailedSuiteSetUpIsAFailureNotASkip) {
  const testing::ProcessResult result = testing::run_process({probe(), "--gtest_filter=BrokenSuite.*"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.out.find("[  SKIPPED ] BrokenSuite.NeverRuns"), std::string::npos) << result.out;
}

// Registers the probe with cmake/SluiceTests.cmake in a CMake project of its own, runs CTest on
// it and returns each test's verdict from CTest's JUnit file: "run", "fail", or the skip's reason.
class CtestRegistration : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {SLUICE_CMAKE, SLUICE_CTEST, SLUICE_MAKE_PROGRAM}) {
      if (fs::exists(tool)) continue;
      if (std::getenv("CI") != nullptr) FAIL() << tool << " is missing";
      GTEST_SKIP() << tool << " is missing (a packed tree without CMake)";
    }
    std::string dir = (fs::temp_directory_path() / "sluice_ctest_registration_XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) fs::remove_all(dir_, ignored);
  }

  std::map<std::string, std::string> ctest_verdicts() {
    const std::string modules = testing::path_from_env("SLUICE_SOURCE_DIR", SLUICE_SOURCE_DIR) + "/cmake";
    std::ofstream(dir_ / "CMakeLists.txt")
        << "cmake_minimum_required(VERSION 3.25)\n"
        << "project(registration_probe NONE)\n"
        << "list(APPEND CMAKE_MODULE_PATH [==[" << modules << "]==])\n"
        << "include(SluiceTests)\n"
        << "enable_testing()\n"
        << "add_executable(gtest_main_probe IMPORTED)\n"
        << "set_target_properties(gtest_main_probe PROPERTIES IMPORTED_LOCATION [==[" << probe() << "]==])\n"
        << "sluice_register_gtests(gtest_main_probe LABEL unit TIMEOUT 60)\n";
    const fs::path build = dir_ / "build";
    const testing::ProcessResult configured =
        testing::run_process({SLUICE_CMAKE, "-S", dir_.string(), "-B", build.string(), "-G", SLUICE_CMAKE_GENERATOR,
                              std::string("-DCMAKE_MAKE_PROGRAM=") + SLUICE_MAKE_PROGRAM});
    EXPECT_EQ(configured.exit_code, 0) << configured.out << configured.err;
    const fs::path junit = dir_ / "junit.xml";
    const testing::ProcessResult tested =
        testing::run_process({SLUICE_CTEST, "--test-dir", build.string(), "--output-junit", junit.string()});
    ctest_output_ = tested.out + tested.err;
    std::stringstream xml;
    xml << std::ifstream(junit).rdbuf();
    const std::string text = xml.str();
    const std::regex testcase(R"re(<testcase name="([^"]+)"[^>]*status="(\w+)">\s*(?:<skipped message="([^"]*)")?)re");
    std::map<std::string, std::string> verdicts;
    for (std::sregex_iterator it(text.begin(), text.end(), testcase), end; it != end; ++it) {
      verdicts[(*it)[1]] = (*it)[2] == "notrun" ? (*it)[3].str() : (*it)[2].str();
    }
    return verdicts;
  }

  fs::path dir_;
  std::string ctest_output_;
};

TEST_F(CtestRegistration, APassingTestPasses) { EXPECT_EQ(ctest_verdicts()["Probe.Passes"], "run") << ctest_output_; }

TEST_F(CtestRegistration, ASkipIsExit77AndNothingElse) {
  EXPECT_EQ(ctest_verdicts()["Probe.Skips"], "SKIP_RETURN_CODE=77") << ctest_output_;
}

TEST_F(CtestRegistration, AFailedSuiteSetUpIsFailedNotSkipped) {
  EXPECT_EQ(ctest_verdicts()["BrokenSuite.NeverRuns"], "fail") << ctest_output_;
}

TEST_F(CtestRegistration, AFailureWhoseOutputShowsASkipLineIsFailed) {
  EXPECT_EQ(ctest_verdicts()["Echo.FailsAfterPrintingASkipLine"], "fail") << ctest_output_;
}

}  // namespace
}  // namespace sluice
