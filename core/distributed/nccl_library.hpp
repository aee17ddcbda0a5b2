#pragma once
// libnccl, opened with dlopen when CUDA ranks start rather than linked, so that every other run, on
// a machine without NCCL too, needs none of it. Built only with NCCL's header (STRATA_HAVE_NCCL).
#include <nccl.h>

#include <string>

namespace strata {

class NcclLibrary {
 public:
  // Throws std::runtime_error naming the library and what dlopen or dlsym said.
  NcclLibrary();
  ~NcclLibrary();
  NcclLibrary(const NcclLibrary&) = delete;
  NcclLibrary& operator=(const NcclLibrary&) = delete;

  // "NCCL 2.28.9 (libnccl.so.2)"
  std::string description() const;
  // Throws std::runtime_error naming `what`, NCCL's error and, where it has one, its last message.
  void check(ncclResult_t result, const char* what, ncclComm_t comm = nullptr) const;

  // The functions Strata calls, each NCCL's own signature.
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetLastError) get_last_error = nullptr;  // null before NCCL 2.13
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclReduce) reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;

 private:
  void* handle_ = nullptr;
};

}  // namespace strata
