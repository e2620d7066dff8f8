// The `/metrics` answer: every stage's metrics as Prometheus metric families, built at scrape
// time and written by prometheus-cpp's text serializer.
#pragma once

#include <string>

namespace sluice {

class Pipeline;

// Every stage's metrics in the Prometheus text exposition format (version 0.0.4): counters
// and gauges per lane and stage with units in their names, drops by reason, lost samples,
// queue fill, busy fraction and the chunk latency as a histogram. Safe from any thread.
std::string prometheus_text(const Pipeline& pipeline);

}  // namespace sluice
