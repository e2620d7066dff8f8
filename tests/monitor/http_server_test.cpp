// The live metrics endpoint on a real pipeline (generator → fft → null) over loopback HTTP: /metrics
// checked by promtool and against what the generator was told to send, the live spectrum against its tone.
#include "monitor/http_server.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"

namespace sluice {
namespace {

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// A pipeline running on its own thread with a server on a free loopback port.
class ServedPipeline {
 public:
  explicit ServedPipeline(const std::string& yaml) : pipeline_(load_pipeline_text(yaml, "http_server_test.yaml")) {
    pipeline_.start();
    server_ = std::make_unique<MetricsServer>(pipeline_, HttpEndpoint{"127.0.0.1", 0});
    thread_ = std::thread([this] { pipeline_.run(); });
  }
  ~ServedPipeline() {
    pipeline_.request_stop();
    if (thread_.joinable()) thread_.join();
  }
  void wait() {
    if (thread_.joinable()) thread_.join();
  }
  Pipeline& pipeline() { return pipeline_; }
  std::string get(const std::string& path) {
    httplib::Client client("127.0.0.1", server_->port());
    auto response = client.Get(path.c_str());
    if (!response) return "GET " + path + " failed: " + httplib::to_string(response.error());
    EXPECT_EQ(response->status, 200) << path;
    return response->body;
  }

 private:
  Pipeline pipeline_;
  std::unique_ptr<MetricsServer> server_;
  std::thread thread_;
};

// One sample line of a scrape: "name{labels} value".
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::vector<Sample> parse_scrape(const std::string& text) {
  std::vector<Sample> samples;
  std::istringstream in(text);
  std::string line;
  static const std::regex kLine(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$)");
  static const std::regex kLabel(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)")re");
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::smatch match;
    if (!std::regex_match(line, match, kLine)) {
      ADD_FAILURE() << "not a sample line: " << line;
      continue;
    }
    Sample sample{match[1], {}, match[3] == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(match[3])};
    const std::string labels = match[2];
    for (auto it = std::sregex_iterator(labels.begin(), labels.end(), kLabel); it != std::sregex_iterator(); ++it) {
      sample.labels[(*it)[1]] = (*it)[2];
    }
    samples.push_back(sample);
  }
  return samples;
}

double value_of(const std::vector<Sample>& samples, const std::string& name,
                const std::map<std::string, std::string>& labels) {
  for (const auto& sample : samples) {
    if (sample.name != name) continue;
    bool match = true;
    for (const auto& [key, value] : labels)
      match = match && sample.labels.count(key) != 0 && sample.labels.at(key) == value;
    if (match) return sample.value;
  }
  ADD_FAILURE() << "no sample " << name;
  return -1;
}

constexpr double kToneHz = 10e6;
constexpr double kSampleRate = 250e6;
constexpr std::uint64_t kStopAfter = 96ULL << 20;

std::string tone_pipeline(const std::string& generator_extra) {
  return R"(
pipeline: {name: http_test, chunk: 256KiB, chunks: 8}
lanes:
  - name: port0
    stages:
      - {name: source, type: generator, signal: tone, format: ci16, sample_rate: 250Msps, frequency: 10MHz, amplitude: 0.5)" +
         generator_extra + R"(}
      - {name: fft, type: fft, size: 1024, window: hann, average: 2, output: power_db}
      - {name: sink, type: null}
)";
}

TEST(HttpEndpoint, ParsesAddressAndPort) {
  EXPECT_EQ(parse_http_endpoint("127.0.0.1:9100")->port, 9100);
  EXPECT_EQ(parse_http_endpoint("0.0.0.0:80")->host, "0.0.0.0");
  EXPECT_EQ(parse_http_endpoint(":9100")->host, "127.0.0.1");
  EXPECT_EQ(parse_http_endpoint("9100")->port, 9100);
  EXPECT_EQ(parse_http_endpoint("[::1]:9100")->host, "::1");
  EXPECT_FALSE(parse_http_endpoint("127.0.0.1:"));
  EXPECT_FALSE(parse_http_endpoint("127.0.0.1:99999"));
  EXPECT_FALSE(parse_http_endpoint("localhost:http"));
  EXPECT_FALSE(parse_http_endpoint("::1:9100"));
}

