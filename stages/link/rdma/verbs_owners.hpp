// One owner per verbs / RDMA CM handle: std::unique_ptr with a function deleter that logs
// (never throws) when the release call fails. Members holding these are declared in
// creation order so that destruction runs in reverse, as rdma-core's own examples do.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"
#include "pipeline/unique_fd.hpp"

namespace sluice::rdma {

// Calls `release` and logs its failure; `name` is the C call for the message.
template <auto release, const char* name>
struct LoggingDeleter {
  template <typename Handle>
  void operator()(Handle* handle) const noexcept {
    if (handle == nullptr) return;
    if constexpr (std::is_void_v<decltype(release(handle))>) {
      release(handle);
    } else if (int error = release(handle); error != 0) {
      // verbs return a positive errno, RDMA CM -1 with errno set.
      log::warn("{}", errno_message(name, error > 0 ? error : errno));
    }
  }
};

inline constexpr char kDestroyEventChannel[] = "rdma_destroy_event_channel";
inline constexpr char kDestroyId[] = "rdma_destroy_id";
inline constexpr char kDeallocPd[] = "ibv_dealloc_pd";
inline constexpr char kDeregMr[] = "ibv_dereg_mr";
inline constexpr char kDestroyCq[] = "ibv_destroy_cq";
inline constexpr char kDestroyQp[] = "rdma_destroy_qp";
inline constexpr char kDestroyCompChannel[] = "ibv_destroy_comp_channel";

inline void destroy_qp_of(rdma_cm_id* id) noexcept { rdma_destroy_qp(id); }

using EventChannelPtr =
    std::unique_ptr<rdma_event_channel, LoggingDeleter<rdma_destroy_event_channel, kDestroyEventChannel>>;
using CmIdPtr = std::unique_ptr<rdma_cm_id, LoggingDeleter<rdma_destroy_id, kDestroyId>>;
using PdPtr = std::unique_ptr<ibv_pd, LoggingDeleter<ibv_dealloc_pd, kDeallocPd>>;
using MrPtr = std::unique_ptr<ibv_mr, LoggingDeleter<ibv_dereg_mr, kDeregMr>>;
using CqPtr = std::unique_ptr<ibv_cq, LoggingDeleter<ibv_destroy_cq, kDestroyCq>>;
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, LoggingDeleter<ibv_destroy_comp_channel, kDestroyCompChannel>>;
// The QP that rdma_create_qp hung on a CM id; the pointer held is the id, released with
// rdma_destroy_qp before the id itself is destroyed.
using QpOnIdPtr = std::unique_ptr<rdma_cm_id, LoggingDeleter<destroy_qp_of, kDestroyQp>>;

// An owned file descriptor (the dma-buf a GPU allocation is exported as).
using FileDescriptor = UniqueFd;  // pipeline/unique_fd.hpp

}  // namespace sluice::rdma
