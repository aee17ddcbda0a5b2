#include "core/distributed/communicator.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace strata {

Communicator::Ticket Communicator::submit(std::function<void()> job) {
  job();
  return ++submitted_;
}

void Communicator::wait(Ticket) {}

void Communicator::sum_to_all(std::span<float> data, std::vector<float>& scratch) {
  all_reduce_sum(*this, data, scratch);
}

void Communicator::sum_to(std::span<float> data, int root, std::vector<float>& scratch) {
  reduce_sum_to(*this, data, root, scratch);
}

void LocalCommunicator::all_gather(std::span<const std::byte> mine, std::span<std::byte> all) {
  std::copy(mine.begin(), mine.end(), all.begin());
}

void LocalCommunicator::broadcast(std::span<std::byte>, int) {}

void LocalCommunicator::gather(std::span<const std::byte> mine, std::span<std::byte> all, int) {
  std::copy(mine.begin(), mine.end(), all.begin());
}

void LocalCommunicator::all_to_all(std::span<const float> send, std::span<const int> send_counts,
                                   std::span<const int> send_offsets, std::span<float> receive, std::span<const int>,
                                   std::span<const int> receive_offsets) {
  std::copy_n(send.begin() + send_offsets[0], send_counts[0], receive.begin() + receive_offsets[0]);
}

void LocalCommunicator::all_gather_pieces(std::span<float>, std::span<const int>, std::span<const int>) {}

// One rank has no one to send to: a call is a bug in the caller.
void LocalCommunicator::send(std::span<const std::byte>, int to) {
  throw std::logic_error("a send to rank " + std::to_string(to) + " in a run of one rank");
}

void LocalCommunicator::receive(std::span<std::byte>, int from) {
  throw std::logic_error("a receive from rank " + std::to_string(from) + " in a run of one rank");
}

void LocalCommunicator::abort(int exit_code) {
  std::_Exit(exit_code);
}

void PlanningCommunicator::abort(int exit_code) {
  std::_Exit(exit_code);
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

#ifndef STRATA_HAVE_MPI
std::unique_ptr<Communicator> make_communicator() {
  if (launched_by_mpirun())
    throw std::runtime_error(
        "started by mpirun, but this strata was built without MPI: install libopenmpi-dev and build again");
  return std::make_unique<LocalCommunicator>();
}
#endif

namespace {

// Rank r's piece of n elements: [r * n / size, (r + 1) * n / size).
std::int64_t piece_start(std::int64_t n, int rank, int size) {
  return n * rank / size;
}

// At most this many elements a collective call, so that the scratch stays small and MPI's int
// counts hold.
constexpr std::int64_t kChunk = std::int64_t{1} << 22;

}  // namespace

void all_reduce_sum(Communicator& communicator, std::span<float> data, std::vector<float>& scratch) {
  const int size = communicator.size(), rank = communicator.rank();
  if (size == 1) return;
  for (std::int64_t begin = 0; begin < static_cast<std::int64_t>(data.size()); begin += kChunk) {
    const std::int64_t n = std::min<std::int64_t>(kChunk, static_cast<std::int64_t>(data.size()) - begin);
    const std::span<float> chunk = data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(n));
    std::vector<int> counts(static_cast<std::size_t>(size)), offsets(counts.size());
    for (int r = 0; r < size; ++r) {
      offsets[static_cast<std::size_t>(r)] = static_cast<int>(piece_start(n, r, size));
      counts[static_cast<std::size_t>(r)] = static_cast<int>(piece_start(n, r + 1, size) - piece_start(n, r, size));
    }
    // Every rank's copy of my piece, rank after rank.
    const int mine = counts[static_cast<std::size_t>(rank)];
    scratch.resize(static_cast<std::size_t>(size) * static_cast<std::size_t>(mine));
    std::vector<int> receive_counts(counts.size(), mine), receive_offsets(counts.size());
    for (int r = 0; r < size; ++r) receive_offsets[static_cast<std::size_t>(r)] = r * mine;
    communicator.all_to_all(chunk, counts, offsets, scratch, receive_counts, receive_offsets);
    float* sum = chunk.data() + offsets[static_cast<std::size_t>(rank)];
    std::copy_n(scratch.data(), mine, sum);
    for (int r = 1; r < size; ++r) {
      const float* part = scratch.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(mine);
      for (int i = 0; i < mine; ++i) sum[i] += part[i];
    }
    communicator.all_gather_pieces(chunk, counts, offsets);
  }
}

void reduce_sum_to(Communicator& communicator, std::span<float> data, int root, std::vector<float>& scratch) {
  const int size = communicator.size();
  if (size == 1) return;
  const bool at_root = communicator.rank() == root;
  for (std::int64_t begin = 0; begin < static_cast<std::int64_t>(data.size()); begin += kChunk) {
    const std::int64_t n = std::min<std::int64_t>(kChunk, static_cast<std::int64_t>(data.size()) - begin);
    float* chunk = data.data() + begin;
    scratch.resize(at_root ? static_cast<std::size_t>(size * n) : 0);
    communicator.gather(std::as_bytes(std::span<const float>(chunk, static_cast<std::size_t>(n))),
                        std::as_writable_bytes(std::span<float>(scratch)), root);
    if (!at_root) continue;
    std::copy_n(scratch.data(), n, chunk);
    for (int r = 1; r < size; ++r) {
      const float* part = scratch.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(n);
      for (std::int64_t i = 0; i < n; ++i) chunk[i] += part[i];
    }
  }
}

std::vector<double> all_gather_doubles(Communicator& communicator, std::span<const double> mine) {
  std::vector<double> all(mine.size() * static_cast<std::size_t>(communicator.size()));
  communicator.all_gather(std::as_bytes(mine), std::as_writable_bytes(std::span(all)));
  return all;
}

}  // namespace strata
