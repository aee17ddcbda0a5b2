// Precision policy `nf4`: the blocks' weight matrices are stored as 4-bit NormalFloat codes (QLoRA's
// NF4) with an absmax per block of values, those absmax themselves stored in 8 bits (double
// quantization), and dequantized inside their matmuls. Under `lora` the base is frozen and only the
// codes exist (QLoRA); trained on its own, the optimizer updates an f32 master copy and after every
// update the plugin re-quantizes it, as int8 does.
//
//   block_size = N           values per absmax (default 64, even); a matrix is read flat in its
//                            stored layout, so N need not divide its rows
//   double_quant = true      the absmax in 8 bits with one f32 scale per 256 (false: f32 absmax)
//   activations = "bf16" | "f32"   the block activations kept for backward (as the bf16 policy)
//   embeddings  = "bf16" | "f32"   wte, wpe (and LLaMA's untied head): the lookup reads whole rows
//   skip_nonfinite = true
//
// The format, the levels and the 8-bit map: cpu/nf4_weights_cpu.hpp. The matmuls:
//   cpu      dequantize a few stored rows at a time into the model's f32 weight scratch and multiply
//            with sgemm, so no f32 copy of a matrix exists;
//   cuda:N   (a build with nvcc, STRATA_NF4_CUDA) dequantize the whole matrix into a bf16 workspace
//            of the plugin's own (the largest matrix's size, accounted under "nf4") and run the
//            backend's bf16 tensor-core matmul on it. Quantization there is bit for bit the CPU's
//            (cuda/nf4_weights_cuda.hpp).
#include <string>

#include "cpu/nf4_weights_cpu.hpp"
#include "strata/plugin.hpp"
#include "strata/plugin_support/device_dequantized_matmul.hpp"
#include "strata/plugin_support/device_workspace.hpp"
#include "strata/plugin_support/kernel_backends.hpp"
#include "strata/plugin_support/storage_precision.hpp"

#ifndef STRATA_NF4_CUDA
#define STRATA_NF4_CUDA 0  // a build without nvcc
#endif
#if STRATA_NF4_CUDA
#include "cuda/nf4_weights_cuda.hpp"
#include "strata/plugin_support/cuda_launch_check.hpp"
#endif

namespace {

using namespace strata;

class Nf4Quantizer final : public WeightQuantizer {
 public:
  Nf4Quantizer(nf4::Nf4Format format, HostServices& host)
      : format_(format), host_(host), workspace_(host, "nf4.dequantized_bf16") {}

  DType dtype() const noexcept override { return DType::u4; }

  Status layout(const MatmulShape& shape, QuantizedLayout& layout) const override {
    layout.group_size = format_.block_size;
    layout.side_bytes = nf4::side_bytes(shape.in_features * shape.out_features, format_);
    return {};
  }

  Status check(const KernelTarget& target) const override {
    return plugin_support::cpu_or_cuda(target, STRATA_NF4_CUDA != 0, "nf4 weights");
  }

  Status bind(const KernelTarget& target) override {
    on_cuda_ = plugin_support::on_cuda(target);
    return {};
  }

  void quantize(QuantizedMatrix out, const float* master, const MatmulShape& shape) noexcept override {
    const std::int64_t elements = shape.in_features * shape.out_features;
    const nf4::Nf4Matrix matrix{static_cast<std::uint8_t*>(out.values), out.scales, format_};
    workspace_.expect((elements + 1) / 2);
#if STRATA_NF4_CUDA
    if (on_cuda_) {
      float* scratch = workspace_.floats(nf4::cuda::quantize_scratch_floats(elements, format_));
      if (scratch == nullptr) {
        // Logged. The old codes must not stand for the updated master: all-ones bytes make the side
        // data NaN (the mean, or every absmax), so the matrix dequantizes to NaN and the step's
        // finiteness check stops the run.
        host_.ops().fill(out.scales, 0xff, nf4::side_bytes(elements, format_));
        return;
      }
      nf4::cuda::quantize(static_cast<cudaStream_t>(stream()), matrix, master, elements, scratch);
      plugin_support::log_failed_launch(host_, "nf4's quantization kernels");
      return;
    }
#endif
    nf4::quantize(matrix, master, elements);
  }

