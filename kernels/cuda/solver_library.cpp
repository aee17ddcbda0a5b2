#include "kernels/cuda/solver_library.hpp"

#include <dlfcn.h>

#include <stdexcept>
#include <string>
#include <type_traits>

namespace strata::cuda {

namespace {

constexpr const char* kLibrary = "libcusolver.so.12";  // CUDA 12 and 13's soname

}  // namespace

SolverLibrary::SolverLibrary() {
  handle_ = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr)
    throw std::runtime_error(std::string("cuSOLVER cannot be loaded for qr or eigh: ") + ::dlerror() +
                             " (put the directory holding it, /usr/local/cuda/lib64, on LD_LIBRARY_PATH)");
  const auto find = [this](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(handle_, name));
    if (function == nullptr) {
      ::dlclose(handle_);
      handle_ = nullptr;
      throw std::runtime_error(std::string(kLibrary) + " has no " + name);
    }
  };
  find(create, "cusolverDnCreate");
  find(destroy, "cusolverDnDestroy");
  find(set_stream, "cusolverDnSetStream");
  find(geqrf_buffer_size, "cusolverDnSgeqrf_bufferSize");
  find(geqrf, "cusolverDnSgeqrf");
  find(orgqr_buffer_size, "cusolverDnSorgqr_bufferSize");
  find(orgqr, "cusolverDnSorgqr");
  find(syevd_buffer_size, "cusolverDnSsyevd_bufferSize");
  find(syevd, "cusolverDnSsyevd");
}

SolverLibrary::~SolverLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

Solver::Solver(cudaStream_t stream) {
  if (library_.create(&handle_) != CUSOLVER_STATUS_SUCCESS) throw std::runtime_error("cuSOLVER could not start");
  if (library_.set_stream(handle_, stream) != CUSOLVER_STATUS_SUCCESS) {
    library_.destroy(handle_);
    throw std::runtime_error("cuSOLVER would not take the compute stream");
  }
}

Solver::~Solver() {
  library_.destroy(handle_);
}

}  // namespace strata::cuda
