// NCCL between the GPUs of a data-parallel run's CUDA ranks (core/distributed/device_communicator.hpp).
// A row in device memory goes through NCCL, enqueued on the backend's compute stream: it runs after
// the kernels that wrote the row and before those that read it or reuse its memory (the arena
// frees into the stream-ordered pool on that stream), so no host thread waits and no event is
// needed. A row in host memory (an offloaded one) goes through the host communicator, MPI.
// Every rank decides by its own row's placement, which strategies make the same on every rank
// (they place whole groups of rows by the manifest).
//
// NCCL sums in its own order (ring or tree, chosen by size and topology), so unlike Strata's
// fixed-order sums its results are not bitwise those of a given rank order; tests bound them.
// Its calls run between the kernels on the one stream, so none of their time is hidden.
//
// libnccl is opened when CUDA ranks start, not linked: a machine without it runs everything else,
// and CUDA ranks there are refused, naming what dlopen said.
#include <cuda_runtime.h>

#include <cstdlib>
#include <deque>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/device/cuda/cuda_memory.hpp"
#include "core/distributed/device_communicator.hpp"
#include "core/distributed/nccl_library.hpp"

namespace strata {

namespace {

// Device memory (the arena's pool) or managed memory, which NCCL reads and writes; host memory,
// pinned or not, is not.
bool on_device(const void* data) {
  if (data == nullptr) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, data) != cudaSuccess) {
    cudaGetLastError();  // a pointer CUDA cannot place is host memory; clear the error it left
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

// The time of NCCL's work on the stream, from an event before and one after each call, read once
// the stream has passed them: a call's time includes waiting for the other ranks to join it.
class StreamTimer {
 public:
  explicit StreamTimer(cudaStream_t stream) : stream_(stream) {}
  ~StreamTimer() {
    for (const Pair& pair : pending_) destroy(pair);
    for (const Pair& pair : free_) destroy(pair);
  }
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  template <typename Call>
  void time(Call&& call) {
    const Pair pair = take();
    free_.push_back(pair);  // until both events are recorded: a failing call leaves no pair half timed
    check_cuda(cudaEventRecord(pair.start, stream_), "cudaEventRecord");
    call();
    check_cuda(cudaEventRecord(pair.stop, stream_), "cudaEventRecord");
    free_.pop_back();
    pending_.push_back(pair);
  }
  // Seconds of the calls the stream has finished, each added once. cudaEventQuery's
  // cudaErrorNotReady is not recorded as an error, so nothing is left to clear.
  double seconds() noexcept {
    while (!pending_.empty() && cudaEventQuery(pending_.front().stop) == cudaSuccess) {
      float ms = 0.0f;
      if (cudaEventElapsedTime(&ms, pending_.front().start, pending_.front().stop) == cudaSuccess)
        seconds_ += static_cast<double>(ms) / 1000.0;
      free_.push_back(pending_.front());
      pending_.pop_front();
    }
    return seconds_;
  }

 private:
  struct Pair {
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
  };
  Pair take() {
    if (!free_.empty()) {
      const Pair pair = free_.back();
      free_.pop_back();
      return pair;
    }
    Pair pair;
    check_cuda(cudaEventCreate(&pair.start), "cudaEventCreate");
    if (const cudaError_t status = cudaEventCreate(&pair.stop); status != cudaSuccess) {
      cudaEventDestroy(pair.start);
      check_cuda(status, "cudaEventCreate");
    }
    return pair;
  }
  static void destroy(const Pair& pair) noexcept {
    cudaEventDestroy(pair.start);
    cudaEventDestroy(pair.stop);
  }
  cudaStream_t stream_;
  std::deque<Pair> pending_;
  std::vector<Pair> free_;
  double seconds_ = 0.0;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& host, const KernelTarget& target)
      : host_(host), device_(target.device_index), stream_(static_cast<cudaStream_t>(target.stream)) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    timer_.emplace(stream_);
    ncclUniqueId id{};
    if (host_.rank() == 0) nccl_.check(nccl_.get_unique_id(&id), "ncclGetUniqueId");
    host_.broadcast({reinterpret_cast<std::byte*>(&id), sizeof(id)}, 0);
    // Every connection and its buffers now, before the model is placed, rather than at a call's
    // first use (NCCL 2.22's default): a save's first sends, hours in, cannot then find the device
    // full. NCCL's buffers are outside the arena; the driver's count of the device includes them.
    ::setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
    nccl_.check(nccl_.comm_init_rank(&comm_, host_.size(), id, host_.rank()), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    // A rank that fails unwinds through here while the others may wait for it, in NCCL or in MPI:
    // waiting for the stream or for NCCL's teardown could then never end. It aborts instead, and
    // the host communicator ends the job (MPI_Abort).
    if (std::uncaught_exceptions() > 0) {
      nccl_.comm_abort(comm_);
      return;
    }
    cudaStreamSynchronize(stream_);  // every call enqueued has run
    nccl_.comm_destroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const noexcept override { return host_.rank(); }
  int size() const noexcept override { return host_.size(); }
  std::string name() const override {
    return nccl_.description() + " on cuda:" + std::to_string(device_) + ", host rows through " + host_.name();
  }

  void broadcast(std::span<std::byte> bytes, int root) override {
    if (!on_device(bytes.data())) return forward([&] { host_.broadcast(bytes, root); });
    nccl(rank() == root && size() > 1 ? bytes.size() : 0, [&] {
      nccl_.check(nccl_.broadcast(bytes.data(), bytes.data(), bytes.size(), ncclUint8, root, comm_, stream_),
                  "ncclBroadcast", comm_);
    });
  }
  void sum_to_all(std::span<float> data, std::vector<float>& scratch) override {
    if (!on_device(data.data())) return forward([&] { host_.sum_to_all(data, scratch); });
    nccl(size() > 1 ? data.size_bytes() : 0, [&] {
      nccl_.check(nccl_.all_reduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm_, stream_),
                  "ncclAllReduce", comm_);
    });
  }
  void sum_to(std::span<float> data, int root, std::vector<float>& scratch) override {
    if (!on_device(data.data())) return forward([&] { host_.sum_to(data, root, scratch); });
    nccl(rank() == root ? 0 : data.size_bytes(), [&] {
      nccl_.check(nccl_.reduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, root, comm_, stream_),
                  "ncclReduce", comm_);
    });
  }
  // A save's shards, which the host reads next: each waits for the stream.
  void send(std::span<const std::byte> bytes, int to) override {
    if (!on_device(bytes.data())) return forward([&] { host_.send(bytes, to); });
    nccl(bytes.size(), [&] {
      nccl_.check(nccl_.send(bytes.data(), bytes.size(), ncclUint8, to, comm_, stream_), "ncclSend", comm_);
    });
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize after ncclSend");
  }
  void receive(std::span<std::byte> bytes, int from) override {
    if (!on_device(bytes.data())) return forward([&] { host_.receive(bytes, from); });
    nccl(0, [&] {
      nccl_.check(nccl_.recv(bytes.data(), bytes.size(), ncclUint8, from, comm_, stream_), "ncclRecv", comm_);
    });
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize after ncclRecv");
  }

