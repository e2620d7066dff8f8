// Link throughput over the roce transport inside the Soft-RoCE VM, beside perftest's ib_write_bw
// at the same message size (rdma_vm_bench.sh). Prints `rdma_link size=BYTES lanes=N MB/s=RATE`:
// every lane's payload over first accepted connection to last end of stream (MB = 10^6 bytes).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "stages/link/roce_transport.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::ChunkPtr;
using sluice::LinkStatus;

struct Lane {
  std::uint64_t received_bytes = 0;
  std::chrono::steady_clock::time_point connected{};  // connection set-up is not counted, as in perftest
  std::chrono::steady_clock::time_point ended{};
  std::string error;
};

// One lane: its own QP, sender and receiver thread, moving `count` chunks of `size` bytes.
void run_lane(const std::string& address, std::uint16_t port, std::uint32_t lane_index, std::size_t size,
              std::uint64_t count, Lane& lane) {
  sluice::TransportSettings settings;
  settings.endpoint = sluice::LinkEndpoint{address, port};
  settings.connect_timeout = 20s;
  sluice::Pool landing("landing", sluice::PoolSpec{size, 16, sluice::MemoryKind::host, 0});
  sluice::Pool source("source", sluice::PoolSpec{size, 16, sluice::MemoryKind::host, 0});
  sluice::RoceReceiver receiver;
  receiver.listen(settings, lane_index, landing);
  std::string sender_error;
  std::thread sending([&] {
    try {
      sluice::RoceSender sender;
      sender.connect(settings, lane_index, {&source}, {});
      for (std::uint64_t sequence = 0; sequence < count; ++sequence) {
        ChunkPtr chunk = source.acquire(10s);
        if (!chunk) throw std::runtime_error("source pool starved");
        chunk->size = size;
        chunk->sequence = sequence;
        LinkStatus status;
        while ((status = sender.send(chunk, 100ms)) == LinkStatus::idle) {
        }
        if (status != LinkStatus::ok) throw std::runtime_error(sender.error());
      }
      if (sender.finish(30s) != LinkStatus::ok) throw std::runtime_error(sender.error());
    } catch (const std::exception& error) {
      sender_error = error.what();
    }
  });
  receiver.accept();
  lane.connected = std::chrono::steady_clock::now();
  for (;;) {
    ChunkPtr chunk;
    const LinkStatus status = receiver.receive(chunk, 100ms);
    if (status == LinkStatus::ok) {
      lane.received_bytes += chunk->size;
      continue;
    }
    if (status == LinkStatus::idle) continue;
    if (status != LinkStatus::end_of_stream) lane.error = receiver.error();
    break;
  }
  lane.ended = std::chrono::steady_clock::now();
  sending.join();
  if (!sender_error.empty()) lane.error = sender_error;
  receiver.close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s ADDRESS PORT SIZE_BYTES COUNT LANES\n", argv[0]);
    return 2;
  }
  const std::string address = argv[1];
  const auto port = static_cast<std::uint16_t>(std::stoul(argv[2]));
  const std::size_t size = std::stoull(argv[3]);
  const std::uint64_t count = std::stoull(argv[4]);
  const auto lanes = static_cast<std::uint32_t>(std::stoul(argv[5]));
  std::vector<Lane> results(lanes);
  std::vector<std::thread> threads;
  for (std::uint32_t lane = 0; lane < lanes; ++lane) {
    threads.emplace_back([&, lane] {
      try {
        run_lane(address, static_cast<std::uint16_t>(port + lane), lane, size, count, results[lane]);
      } catch (const std::exception& error) {
        results[lane].error = error.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  auto first = results[0].connected;
  auto last = results[0].ended;
  for (const Lane& lane : results) {
    first = std::min(first, lane.connected);
    last = std::max(last, lane.ended);
  }
  const double seconds = std::chrono::duration<double>(last - first).count();
  std::uint64_t bytes = 0;
  for (const Lane& lane : results) {
    if (!lane.error.empty()) {
      std::fprintf(stderr, "rdma_link_bench: %s\n", lane.error.c_str());
      return 1;
    }
    bytes += lane.received_bytes;
  }
  if (bytes != size * count * lanes) {
    std::fprintf(stderr, "rdma_link_bench: %llu of %llu bytes arrived\n", static_cast<unsigned long long>(bytes),
                 static_cast<unsigned long long>(size * count * lanes));
    return 1;
  }
  std::printf("rdma_link size=%zu lanes=%u MB/s=%.2f\n", size, lanes, static_cast<double>(bytes) / seconds / 1e6);
  return 0;
}
