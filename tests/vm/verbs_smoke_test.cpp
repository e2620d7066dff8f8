// Proves the Soft-RoCE VM gives verbs code a real RDMA stack: device, PD, MR, CQ, QP, and one
// RDMA WRITE WITH IMMEDIATE between two threads that meet through rdma_cm on the VM's address.
// Run inside the VM by ctest (tests/vm/run_in_vm.sh); on a host without RDMA it skips.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

constexpr std::size_t kMessageBytes = 1 << 20;
constexpr std::uint32_t kImmediate = 0x51C0FFEEu;
// TCG runs the guest several times slower than the host; these bound a hang, not a speed.
constexpr auto kEventTimeout = 30s;
constexpr auto kCompletionTimeout = 30s;

[[noreturn]] void fail_call(const char* call) { throw std::system_error(errno, std::generic_category(), call); }
void check(int rc, const char* call) {
  if (rc != 0) {
    if (rc > 0) errno = rc;  // ibv_post_* return the error instead of setting errno
    fail_call(call);
  }
}
template <typename T>
T* check_ptr(T* pointer, const char* call) {
  if (pointer == nullptr) fail_call(call);
  return pointer;
}

bool in_vm() { return std::getenv("SLUICE_IN_VM") != nullptr; }
std::string vm_address() {
  const char* address = std::getenv("SLUICE_VM_ADDRESS");
  return address != nullptr ? address : "192.0.2.1";
}

// One owner per C handle; members of the users below are declared in creation order.
struct DeviceListDeleter {
  void operator()(ibv_device** list) const noexcept { ibv_free_device_list(list); }
};
struct ContextDeleter {
  void operator()(ibv_context* context) const noexcept { ibv_close_device(context); }
};
struct PdDeleter {
  void operator()(ibv_pd* pd) const noexcept { ibv_dealloc_pd(pd); }
};
struct MrDeleter {
  void operator()(ibv_mr* mr) const noexcept { ibv_dereg_mr(mr); }
};
struct CqDeleter {
  void operator()(ibv_cq* cq) const noexcept { ibv_destroy_cq(cq); }
};
struct QpDeleter {
  void operator()(ibv_qp* qp) const noexcept { ibv_destroy_qp(qp); }
};
struct ChannelDeleter {
  void operator()(rdma_event_channel* channel) const noexcept { rdma_destroy_event_channel(channel); }
};
struct IdDeleter {
  void operator()(rdma_cm_id* id) const noexcept { rdma_destroy_id(id); }
};
// The QP of an rdma_cm id: destroyed before the CQ and PD it uses, while the id lives on.
struct CmQpDeleter {
  void operator()(rdma_cm_id* id) const noexcept { rdma_destroy_qp(id); }
};
using DeviceList = std::unique_ptr<ibv_device*, DeviceListDeleter>;
using Context = std::unique_ptr<ibv_context, ContextDeleter>;
using Pd = std::unique_ptr<ibv_pd, PdDeleter>;
using Mr = std::unique_ptr<ibv_mr, MrDeleter>;
using Cq = std::unique_ptr<ibv_cq, CqDeleter>;
using Qp = std::unique_ptr<ibv_qp, QpDeleter>;
using Channel = std::unique_ptr<rdma_event_channel, ChannelDeleter>;
using CmId = std::unique_ptr<rdma_cm_id, IdDeleter>;
using CmQp = std::unique_ptr<rdma_cm_id, CmQpDeleter>;

// Skips outside the VM when the host has no RDMA device; inside it that is a failure.
#define REQUIRE_RDMA_DEVICE(count)                                                        \
  do {                                                                                    \
    if ((count) == 0) {                                                                   \
      if (in_vm()) FAIL() << "no RDMA device inside the Soft-RoCE VM (rxe0 missing)";     \
      GTEST_SKIP() << "no RDMA device on this machine (run under tests/vm/run_in_vm.sh)"; \
    }                                                                                     \
  } while (false)

// The bytes the writer sends: a function of the offset alone, so the reader checks against it
// without sharing the sender's buffer.
std::uint8_t pattern_byte(std::size_t offset) {
  std::uint64_t x = offset * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x ^ (x >> 8));
}

// What the receiver tells the writer in its accept's private data.
struct Landing {
  std::uint64_t address;
  std::uint32_t rkey;
  std::uint32_t length;
};

