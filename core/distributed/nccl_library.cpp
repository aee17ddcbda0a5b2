#include "core/distributed/nccl_library.hpp"

#include <dlfcn.h>

#include <stdexcept>

namespace strata {

namespace {

constexpr const char* kLibrary = "libnccl.so.2";  // NCCL 2's soname, in the toolkit or PyTorch's wheel

}  // namespace

NcclLibrary::NcclLibrary() {
  handle_ = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr)
    throw std::runtime_error(std::string("NCCL cannot be loaded: ") + ::dlerror() +
                             " (put the directory holding it, /usr/local/cuda/lib64 or a PyTorch wheel's "
                             "nvidia/nccl/lib, on LD_LIBRARY_PATH)");
  const auto find = [this](auto& function, const char* name, bool required = true) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(handle_, name));
    if (function == nullptr && required) {
      ::dlclose(handle_);
      handle_ = nullptr;
      throw std::runtime_error(std::string(kLibrary) + " has no " + name + ": NCCL 2.12 or newer is needed");
    }
  };
  find(get_version, "ncclGetVersion");
  find(get_unique_id, "ncclGetUniqueId");
  find(comm_init_rank, "ncclCommInitRank");
  find(comm_destroy, "ncclCommDestroy");
  find(comm_abort, "ncclCommAbort");
  find(get_error_string, "ncclGetErrorString");
  find(get_last_error, "ncclGetLastError", /*required=*/false);
  find(all_reduce, "ncclAllReduce");
  find(reduce, "ncclReduce");
  find(broadcast, "ncclBroadcast");
  find(send, "ncclSend");
  find(recv, "ncclRecv");
}

NcclLibrary::~NcclLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

std::string NcclLibrary::description() const {
  int version = 0;
  if (get_version(&version) != ncclSuccess) return std::string("NCCL (version unknown, ") + kLibrary + ")";
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9.
  return "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100) + " (" + kLibrary + ")";
}

void NcclLibrary::check(ncclResult_t result, const char* what, ncclComm_t comm) const {
  if (result == ncclSuccess) return;
  std::string message = std::string(what) + " failed: " + get_error_string(result);
  if (get_last_error != nullptr)
    if (const char* last = get_last_error(comm); last != nullptr && *last != '\0')
      message += " (" + std::string(last) + ")";
  throw std::runtime_error(message);
}

}  // namespace strata