TEST(HttpEndpoint, APipelineSettingThatIsNoAddressIsAConfigError) {
  EXPECT_THROW(load_pipeline_text(
                   "pipeline: {http: 'nowhere'}\nlanes: [{name: a, stages: [{type: generator}, {type: null}]}]\n"),
               ConfigException);
  EXPECT_EQ(
      load_pipeline_text("pipeline: {http: ':0'}\nlanes: [{name: a, stages: [{type: generator}, {type: null}]}]\n")
          .settings.http,
      ":0");
}

TEST(MetricsServer, APortInUseIsAClearError) {
  Pipeline pipeline(load_pipeline_text(tone_pipeline(", stop_after: 1MiB")));
  MetricsServer first(pipeline, HttpEndpoint{"127.0.0.1", 0});
  try {
    MetricsServer second(pipeline, HttpEndpoint{"127.0.0.1", first.port()});
    ADD_FAILURE() << "a second server bound the same port";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("127.0.0.1:" + std::to_string(first.port())), std::string::npos)
        << error.what();
  }
}

// After the generator sent exactly kStopAfter bytes, every byte counter says so, the
// histogram is cumulative and counts every chunk, and promtool accepts the scrape.
TEST(MetricsServer, ScrapeIsValidPrometheusTextWithExactCounts) {
  ServedPipeline served(tone_pipeline(", stop_after: " + std::to_string(kStopAfter)));
  served.wait();  // the run ended; the server still answers
  const std::string text = served.get("/metrics");
  const auto samples = parse_scrape(text);
  const std::map<std::string, std::string> source{{"lane", "port0"}, {"stage", "source"}, {"type", "generator"}};
  const std::map<std::string, std::string> fft{{"lane", "port0"}, {"stage", "fft"}};
  const std::map<std::string, std::string> sink{{"lane", "port0"}, {"stage", "sink"}};
  EXPECT_EQ(value_of(samples, "sluice_stage_out_bytes_total", source), static_cast<double>(kStopAfter));
  EXPECT_EQ(value_of(samples, "sluice_stage_out_samples_total", source), static_cast<double>(kStopAfter / 4));
  EXPECT_EQ(value_of(samples, "sluice_stage_in_bytes_total", fft), static_cast<double>(kStopAfter));
  // 2-frame averages of 1024 samples: one row of 1024 floats per 2048 input samples.
  const double rows = std::floor(static_cast<double>(kStopAfter / 4) / 2048);
  EXPECT_EQ(value_of(samples, "sluice_stage_events_total", {{"stage", "fft"}, {"event", "rows"}}), rows);
  EXPECT_EQ(value_of(samples, "sluice_stage_in_bytes_total", sink), rows * 1024 * 4);
  EXPECT_EQ(value_of(samples, "sluice_stage_drops_total", {{"stage", "fft"}, {"reason", "not_complex_samples"}}), 0);
  EXPECT_EQ(value_of(samples, "sluice_stage_queue_capacity_chunks", fft), 16);
  const double busy = value_of(samples, "sluice_stage_busy_ratio", fft);
  EXPECT_GT(busy, 0);
  EXPECT_LE(busy, 1.0);

  // Histogram: cumulative buckets, +Inf == _count == chunks the sink took.
  double previous = 0;
  double infinite = -1;
  for (const auto& sample : samples) {
    if (sample.name != "sluice_stage_latency_seconds_bucket" || sample.labels.at("stage") != "sink") continue;
    EXPECT_GE(sample.value, previous) << "le=" << sample.labels.at("le");
    previous = sample.value;
    if (sample.labels.at("le") == "+Inf") infinite = sample.value;
  }
  EXPECT_EQ(infinite, value_of(samples, "sluice_stage_latency_seconds_count", sink));
  EXPECT_EQ(infinite, value_of(samples, "sluice_stage_in_chunks_total", sink));
  EXPECT_GT(value_of(samples, "sluice_stage_latency_seconds_sum", sink), 0);

  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    if (in_ci()) FAIL() << "promtool is not installed (Debian package prometheus; scripts/setup.sh installs it)";
    GTEST_SKIP() << "promtool is not installed (apt install prometheus)";
  }
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("sluice_scrape_" + std::to_string(getpid()));
  std::ofstream(file) << text;
  const std::string output_file = file.string() + ".out";
  const int status =
      std::system(("promtool check metrics < '" + file.string() + "' > '" + output_file + "' 2>&1").c_str());
  std::ifstream output(output_file);
  const std::string complaints((std::istreambuf_iterator<char>(output)), std::istreambuf_iterator<char>());
  EXPECT_EQ(status, 0) << complaints;
  EXPECT_EQ(complaints, "") << "promtool lint findings";
  std::filesystem::remove(file);
  std::filesystem::remove(output_file);
}

