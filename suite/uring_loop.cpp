// The raw io_uring loop behind the record and replay ceilings (see uring_loop.hpp).
#include "suite/uring_loop.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/errno_message.hpp"
#include "pipeline/memory.hpp"
#include "recorder/uring.hpp"

namespace sluice::bench {

double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& value) {
    return static_cast<double>(value.tv_sec) + static_cast<double>(value.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

namespace {

// Registered (fixed) buffers, as the recorder and replay register their pools: the kernel
// then pins the pages once instead of on every I/O.
void register_blocks(recorder::Uring& ring, const std::vector<std::byte*>& blocks, std::size_t block_bytes) {
  std::vector<iovec> vectors;
  for (std::byte* data : blocks) vectors.push_back({data, block_bytes});
  const auto count = static_cast<unsigned>(vectors.size());
  if (const int registered = io_uring_register_buffers(ring.get(), vectors.data(), count); registered != 0) {
    throw std::runtime_error(errno_message("io_uring_register_buffers", -registered) +
                             " (RLIMIT_MEMLOCK too small for " + std::to_string(count) + " × " +
                             std::to_string(block_bytes >> 20) + " MiB?)");
  }
}

}  // namespace

UringLoopResult uring_loop(const std::string& path, std::uint64_t total, std::size_t block_bytes, unsigned depth,
                           bool write, bool direct) {
  const int flags = (write ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY) | O_CLOEXEC | (direct ? O_DIRECT : 0);
  recorder::FileDescriptor file = recorder::open_file(path, flags);
  if (write && ::fallocate(file.get(), 0, 0, static_cast<off_t>(total)) != 0 && errno != EOPNOTSUPP) {
    throw std::runtime_error(errno_message("fallocate(" + path + ")", errno));
  }
  // The blocks come from the allocator the stages' pools use (MemoryRegion, host), so huge
  // pages or not is the same on both sides of the ratio.
  const MemoryRegion region(MemoryKind::host, std::size_t{depth} * block_bytes);
  std::vector<std::byte*> blocks;
  for (unsigned i = 0; i < depth; ++i) {
    blocks.push_back(region.data() + std::size_t{i} * block_bytes);
    std::memset(blocks.back(), static_cast<int>(i + 1), block_bytes);
  }
  recorder::Uring ring(depth);  // after the blocks: unregistered and closed before they are freed
  register_blocks(ring, blocks, block_bytes);
  const std::uint64_t count = total / block_bytes;
  std::uint64_t submitted = 0;
  std::uint64_t completed = 0;
  std::vector<unsigned> free_blocks;
  for (unsigned i = 0; i < depth; ++i) free_blocks.push_back(i);
  const std::uint64_t begin_ns = monotonic_ns();
  const double begin_cpu = process_cpu_seconds();
  while (completed < count) {
    while (submitted < count && !free_blocks.empty()) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring.get());
      if (sqe == nullptr) break;
      const unsigned block = free_blocks.back();
      free_blocks.pop_back();
      const auto offset = submitted * block_bytes;
      if (write) {
        io_uring_prep_write_fixed(sqe, file.get(), blocks[block], static_cast<unsigned>(block_bytes), offset,
                                  static_cast<int>(block));
      } else {
        io_uring_prep_read_fixed(sqe, file.get(), blocks[block], static_cast<unsigned>(block_bytes), offset,
                                 static_cast<int>(block));
      }
      io_uring_sqe_set_data64(sqe, block);
      ++submitted;
    }
    const int pushed = io_uring_submit_and_wait(ring.get(), 1);
    if (pushed < 0 && pushed != -EINTR) throw std::runtime_error(errno_message("io_uring_submit_and_wait", -pushed));
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(ring.get(), &cqe) == 0) {
      if (cqe->res != static_cast<int>(block_bytes)) {
        throw std::runtime_error(std::string(write ? "write(" : "read(") + path +
                                 ") via io_uring: " + (cqe->res < 0 ? std::strerror(-cqe->res) : "short transfer"));
      }
      free_blocks.push_back(static_cast<unsigned>(io_uring_cqe_get_data64(cqe)));
      io_uring_cqe_seen(ring.get(), cqe);
      ++completed;
    }
  }
  return {static_cast<double>(count * block_bytes), static_cast<double>(monotonic_ns() - begin_ns) / 1e9,
          process_cpu_seconds() - begin_cpu};
}

}  // namespace sluice::bench
