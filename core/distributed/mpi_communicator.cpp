// The communicator between processes that mpirun started (Open MPI from Debian). MPI lives on the
// communicator's own thread (core/distributed/communication_thread.hpp), from MPI_Init to
// MPI_Finalize: a blocking call runs there and waits, a submitted job runs there while the caller
// computes. MPI's default error handler ends the job on a lost rank, and mpirun names it.
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/distributed/communication_thread.hpp"
#include "core/distributed/communicator.hpp"

namespace strata {

namespace {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    // A blocking call waits in MPI's progress loop, which spins unless told to yield. mpirun tells
    // a rank to spin when the ranks have a core each, but this thread shares its rank's core with
    // the rank's computing: it yields.
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/1);
    int provided = 0;
    thread_.run([&] {
      // This thread makes every call but MPI_Abort, which a failing rank makes from its own thread
      // while this one may be inside a collective call: legal at MPI_THREAD_MULTIPLE alone.
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      if (provided < MPI_THREAD_FUNNELED) {
        MPI_Finalize();
        throw std::runtime_error(
            "this MPI library cannot be used by a process with other threads (it gives thread level " +
            std::to_string(provided) + ", below MPI_THREAD_FUNNELED)");
      }
      MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &size_);
      char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
      int length = 0;
      MPI_Get_library_version(version, &length);
      library_ = std::string(version, static_cast<std::size_t>(length));
    });
    if (const auto comma = library_.find(','); comma != std::string::npos) library_.resize(comma);
    provided_ = provided;
  }
  ~MpiCommunicator() override {
    try {
      thread_.run([] { MPI_Finalize(); });
    } catch (...) {  // a job failed before: the run has reported it
    }
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::string name() const override { return "MPI (" + library_ + ")"; }

  void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    timed(mine.size(), [&] {
      MPI_Allgather(mine.data(), count(mine.size()), MPI_BYTE, all.data(), count(mine.size()), MPI_BYTE,
                    MPI_COMM_WORLD);
    });
  }
  // Rows of any size, in messages of at most kMessage bytes (MPI's counts are ints).
  void broadcast(std::span<std::byte> bytes, int root) override {
    timed(rank_ == root ? bytes.size() : 0, [&] {
      for (std::size_t at = 0; at < bytes.size(); at += kMessage) {
        const std::size_t n = std::min(kMessage, bytes.size() - at);
        MPI_Bcast(bytes.data() + at, count(n), MPI_BYTE, root, MPI_COMM_WORLD);
      }
    });
  }
  void gather(std::span<const std::byte> mine, std::span<std::byte> all, int root) override {
    timed(mine.size(), [&] {
      MPI_Gather(mine.data(), count(mine.size()), MPI_BYTE, all.data(), count(mine.size()), MPI_BYTE, root,
                 MPI_COMM_WORLD);
    });
  }
  void all_to_all(std::span<const float> send, std::span<const int> send_counts, std::span<const int> send_offsets,
                  std::span<float> receive, std::span<const int> receive_counts,
                  std::span<const int> receive_offsets) override {
    std::size_t sent = 0;
    for (int r = 0; r < size_; ++r)
      if (r != rank_) sent += static_cast<std::size_t>(send_counts[static_cast<std::size_t>(r)]) * sizeof(float);
    timed(sent, [&] {
      MPI_Alltoallv(send.data(), send_counts.data(), send_offsets.data(), MPI_FLOAT, receive.data(),
                    receive_counts.data(), receive_offsets.data(), MPI_FLOAT, MPI_COMM_WORLD);
    });
  }
  void all_gather_pieces(std::span<float> data, std::span<const int> counts, std::span<const int> offsets) override {
    timed(static_cast<std::size_t>(counts[static_cast<std::size_t>(rank_)]) * sizeof(float) *
              static_cast<std::size_t>(size_ - 1),
          [&] {
            MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data.data(), counts.data(), offsets.data(), MPI_FLOAT,
                           MPI_COMM_WORLD);
          });
  }
  void send(std::span<const std::byte> bytes, int to) override {
    timed(bytes.size(), [&] {
      for (std::size_t at = 0; at < bytes.size(); at += kMessage)
        MPI_Send(bytes.data() + at, count(std::min(kMessage, bytes.size() - at)), MPI_BYTE, to, 0, MPI_COMM_WORLD);
    });
  }
  void receive(std::span<std::byte> bytes, int from) override {
    timed(0, [&] {
      for (std::size_t at = 0; at < bytes.size(); at += kMessage)
        MPI_Recv(bytes.data() + at, count(std::min(kMessage, bytes.size() - at)), MPI_BYTE, from, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    });
  }
  // From the caller's thread, which may find the communicator's thread blocked in a collective
  // call that will never end. Below MPI_THREAD_MULTIPLE that thread's call may not be joined by
  // another: the rank exits with the code, and mpirun ends the job on a rank that exits unfinalized.
  [[noreturn]] void abort(int exit_code) override {
    if (provided_ >= MPI_THREAD_MULTIPLE) MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }
  double seconds() const noexcept override { return thread_.busy_seconds(); }
  Ticket submit(std::function<void()> job) override { return thread_.submit(std::move(job)); }
  void wait(Ticket ticket) override { thread_.wait(ticket); }
  double waited_seconds() const noexcept override { return thread_.waited_seconds(); }

 private:
  static constexpr std::size_t kMessage = std::size_t{1} << 30;
  static int count(std::size_t bytes) {
    if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::length_error("one MPI message of " + std::to_string(bytes) + " bytes: more than MPI's int count");
    return static_cast<int>(bytes);
  }
  // Runs an MPI call on the communicator's thread (at once when a job makes it there), counting the
  // bytes it sends; the thread times it (seconds()).
  template <typename Call>
  void timed(std::size_t bytes, Call&& call) {
    thread_.run([&] {
      call();
      bytes_sent_ += bytes;
    });
  }
  CommunicationThread thread_;
  int provided_ = 0;  // MPI's thread level
  int rank_ = 0;
  int size_ = 1;
  std::string library_;
};

}  // namespace

std::unique_ptr<Communicator> make_communicator() {
  if (!launched_by_mpirun()) return std::make_unique<LocalCommunicator>();
  return std::make_unique<MpiCommunicator>();
}

}  // namespace strata