  // The pieces of Strata's fixed-order sums and the small host exchanges (norms, flags, telemetry):
  // host rows only. Device rows are summed by NCCL (sum_to_all, sum_to).
  void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    host_rows_only(mine.data(), "all_gather");
    forward([&] { host_.all_gather(mine, all); });
  }
  void gather(std::span<const std::byte> mine, std::span<std::byte> all, int root) override {
    host_rows_only(mine.data(), "gather");
    forward([&] { host_.gather(mine, all, root); });
  }
  void all_to_all(std::span<const float> send, std::span<const int> send_counts, std::span<const int> send_offsets,
                  std::span<float> receive, std::span<const int> receive_counts,
                  std::span<const int> receive_offsets) override {
    host_rows_only(send.data(), "all_to_all");
    forward([&] { host_.all_to_all(send, send_counts, send_offsets, receive, receive_counts, receive_offsets); });
  }
  void all_gather_pieces(std::span<float> data, std::span<const int> counts, std::span<const int> offsets) override {
    host_rows_only(data.data(), "all_gather_pieces");
    forward([&] { host_.all_gather_pieces(data, counts, offsets); });
  }

  [[noreturn]] void abort(int exit_code) override {
    nccl_.comm_abort(comm_);  // no call of this rank's waits on the others any more
    host_.abort(exit_code);
    std::_Exit(exit_code);  // not reached: GCC does not carry [[noreturn]] through the virtual call
  }

  // The host communicator's time and NCCL's on the stream; NCCL's runs between the kernels, so
  // the caller waits for all of it.
  double seconds() const noexcept override { return host_.seconds() + timer_->seconds(); }
  double waited_seconds() const noexcept override { return host_.waited_seconds() + timer_->seconds(); }

 private:
  static void host_rows_only(const void* data, const char* call) {
    if (on_device(data))
      throw std::logic_error(std::string("NCCL's communicator: ") + call +
                             " on device rows (Strata's fixed-order sums run on host rows; device rows are NCCL's)");
  }
  template <typename Call>
  void forward(Call&& call) {
    const std::uint64_t before = host_.bytes_sent();
    call();
    bytes_sent_ += host_.bytes_sent() - before;
  }
  // `bytes`: the bytes of the rows this rank hands NCCL for the other ranks (NCCL's ring or tree
  // moves more: an all-reduce up to twice).
  template <typename Call>
  void nccl(std::size_t bytes, Call&& call) {
    timer_->time(std::forward<Call>(call));
    bytes_sent_ += bytes;
  }

  NcclLibrary nccl_;  // first: loaded before anything calls it, closed after the communicator goes
  Communicator& host_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  mutable std::optional<StreamTimer> timer_;  // made on the device; reading it adds the finished calls' time
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool nccl_built() {
  return true;
}

std::string nccl_unavailable_reason() {
  try {
    const NcclLibrary library;
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string nccl_description() {
  try {
    return NcclLibrary().description();
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host, const KernelTarget& target) {
  return std::make_unique<NcclCommunicator>(host, target);
}

}  // namespace strata
