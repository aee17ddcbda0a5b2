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
// Quantization is symmetric: scale = absmax / 127, q = round(x / scale) in [-127, 127]. A matmul
// dequantizes a few stored rows at a time into the model's f32 weight scratch and multiplies with
// sgemm, so no f32 copy of a matrix exists; the weight gradient is f32 (it does not read the
// weight). The kernels are the CPU backend's (cpu/int8_weights_cpu.hpp); a cuda device is refused.
#include <string>

#include "../precision/storage_precision.hpp"
#include "cpu/int8_weights_cpu.hpp"
#include "strata/plugin.hpp"

namespace {

using namespace strata;

class Int8Quantizer final : public WeightQuantizer {
 public:
  explicit Int8Quantizer(std::int64_t block_size) : block_size_(block_size) {}

  DType dtype() const noexcept override { return DType::i8; }

  Status scale_groups(const MatmulShape& shape, std::int64_t& group_size, std::int64_t& scales) const override {
    const std::int64_t row_length = shape.layout == WeightLayout::in_out ? shape.out_features : shape.in_features;
    if (block_size_ > 0 && row_length % block_size_ != 0)
      return Status::error("block_size = " + std::to_string(block_size_) + " does not divide its rows (" +
                           std::to_string(row_length) + " values each); pick a divisor, or leave block_size out " +
                           "for one scale per output channel");
    group_size = block_size_;
    scales = int8::scale_count(shape.in_features, shape.out_features, shape.layout, block_size_);
    return {};
  }

  Status check(const KernelTarget& target) const override {
    if (target.backend == "cpu") return {};
    return Status::error("int8 weights run on the cpu backend; there are no int8 kernels for device.kind = \"" +
                         std::string(target.backend) + "\" (use bf16 there)");
  }

  void quantize(QuantizedMatrix out, const float* master, const MatmulShape& shape) noexcept override {
    int8::quantize(int8::Int8Matrix{static_cast<std::int8_t*>(out.values), out.scales, out.group_size}, master,
                   shape.in_features, shape.out_features, shape.layout);
  }

  void matmul_forward(float* out, const float* inp, Weight weight, const float* bias, const MatmulShape& shape,
                      Scratch scratch) noexcept override {
    int8::matmul_forward(out, inp, matrix(weight), bias, shape, scratch.data, scratch.elements);
  }

  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, Weight weight,
                       const MatmulShape& shape, Scratch scratch, GradientWrite dinp_write) noexcept override {
    int8::matmul_backward(dinp, dweight, dbias, dout, inp, matrix(weight), shape, scratch.data, scratch.elements,
                          dinp_write);
  }

 private:
  static int8::ConstInt8Matrix matrix(const Weight& weight) noexcept {
    return {static_cast<const std::int8_t*>(weight.data), weight.scales, weight.group_size};
  }

  std::int64_t block_size_;
};

class Int8 final : public plugins::StoragePrecision {
 public:
  Int8(ConfigView& config, HostServices&)
      : StoragePrecision(config, DType::i8, plugins::storage_key(config, "activations")),
        embeddings_(plugins::storage_key(config, "embeddings")),
        quantizer_(config.has("block_size") ? config.get_int("block_size", 64, 1, std::int64_t{1} << 30) : 0) {}

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
