// Kernel plugin `flash`: causal flash attention (the FlashAttention-2 algorithm), selected by
// `[kernels] attention = "flash"`. The forward pass keeps only the log-sum-exp of every score row
// (B x n_head x T floats) instead of the built-in kernel's B x n_head x T x T probabilities; the
// backward pass recomputes the score tiles. One kernel per backend:
//   cpu      cpu/flash_attention_cpu.cpp, threaded over batch x heads x query tiles; any head dim.
//   cuda:N   cuda/flash_attention_cuda.cu on the backend's compute stream, f32, head dims 64 and
//            128; compiled when the build has nvcc (STRATA_FLASH_ATTENTION_CUDA).
// `flash_bf16` is the same algorithm on the tensor cores (cuda/flash_attention_tensor_cores.cu:
// bf16 operands, f32 accumulation and softmax; CUDA only, sm_80 and later): it changes the
// numbers as TF32 products do, so it is a name of its own. The host picks it by default only for a
// CUDA run that keeps bf16 activations, whose numbers bf16 rounds already (and says so in the log).
// A shape or backend it cannot run is refused when the manifest is validated, with the reason.
#include <cstdint>
#include <string>

#include "cpu/flash_attention_cpu.hpp"
#include "strata/plugin.hpp"
#include "tensor_core_scratch.hpp"

#if STRATA_FLASH_ATTENTION_CUDA
#include <cuda_runtime_api.h>

#include "cuda/flash_attention_cuda.hpp"
#endif

namespace {

using namespace strata;

enum class Device { cpu, cuda };
enum class Products { f32, bf16_tensor_cores };

template <Products kProducts>
class FlashAttention final : public Kernel {
 public:
  FlashAttention(ConfigView& /*config*/, HostServices& /*host*/) {}

  std::string_view op() const noexcept override { return "attention"; }

  Status check(const AttentionShape& shape, const KernelTarget& target) const override {
    if (shape.n_kv_head <= 0 || shape.n_head % shape.n_kv_head != 0)
      return Status::error("n_head " + std::to_string(shape.n_head) + " is not a multiple of n_kv_head " +
                           std::to_string(shape.n_kv_head));
    if (shape.documents) return Status::error("flash does not separate packed documents yet");
    if (target.backend == "cpu") {
      if constexpr (kProducts == Products::bf16_tensor_cores)
        return Status::error(
            "flash_bf16 runs its products on CUDA tensor cores, not on the cpu backend; the cpu's "
            "flash attention is \"flash\"");
      return {};
    }
    if (!target.backend.starts_with("cuda:"))
      return Status::error("flash has kernels for the cpu and cuda backends, not for " + std::string(target.backend));
#if STRATA_FLASH_ATTENTION_CUDA
    if (shape.head_dim != 64 && shape.head_dim != 128)
      return Status::error("head dim " + std::to_string(shape.head_dim) +
                           " is not supported on CUDA: flash runs head dims 64 and 128 there (any head dim on the "
                           "cpu backend)");
    // With a device at hand (not at validate time), ask it whether the tiles fit its shared memory.
    if (target.stream != nullptr) {
      if (const cudaError_t error = cudaSetDevice(target.device_index); error != cudaSuccess)
        return Status::error(std::string("cudaSetDevice: ") + cudaGetErrorString(error));
      if (!flash::cuda::supports(shape, kOperands))
        return Status::error(kProducts == Products::f32
                                 ? "head dim " + std::to_string(shape.head_dim) +
                                       " needs more shared memory per block than " + std::string(target.backend) +
                                       " offers (head dim 128 needs 218 KiB, an sm_90 GPU)"
                                 : std::string(target.backend) +
                                       " cannot run bf16 tensor-core products with this head dim (sm_80 or later, "
                                       "and 103 KiB of shared memory per block at head dim 128)");
    }
    return {};
#else
    return Status::error(
        "this build of the flash plugin has no CUDA kernels (it was built without nvcc), so it "
        "cannot run on " +
        std::string(target.backend));
#endif
  }

  Status bind(const KernelTarget& target) override {
    device_ = target.backend == "cpu" ? Device::cpu : Device::cuda;
    device_index_ = target.device_index;
    stream_ = target.stream;
    return {};
  }

  // The same on both backends: the log-sum-exp rows, and rowsum(dout ⊙ out) in backward; the
  // tensor-core kernels' backward also keeps bf16 copies of its operands.
  std::int64_t saved_floats(const AttentionShape& shape) const noexcept override {
    return flash::cpu::lse_floats(shape);
  }
  std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept override {
    return kProducts == Products::f32 ? flash::cpu::scratch_floats(shape) : flash::tensor_core_scratch_floats(shape);
  }

  Status attention_forward(const KernelCall& /*call*/, const AttentionShape& shape, float* out, float* saved,
                           const AttentionInputs& in) override {
    if (device_ == Device::cpu) {
      flash::cpu::forward(shape, out, saved, in);
      return {};
    }
#if STRATA_FLASH_ATTENTION_CUDA
    return launched(
        [&](cudaStream_t stream) { return flash::cuda::forward(stream, shape, out, saved, in, kOperands); });
#else
    return no_cuda();
#endif
  }

  Status attention_backward(const KernelCall& /*call*/, const AttentionShape& shape, const AttentionGrads& grads,
                            const float* dout, const float* out, const AttentionInputs& in, const float* saved,
                            float* scratch) override {
    if (device_ == Device::cpu) {
      flash::cpu::backward(shape, grads, dout, out, in, saved, scratch);
      return {};
    }
#if STRATA_FLASH_ATTENTION_CUDA
    return launched([&](cudaStream_t stream) {
      return flash::cuda::backward(stream, shape, grads, dout, out, in, saved, scratch, kOperands);
    });
#else
    return no_cuda();
#endif
  }

 private:
#if STRATA_FLASH_ATTENTION_CUDA
  static constexpr flash::cuda::Operands kOperands =
      kProducts == Products::f32 ? flash::cuda::Operands::f32 : flash::cuda::Operands::bf16;

  // Launches on the backend's stream and reports a launch failure; a fault inside the kernel
  // surfaces at the backend's next synchronisation, as any op's does.
  template <typename Launch>
  Status launched(Launch&& launch) {
    if (const cudaError_t error = cudaSetDevice(device_index_); error != cudaSuccess)
      return Status::error(std::string("cudaSetDevice: ") + cudaGetErrorString(error));
    if (!launch(static_cast<cudaStream_t>(stream_)))
      return Status::error("the CUDA kernel does not run this shape (head dims 64 and 128, shared memory)");
    if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess)
      return Status::error(std::string("kernel launch: ") + cudaGetErrorString(error));
    return {};
  }
#else
  static Status no_cuda() {
    return Status::error("this build of the flash plugin has no CUDA kernels");
  }
#endif

  Device device_ = Device::cpu;
  int device_index_ = -1;
  void* stream_ = nullptr;
};

const FactoryDescriptor kFactories[] = {
    make_factory<Kernel, FlashAttention<Products::f32>>(
        "flash", "causal flash attention: saves B x n_head x T floats, recomputes score tiles in backward (cpu, cuda)"),
    make_factory<Kernel, FlashAttention<Products::bf16_tensor_cores>>(
        "flash_bf16", "flash attention on CUDA tensor cores: bf16 products, f32 accumulation and softmax (cuda)")};

}  // namespace

STRATA_DEFINE_PLUGIN(flash_attention, "1.0.0", kFactories)
