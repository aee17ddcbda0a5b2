#pragma once
// How data-parallel ranks talk (docs/architecture.md, "Data parallel"): one small interface, with
// one rank alone (no communication) and MPI between processes behind it. Every call is collective:
// each rank makes the same calls in the same order, or the job waits forever (MPI's rule).
//
// The sums are Strata's own, not MPI's: a reduction adds the ranks' values in rank order,
// ((r0 + r1) + r2) + ..., whatever order the bytes arrive in, so a run repeats bitwise, and a
// gradient summed for every rank (ZeRO 0) has the bits of one summed for its owner (ZeRO 1, 2).
// NCCL's communicator (core/distributed/device_communicator.hpp) sums device rows in NCCL's order.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace strata {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual std::string name() const = 0;  // "one process", "MPI (Open MPI v4.1.4)"
  // False for a plan's ranks: no value is read or written, so the sums are skipped too.
  virtual bool moves_bytes() const noexcept { return true; }

  // Every rank's `mine` (the same size on each) into `all`, in rank order: size() x mine.size().
  virtual void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) = 0;
  // Rank `root`'s `bytes` into every rank's `bytes`.
  virtual void broadcast(std::span<std::byte> bytes, int root) = 0;
  // Every rank's `mine` (the same size on each) into root's `all`, in rank order; `all` is
  // ignored elsewhere.
  virtual void gather(std::span<const std::byte> mine, std::span<std::byte> all, int root) = 0;
  // A variable all-to-all of floats: send[send_offsets[r], + send_counts[r]) to rank r, and from
  // rank r into receive[receive_offsets[r], + receive_counts[r]).
  virtual void all_to_all(std::span<const float> send, std::span<const int> send_counts,
                          std::span<const int> send_offsets, std::span<float> receive,
                          std::span<const int> receive_counts, std::span<const int> receive_offsets) = 0;
  // Every rank's piece of `data` (piece r: [offsets[r], + counts[r])) into every rank's `data`.
  virtual void all_gather_pieces(std::span<float> data, std::span<const int> counts, std::span<const int> offsets) = 0;
  // Point to point, for a save's shards: `bytes` to rank `to`; from rank `from` into `bytes`.
  virtual void send(std::span<const std::byte> bytes, int to) = 0;
  virtual void receive(std::span<std::byte> bytes, int from) = 0;
  // Ends every rank of the job with this exit code: a rank that fails cannot leave the others
  // waiting in a collective call.
  [[noreturn]] virtual void abort(int exit_code) = 0;

  // The sum over the ranks of every rank's `data`: into every rank's (sum_to_all), or into root's
  // alone, the others' unchanged (sum_to). By default Strata's fixed-order sums (all_reduce_sum and
  // reduce_sum_to, below); NCCL's communicator sums device rows in NCCL's own order.
  virtual void sum_to_all(std::span<float> data, std::vector<float>& scratch);
  virtual void sum_to(std::span<float> data, int root, std::vector<float>& scratch);

  // Calls that overlap the caller's computing: `job` (which makes this communicator's calls) runs
  // on the communicator's own thread after every job submitted before it, so the ranks still make
  // the same calls in the same order. A communicator without such a thread runs it at once.
  using Ticket = std::uint64_t;
  virtual Ticket submit(std::function<void()> job);
  // Returns once the job of `ticket` and every job before it have run; rethrows a job's failure.
  virtual void wait(Ticket ticket);

  // Wall time spent communicating so far: in calls to the other ranks (waiting for them included),
  // and, where jobs run on a thread of the communicator's own, everything those jobs did (the sums'
  // additions too).
  virtual double seconds() const noexcept { return seconds_.load(); }
  // The part of it the caller spent blocked (in a call, or in wait()); the rest overlapped its
  // computing. Without a thread of its own, all of it.
  virtual double waited_seconds() const noexcept { return seconds(); }
  std::uint64_t bytes_sent() const noexcept { return bytes_sent_.load(); }

 protected:
  std::atomic<double> seconds_{0.0};  // written on the communicator's thread, read on the caller's
  std::atomic<std::uint64_t> bytes_sent_{0};

 private:
  Ticket submitted_ = 0;
};

// One rank alone: every collective copies its own bytes.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  std::string name() const override { return "one process"; }
  void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override;
  void broadcast(std::span<std::byte> bytes, int root) override;
  void gather(std::span<const std::byte> mine, std::span<std::byte> all, int root) override;
  void all_to_all(std::span<const float> send, std::span<const int> send_counts, std::span<const int> send_offsets,
                  std::span<float> receive, std::span<const int> receive_counts,
                  std::span<const int> receive_offsets) override;
  void all_gather_pieces(std::span<float> data, std::span<const int> counts, std::span<const int> offsets) override;
  void send(std::span<const std::byte> bytes, int to) override;
  void receive(std::span<std::byte> bytes, int from) override;
  [[noreturn]] void abort(int exit_code) override;
};

// One rank of `size` as `strata plan --ranks` drives it: the calls move no bytes (the dry backend's
// values mean nothing), so one process can plan each rank's memory in turn.
class PlanningCommunicator final : public Communicator {
 public:
  PlanningCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::string name() const override { return "a plan of " + std::to_string(size_) + " ranks"; }
  bool moves_bytes() const noexcept override { return false; }
  void all_gather(std::span<const std::byte>, std::span<std::byte>) override {}
  void broadcast(std::span<std::byte>, int) override {}
  void gather(std::span<const std::byte>, std::span<std::byte>, int) override {}
  void all_to_all(std::span<const float>, std::span<const int>, std::span<const int>, std::span<float>,
                  std::span<const int>, std::span<const int>) override {}
  void all_gather_pieces(std::span<float>, std::span<const int>, std::span<const int>) override {}
  void send(std::span<const std::byte>, int) override {}
  void receive(std::span<std::byte>, int) override {}
  [[noreturn]] void abort(int exit_code) override;

 private:
  int rank_ = 0;
  int size_ = 1;
};

// True when this process was started by mpirun (Open MPI's or a PMIx launcher's environment).
bool launched_by_mpirun();
// MPI's communicator when launched by mpirun (MPI is initialised here and finalised when it goes),
// the local one otherwise. Throws std::runtime_error when mpirun started a build without MPI.
std::unique_ptr<Communicator> make_communicator();

// The fixed-order sums. Each rank's piece of `data` is [r * n / size, (r + 1) * n / size).
// Every rank ends with the sum over ranks of `data`, each element added in rank order.
// `scratch` is resized to size() x the largest piece.
void all_reduce_sum(Communicator& communicator, std::span<float> data, std::vector<float>& scratch);
// Rank `root` ends with the sum, added in rank order; the others' `data` is unchanged.
void reduce_sum_to(Communicator& communicator, std::span<float> data, int root, std::vector<float>& scratch);
// Every rank's `mine` (the same count on each), rank after rank.
std::vector<double> all_gather_doubles(Communicator& communicator, std::span<const double> mine);

}  // namespace strata
