#pragma once
// The CUDA backend's op table: every op of strata/ops.hpp issued on one compute stream. Ops are
// noexcept, so a failure (a CUDA or cuBLAS error, a workspace the device budget refuses) is kept,
// the ops after it do nothing, and the backend rethrows it at the next synchronize().
#include <cuda_runtime_api.h>

#include <cstddef>
#include <exception>
#include <memory>
#include <string>

#include "strata/ops.hpp"

namespace strata::cuda {

// Device memory the ops keep for themselves, one growable block per slot, taken from the backend's
// accounted arena (category workspace), so every byte they use is counted against the budget.
enum class WorkspaceSlot { cublas, bf16_staging, row_partials, sort, reduction, ones, solver, count };

class WorkspaceSource {
 public:
  virtual ~WorkspaceSource() = default;
  // At least `bytes` bytes for `slot`, kept until a larger request for the same slot; throws when
  // the arena refuses (MemoryLimitExceeded, std::bad_alloc).
  virtual void* reserve(WorkspaceSlot slot, std::size_t bytes) = 0;
};

class CudaOps : public Ops {
 public:
  // The first failure since the last call, or null; clears it.
  virtual std::exception_ptr take_error() noexcept = 0;
};

// `stream` is the compute stream; the ops do not own it. tf32_products: f32 products (matmuls
// with f32 weights, attention's batched products) run on TF32 tensor cores, inputs rounded to 10
// mantissa bits, f32 accumulation; otherwise they are true f32. Throws std::runtime_error when
// cuBLAS cannot start.
std::unique_ptr<CudaOps> make_cuda_ops(std::string name, cudaStream_t stream, WorkspaceSource& workspace,
                                       bool tf32_products);

}  // namespace strata::cuda
