// The data-parallel sums (core/distributed/communicator.hpp) on ranks that are threads of this
// process: every element is added in rank order, whichever rank arrives first, so an all-reduce
// (zero 0) and a reduction to one owner (zero 1, 2) give the same bits, pieces and chunks included.
// The ranks under mpirun are tests/cli/data_parallel.sh's.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/distributed/communication_thread.hpp"
#include "core/distributed/communicator.hpp"
#include "core/distributed/device_communicator.hpp"
#include "thread_ranks.hpp"

namespace strata::test {
namespace {

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

// The communicator's thread (core/distributed/communication_thread.hpp): jobs run in the order
// submitted while the caller goes on, a failure reaches the caller, and a job's own calls run at once.
TEST(CommunicationThread, RunsJobsInOrderWhileTheCallerGoesOn) {
  CommunicationThread thread;
  std::atomic<bool> caller_went_on{false};
  std::vector<int> order;
  const auto first = thread.submit([&] {
    // Submit returned before this job ran: the caller sets the flag only after it has.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!caller_went_on.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    order.push_back(caller_went_on.load() ? 1 : -1);
  });
  const auto second = thread.submit([&] { order.push_back(2); });
  EXPECT_LT(first, second);
  caller_went_on = true;
  thread.wait(first);
  thread.wait(second);
  EXPECT_EQ(order, (std::vector<int>{1, 2})) << "-1: the job ran inside submit(), before the caller went on";
  EXPECT_GT(thread.waited_seconds(), 0.0);
}

TEST(CommunicationThread, AFailureReachesTheCallerAndTheJobsAfterItStillRun) {
  CommunicationThread thread;
  bool later_ran = false, nested_ran = false;
  const auto failing = thread.submit([] { throw std::runtime_error("the other rank is gone"); });
  const auto later = thread.submit([&] {
    thread.run([&] { nested_ran = thread.on_thread(); });  // at once: waiting here would never end
    later_ran = true;
  });
  EXPECT_THROW(thread.wait(failing), std::runtime_error);
  EXPECT_THROW(thread.wait(later), std::runtime_error);  // the rank has failed: every wait says so
  EXPECT_TRUE(later_ran);
  EXPECT_TRUE(nested_ran);
}

// The sums submitted to each rank's own thread, lagging behind the caller, give the bits of the
// blocking calls.
TEST(DataParallelSums, SubmittedSumsGiveTheBlockingCallsBits) {
  const int ranks = 3;
  const std::size_t n = 100003;
  const std::vector<float> expected = in_rank_order(ranks, n);
  std::vector<std::vector<float>> summed(ranks);
  on_ranks(
      ranks,
      [&](Communicator& communicator) {
        const auto r = static_cast<std::size_t>(communicator.rank());
        summed[r] = values_of(communicator.rank(), n);
        std::vector<float> scratch;
        const Communicator::Ticket ticket =
            communicator.submit([&] { all_reduce_sum(communicator, summed[r], scratch); });
        communicator.wait(ticket);
      },
      /*own_thread=*/true, std::chrono::microseconds(2000));
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(0, std::memcmp(summed[static_cast<std::size_t>(r)].data(), expected.data(), n * sizeof(float)))
        << "rank " << r;
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

// Each CUDA rank on a machine takes its own GPU, counted from the manifest's; other kinds stay.
TEST(DataParallelDevices, ARankTakesTheGpuOfItsLocalRank) {
  EXPECT_EQ(rank_device_kind("cuda:0", 2, 4), "cuda:2");
  EXPECT_EQ(rank_device_kind("cuda:1", 2, 4), "cuda:3");
  EXPECT_EQ(rank_device_kind("cuda:1", -1, 4), "cuda:1") << "no launcher";
  EXPECT_EQ(rank_device_kind("cuda:0", 3, 1), "cuda:0") << "the launcher gave this rank one device";
  EXPECT_EQ(rank_device_kind("cpu", 2, 4), "cpu");
  EXPECT_EQ(rank_device_kind("cuda:x", 2, 4), "cuda:x") << "left for the backend to refuse, as written";
  EXPECT_EQ(rank_device_kind("cuda:", 2, 4), "cuda:");
  const char* before = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);
  EXPECT_EQ(launcher_local_rank(), 5);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "five", 1);
  EXPECT_EQ(launcher_local_rank(), -1);
  if (before != nullptr)
    ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", saved.c_str(), 1);
  else
    ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
}

// Without NCCL (in the build, or on the machine), CUDA ranks are refused, saying why; CPU ranks
// never are.
TEST(DataParallelDevices, CudaRanksNeedNccl) {
  EXPECT_EQ(device_communication_unavailable("cpu"), "");
  const std::string why = device_communication_unavailable("cuda:0");
  const std::string reason = nccl_unavailable_reason();
  EXPECT_EQ(why.empty(), reason.empty()) << why;
  EXPECT_NE(why.find(reason), std::string::npos) << why;
  if (!nccl_built()) {
    EXPECT_NE(why.find("no NCCL"), std::string::npos) << why;
  } else if (reason.empty()) {  // libnccl opened, no GPU needed: its version through the looked-up symbols
    EXPECT_EQ(nccl_description().rfind("NCCL 2.", 0), 0u) << nccl_description();
  }
  std::printf("NCCL here: %s\n", reason.empty() ? nccl_description().c_str() : reason.c_str());
}

}  // namespace
}  // namespace strata::test
