#pragma once
// How a data-parallel run's rows travel between ranks on its device (docs/architecture.md, "Data
// parallel"): on the CPU, through the ranks' own communicator (MPI); on CUDA, through NCCL between
// the ranks' GPUs, its unique id sent over MPI, with rows in host memory still through MPI.
#include <memory>
#include <string>

#include "core/device/backend.hpp"
#include "core/distributed/communicator.hpp"
#include "strata/kernel.hpp"

namespace strata {

// Whether this build has NCCL's header (found beside CUDA's toolkit at configure time); the library
// itself is opened at run time.
bool nccl_built();
// Why CUDA ranks cannot use NCCL here ("this build has no NCCL ...", "NCCL cannot be loaded: ..."),
// or empty when they can.
std::string nccl_unavailable_reason();
// The NCCL library's version ("NCCL 2.28.9 (libnccl.so.2)"), or why there is none.
std::string nccl_description();

// Why ranks on `kind` cannot communicate here, or empty.
std::string device_communication_unavailable(const std::string& kind);

// The device a rank of a data-parallel run trains on: "cuda:N" is the first device of a machine's
// ranks, and the rank its launcher numbers `local_rank` on its machine takes "cuda:(N + local_rank)",
// so that no two ranks share a GPU. Where the rank sees one device only (its launcher set
// CUDA_VISIBLE_DEVICES for it), without a launcher (local_rank -1), and for "cpu", the kind stays.
std::string rank_device_kind(const std::string& kind, int local_rank, int visible_devices);
// This process's rank on its machine from its launcher (OMPI_COMM_WORLD_LOCAL_RANK, or another
// PMIx launcher's PMIX_LOCAL_RANK), or -1.
int launcher_local_rank();
// rank_device_kind for this process, with the devices it sees.
std::string this_rank_device_kind(const std::string& kind);

// NCCL between the ranks' GPUs: device rows go through NCCL on `target`'s compute stream, host rows
// through `host`, which also carries NCCL's unique id from rank 0. Collective: every rank makes it.
// Throws std::runtime_error when NCCL is not available here, or cannot start.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host, const KernelTarget& target);

// The communicator DataParallel uses on `device`: null on the CPU (use `host`), NCCL's on CUDA.
std::unique_ptr<Communicator> communicator_for_device(Communicator& host, Backend& device);

}  // namespace strata
