#pragma once
// cuSOLVER, opened with dlopen on the first factorization (Ops::qr, eigh) rather than linked: it is
// large, few runs factorize, and every run would otherwise map it at start-up (under an address
// space limit, before Strata could say why it cannot run).
#include <cusolverDn.h>

namespace strata::cuda {

class SolverLibrary {
 public:
  // Throws std::runtime_error naming the library and what dlopen or dlsym said.
  SolverLibrary();
  ~SolverLibrary();
  SolverLibrary(const SolverLibrary&) = delete;
  SolverLibrary& operator=(const SolverLibrary&) = delete;

  // The functions Strata calls, each cuSOLVER's own signature.
  decltype(&cusolverDnCreate) create = nullptr;
  decltype(&cusolverDnDestroy) destroy = nullptr;
  decltype(&cusolverDnSetStream) set_stream = nullptr;
  decltype(&cusolverDnSgeqrf_bufferSize) geqrf_buffer_size = nullptr;
  decltype(&cusolverDnSgeqrf) geqrf = nullptr;
  decltype(&cusolverDnSorgqr_bufferSize) orgqr_buffer_size = nullptr;
  decltype(&cusolverDnSorgqr) orgqr = nullptr;
  decltype(&cusolverDnSsyevd_bufferSize) syevd_buffer_size = nullptr;
  decltype(&cusolverDnSsyevd) syevd = nullptr;

 private:
  void* handle_ = nullptr;
};

// One cuSOLVER handle on one stream, with the library that made it.
class Solver {
 public:
  explicit Solver(cudaStream_t stream);  // throws std::runtime_error
  ~Solver();
  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;
  const SolverLibrary& library() const noexcept { return library_; }
  cusolverDnHandle_t handle() const noexcept { return handle_; }

 private:
  SolverLibrary library_;
  cusolverDnHandle_t handle_ = nullptr;
};

}  // namespace strata::cuda
