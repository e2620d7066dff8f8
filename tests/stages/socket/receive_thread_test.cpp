// ReceiveThread on real loopback UDP sockets: every datagram sent reaches the consumer once and in
// order, with slow consumers (a datagram per ring slot however few each call returns), stops
// mid-receive and failed receives, with and without a spin before each blocking call.
#include "stages/socket/receive_thread.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "loopback_pair.hpp"
#include "pipeline/clock.hpp"
#include "pipeline/thread_cores.hpp"
#include "proc_net_udp.hpp"
#include "stages/socket/receive_merge.hpp"
#include "tests/support/proc_tasks.hpp"
#include "wire/socket.hpp"

namespace sluice {
namespace {

constexpr std::size_t kSlot = 2048;
constexpr std::size_t kControl = 64;

// A bound receiver (10 ms SO_RCVTIMEO, as the udp stage sets it) and a sender aimed at it.
struct Loopback : test_support::LoopbackPair {
  Loopback() {
    const timeval timeout{0, 10'000};
    EXPECT_EQ(::setsockopt(receiver.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)), 0);
    const int buffer = 4 << 20;
    (void)::setsockopt(receiver.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof(buffer));
    bind_receiver();
  }
  // Datagrams [from, to), each 1000 bytes starting with its 64-bit sequence number.
  void send(std::uint64_t from, std::uint64_t to) {
    std::array<std::byte, 1000> datagram{};
    for (std::uint64_t sequence = from; sequence < to; ++sequence) {
      std::memcpy(datagram.data(), &sequence, sizeof(sequence));
      ASSERT_EQ(::sendto(sender.get(), datagram.data(), datagram.size(), 0, reinterpret_cast<const sockaddr*>(&address),
                         sizeof(address)),
                static_cast<ssize_t>(datagram.size()));
      if (sequence % 64 == 63) std::this_thread::sleep_for(std::chrono::microseconds(200));  // loopback backlog
    }
  }
};

// Bounds a stop(): the thread must end within a receive timeout and a wait, far below this.
template <typename Action>
std::chrono::milliseconds timed(Action action) {
  const auto begin = std::chrono::steady_clock::now();
  action();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begin);
}

TEST(ReceiveThread, EveryDatagramReachesTheConsumerOnceAndInOrderThroughASlowConsumer) {
  Loopback loopback;
  ReceiveThread thread(loopback.receiver.get(), 2, 4, kSlot, kControl);
  thread.start({}, "rx test");
  constexpr std::uint64_t kCount = 3000;
  std::thread sender([&] { loopback.send(0, kCount); });
  std::uint64_t next = 0;
  std::uint64_t batches = 0;
  while (next < kCount) {
    ReceiveBatch* batch = thread.next(std::chrono::seconds(5));
    ASSERT_NE(batch, nullptr) << "nothing after datagram " << next;
    ASSERT_GE(batch->received, 1U);
    for (std::size_t i = 0; i < batch->received; ++i) {
      ASSERT_EQ(batch->message(i).msg_len, 1000U);
      std::uint64_t sequence = 0;
      std::memcpy(&sequence, batch->data(i), sizeof(sequence));
      ASSERT_EQ(sequence, next);
      ++next;
    }
    // Now and then the consumer holds a batch a while: the thread runs out of free ones and waits.
    if (++batches % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    thread.give_back(batch);
  }
  sender.join();
  EXPECT_EQ(test_support::proc_udp_drops(loopback.port).value(), 0U);
  EXPECT_EQ(thread.received_bytes(), kCount * 1000);
  EXPECT_GT(thread.waits_for_batch(), 0U) << "the slow consumer never made the thread wait";
  EXPECT_GT(thread.cpu_ns(), 0U);
  // The consumer is this thread: its clock is this thread's.
  const std::uint64_t consumer = thread.consumer_cpu_ns();
  EXPECT_GT(consumer, 0U);
  EXPECT_LE(consumer, thread_cpu_ns());
  thread.stop();
  EXPECT_EQ(thread.next(std::chrono::milliseconds(0)), nullptr);
  EXPECT_EQ(thread.failed_errno(), 0);
  EXPECT_GT(thread.cpu_ns(), 0U) << "its CPU time is kept after it ends";
}

// The merge's key here: when the kernel received the datagram, then its sequence number.
bool received_then_sequence(const mmsghdr& message, const std::byte* data, std::uint64_t& high,
                            std::uint64_t& low) noexcept {
  std::memcpy(&low, data, sizeof(low));
  return wire::kernel_receive_time(message.msg_hdr, high);
}

// Three threads reading one socket a datagram a call, spinning, share the stream between them;
// a ReceiveMerge over them gives every datagram back once, in the order they were sent.
TEST(ReceiveThread, SeveralOnOneSocketAreMergedBackIntoTheOrderTheSocketQueuedThem) {
  Loopback loopback;
  const int one = 1;
  ASSERT_EQ(::setsockopt(loopback.receiver.get(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)), 0);
  ASSERT_TRUE(wire::wait_for_arrival_timestamps(std::chrono::seconds(1)));  // as the udp stage waits
  std::vector<std::unique_ptr<ReceiveThread>> threads;
  std::vector<ReceiveThread*> readers;
  for (int k = 0; k < 3; ++k) {
    threads.push_back(
        std::make_unique<ReceiveThread>(loopback.receiver.get(), 4, 1, kSlot, kControl, std::chrono::seconds(10)));
    threads.back()->wait_outside_calls();
    readers.push_back(threads.back().get());
  }
  ReceiveMerge merge(readers, &received_then_sequence);
  for (auto& thread : threads) thread->start({}, "rx merge test");
  // Rounds of datagrams until every thread has taken some (on a busy machine one may not be
  // scheduled during the first), at most 100 rounds; each round once the last is handed on, so
  // that the socket never holds more than one.
  constexpr std::uint64_t kRound = 2000;
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> handed{0};
  std::atomic<bool> sending{true};
  std::thread sender([&] {
    // On loopback a datagram waits on the sending core's backlog: a sender that moves to another
    // core can have its later datagrams queued on the socket first. Pinned, it queues them in order.
    pin_thread(pthread_self(), {allowed_cores().front()}, "sender");
    const auto every_thread_took_some = [&] {
      return std::all_of(threads.begin(), threads.end(), [](const auto& t) { return t->received_bytes() > 0; });
    };
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (int round = 0; round < 100 && (round < 3 || !every_thread_took_some()); ++round) {
      loopback.send(sent.load(), sent.load() + kRound);
      sent += kRound;
      while (handed.load() < sent.load() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    sending = false;
  });
  std::uint64_t next = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const bool last_look = !sending.load() && next >= sent.load();
    const auto message = merge.next(std::chrono::milliseconds(50));
    if (!message) {
      if (last_look) break;
      continue;
    }
    std::uint64_t sequence = 0;
    std::memcpy(&sequence, message->batch->data(message->index), sizeof(sequence));
    if (sequence != next) {  // not ASSERT: the sender's thread must be joined first
      ADD_FAILURE() << "datagram " << sequence << " handed on where " << next << " belongs";
      break;
    }
    handed = ++next;
    static_cast<void>(merge.done(*message));
  }
  sender.join();
  const std::uint64_t kCount = sent.load();
  EXPECT_EQ(next, kCount) << "datagrams sent but never handed on";
  for (auto& thread : threads) thread->stop();
  EXPECT_FALSE(merge.next(std::chrono::milliseconds(0))) << "a datagram more than was sent";
  EXPECT_EQ(test_support::proc_udp_drops(loopback.port).value(), 0U);
  std::uint64_t bytes = 0;
  for (const auto& thread : threads) {
    EXPECT_GT(thread->received_bytes(), 0U) << "a thread took no datagram: the merge had nothing to merge";
    bytes += thread->received_bytes();
  }
  EXPECT_EQ(bytes, kCount * 1000);
}

// Before the consumer's first next() the datagrams stay in the socket, as they do for a stage
// that receives on its own thread before it runs.
TEST(ReceiveThread, ItReceivesNothingBeforeTheConsumerAsks) {
  Loopback loopback;
  ReceiveThread thread(loopback.receiver.get(), 2, 4, kSlot, kControl);
  thread.start({}, "rx test");
  loopback.send(0, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  // The socket's receive queue (/proc/net/udp "tx_queue:rx_queue", hex bytes) still holds them.
  const std::string queues = test_support::proc_udp_row(loopback.port).at(4);
  EXPECT_GT(std::stoul(queues.substr(queues.find(':') + 1), nullptr, 16), 0U) << queues;
  ReceiveBatch* batch = thread.next(std::chrono::seconds(5));
  ASSERT_NE(batch, nullptr);
  std::uint64_t sequence = 1;
  std::memcpy(&sequence, batch->data(0), sizeof(sequence));
  EXPECT_EQ(sequence, 0U);
  thread.give_back(batch);
}

// A batch takes only the slots its recvmmsg filled: when each call returns one datagram, a ring
// of 2 batches of 4 slots holds 8 datagrams before the thread waits, not 2, and the slots a batch
// gives back take the next datagram (the ring wraps).
TEST(ReceiveThread, ItsRingHoldsADatagramPerSlotWhenEachCallReturnsOne) {
  Loopback loopback;
  ReceiveThread thread(loopback.receiver.get(), 2, 4, kSlot, kControl);
  thread.start({}, "rx test");
  EXPECT_EQ(thread.next(std::chrono::milliseconds(0)), nullptr);  // it may receive from here on
  const auto sequence_of = [](const ReceiveBatch& batch) {
    std::uint64_t sequence = 0;
    std::memcpy(&sequence, batch.data(0), sizeof(sequence));
    return sequence;
  };
  std::vector<ReceiveBatch*> held;
  for (std::uint64_t sequence = 0; sequence < 8; ++sequence) {
    loopback.send(sequence, sequence + 1);  // the thread waits in recvmmsg: the call returns this one
    ReceiveBatch* batch = thread.next(std::chrono::seconds(5));
    ASSERT_NE(batch, nullptr) << "datagram " << sequence << " never came while the consumer held " << held.size()
                              << " batches of one datagram";
    ASSERT_EQ(batch->received, 1U);
    EXPECT_EQ(sequence_of(*batch), sequence);
    held.push_back(batch);
  }
  // Every slot is with the consumer: a ninth datagram stays in the socket.
  loopback.send(8, 9);
  for (int i = 0; i < 500 && thread.waits_for_batch() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_GT(thread.waits_for_batch(), 0U) << "the thread never found its ring full";
  EXPECT_EQ(thread.next(std::chrono::milliseconds(50)), nullptr);
  thread.give_back(held.front());
  ReceiveBatch* ninth = thread.next(std::chrono::seconds(5));
  ASSERT_NE(ninth, nullptr) << "a slot given back did not take the datagram that waited";
  EXPECT_EQ(sequence_of(*ninth), 8U);
  EXPECT_EQ(ninth->data(0), held.front()->data(0)) << "the ninth went into the first slot, freed first";
  for (std::size_t i = 1; i < held.size(); ++i) thread.give_back(held[i]);
  thread.give_back(ninth);
  EXPECT_EQ(thread.received_bytes(), 9U * 1000);
  thread.stop();
}

// Takes datagrams [from, to) from the thread, checking their order, and gives each batch back.
void take_in_order(ReceiveThread& thread, std::uint64_t from, std::uint64_t to) {
  std::uint64_t next = from;
  while (next < to) {
    ReceiveBatch* batch = thread.next(std::chrono::seconds(5));
    ASSERT_NE(batch, nullptr) << "nothing after datagram " << next;
    for (std::size_t i = 0; i < batch->received; ++i) {
      std::uint64_t sequence = 0;
      std::memcpy(&sequence, batch->data(i), sizeof(sequence));
      ASSERT_EQ(sequence, next);
      ++next;
    }
    thread.give_back(batch);
  }
}

// Without a spin every call may sleep in the kernel; with one longer than the stream's pauses
// (groups of 64 datagrams 0.2 ms apart, then 20 ms before the last) the thread polls through them
// and never blocks, and the pause counts as spinning.
TEST(ReceiveThread, WithASpinLongerThanThePausesItNeverBlocks) {
  for (const auto spin : {std::chrono::nanoseconds(0), std::chrono::nanoseconds(std::chrono::seconds(10))}) {
    SCOPED_TRACE(spin.count() == 0 ? "no spin" : "10 s spin");
    Loopback loopback;
    ReceiveThread thread(loopback.receiver.get(), 2, 4, kSlot, kControl, spin);
    thread.start({}, "rx spin");
    std::thread sender([&] { loopback.send(0, 640); });
    take_in_order(thread, 0, 640);
    sender.join();
    // Every batch is back: the thread finds the socket empty until the last datagram comes.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    loopback.send(640, 641);
    take_in_order(thread, 640, 641);
    EXPECT_EQ(thread.received_bytes(), 641U * 1000);
    if (spin.count() == 0) {
      EXPECT_GT(thread.blocking_calls(), 0U);
      EXPECT_EQ(thread.spin_ns(), 0U);
    } else {
      EXPECT_EQ(thread.blocking_calls(), 0U) << "a call blocked within the spin";
      EXPECT_GE(thread.spin_ns(), 5'000'000U) << "the 20 ms pause was not counted as spinning";
    }
    thread.stop();
  }
}

// A pause longer than the spin: the thread polls for the spin, then sleeps in a blocking call
// (its CPU time stays far below the pause), and the next datagram wakes it.
TEST(ReceiveThread, AfterASpinThatFindsNothingItSleepsUntilTheNextDatagram) {
  Loopback loopback;
  ReceiveThread thread(loopback.receiver.get(), 2, 4, kSlot, kControl, std::chrono::milliseconds(2));
  thread.start({}, "rx spin");
  loopback.send(0, 1);
  take_in_order(thread, 0, 1);
  const std::uint64_t cpu_before = thread.cpu_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::uint64_t cpu_over_pause = thread.cpu_ns() - cpu_before;
  EXPECT_GE(thread.blocking_calls(), 1U) << "it never gave up spinning";
  EXPECT_GE(thread.spin_ns(), 2'000'000U) << "it spun less than its spin";
  EXPECT_LT(cpu_over_pause, 150'000'000U) << "it spun through most of a 300 ms pause";
  loopback.send(1, 2);
  take_in_order(thread, 1, 2);
  thread.stop();
  EXPECT_EQ(thread.failed_errno(), 0);
}

TEST(ReceiveThread, StopEndsItWhileItWaitsInAReceive) {
  Loopback loopback;  // nothing is sent: the thread sits in recvmmsg
  ReceiveThread thread(loopback.receiver.get(), 2, 4, kSlot, kControl);
  thread.start({}, "rx test");
  EXPECT_EQ(thread.next(std::chrono::milliseconds(30)), nullptr);
  EXPECT_LT(timed([&] { thread.stop(); }), std::chrono::milliseconds(1000));
  EXPECT_EQ(thread.next(std::chrono::milliseconds(0)), nullptr);
  EXPECT_EQ(thread.failed_errno(), 0);
}

TEST(ReceiveThread, StopEndsItWhileItWaitsForABatchAndKeepsWhatItFilled) {
  Loopback loopback;
  ReceiveThread thread(loopback.receiver.get(), 2, 1, kSlot, kControl);
  thread.start({}, "rx test");
  EXPECT_EQ(thread.next(std::chrono::milliseconds(0)), nullptr);  // it may receive from here on
  loopback.send(0, 3);                                            // two fill the ring; the third waits in the socket
  ASSERT_TRUE([&] {
    for (int i = 0; i < 500 && thread.waits_for_batch() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return thread.waits_for_batch() > 0;
  }()) << "the thread never waited for a batch";
  EXPECT_LT(timed([&] { thread.stop(); }), std::chrono::milliseconds(1000));
  // The two filled batches are still there, in order, then nothing.
  for (std::uint64_t expected = 0; expected < 2; ++expected) {
    ReceiveBatch* batch = thread.next(std::chrono::milliseconds(0));
    ASSERT_NE(batch, nullptr);
    std::uint64_t sequence = 0;
    std::memcpy(&sequence, batch->data(0), sizeof(sequence));
    EXPECT_EQ(sequence, expected);
    thread.give_back(batch);
  }
  EXPECT_EQ(thread.next(std::chrono::milliseconds(0)), nullptr);
}

// The first thread's check raises the signal only once the socket holds the mark: a short queue
// leaves it down, a long one raises it (counted once while it stays up), and a standby waiter
// sees it at once; a standby thread's lowering puts it down again.
// Waits up to 5 s until socket `fd` holds `bytes` or more (SO_MEMINFO's receive allocation): on a
// busy machine the kernel may queue loopback datagrams well after the send returned.
bool wait_until_queued(int fd, std::uint32_t bytes) {
  for (int i = 0; i < 5000; ++i) {
    if (const auto memory = wire::receive_memory(fd); memory && memory->queued >= bytes) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(ReceiveStandby, TheSocketsQueueAtTheMarkRaisesItAndAWaiterSeesIt) {
  Loopback loopback;
  ReceiveStandby standby(256U << 10);
  loopback.send(0, 10);  // 10 datagrams: a few KiB held, under the mark
  ASSERT_TRUE(wait_until_queued(loopback.receiver.get(), 10 * 1000));
  standby.check(loopback.receiver.get());
  EXPECT_FALSE(standby.raised());
  EXPECT_FALSE(standby.wait(std::chrono::milliseconds(1)));
  loopback.send(10, 1000);  // about a MiB held with the kernel's overhead
  ASSERT_TRUE(wait_until_queued(loopback.receiver.get(), 256U << 10));
  std::this_thread::sleep_for(std::chrono::microseconds(100));  // past the check's interval
  standby.check(loopback.receiver.get());
  EXPECT_TRUE(standby.raised());
  EXPECT_TRUE(standby.wait(std::chrono::milliseconds(0)));
  standby.check(loopback.receiver.get());
  EXPECT_EQ(standby.raises(), 1U);
  standby.lower();
  EXPECT_FALSE(standby.raised());
}

// A standby thread takes nothing while the signal is down, even with datagrams waiting; once it
// is raised it receives them, lowers the signal when it finds the socket empty, and a stop ends
// it while it stands by.
TEST(ReceiveStandby, AStandbyThreadReceivesOnlyWhileTheSignalIsUp) {
  Loopback loopback;
  ReceiveStandby standby(1);
  ReceiveThread thread(loopback.receiver.get(), 2, 4, kSlot, kControl);
  thread.wait_outside_calls();
  thread.stand_by(&standby);
  thread.start({}, "rx standby");
  loopback.send(0, 4);
  ASSERT_TRUE(wait_until_queued(loopback.receiver.get(), 4 * 1000));
  EXPECT_EQ(thread.next(std::chrono::milliseconds(50)), nullptr) << "it received while standing by";
  EXPECT_EQ(thread.received_bytes(), 0U);
  std::this_thread::sleep_for(std::chrono::microseconds(100));
  standby.check(loopback.receiver.get());  // the mark is a byte: anything held raises it
  ASSERT_EQ(standby.raises(), 1U);         // (the thread may take all and lower it again at once)
  take_in_order(thread, 0, 4);
  EXPECT_TRUE([&] {
    for (int i = 0; i < 500 && standby.raised(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return !standby.raised();
  }()) << "an empty socket did not lower the signal";
  EXPECT_LT(timed([&] { thread.stop(); }), std::chrono::milliseconds(1000));
  EXPECT_EQ(thread.failed_errno(), 0);
  EXPECT_EQ(thread.blocking_calls(), 0U) << "a standby thread waits on the signal, not in a call";
}

// A backlog queued before the consumer asks wakes the standby thread as soon as the first thread
// finds the socket past the mark: both take datagrams, and a ReceiveMerge over them hands every
// one on once, in the order they were sent.
TEST(ReceiveStandby, AStandbyThreadDrainsABacklogBesideTheFirstAndTheMergeKeepsOrder) {
  Loopback loopback;
  const int one = 1;
  ASSERT_EQ(::setsockopt(loopback.receiver.get(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)), 0);
  ASSERT_TRUE(wire::wait_for_arrival_timestamps(std::chrono::seconds(1)));  // as the udp stage waits
  ReceiveStandby standby(256U << 10);
  ReceiveThread first(loopback.receiver.get(), 4, 4, kSlot, kControl, std::chrono::seconds(10));
  ReceiveThread second(loopback.receiver.get(), 4, 4, kSlot, kControl, std::chrono::seconds(10));
  first.wait_outside_calls();
  second.wait_outside_calls();
  first.watch_for_standby(&standby);
  second.stand_by(&standby);
  ReceiveMerge merge({&first, &second}, &received_then_sequence);
  first.start({}, "rx first");
  second.start({}, "rx standby");
  constexpr std::uint64_t kCount = 2000;  // a few MiB held: far past the mark, short of the buffer
  loopback.send(0, kCount);
  std::uint64_t next = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (next < kCount && std::chrono::steady_clock::now() < deadline) {
    const auto message = merge.next(std::chrono::milliseconds(50));
    if (!message) continue;
    std::uint64_t sequence = 0;
    std::memcpy(&sequence, message->batch->data(message->index), sizeof(sequence));
    ASSERT_EQ(sequence, next) << "handed on out of order";
    ++next;
    static_cast<void>(merge.done(*message));
  }
  first.stop();
  second.stop();
  EXPECT_EQ(next, kCount);
  EXPECT_FALSE(merge.next(std::chrono::milliseconds(0))) << "a datagram more than was sent";
  EXPECT_EQ(test_support::proc_udp_drops(loopback.port).value(), 0U);
  EXPECT_GE(standby.raises(), 1U);
  EXPECT_GT(second.received_bytes(), 0U) << "the standby thread took none of the backlog";
  EXPECT_EQ(first.received_bytes() + second.received_bytes(), kCount * 1000);
}

// The socket's descriptor is replaced by a file under the running thread (dup2): its next
// recvmmsg fails for real, and the thread ends with that errno.
TEST(ReceiveThread, AFailedReceiveEndsItWithItsErrno) {
  Loopback loopback;
  ReceiveThread thread(loopback.receiver.get(), 2, 4, kSlot, kControl);
  thread.start({}, "rx test");
  const wire::UniqueFd not_a_socket(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(not_a_socket.valid());
  ASSERT_EQ(::dup2(not_a_socket.get(), loopback.receiver.get()), loopback.receiver.get());
  EXPECT_EQ(thread.next(std::chrono::seconds(5)), nullptr);
  EXPECT_EQ(thread.failed_errno(), ENOTSOCK);
  thread.stop();
}

TEST(ReceiveThread, ItRunsOnTheCoresItIsGiven) {
  Loopback loopback;
  ReceiveThread thread(loopback.receiver.get(), 2, 4, kSlot, kControl);
  const int core = allowed_cores().front();
  thread.start({core}, "rx pinned");
  // Its entry under /proc/self/task, found by its name, shows the one core it may run on.
  std::string found;
  for (int attempt = 0; attempt < 100 && found.empty(); ++attempt) {
    for (const std::string& task : test::tasks_named("rx pinned"))
      found = test::status_field(task, "Cpus_allowed_list");
    if (found.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(found, std::to_string(core));
  thread.stop();
}

TEST(ReceiveThread, ACoreItMayNotUseIsAnErrorNamingTheCall) {
  Loopback loopback;
  ReceiveThread thread(loopback.receiver.get(), 2, 4, kSlot, kControl);
  try {
    thread.start({CPU_SETSIZE - 1}, "rx nowhere");
    FAIL() << "pinned to a core that is not there";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("pthread_setaffinity_np (receive thread): "), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace sluice
