// The dashboard as a person sees it: `sluice run configs/fft_demo.yaml --http`, the page loaded twice
// in headless Chromium (Debian's chromium) with its scripts run, its gauges and spectrum checked
// against the demo's paced rate and 10 MHz tone.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>

#include "tests/support/process.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using testing::Process;
using testing::run_process;

const std::string kSluice = testing::path_from_env("SLUICE_BINARY", SLUICE_BINARY);
const std::string kSourceDir = testing::path_from_env("SLUICE_SOURCE_DIR", SLUICE_SOURCE_DIR);

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

std::optional<std::string> find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    for (const char* directory : {"/usr/bin/", "/usr/local/bin/", "/snap/bin/"}) {
      const std::string path = std::string(directory) + name;
      if (access(path.c_str(), X_OK) == 0) return path;
    }
  }
  return std::nullopt;
}

// The page after its scripts ran for `budget_ms` of virtual time (polls take real time:
// virtual time waits for each fetch).
std::string load_page(const std::string& chromium, const std::string& url, const fs::path& profile) {
  const auto result =
      run_process({chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                   "--user-data-dir=" + profile.string(), "--virtual-time-budget=3000", "--dump-dom", url},
                  std::chrono::seconds(120));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return result.out;
}

std::string attribute(const std::string& dom, const std::string& element_pattern, const std::string& name) {
  std::smatch match;
  const std::regex element(element_pattern);
  if (!std::regex_search(dom, match, element)) return "";
  const std::string tag = match.str(0);
  const std::regex value(name + "=\"([^\"]*)\"");
  return std::regex_search(tag, match, value) ? match.str(1) : "";
}

double number(const std::string& text) { return text.empty() ? -1 : std::stod(text); }

TEST(Dashboard, ShowsLiveRatesAndTheSpectrumInABrowser) {
  const std::optional<std::string> chromium = find_chromium();
  if (!chromium) {
    if (in_ci()) FAIL() << "chromium is not installed (scripts/setup.sh installs it)";
    GTEST_SKIP() << "chromium is not installed (apt install chromium)";
  }
  Process sluice({kSluice, "run", kSourceDir + "/configs/fft_demo.yaml", "--set", "pipeline.duration=0s", "--http",
                  "127.0.0.1:0", "-q"});
  ASSERT_TRUE(sluice.wait_for_stderr("dashboard at http://127.0.0.1:", std::chrono::seconds(60)));
  // The log line is complete once its second URL (…/metrics) is there.
  ASSERT_TRUE(sluice.wait_for_stderr("/metrics)", std::chrono::seconds(10)));
  std::smatch match;
  const std::string& log = sluice.stderr_so_far();
  ASSERT_TRUE(std::regex_search(log, match, std::regex(R"(dashboard at (http://127\.0\.0\.1:[0-9]+/))"))) << log;
  const std::string url = match.str(1);
  const fs::path profile = fs::temp_directory_path() / ("sluice_chromium_" + std::to_string(getpid()));

  const std::string first = load_page(*chromium, url, profile);
  const std::string second = load_page(*chromium, url, profile);
  sluice.send_signal(SIGINT);
  const auto result = sluice.wait(std::chrono::seconds(60));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  fs::remove_all(profile);

  for (const std::string* dom : {&first, &second}) {
    // The page polled and drew more than once while it was open.
    EXPECT_GE(number(attribute(*dom, "<body[^>]*>", "data-updates")), 2) << *dom;
    // One gauge per lane, reading the generator's paced 200 MB/s (never more than pacing allows).
    const double gauge = number(attribute(*dom, "<text[^>]*id=\"gauge-port0\"[^>]*>", "data-bytes-per-second"));
    EXPECT_GT(gauge, 0) << *dom;
    EXPECT_LT(gauge, 200e6 * 1.25);
    // The lane's card names its GPU (placement's choice; GPU 0 for the demo's single lane).
    EXPECT_TRUE(std::regex_search(*dom, std::regex(R"(<div class="gpu" data-gpu="0"[^>]*>GPU 0\b)"))) << *dom;
    // Per-stage rows with their rates.
    for (const char* stage : {"source", "fft", "sink"}) {
      EXPECT_NE(dom->find("<tr data-stage=\"port0/" + std::string(stage) + "\">"), std::string::npos) << stage;
    }
    // Each stage row has its pinned threads' time off their cores (the demo pins none: 0).
    const std::regex off_core(R"re(<tr data-stage="port0/source">(?:(?!</tr>).)*?data-core-wait-ns="([0-9]+)")re");
    std::smatch waited;
    EXPECT_TRUE(std::regex_search(*dom, waited, off_core)) << *dom;
    // The spectrum: the demo's 10 MHz tone, 250 Msps / 1024 = 244 kHz per bin.
    const double peak = number(attribute(*dom, "<svg[^>]*class=\"spectrum\"[^>]*>", "data-peak-hz"));
    EXPECT_NEAR(peak, 10e6, 250e6 / 1024) << *dom;
  }
  // Live: the counts and the spectrum moved on between the two loads.
  auto samples = [](const std::string& dom) {
    std::smatch found;
    const std::regex cell(R"re(<tr data-stage="port0/source">(?:(?!</tr>).)*?data-samples="([0-9]+)")re");
    return std::regex_search(dom, found, cell) ? std::stod(found.str(1)) : -1.0;
  };
  EXPECT_GT(samples(first), 0) << first;
  EXPECT_GT(samples(second), samples(first));
  const double first_sequence = number(attribute(first, "<svg[^>]*class=\"spectrum\"[^>]*>", "data-sequence"));
  EXPECT_GT(first_sequence, 0);
  EXPECT_GT(number(attribute(second, "<svg[^>]*class=\"spectrum\"[^>]*>", "data-sequence")), first_sequence);
}

}  // namespace
}  // namespace sluice