// Waits for the next event on `channel` (made non-blocking) and requires it to be `expected`.
// Returns the event's private data, if any, copied before the event is acknowledged.
std::vector<std::uint8_t> expect_event(rdma_event_channel* channel, rdma_cm_event_type expected,
                                       rdma_cm_id** new_id = nullptr) {
  pollfd descriptor{channel->fd, POLLIN, 0};
  const int ready = poll(&descriptor, 1, static_cast<int>(std::chrono::milliseconds(kEventTimeout).count()));
  if (ready < 0) fail_call("poll(rdma_cm event channel)");
  if (ready == 0) {
    throw std::runtime_error(std::string("timed out waiting for ") + rdma_event_str(expected));
  }
  rdma_cm_event* event = nullptr;
  check(rdma_get_cm_event(channel, &event), "rdma_get_cm_event");
  const rdma_cm_event_type type = event->event;
  const int status = event->status;
  std::vector<std::uint8_t> private_data;
  if (event->param.conn.private_data != nullptr) {
    const auto* bytes = static_cast<const std::uint8_t*>(event->param.conn.private_data);
    private_data.assign(bytes, bytes + event->param.conn.private_data_len);
  }
  if (new_id != nullptr) *new_id = event->id;
  rdma_ack_cm_event(event);
  if (type != expected) {
    throw std::runtime_error(std::string("expected ") + rdma_event_str(expected) + ", got " + rdma_event_str(type) +
                             " (status " + std::to_string(status) + ")");
  }
  return private_data;
}

void make_nonblocking(rdma_event_channel* channel) {
  const int flags = fcntl(channel->fd, F_GETFL);
  if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) fail_call("fcntl(O_NONBLOCK)");
}

ibv_wc poll_one(ibv_cq* cq) {
  const auto deadline = std::chrono::steady_clock::now() + kCompletionTimeout;
  ibv_wc completion{};
  while (std::chrono::steady_clock::now() < deadline) {
    const int polled = ibv_poll_cq(cq, 1, &completion);
    if (polled < 0) fail_call("ibv_poll_cq");
    if (polled == 1) return completion;
    std::this_thread::yield();
  }
  throw std::runtime_error("timed out waiting for a completion");
}

sockaddr_in address_of(const std::string& text, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (inet_pton(AF_INET, text.c_str(), &address.sin_addr) != 1) {
    throw std::invalid_argument("not an IPv4 address: " + text);
  }
  return address;
}

ibv_qp_init_attr rc_qp_attributes(ibv_cq* cq) {
  ibv_qp_init_attr attributes{};
  attributes.send_cq = cq;
  attributes.recv_cq = cq;
  attributes.qp_type = IBV_QPT_RC;
  attributes.cap.max_send_wr = 4;
  attributes.cap.max_recv_wr = 4;
  attributes.cap.max_send_sge = 1;
  attributes.cap.max_recv_sge = 1;
  return attributes;
}

// PD, MR over `buffer`, CQ and an RC QP on an rdma_cm id; declared in creation order, so
// the QP goes first and the PD last.
struct Endpoint {
  Endpoint(rdma_cm_id* id, std::vector<std::uint8_t>& buffer, unsigned access)
      : pd(check_ptr(ibv_alloc_pd(id->verbs), "ibv_alloc_pd")),
        mr(check_ptr(ibv_reg_mr(pd.get(), buffer.data(), buffer.size(), access), "ibv_reg_mr")),
        cq(check_ptr(ibv_create_cq(id->verbs, 16, nullptr, nullptr, 0), "ibv_create_cq")),
        qp(create_qp(id)) {}
  CmQp create_qp(rdma_cm_id* id) {
    ibv_qp_init_attr attributes = rc_qp_attributes(cq.get());
    check(rdma_create_qp(id, pd.get(), &attributes), "rdma_create_qp");
    return CmQp(id);
  }
  Pd pd;
  Mr mr;
  Cq cq;
  CmQp qp;
};

int device_count() {
  int count = 0;
  DeviceList list(ibv_get_device_list(&count));
  return list ? count : 0;
}

