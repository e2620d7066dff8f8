// io_uring and file descriptor owners.
#include "recorder/uring.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"

namespace sluice::recorder {

void FileDescriptor::close() noexcept {
  if (const int error = fd_.close(); error != 0) log::warn("{}", errno_message("close(" + path_ + ")", error));
}

FileDescriptor open_file(const std::string& path, int flags, mode_t mode) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) {
    const int error = errno;
    throw std::runtime_error(errno_message("open(" + path + ")", error) +
                             (error == EEXIST ? " (a capture is never overwritten: set overwrite: true to replace it)"
                              : error == EINVAL && (flags & O_DIRECT) != 0
                                  ? " (this filesystem refuses O_DIRECT: set direct: false)"
                                  : ""));
  }
  return FileDescriptor(fd, path);
}

Uring::Uring(unsigned queue_depth) {
  if (const int result = io_uring_queue_init(queue_depth, &ring_, 0); result < 0) {
    throw std::runtime_error(errno_message("io_uring_queue_init", -result));
  }
  initialised_ = true;
}

Uring::Uring(Uring&& other) noexcept
    : ring_(other.ring_),
      initialised_(other.initialised_),
      buffers_registered_(other.buffers_registered_),
      pool_base_(std::move(other.pool_base_)) {
  other.initialised_ = false;
  other.buffers_registered_ = false;
}

Uring& Uring::operator=(Uring&& other) noexcept {
  if (this != &other) {
    if (initialised_) io_uring_queue_exit(&ring_);
    ring_ = other.ring_;
    initialised_ = other.initialised_;
    buffers_registered_ = other.buffers_registered_;
    pool_base_ = std::move(other.pool_base_);
    other.initialised_ = false;
    other.buffers_registered_ = false;
  }
  return *this;
}

Uring::~Uring() {
  if (!initialised_) return;
  if (buffers_registered_) io_uring_unregister_buffers(&ring_);
  io_uring_queue_exit(&ring_);
}

std::string Uring::register_pools(const std::vector<Pool*>& pools) {
  std::vector<iovec> buffers;
  std::map<const Pool*, int> bases;
  for (Pool* pool : pools) {
    if (pool->memory() == MemoryKind::device) continue;  // written through the pinned bounce pool
    bases[pool] = static_cast<int>(buffers.size());
    for (std::size_t i = 0; i < pool->chunk_count(); ++i) {
      buffers.push_back(iovec{pool->chunk(i).data, pool->chunk_bytes()});
    }
  }
  if (buffers.empty()) return "no host chunks to register";
  const int result = io_uring_register_buffers(&ring_, buffers.data(), static_cast<unsigned>(buffers.size()));
  if (result < 0) {
    return errno_message("io_uring_register_buffers(" + std::to_string(buffers.size()) + " chunks)", -result) +
           (result == -ENOMEM ? " (raise RLIMIT_MEMLOCK: ulimit -l)" : "");
  }
  buffers_registered_ = true;
  pool_base_ = std::move(bases);
  return {};
}

int Uring::buffer_index(const Chunk& chunk) const noexcept {
  auto it = pool_base_.find(chunk.pool);
  return it == pool_base_.end() ? -1 : it->second + static_cast<int>(chunk.index);
}

}  // namespace sluice::recorder
