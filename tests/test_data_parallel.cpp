// The data-parallel sums (core/distributed/communicator.hpp) on ranks that are threads of this
// process: every element is added in rank order, whichever rank arrives first, so an all-reduce
// (zero 0) and a reduction to one owner (zero 1, 2) give the same bits, pieces and chunks included.
// The ranks under mpirun are tests/cli/data_parallel.sh's.
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "core/distributed/communicator.hpp"

namespace strata {
namespace {

// The ranks' shared mailbox: each call posts its buffers, waits for every rank, reads the others'
// and waits again before anyone may reuse a buffer.
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
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(Mailbox& mailbox, int rank) : mailbox_(mailbox), rank_(rank) {}
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
  void send(std::span<const std::byte>, int) override { FAIL() << "no point-to-point here"; }
  void receive(std::span<std::byte>, int) override { FAIL() << "no point-to-point here"; }
  [[noreturn]] void abort(int exit_code) override { std::_Exit(exit_code); }

 private:
  const Mailbox::Post& post(int rank) const { return mailbox_.sent[static_cast<std::size_t>(rank)]; }
  void exchange(Mailbox::Post mine, const std::function<void()>& read) {
    // The ranks arrive in a different order at every call: the last rank first, and so on.
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (size() - 1 - rank_)));
    mailbox_.sent[static_cast<std::size_t>(rank_)] = mine;
    mailbox_.sync.arrive_and_wait();
    read();
    mailbox_.sync.arrive_and_wait();
  }
  Mailbox& mailbox_;
  int rank_;
};

// Runs body(communicator) on `ranks` threads.
void on_ranks(int ranks, const std::function<void(Communicator&)>& body) {
  Mailbox mailbox(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator communicator(mailbox, r);
      body(communicator);
    });
  for (std::thread& thread : threads) thread.join();
}

// Rank r's values: large and small together, so that the order of the additions shows in the bits.
std::vector<float> values_of(int rank, std::size_t n) {
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Ranks 0 and 1 cancel; a small value added before or after the cancellation shows the order.
    const float large = i % 2 == 0 ? 1e8f : -1e8f;
    values[i] = rank == 0   ? large
                : rank == 1 ? -large
                            : 1.0f + 1e-3f * static_cast<float>((i * 7 + static_cast<std::size_t>(rank)) % 13);
  }
  return values;
}

std::vector<float> in_rank_order(int ranks, std::size_t n) {
  std::vector<float> sum = values_of(0, n);
  for (int r = 1; r < ranks; ++r) {
    const std::vector<float> part = values_of(r, n);
    for (std::size_t i = 0; i < n; ++i) sum[i] += part[i];
  }
  return sum;
}

TEST(DataParallelSums, EveryElementIsAddedInRankOrderWhateverTheArrival) {
  for (const int ranks : {2, 3}) {
    // One element, a size the ranks do not divide, and more than one chunk of the sums' calls.
    for (const std::size_t n : {std::size_t{1}, std::size_t{1000003}, (std::size_t{1} << 22) + 5}) {
      const std::vector<float> expected = in_rank_order(ranks, n);
      // With three ranks another order gives other bits: the test can tell the orders apart.
      std::vector<float> reversed = values_of(ranks - 1, n);
      for (int r = ranks - 2; r >= 0; --r) {
        const std::vector<float> part = values_of(r, n);
        for (std::size_t i = 0; i < n; ++i) reversed[i] += part[i];
      }
      if (ranks >= 3) {
        ASSERT_NE(0, std::memcmp(expected.data(), reversed.data(), n * sizeof(float)));
      }
      std::vector<std::vector<float>> all_reduced(static_cast<std::size_t>(ranks)), reduced(all_reduced.size());
      on_ranks(ranks, [&](Communicator& communicator) {
        const auto r = static_cast<std::size_t>(communicator.rank());
        std::vector<float> scratch;
        all_reduced[r] = values_of(communicator.rank(), n);
        all_reduce_sum(communicator, all_reduced[r], scratch);
        reduced[r] = values_of(communicator.rank(), n);
        reduce_sum_to(communicator, reduced[r], ranks - 1, scratch);
      });
      for (int r = 0; r < ranks; ++r)
        EXPECT_EQ(0, std::memcmp(all_reduced[static_cast<std::size_t>(r)].data(), expected.data(), n * sizeof(float)))
            << ranks << " ranks, " << n << " elements: rank " << r << "'s all-reduce is not the sum in rank order";
      EXPECT_EQ(0, std::memcmp(reduced[static_cast<std::size_t>(ranks - 1)].data(), expected.data(), n * sizeof(float)))
          << ranks << " ranks, " << n << " elements: the reduction to the owner is not the sum in rank order";
      EXPECT_EQ(reduced[0], values_of(0, n)) << "a reduction changed a rank that does not own the sum";
    }
  }
}

TEST(DataParallelSums, OneRankAloneIsLeftAsItIs) {
  LocalCommunicator alone;
  std::vector<float> values = values_of(0, 17), scratch;
  all_reduce_sum(alone, values, scratch);
  reduce_sum_to(alone, values, 0, scratch);
  EXPECT_EQ(values, values_of(0, 17));
  const std::vector<double> mine{2.5, -1.0};
  EXPECT_EQ(all_gather_doubles(alone, mine), mine);
}

}  // namespace
}  // namespace strata
