// Precision policy `int8`: the blocks' weight matrices are stored as int8 with f32 absmax scales, and
// dequantized inside their matmuls; the optimizer updates an f32 master copy (optimizer state, which
// the offload strategy may keep on the host), and after every update the plugin re-quantizes it.
//
//   block_size = N           one scale per N consecutive values of a stored row (N divides every
//                            block matrix's rows); absent: one scale per output channel
//   activations = "bf16" | "f32"   the block activations kept for backward (as the bf16 policy)
//   embeddings  = "bf16" | "f32"   wte, wpe (and LLaMA's untied head): the lookup reads whole rows
//   skip_nonfinite = true
//
// Quantization is symmetric: scale = absmax / 127, q = round(x / scale) in [-127, 127]; the weight
// gradient is f32 (it does not read the weight). The matmuls:
//   cpu      dequantize a few stored rows at a time into the model's f32 weight scratch and multiply
//            with sgemm, so no f32 copy of a matrix exists (cpu/int8_weights_cpu.hpp);
//   cuda:N   (a build with nvcc, STRATA_INT8_CUDA) dequantize the whole matrix into a bf16
//            workspace of the plugin's own (precision/device_workspace.hpp: the largest matrix's
//            size, accounted under "int8") and run the backend's bf16 tensor-core matmul on it: the
//            bf16 policy's numerics on the dequantized values. Quantization there is bit for bit
//            the CPU's (cuda/int8_weights_cuda.hpp).
#include <string>

#include "cpu/int8_weights_cpu.hpp"
#include "strata/plugin.hpp"
#include "strata/plugin_support/device_dequantized_matmul.hpp"
#include "strata/plugin_support/device_workspace.hpp"
#include "strata/plugin_support/kernel_backends.hpp"
#include "strata/plugin_support/storage_precision.hpp"

#ifndef STRATA_INT8_CUDA
#define STRATA_INT8_CUDA 0  // a build without nvcc
#endif
#if STRATA_INT8_CUDA
#include "cuda/int8_weights_cuda.hpp"
#include "strata/plugin_support/cuda_launch_check.hpp"
#endif

namespace {

using namespace strata;

class Int8Quantizer final : public WeightQuantizer {
 public:
  Int8Quantizer(std::int64_t block_size, HostServices& host)
      : block_size_(block_size), host_(host), workspace_(host, "int8.dequantized_bf16") {}

  DType dtype() const noexcept override { return DType::i8; }

  Status layout(const MatmulShape& shape, QuantizedLayout& layout) const override {
    const std::int64_t row_length = shape.layout == WeightLayout::in_out ? shape.out_features : shape.in_features;
    if (block_size_ > 0 && row_length % block_size_ != 0)
      return Status::error("block_size = " + std::to_string(block_size_) + " does not divide its rows (" +
                           std::to_string(row_length) + " values each); pick a divisor, or leave block_size out " +
                           "for one scale per output channel");
    layout.group_size = block_size_;
    layout.side_bytes = static_cast<std::uint64_t>(
                            int8::scale_count(shape.in_features, shape.out_features, shape.layout, block_size_)) *
                        sizeof(float);
    return {};
  }

  Status check(const KernelTarget& target) const override {
    return plugin_support::cpu_or_cuda(target, STRATA_INT8_CUDA != 0, "int8 weights");
  }

  Status bind(const KernelTarget& target) override {
    on_cuda_ = plugin_support::on_cuda(target);
    return {};
  }

  void quantize(QuantizedMatrix out, const float* master, const MatmulShape& shape) noexcept override {
    const int8::Int8Matrix matrix{static_cast<std::int8_t*>(out.values), static_cast<float*>(out.scales),
                                  out.group_size};
    workspace_.expect((shape.in_features * shape.out_features + 1) / 2);
#if STRATA_INT8_CUDA
    if (on_cuda_) {
      int8::cuda::quantize(static_cast<cudaStream_t>(stream()), matrix, master, shape.in_features, shape.out_features,
                           shape.layout);
      plugin_support::log_failed_launch(host_, "int8's quantization kernel");
      return;
    }
#endif
    int8::quantize(matrix, master, shape.in_features, shape.out_features, shape.layout);
  }

  void matmul_forward(const op::MatmulForward& call) noexcept override {
    if (on_cuda_)
      return plugin_support::device_matmul_forward(
          host_.ops(), call, [this](const Weight& w, const MatmulShape& s) { return dequantize_on_device(w, s); });
    const auto& [out, inp, weight, bias, shape, scratch] = call;
    int8::matmul_forward(out, inp, matrix(weight), bias, shape, scratch.data, scratch.elements);
  }

  void matmul_backward(const op::MatmulBackward& call) noexcept override {
    if (on_cuda_)
      return plugin_support::device_matmul_backward(
          host_.ops(), call, [this](const Weight& w, const MatmulShape& s) { return dequantize_on_device(w, s); });
    const auto& [dinp, dweight, dbias, dout, inp, weight, shape, scratch, dinp_write] = call;
    int8::matmul_backward(dinp, dweight, dbias, dout, inp, matrix(weight), shape, scratch.data, scratch.elements,
                          dinp_write);
  }

 private:
  static int8::ConstInt8Matrix matrix(const Weight& weight) noexcept {
    return {static_cast<const std::int8_t*>(weight.data), static_cast<const float*>(weight.scales), weight.group_size};
  }

  void* stream() const noexcept {
    return host_.target().stream;
  }

  // The weight as a bf16 matrix in the workspace, for the backend's own bf16 matmul; null data when
  // the workspace could not be had (logged). Every stored matrix was quantized before it is
  // multiplied, so the workspace is sized at once to the largest.
  Weight dequantize_on_device(const Weight& weight, const MatmulShape& shape) noexcept {
    const std::int64_t elements = shape.in_features * shape.out_features;
    auto* values = reinterpret_cast<std::uint16_t*>(workspace_.floats((elements + 1) / 2));  // two bf16 per float
    if (values == nullptr) return Weight{nullptr, DType::bf16};
#if STRATA_INT8_CUDA
    int8::cuda::dequantize_bf16(static_cast<cudaStream_t>(stream()), values, matrix(weight), shape.in_features,
                                shape.out_features, shape.layout);
    plugin_support::log_failed_launch(host_, "int8's dequantization kernel");
#else
    (void)weight;
#endif
    return Weight{values, DType::bf16};
  }

  std::int64_t block_size_;
  HostServices& host_;
  bool on_cuda_ = false;
  plugin_support::DeviceWorkspace workspace_;  // cuda: the dequantized matrix
};

class Int8 final : public plugin_support::StoragePrecision {
 public:
  Int8(ConfigView& config, HostServices& host)
      : StoragePrecision(config, DType::i8, plugin_support::storage_key(config, "activations")),
        embeddings_(plugin_support::storage_key(config, "embeddings")),
        quantizer_(config.has("block_size") ? config.get_int("block_size", 64, 1, std::int64_t{1} << 30) : 0, host) {}

  DType embedding_storage() const noexcept override { return embeddings_; }
  WeightQuantizer* weight_quantizer() noexcept override { return &quantizer_; }

 private:
  DType embeddings_;
  Int8Quantizer quantizer_;
};

constexpr const char* kKeys[] = {"block_size", "activations", "embeddings", "skip_nonfinite"};
const FactoryDescriptor kFactories[] = {make_factory<PrecisionPolicy, Int8>(
    "int8", "int8 block matrices (absmax scales per output channel or block), f32 master, f32 compute",
    name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(int8, "1.0.0", kFactories)
