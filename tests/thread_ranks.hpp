#pragma once
// Data-parallel ranks that are threads of one process (tests/test_data_parallel*.cpp): each call
// posts its buffers in a shared mailbox, waits for every rank, reads the others' and waits again
// before anyone may reuse a buffer. The ranks arrive in a different order at every call.
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/distributed/communication_thread.hpp"
#include "core/distributed/communicator.hpp"

namespace strata::test {

struct Mailbox {
  explicit Mailbox(int size) : ranks(size), sync(size), sent(static_cast<std::size_t>(size)) {}
  int ranks;
  std::barrier<> sync;
  struct Post {
    const std::byte* bytes = nullptr;
    std::size_t size = 0;
    const int* counts = nullptr;
    const int* offsets = nullptr;
  };
  std::vector<Post> sent;
  // Point to point: each message copied into the queue of its (from, to) pair, as MPI buffers a send.
  std::mutex lock;
  std::condition_variable arrived;
  std::map<std::pair<int, int>, std::deque<std::vector<std::byte>>> messages;
};

// With `own_thread`, the calls run on a thread of the rank's own, as the MPI communicator's do, so
// a submitted job overlaps the caller's computing; `lag` is slept before every call, so that jobs
// are still in flight when the caller goes on.
class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(Mailbox& mailbox, int rank, bool own_thread = false,
                     std::chrono::microseconds lag = std::chrono::microseconds(0))
      : mailbox_(mailbox), rank_(rank), lag_(lag) {
    if (own_thread) thread_ = std::make_unique<CommunicationThread>();
  }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return mailbox_.ranks; }
  std::string name() const override { return "threads"; }
  void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    exchange({mine.data(), mine.size()}, [&] {
      for (int r = 0; r < size(); ++r) std::memcpy(all.data() + r * mine.size(), post(r).bytes, mine.size());
    });
  }
  void broadcast(std::span<std::byte> bytes, int root) override {
    exchange({bytes.data(), bytes.size()}, [&] {
      if (rank_ != root) std::memcpy(bytes.data(), post(root).bytes, bytes.size());
    });
  }
  void gather(std::span<const std::byte> mine, std::span<std::byte> all, int root) override {
    exchange({mine.data(), mine.size()}, [&] {
      if (rank_ == root)
        for (int r = 0; r < size(); ++r) std::memcpy(all.data() + r * mine.size(), post(r).bytes, mine.size());
    });
  }
  void all_to_all(std::span<const float> send, std::span<const int> send_counts, std::span<const int> send_offsets,
                  std::span<float> receive, std::span<const int> receive_counts,
                  std::span<const int> receive_offsets) override {
    exchange({reinterpret_cast<const std::byte*>(send.data()), 0, send_counts.data(), send_offsets.data()}, [&] {
      for (int r = 0; r < size(); ++r) {
        const Mailbox::Post& from = post(r);
        ASSERT_EQ(from.counts[rank_], receive_counts[static_cast<std::size_t>(r)]);
        if (from.counts[rank_] == 0) continue;  // an empty piece may have no buffer
        std::memcpy(receive.data() + receive_offsets[static_cast<std::size_t>(r)],
                    reinterpret_cast<const float*>(from.bytes) + from.offsets[rank_],
                    sizeof(float) * static_cast<std::size_t>(from.counts[rank_]));
      }
    });
  }
  void all_gather_pieces(std::span<float> data, std::span<const int> counts, std::span<const int> offsets) override {
    exchange({reinterpret_cast<const std::byte*>(data.data()), 0}, [&] {
      for (int r = 0; r < size(); ++r)
        if (r != rank_ && counts[static_cast<std::size_t>(r)] > 0)
          std::memcpy(data.data() + offsets[static_cast<std::size_t>(r)],
                      reinterpret_cast<const float*>(post(r).bytes) + offsets[static_cast<std::size_t>(r)],
                      sizeof(float) * static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]));
    });
  }
  void send(std::span<const std::byte> bytes, int to) override {
    const auto call = [&] {
      std::this_thread::sleep_for(lag_);
      {
        const std::lock_guard<std::mutex> hold(mailbox_.lock);
        mailbox_.messages[{rank_, to}].emplace_back(bytes.begin(), bytes.end());
      }
      mailbox_.arrived.notify_all();
    };
    on_own_thread(call);
  }
  void receive(std::span<std::byte> bytes, int from) override {
    const auto call = [&] {
      std::unique_lock<std::mutex> hold(mailbox_.lock);
      std::deque<std::vector<std::byte>>& queue = mailbox_.messages[{from, rank_}];
      mailbox_.arrived.wait(hold, [&] { return !queue.empty(); });
      ASSERT_EQ(queue.front().size(), bytes.size()) << "a message of another size than the receive's";
      std::copy(queue.front().begin(), queue.front().end(), bytes.begin());
      queue.pop_front();
    };
    on_own_thread(call);
  }
  [[noreturn]] void abort(int exit_code) override { std::_Exit(exit_code); }

  Ticket submit(std::function<void()> job) override {
    return thread_ ? thread_->submit(std::move(job)) : Communicator::submit(std::move(job));
  }
  void wait(Ticket ticket) override {
    if (thread_) thread_->wait(ticket);
  }
  double waited_seconds() const noexcept override { return thread_ ? thread_->waited_seconds() : seconds(); }

 private:
  const Mailbox::Post& post(int rank) const { return mailbox_.sent[static_cast<std::size_t>(rank)]; }
  void exchange(Mailbox::Post mine, const std::function<void()>& read) {
    const auto call = [&] {
      const auto start = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(lag_ + std::chrono::microseconds(200 * (size() - 1 - rank_)));
      mailbox_.sent[static_cast<std::size_t>(rank_)] = mine;
      mailbox_.sync.arrive_and_wait();
      read();
      mailbox_.sync.arrive_and_wait();
      seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    on_own_thread(call);
  }
  // Where every call runs: the rank's own thread when it has one, else here.
  void on_own_thread(const std::function<void()>& call) {
    if (thread_)
      thread_->run(call);
    else
      call();
  }
  Mailbox& mailbox_;
  int rank_;
  std::chrono::microseconds lag_;
  std::unique_ptr<CommunicationThread> thread_;
};

// Runs body(communicator) on `ranks` threads.
inline void on_ranks(int ranks, const std::function<void(Communicator&)>& body, bool own_thread = false,
                     std::chrono::microseconds lag = std::chrono::microseconds(0)) {
  Mailbox mailbox(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator communicator(mailbox, r, own_thread, lag);
      body(communicator);
    });
  for (std::thread& thread : threads) thread.join();
}

}  // namespace strata::test