TEST(VerbsSmoke, DeviceOpensWithAnActivePortAndTakesPdMrCqQp) {
  int count = 0;
  // Without RDMA in the kernel the list is null (ENOSYS): no device, like an empty list.
  DeviceList devices(ibv_get_device_list(&count));
  REQUIRE_RDMA_DEVICE(devices ? count : 0);
  ibv_device* device = devices.get()[0];
  if (in_vm()) {
    EXPECT_STREQ(ibv_get_device_name(device), "rxe0");
  }

  Context context(check_ptr(ibv_open_device(device), "ibv_open_device"));
  ibv_port_attr port{};
  check(ibv_query_port(context.get(), 1, &port), "ibv_query_port");
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(port.link_layer, IBV_LINK_LAYER_ETHERNET) << "Soft-RoCE is RoCE: an Ethernet link layer";
  if (in_vm()) {
    EXPECT_EQ(port.active_mtu, IBV_MTU_4096) << "dummy0 has MTU 9000, so rxe uses 4096";
  }

  Pd pd(check_ptr(ibv_alloc_pd(context.get()), "ibv_alloc_pd"));
  std::vector<std::uint8_t> buffer(kMessageBytes);
  Mr mr(check_ptr(ibv_reg_mr(pd.get(), buffer.data(), buffer.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
                  "ibv_reg_mr"));
  EXPECT_EQ(mr->length, kMessageBytes);
  EXPECT_EQ(mr->addr, buffer.data());
  Cq cq(check_ptr(ibv_create_cq(context.get(), 16, nullptr, nullptr, 0), "ibv_create_cq"));
  ibv_qp_init_attr attributes = rc_qp_attributes(cq.get());
  Qp qp(check_ptr(ibv_create_qp(pd.get(), &attributes), "ibv_create_qp"));
  EXPECT_EQ(qp->qp_type, IBV_QPT_RC);
  EXPECT_EQ(qp->state, IBV_QPS_RESET);
}

// The receiving side: listens, accepts with its landing buffer's address and key, and waits
// for the write's immediate. Returns the landed bytes and the immediate it saw.
struct Received {
  std::vector<std::uint8_t> bytes;
  std::uint32_t immediate = 0;
  std::uint32_t byte_len = 0;
  ibv_wc_opcode opcode{};
};

Received receive_one(std::promise<std::uint16_t>& port_ready) {
  Channel channel(check_ptr(rdma_create_event_channel(), "rdma_create_event_channel"));
  make_nonblocking(channel.get());
  rdma_cm_id* raw_id = nullptr;
  check(rdma_create_id(channel.get(), &raw_id, nullptr, RDMA_PS_TCP), "rdma_create_id(listen)");
  CmId listener(raw_id);
  sockaddr_in address = address_of(vm_address(), 0);
  check(rdma_bind_addr(listener.get(), reinterpret_cast<sockaddr*>(&address)), "rdma_bind_addr");
  check(rdma_listen(listener.get(), 1), "rdma_listen");
  port_ready.set_value(ntohs(rdma_get_src_port(listener.get())));

  rdma_cm_id* request = nullptr;
  expect_event(channel.get(), RDMA_CM_EVENT_CONNECT_REQUEST, &request);
  CmId connection(request);
  Received received;
  received.bytes.assign(kMessageBytes, 0);
  Endpoint endpoint(connection.get(), received.bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

  // A WRITE WITH IMMEDIATE consumes one receive; it needs no buffer of its own.
  ibv_recv_wr receive{};
  receive.wr_id = 1;
  ibv_recv_wr* bad_receive = nullptr;
  check(ibv_post_recv(connection->qp, &receive, &bad_receive), "ibv_post_recv");

  const Landing landing{reinterpret_cast<std::uintptr_t>(received.bytes.data()), endpoint.mr->rkey,
                        static_cast<std::uint32_t>(kMessageBytes)};
  rdma_conn_param accept{};
  accept.private_data = &landing;
  accept.private_data_len = sizeof(landing);
  check(rdma_accept(connection.get(), &accept), "rdma_accept");
  expect_event(channel.get(), RDMA_CM_EVENT_ESTABLISHED);

  const ibv_wc completion = poll_one(endpoint.cq.get());
  if (completion.status != IBV_WC_SUCCESS) {
    throw std::runtime_error(std::string("receive completion: ") + ibv_wc_status_str(completion.status));
  }
  received.opcode = completion.opcode;
  received.byte_len = completion.byte_len;
  if ((completion.wc_flags & IBV_WC_WITH_IMM) != 0) received.immediate = ntohl(completion.imm_data);
  expect_event(channel.get(), RDMA_CM_EVENT_DISCONNECTED);
  return received;
}

TEST(VerbsSmoke, RdmaWriteWithImmediateLandsThroughRdmaCm) {
  REQUIRE_RDMA_DEVICE(device_count());
  // The receiver owns the promise: if it fails before listening, the broken promise wakes us
  // at once and its own error is rethrown here.
  std::promise<std::uint16_t> port_ready;
  std::future<std::uint16_t> port = port_ready.get_future();
  std::future<Received> receiver =
      std::async(std::launch::async, [ready = std::move(port_ready)]() mutable { return receive_one(ready); });
  ASSERT_EQ(port.wait_for(kEventTimeout), std::future_status::ready) << "the receiver never listened";
  std::uint16_t listen_port = 0;
  try {
    listen_port = port.get();
  } catch (const std::future_error&) {
    receiver.get();
    throw;
  }

  Channel channel(check_ptr(rdma_create_event_channel(), "rdma_create_event_channel"));
  make_nonblocking(channel.get());
  rdma_cm_id* raw_id = nullptr;
  check(rdma_create_id(channel.get(), &raw_id, nullptr, RDMA_PS_TCP), "rdma_create_id");
  CmId id(raw_id);
  sockaddr_in peer = address_of(vm_address(), listen_port);
  check(rdma_resolve_addr(id.get(), nullptr, reinterpret_cast<sockaddr*>(&peer), 5000), "rdma_resolve_addr");
  expect_event(channel.get(), RDMA_CM_EVENT_ADDR_RESOLVED);
  check(rdma_resolve_route(id.get(), 5000), "rdma_resolve_route");
  expect_event(channel.get(), RDMA_CM_EVENT_ROUTE_RESOLVED);

  std::vector<std::uint8_t> source(kMessageBytes);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = pattern_byte(i);
  Endpoint endpoint(id.get(), source, IBV_ACCESS_LOCAL_WRITE);

  rdma_conn_param connect{};
  connect.retry_count = 7;
  check(rdma_connect(id.get(), &connect), "rdma_connect");
  const std::vector<std::uint8_t> accepted = expect_event(channel.get(), RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_GE(accepted.size(), sizeof(Landing)) << "the accept carried no landing buffer";
  Landing landing{};
  std::memcpy(&landing, accepted.data(), sizeof(landing));
  ASSERT_EQ(landing.length, kMessageBytes);

  ibv_sge gather{reinterpret_cast<std::uintptr_t>(source.data()), static_cast<std::uint32_t>(source.size()),
                 endpoint.mr->lkey};
  ibv_send_wr write{};
  write.wr_id = 7;
  write.sg_list = &gather;
  write.num_sge = 1;
  write.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  write.send_flags = IBV_SEND_SIGNALED;
  write.imm_data = htonl(kImmediate);
  write.wr.rdma.remote_addr = landing.address;
  write.wr.rdma.rkey = landing.rkey;
  ibv_send_wr* bad_write = nullptr;
  check(ibv_post_send(id->qp, &write, &bad_write), "ibv_post_send");
  const ibv_wc sent = poll_one(endpoint.cq.get());
  EXPECT_EQ(sent.status, IBV_WC_SUCCESS) << ibv_wc_status_str(sent.status);
  EXPECT_EQ(sent.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(sent.wr_id, 7u);
  check(rdma_disconnect(id.get()), "rdma_disconnect");

  ASSERT_EQ(receiver.wait_for(kEventTimeout + kCompletionTimeout), std::future_status::ready);
  const Received received = receiver.get();
  EXPECT_EQ(received.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(received.immediate, kImmediate);
  EXPECT_EQ(received.byte_len, kMessageBytes);
  std::size_t mismatches = 0;
  std::size_t first_mismatch = kMessageBytes;
  for (std::size_t i = 0; i < kMessageBytes; ++i) {
    if (received.bytes[i] != pattern_byte(i)) {
      if (mismatches++ == 0) first_mismatch = i;
    }
  }
  EXPECT_EQ(mismatches, 0u) << "first wrong byte at offset " << first_mismatch;
}

}  // namespace