// The live spectrum is the fft stage's latest row: it peaks at the generator's tone, and a
// later read is a later row.
// The page served at / is monitor/dashboard.html byte for byte, as the build embedded it.
TEST(MetricsServer, ServesTheDashboardFileInTheTreeByteForByte) {
  std::ifstream file(SLUICE_SOURCE_DIR "/monitor/dashboard.html", std::ios::binary);
  ASSERT_TRUE(file) << "cannot read monitor/dashboard.html";
  const std::string page((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  ASSERT_GT(page.size(), 1000U);
  ServedPipeline served(tone_pipeline(", stop_after: 1MiB"));
  EXPECT_EQ(served.get("/"), page);
}

TEST(MetricsServer, LiveSpectrumPeaksAtTheTone) {
  ServedPipeline served(tone_pipeline(", rate: 100MB/s"));
  nlohmann::json spectra;
  while ((spectra = nlohmann::json::parse(served.get("/api/spectrum"))).empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(spectra.size(), 1U);
  const auto& spectrum = spectra[0];
  EXPECT_EQ(spectrum["lane"], "port0");
  EXPECT_EQ(spectrum["bins"], 1024);
  EXPECT_DOUBLE_EQ(spectrum["bin_hz"].get<double>(), kSampleRate / 1024);
  const auto values = spectrum["decibels"].get<std::vector<float>>();
  ASSERT_EQ(values.size(), 1024U);
  const auto peak = static_cast<std::size_t>(std::max_element(values.begin(), values.end()) - values.begin());
  const double peak_hz =
      spectrum["first_hz"].get<double>() + static_cast<double>(peak) * spectrum["step_hz"].get<double>();
  EXPECT_NEAR(peak_hz, kToneHz, kSampleRate / 1024);
  EXPECT_NEAR(values[peak], 20 * std::log10(0.5), 1.5);  // amplitude 0.5, within the Hann scalloping loss
  const auto first_sequence = spectrum["sequence"].get<std::uint64_t>();
  nlohmann::json later;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    later = nlohmann::json::parse(served.get("/api/spectrum"));
  } while (later[0]["sequence"].get<std::uint64_t>() == first_sequence);
  EXPECT_GT(later[0]["row"].get<std::uint64_t>(), spectrum["row"].get<std::uint64_t>());
}

// Two clients scraping every endpoint as fast as they can: the lane's counts keep rising
// (checked 20 times) and so do the scrapes. No timing is asserted, only progress.
TEST(MetricsServer, AScrapeLoopDoesNotStallTheLanes) {
  ServedPipeline served(tone_pipeline(""));
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> scrapes{0};
  std::atomic<std::uint64_t> failures{0};
  std::vector<std::thread> scrapers;
  for (int i = 0; i < 2; ++i) {
    scrapers.emplace_back([&] {
      while (!done.load()) {
        for (const char* path : {"/metrics", "/api/status", "/api/spectrum", "/"}) {
          const std::string body = served.get(path);
          if (body.rfind("GET ", 0) == 0) failures.fetch_add(1);
          scrapes.fetch_add(1);
        }
      }
    });
  }
  const StageMetrics& sink = *served.pipeline().metrics_by_lane()[0].back();
  for (int round = 0; round < 20; ++round) {
    const std::uint64_t samples = sink.in.samples.load();
    const std::uint64_t scraped = scrapes.load();
    while (sink.in.samples.load() == samples || scrapes.load() == scraped) std::this_thread::yield();
  }
  done = true;
  for (auto& scraper : scrapers) scraper.join();
  EXPECT_EQ(failures.load(), 0U);
  EXPECT_EQ(sink.total_drops(), 0U);
}

}  // namespace
}  // namespace sluice
