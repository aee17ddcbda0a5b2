#include "core/distributed/device_communicator.hpp"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/device/backends.hpp"

namespace strata {

#ifndef STRATA_HAVE_NCCL
bool nccl_built() {
  return false;
}

std::string nccl_unavailable_reason() {
  return "this build has no NCCL (configure with CUDA's toolkit holding nccl.h, and MPI)";
}

std::string nccl_description() {
  return nccl_unavailable_reason();
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, const KernelTarget&) {
  throw std::runtime_error(nccl_unavailable_reason());
}
#endif

std::string device_communication_unavailable(const std::string& kind) {
  if (kind == "cpu") return {};
  const std::string why = nccl_unavailable_reason();
  return why.empty() ? why : "CUDA ranks talk through NCCL, and " + why;
}

std::string rank_device_kind(const std::string& kind, int local_rank, int visible_devices) {
  const int first = cuda_ordinal(kind);  // -1 for "cpu", or a kind left for the backend to refuse
  if (first < 0 || local_rank < 0 || visible_devices <= 1) return kind;
  return "cuda:" + std::to_string(first + local_rank);
}

int launcher_local_rank() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (local == nullptr) local = std::getenv("PMIX_LOCAL_RANK");  // another PMIx launcher (srun)
  int rank = -1;
  if (local == nullptr || std::from_chars(local, local + std::strlen(local), rank).ec != std::errc()) return -1;
  return rank;
}

std::string this_rank_device_kind(const std::string& kind) {
  if (kind == "cpu") return kind;
  return rank_device_kind(kind, launcher_local_rank(), static_cast<int>(available_backends().size()) - 1);
}

std::unique_ptr<Communicator> communicator_for_device(Communicator& host, Backend& device) {
  const KernelTarget target = device.kernel_target();
  if (target.backend == "cpu" || target.stream == nullptr) return nullptr;
  return make_nccl_communicator(host, target);
}

}  // namespace strata
