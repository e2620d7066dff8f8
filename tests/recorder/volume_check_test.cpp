// fresh_volume_warning on real loop devices: over a sparse image it warns, naming the image;
// once the image is fully allocated it does not; a plain directory never warns.
#include "recorder/volume_check.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/stages/record/record_test_support.hpp"

namespace sluice {
namespace {

TEST(VolumeCheck, WarnsAboutALoopVolumeOverASparseImageUntilItIsFilled) {
  test::TempDir dir;
  test::LoopVolume volume(dir, "ext4", "64M", "fresh");  // truncate: a sparse image
  SLUICE_REQUIRE_MOUNTED(volume);
  const std::string image = dir.str("fresh.img");
  const std::string warning = recorder::fresh_volume_warning(volume.path() + "/cap");
  EXPECT_NE(warning.find(image), std::string::npos) << warning;
  EXPECT_NE(warning.find("allocated"), std::string::npos) << warning;
  ASSERT_EQ(std::system(("fallocate -l 64M '" + image + "'").c_str()), 0);
  EXPECT_EQ(recorder::fresh_volume_warning(volume.path() + "/cap"), "");
}

TEST(VolumeCheck, APlainDirectoryNeedsNoWarning) {
  test::TempDir dir;
  EXPECT_EQ(recorder::fresh_volume_warning(dir.str("cap")), "");
}

}  // namespace
}  // namespace sluice