  void matmul_forward(const op::MatmulForward& call) noexcept override {
    if (on_cuda_)
      return plugin_support::device_matmul_forward(
          host_.ops(), call, [this](const Weight& w, const MatmulShape& s) { return dequantize_on_device(w, s); });
    const auto& [out, inp, weight, bias, shape, scratch] = call;
    nf4::matmul_forward(out, inp, matrix(weight), bias, shape, scratch.data, scratch.elements);
  }

  void matmul_backward(const op::MatmulBackward& call) noexcept override {
    if (on_cuda_)
      return plugin_support::device_matmul_backward(
          host_.ops(), call, [this](const Weight& w, const MatmulShape& s) { return dequantize_on_device(w, s); });
    const auto& [dinp, dweight, dbias, dout, inp, weight, shape, scratch, dinp_write] = call;
    nf4::matmul_backward(dinp, dweight, dbias, dout, inp, matrix(weight), shape, scratch.data, scratch.elements,
                         dinp_write);
  }

 private:
  nf4::ConstNf4Matrix matrix(const Weight& weight) const noexcept {
    return {static_cast<const std::uint8_t*>(weight.data), weight.scales, format_};
  }

  void* stream() const noexcept {
    return host_.target().stream;
  }

  // The weight as a bf16 matrix in the workspace, for the backend's own bf16 matmul; null data when
  // the workspace could not be had (logged).
  Weight dequantize_on_device(const Weight& weight, const MatmulShape& shape) noexcept {
    const std::int64_t elements = shape.in_features * shape.out_features;
    auto* values = reinterpret_cast<std::uint16_t*>(workspace_.floats((elements + 1) / 2));  // two bf16 per float
    if (values == nullptr) return Weight{nullptr, DType::bf16};
#if STRATA_NF4_CUDA
    nf4::cuda::dequantize_bf16(static_cast<cudaStream_t>(stream()), values, matrix(weight), elements);
    plugin_support::log_failed_launch(host_, "nf4's dequantization kernel");
#else
    (void)weight;
#endif
    return Weight{values, DType::bf16};
  }

  nf4::Nf4Format format_;
  HostServices& host_;
  bool on_cuda_ = false;
  plugin_support::DeviceWorkspace workspace_;  // cuda: the dequantized matrix, or quantization's scratch
};

nf4::Nf4Format format_of(ConfigView& config) {
  nf4::Nf4Format format;
  format.block_size = config.get_int("block_size", 64, 2, 1 << 20);
  if (format.block_size % 2 != 0) {
    config.report_error("block_size",
                        "must be even: a block fills whole bytes of two 4-bit codes (64 is "
                        "bitsandbytes' default)");
    format.block_size = 64;
  }
  format.double_quant = config.get_bool("double_quant", true);
  return format;
}

class Nf4 final : public plugin_support::StoragePrecision {
 public:
  Nf4(ConfigView& config, HostServices& host)
      : StoragePrecision(config, DType::u4, plugin_support::storage_key(config, "activations")),
        embeddings_(plugin_support::storage_key(config, "embeddings")),
        quantizer_(format_of(config), host) {}

  DType embedding_storage() const noexcept override { return embeddings_; }
  WeightQuantizer* weight_quantizer() noexcept override { return &quantizer_; }

 private:
  DType embeddings_;
  Nf4Quantizer quantizer_;
};

constexpr const char* kKeys[] = {"block_size", "double_quant", "activations", "embeddings", "skip_nonfinite"};
const FactoryDescriptor kFactories[] = {make_factory<PrecisionPolicy, Nf4>(
    "nf4", "NF4 block matrices (4-bit NormalFloat, absmax per block of 64, double-quantized), f32 compute",
    name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(nf4, "1.0.0", kFactories)
