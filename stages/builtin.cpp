// The built-in stage types: one registration call per stage module.
#include "pipeline/stage.hpp"
#include "stages/fft/fft_stage.hpp"
#include "stages/generator/generator.hpp"
#include "stages/link/local_link.hpp"
#include "stages/record/record_stage.hpp"
#include "stages/replay/replay_stage.hpp"
#include "stages/sinks/file_sink.hpp"
#include "stages/sinks/null_sink.hpp"
#include "stages/socket/tcp_source.hpp"
#include "stages/socket/udp_source.hpp"

namespace sluice {

void register_builtin_stages(StageRegistry& registry) {
  register_generator_stage(registry);
  register_null_sink_stage(registry);
  register_file_sink_stage(registry);
  register_link_stage(registry);
  register_fft_stage(registry);
  register_record_stage(registry);
  register_replay_stage(registry);
  register_udp_source_stage(registry);
  register_tcp_source_stage(registry);
}

const StageRegistry& StageRegistry::builtin() {
  static const StageRegistry registry = [] {
    StageRegistry built;
    register_builtin_stages(built);
    return built;
  }();
  return registry;
}

}  // namespace sluice
