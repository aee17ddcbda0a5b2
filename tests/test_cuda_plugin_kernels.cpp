// Plugin kernels on the GPU against the CPU's, bit for bit where the CPU's result is exact:
// - AdamW (the CUDA backend's) and adamw8bit run the CPU kernel's own AdamW element
//   (strata/kernels_common.hpp) without contraction, and adamw8bit quantizes with the CPU's
//   decision thresholds: several steps, odd counts (a partial last block), every block size
//   class, and a block whose moments are zero;
// - LoRA's dropout mask (plugins/lora/dropout_mask.hpp), overwriting and accumulating;
// - int8 weight quantization (codes and scales, every group kind, zero and non-finite groups), and
//   its dequantization into bf16 against the CPU's f32 values rounded to bf16;
// - nf4 weight quantization (codes, the absmax mean, scales and indices, with and without double
//   quantization, a short last block, zero and non-finite blocks), and its dequantization into bf16
//   against the CPU's f32 values rounded to bf16;
// - fp16's conversions (to and from binary16, operands rounded to binary16 or bf16), NaN payloads
//   aside;
// and within a bound where the GPU rounds differently:
// - flash attention on the tensor cores (`flash_bf16`: bf16 operands, f32 accumulation) against
//   the flash plugin's f32 CPU kernel, forward and backward, and bit for bit across two runs.
// Skips, saying why, where no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend_buffers.hpp"
#include "kernel_test_support.hpp"
#include "plugins/adamw/cpu/adamw_cpu.hpp"
#include "plugins/adamw8bit/cpu/adamw8bit_cpu.hpp"
#include "plugins/adamw8bit/cpu/dynamic_quantization.hpp"
#include "plugins/flash_attention/cpu/flash_attention_cpu.hpp"
#include "plugins/fp16/cpu/fp16_matmul_cpu.hpp"
#include "plugins/int8/cpu/int8_weights_cpu.hpp"
#include "plugins/lora/dropout_mask.hpp"
#include "plugins/nf4/cpu/nf4_weights_cpu.hpp"
#include "plugins/sgd/cpu/sgd_cpu.hpp"

#if STRATA_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "plugins/adamw/cuda/adamw_cuda.hpp"
#include "plugins/adamw8bit/cuda/adamw8bit_cuda.hpp"
#include "plugins/flash_attention/cuda/flash_attention_cuda.hpp"
#include "plugins/fp16/cuda/fp16_cuda.hpp"
#include "plugins/int8/cuda/int8_weights_cuda.hpp"
#include "plugins/lora/cuda/lora_dropout_cuda.hpp"
#include "plugins/nf4/cuda/nf4_weights_cuda.hpp"
#include "plugins/sgd/cuda/sgd_cuda.hpp"
#endif

namespace strata {
namespace {

// How many elements differ in their bits (floats compared as bit patterns: -0 and NaN count).
template <typename T>
std::size_t differing(const std::vector<T>& a, const std::vector<T>& b) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < a.size(); ++i) count += std::memcmp(&a[i], &b[i], sizeof(T)) != 0 ? 1 : 0;
  return count;
}

#if STRATA_HAVE_CUDA
AdamWHyper hyper_at(int step) {
  return AdamWHyper{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.75f};
}
#endif

TEST(CudaPluginKernels, AdamWIsBitwiseTheCpus) {
  STRATA_SKIP_WITHOUT_CUDA();
  const std::int64_t count = 100003;
  std::vector<float> param = cpu::test::random_vector<float>(count, 1),
                     m = cpu::test::random_vector<float>(count, 2, 0.1);
  std::vector<float> v = cpu::test::random_vector<float>(count, 3, 0.01);
  for (float& value : v) value = std::abs(value);
#if STRATA_HAVE_CUDA
  // The adamw plugin's kernels: the host loop on host vectors, the CUDA kernel on device memory.
  const std::unique_ptr<Backend> gpu = make_backend("cuda:0", 0);
  const auto stream = static_cast<cudaStream_t>(gpu->kernel_target().stream);
  test::BackendBuffers on_gpu(*gpu);
  std::vector<float> p_cpu = param, m_cpu = m, v_cpu = v;
  float *p_gpu = on_gpu.upload(param), *m_gpu = on_gpu.upload(m), *v_gpu = on_gpu.upload(v);
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> grad = cpu::test::random_vector<float>(count, 10 + step);
    adamw::cpu::update(p_cpu.data(), grad.data(), m_cpu.data(), v_cpu.data(), count, hyper_at(step));
    adamw::cuda::update(stream, p_gpu, on_gpu.upload(grad), m_gpu, v_gpu, count, hyper_at(step));
  }
  EXPECT_EQ(differing(p_cpu, on_gpu.download(p_gpu, count)), 0u) << "parameters";
  EXPECT_EQ(differing(m_cpu, on_gpu.download(m_gpu, count)), 0u) << "first moments";
  EXPECT_EQ(differing(v_cpu, on_gpu.download(v_gpu, count)), 0u) << "second moments";
  // And SGD's, with and without momentum.
  for (const SgdHyper hyper : {SgdHyper{0.01f, 0.9f, 0.1f, 0.5f}, SgdHyper{0.03f, 0.0f, 0.1f, 0.7f}}) {
    const std::vector<float> grad = cpu::test::random_vector<float>(count, 20);
    std::vector<float> p_host = param, velocity = m;
    float *p_device = on_gpu.upload(param), *velocity_device = on_gpu.upload(m);
    sgd::cpu::update(p_host.data(), grad.data(), velocity.data(), count, hyper);
    sgd::cuda::update(stream, p_device, on_gpu.upload(grad), velocity_device, count, hyper);
    EXPECT_EQ(differing(p_host, on_gpu.download(p_device, count)), 0u) << "sgd momentum " << hyper.momentum;
    EXPECT_EQ(differing(velocity, on_gpu.download(velocity_device, count)), 0u) << "sgd velocity";
  }
#endif
}

TEST(CudaPluginKernels, AdamW8bitIsBitwiseTheCpus) {
  STRATA_SKIP_WITHOUT_CUDA();
#if STRATA_HAVE_CUDA
  const std::unique_ptr<Backend> gpu = make_backend("cuda:0", 0);
  const auto stream = static_cast<cudaStream_t>(gpu->kernel_target().stream);
  for (const std::int64_t block_size : {256, 2048, 4096}) {
    SCOPED_TRACE("block size " + std::to_string(block_size));
    const std::int64_t count = 3 * block_size + 77, blocks = adamw8bit::block_count(count, block_size);
    std::vector<float> param = cpu::test::random_vector<float>(count, 4);
    std::vector<float> m = cpu::test::random_vector<float>(count, 5, 0.1),
                       v = cpu::test::random_vector<float>(count, 6, 0.01);
    for (float& value : v) value = std::abs(value);
    std::fill(m.begin(), m.begin() + block_size, 0.0f);  // block 0 starts with zero moments
    std::fill(v.begin(), v.begin() + block_size, 0.0f);
    std::vector<std::uint8_t> m_codes(count), v_codes(count);
    std::vector<float> m_absmax(blocks), v_absmax(blocks);
    adamw8bit::quantize_blockwise(m_codes.data(), m_absmax.data(), m.data(), count, block_size,
                                  adamw8bit::MapKind::signed_dynamic);
    adamw8bit::quantize_blockwise(v_codes.data(), v_absmax.data(), v.data(), count, block_size,
                                  adamw8bit::MapKind::unsigned_dynamic);
    test::BackendBuffers on_gpu(*gpu);
    float* p_gpu = on_gpu.upload(param);
    std::uint8_t *mc_gpu = on_gpu.upload(m_codes), *vc_gpu = on_gpu.upload(v_codes);
    float *ma_gpu = on_gpu.upload(m_absmax), *va_gpu = on_gpu.upload(v_absmax);
    for (int step = 1; step <= 3; ++step) {
      std::vector<float> grad = cpu::test::random_vector<float>(count, 20 + step);
      if (step == 1) std::fill(grad.begin(), grad.begin() + block_size, 0.0f);  // block 0 stays zero once
      adamw8bit::adamw8bit_update(param.data(), grad.data(), {m_codes.data(), m_absmax.data()},
                                  {v_codes.data(), v_absmax.data()}, count, block_size, hyper_at(step));
      adamw8bit::cuda::adamw8bit_update(stream, p_gpu, on_gpu.upload(grad), mc_gpu, ma_gpu, vc_gpu, va_gpu, count,
                                        block_size, kernels::adamw_coefficients(hyper_at(step)),
                                        adamw8bit::cuda::quantization_tables());
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      if (step == 1) {
        EXPECT_EQ(m_absmax[0], 0.0f) << "a zero gradient on zero moments keeps the block zero";
      }
    }
    EXPECT_EQ(differing(param, on_gpu.download(p_gpu, count)), 0u) << "parameters";
    EXPECT_EQ(differing(m_codes, on_gpu.download(mc_gpu, count)), 0u) << "first moment codes";
    EXPECT_EQ(differing(v_codes, on_gpu.download(vc_gpu, count)), 0u) << "second moment codes";
    EXPECT_EQ(differing(m_absmax, on_gpu.download(ma_gpu, blocks)), 0u) << "first moment scales";
    EXPECT_EQ(differing(v_absmax, on_gpu.download(va_gpu, blocks)), 0u) << "second moment scales";
  }
#endif
}

TEST(CudaPluginKernels, LoraDropoutMaskIsBitwiseTheHosts) {
  STRATA_SKIP_WITHOUT_CUDA();
#if STRATA_HAVE_CUDA
  const std::unique_ptr<Backend> gpu = make_backend("cuda:0", 0);
  const auto stream = static_cast<cudaStream_t>(gpu->kernel_target().stream);
  const std::int64_t count = 300007;
  const std::vector<float> x = cpu::test::random_vector<float>(count, 7),
                           base = cpu::test::random_vector<float>(count, 8);
  for (const float p : {0.1f, 0.5f}) {
    for (const bool accumulate : {false, true}) {
      SCOPED_TRACE("p " + std::to_string(p) + (accumulate ? ", accumulating" : ", overwriting"));
      const std::uint64_t hash_stream = lora::dropout_stream(12345, 3);
      std::vector<float> expected = base;
      std::size_t kept = 0;
      for (std::int64_t i = 0; i < count; ++i) {
        const float value = lora::dropped(x[i], hash_stream, i, p, 1.0f / (1.0f - p));
        kept += value != 0.0f ? 1 : 0;
        expected[i] = accumulate ? expected[i] + value : value;
      }
      test::BackendBuffers on_gpu(*gpu);
      float* into = on_gpu.upload(base);
      lora::cuda::apply_dropout(stream, {into, on_gpu.upload(x), count, hash_stream, p, 1.0f / (1.0f - p), accumulate});
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      EXPECT_EQ(differing(expected, on_gpu.download(into, count)), 0u);
      EXPECT_NEAR(static_cast<double>(kept) / count, 1.0 - p, 0.01) << "the mask keeps about 1 - p";
    }
  }
#endif
}

TEST(CudaPluginKernels, Int8QuantizationIsBitwiseTheCpus) {
  STRATA_SKIP_WITHOUT_CUDA();
#if STRATA_HAVE_CUDA
  const std::unique_ptr<Backend> gpu = make_backend("cuda:0", 0);
  const auto stream = static_cast<cudaStream_t>(gpu->kernel_target().stream);
  const std::int64_t in_features = 96, out_features = 320;
  for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
    for (const std::int64_t group_size : {std::int64_t{0}, std::int64_t{32}}) {
      SCOPED_TRACE(std::string(layout == WeightLayout::in_out ? "in_out" : "out_in") + ", group size " +
                   std::to_string(group_size));
      std::vector<float> master = cpu::test::random_vector<float>(in_features * out_features, 41, 0.05);
      // Stored row 0 all zero (a zero group for every grouping but in_out's per-column one, whose
      // column 5 is zeroed instead); an infinity in stored row 3, a NaN in column 7 of row 9.
      const std::int64_t row_length = layout == WeightLayout::in_out ? out_features : in_features;
      std::fill(master.begin(), master.begin() + row_length, 0.0f);
      for (std::int64_t r = 0; r < in_features * out_features / row_length; ++r) master[r * row_length + 5] = 0.0f;
      master[3 * row_length + 11] = INFINITY;
      master[9 * row_length + 7] = NAN;
      for (std::size_t i = 100; i < master.size(); i += 997) master[i] *= 40.0f;  // outliers set the scales
      const std::int64_t scales = int8::scale_count(in_features, out_features, layout, group_size);
      std::vector<std::int8_t> codes(master.size());
      std::vector<float> scale_values(scales);
      int8::quantize({codes.data(), scale_values.data(), group_size}, master.data(), in_features, out_features, layout);
      std::vector<float> dequantized(master.size());
      int8::dequantize(dequantized.data(), {codes.data(), scale_values.data(), group_size}, in_features, out_features,
                       layout);

      test::BackendBuffers on_gpu(*gpu);
      const float* d_master = on_gpu.upload(master);
      std::int8_t* d_codes = on_gpu.upload(std::vector<std::int8_t>(master.size(), 99));  // every code written
      float* d_scales = on_gpu.upload(std::vector<float>(scales, -1.0f));
      std::uint16_t* d_bf16 = on_gpu.upload(std::vector<std::uint16_t>(master.size(), 0xdead));
      int8::cuda::quantize(stream, {d_codes, d_scales, group_size}, d_master, in_features, out_features, layout);
      int8::cuda::dequantize_bf16(stream, d_bf16, {d_codes, d_scales, group_size}, in_features, out_features, layout);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      EXPECT_EQ(differing(codes, on_gpu.download(d_codes, codes.size())), 0u) << "codes";
      const std::vector<float> gpu_scales = on_gpu.download(d_scales, scale_values.size());
      EXPECT_EQ(differing(scale_values, gpu_scales), 0u) << "scales";
      EXPECT_GT(std::count_if(gpu_scales.begin(), gpu_scales.end(), [](float s) { return std::isnan(s); }), 0)
          << "a non-finite group gets a NaN scale";
      EXPECT_GT(std::count(gpu_scales.begin(), gpu_scales.end(), 0.0f), 0) << "a zero group gets scale 0";
      // bf16 of the CPU's dequantized f32 value; a NaN group is NaN on both sides.
      const std::vector<std::uint16_t> gpu_bf16 = on_gpu.download(d_bf16, master.size());
      std::size_t mismatched = 0;
      for (std::size_t i = 0; i < dequantized.size(); ++i) {
        const float widened = bf16_to_f32(gpu_bf16[i]);
        if (std::isnan(dequantized[i]) ? !std::isnan(widened) : gpu_bf16[i] != f32_to_bf16(dequantized[i]))
          ++mismatched;
      }
      EXPECT_EQ(mismatched, 0u) << "dequantized bf16 values";
    }
  }
#endif
}

TEST(CudaPluginKernels, Nf4QuantizationIsBitwiseTheCpus) {
  STRATA_SKIP_WITHOUT_CUDA();
#if STRATA_HAVE_CUDA
  const std::unique_ptr<Backend> gpu = make_backend("cuda:0", 0);
  const auto stream = static_cast<cudaStream_t>(gpu->kernel_target().stream);
  // 300 blocks of 64 and a short one: two groups of absmax; block 0 zero, an infinity in block 7.
  const std::int64_t elements = 64 * 300 + 22;
  for (const bool double_quant : {true, false})
    for (const bool finite : {true, false}) {
      SCOPED_TRACE(std::string(double_quant ? "double quantized" : "f32 absmax") + (finite ? "" : ", an infinity"));
      const nf4::Nf4Format format{64, double_quant};
      std::vector<float> master = cpu::test::random_vector<float>(static_cast<std::size_t>(elements), 43, 0.05);
      std::fill(master.begin(), master.begin() + 64, 0.0f);
      for (std::size_t i = 100; i < master.size(); i += 997) master[i] *= 40.0f;
      if (!finite) master[7 * 64 + 3] = INFINITY;
      const std::size_t code_bytes = static_cast<std::size_t>((elements + 1) / 2);
      const std::size_t side_floats = (nf4::side_bytes(elements, format) + 3) / 4;
      std::vector<std::uint8_t> codes(code_bytes);
      std::vector<float> side(side_floats, 0.0f);
      nf4::quantize({codes.data(), side.data(), format}, master.data(), elements);
      std::vector<float> dequantized(master.size());
      nf4::dequantize(dequantized.data(), {codes.data(), side.data(), format}, elements, 0, elements);

      test::BackendBuffers on_gpu(*gpu);
      const float* d_master = on_gpu.upload(master);
      std::uint8_t* d_codes = on_gpu.upload(std::vector<std::uint8_t>(code_bytes, 0xab));
      float* d_side = on_gpu.upload(std::vector<float>(side_floats, 0.0f));
      float* d_scratch = on_gpu.upload(
          std::vector<float>(static_cast<std::size_t>(nf4::cuda::quantize_scratch_floats(elements, format)), -1.0f));
      std::uint16_t* d_bf16 = on_gpu.upload(std::vector<std::uint16_t>(master.size(), 0xdead));
      nf4::cuda::quantize(stream, {d_codes, d_side, format}, d_master, elements, d_scratch);
      nf4::cuda::dequantize_bf16(stream, d_bf16, {d_codes, d_side, format}, elements);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      EXPECT_EQ(differing(codes, on_gpu.download(d_codes, codes.size())), 0u) << "codes";
      EXPECT_EQ(differing(side, on_gpu.download(d_side, side.size())), 0u) << "absmax, mean, scales and indices";
      const std::vector<std::uint16_t> gpu_bf16 = on_gpu.download(d_bf16, master.size());
      std::size_t mismatched = 0, nan = 0;
      for (std::size_t i = 0; i < dequantized.size(); ++i) {
        const float widened = bf16_to_f32(gpu_bf16[i]);
        nan += std::isnan(widened) ? 1 : 0;
        if (std::isnan(dequantized[i]) ? !std::isnan(widened) : gpu_bf16[i] != f32_to_bf16(dequantized[i]))
          ++mismatched;
      }
      EXPECT_EQ(mismatched, 0u) << "dequantized bf16 values";
      EXPECT_EQ(nan, finite ? 0u : double_quant ? dequantized.size() : 64u);
    }
#endif
}

TEST(CudaPluginKernels, Fp16ConversionsAreTheCpus) {
  STRATA_SKIP_WITHOUT_CUDA();
#if STRATA_HAVE_CUDA
  const std::unique_ptr<Backend> gpu = make_backend("cuda:0", 0);
  const auto stream = static_cast<cudaStream_t>(gpu->kernel_target().stream);
  // Every range binary16 rounds differently: normal, subnormal (under 2^-14), flushed (under 2^-25),
  // past 65504 to infinity, ties; plus infinities and NaN.
  std::vector<float> x = cpu::test::random_vector<float>(200003, 51);
  const float magnitudes[] = {1.0f, 3e-5f, 1e-7f, 1e-9f, 6e4f, 7e4f, 1e6f, 1e-40f};
  for (std::size_t i = 0; i < x.size(); ++i) x[i] *= magnitudes[i % 8];
  x[10] = INFINITY, x[11] = -INFINITY, x[12] = NAN, x[13] = 65520.0f, x[14] = 1.0f + 1.0f / 2048.0f;
  const auto count = static_cast<std::int64_t>(x.size());
  std::vector<std::uint16_t> narrowed(x.size());
  fp16::narrow(narrowed.data(), x.data(), count);
  std::vector<float> widened(x.size()), as_f16(x.size()), as_bf16(x.size());
  fp16::widen(widened.data(), narrowed.data(), count);
  fp16::round_to_f16(as_f16.data(), x.data(), count);
  for (std::size_t i = 0; i < x.size(); ++i) as_bf16[i] = bf16_to_f32(f32_to_bf16(x[i]));

  test::BackendBuffers on_gpu(*gpu);
  const float* d_x = on_gpu.upload(x);
  std::uint16_t* d_narrowed = on_gpu.upload(std::vector<std::uint16_t>(x.size()));
  float* d_widened = on_gpu.upload(std::vector<float>(x.size()));
  float* d_f16 = on_gpu.upload(std::vector<float>(x.size()));
  float* d_bf16 = on_gpu.upload(std::vector<float>(x.size()));
  fp16::cuda::narrow(stream, d_narrowed, d_x, count);
  fp16::cuda::widen(stream, d_widened, on_gpu.upload(narrowed), count);
  fp16::cuda::round_operand(stream, d_f16, d_x, count, fp16::Operands::f16);
  fp16::cuda::round_operand(stream, d_bf16, d_x, count, fp16::Operands::bf16);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  // Bit for bit, except that a NaN need only stay a NaN.
  const auto mismatches = [](const auto& expected, const auto& got, auto is_nan) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < expected.size(); ++i)
      count += is_nan(expected[i]) ? !is_nan(got[i]) : std::memcmp(&expected[i], &got[i], sizeof(expected[i])) != 0;
    return count;
  };
  const auto nan_f16 = [](std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; };
  const auto nan_f32 = [](float f) { return std::isnan(f); };
  EXPECT_EQ(mismatches(narrowed, on_gpu.download(d_narrowed, x.size()), nan_f16), 0u) << "to binary16";
  const std::vector<float> gpu_widened = on_gpu.download(d_widened, x.size());
  EXPECT_EQ(mismatches(widened, gpu_widened, nan_f32), 0u) << "from binary16";
  EXPECT_EQ(mismatches(as_f16, on_gpu.download(d_f16, x.size()), nan_f32), 0u) << "rounded to binary16";
  EXPECT_EQ(mismatches(as_bf16, on_gpu.download(d_bf16, x.size()), nan_f32), 0u) << "rounded to bf16";
  EXPECT_TRUE(std::isinf(gpu_widened[13])) << "65520 rounds past 65504 to infinity";
#endif
}

#if STRATA_HAVE_CUDA
// ||a - b|| / ||b|| over a whole buffer; a NaN (an element never written) fails it.
double norm_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff2 = 0.0, ref2 = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return INFINITY;
    diff2 += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    ref2 += double{b[i]} * b[i];
  }
  return std::sqrt(diff2 / std::max(ref2, 1e-300));
}
#endif

// flash's CUDA kernels, f32 and on tensor cores (bf16 operands), against its CPU kernel: the output
// and the gradients added, then a second run for the same bits. Windowed cases (Mistral's sliding
// window) reach past one 64-row tile, so some rows see no key of a whole tile.
TEST(CudaPluginKernels, FlashAttentionCudaStaysNearTheCpuKernel) {
  STRATA_SKIP_WITHOUT_CUDA();
#if STRATA_HAVE_CUDA
  const std::unique_ptr<Backend> gpu = make_backend("cuda:0", 0);
  const auto stream = static_cast<cudaStream_t>(gpu->kernel_target().stream);
  struct Case {
    AttentionShape shape;
    bool packed;  // q, k, v column blocks of one buffer (GPT-2's qkv), else three buffers
  };
  // Around the 64-row tile, both head dims, multi-head, grouped and multi-query; windows of 5 and 70.
  const Case cases[] = {{{2, 7, 4, 4, 64}, true},       {{2, 70, 6, 2, 64}, false}, {{1, 257, 4, 1, 128}, true},
                        {{2, 130, 4, 4, 128}, false},   {{1, 200, 8, 8, 64}, true}, {{2, 150, 4, 2, 64, 5}, false},
                        {{1, 200, 4, 4, 128, 70}, true}};
  for (const flash::cuda::Operands operands : {flash::cuda::Operands::f32, flash::cuda::Operands::bf16})
    for (const Case& c : cases) {
      const AttentionShape& s = c.shape;
      const bool bf16 = operands == flash::cuda::Operands::bf16;
      SCOPED_TRACE(std::string(bf16 ? "bf16" : "f32") + " T " + std::to_string(s.seq_len) + " D " +
                   std::to_string(s.head_dim) + " heads " + std::to_string(s.n_head) + "/" +
                   std::to_string(s.n_kv_head) + " window " + std::to_string(s.window));
      if (!flash::cuda::supports(s, operands)) {
        std::printf("flash %s T%d D%d: not supported on this GPU, skipped\n", bf16 ? "bf16" : "f32", s.seq_len,
                    s.head_dim);
        continue;
      }
      const std::int64_t N = std::int64_t{s.batch} * s.seq_len, C = std::int64_t{s.n_head} * s.head_dim,
                         KVC = std::int64_t{s.n_kv_head} * s.head_dim, floats = N * (C + 2 * KVC);
      const std::int64_t q_stride = c.packed ? C + 2 * KVC : C, kv_stride = c.packed ? C + 2 * KVC : KVC;
      const std::int64_t k_offset = c.packed ? C : N * C, v_offset = c.packed ? C + KVC : N * C + N * KVC;
      std::vector<float> qkv = cpu::test::random_vector<float>(floats, 31 + s.seq_len, 2.0);
      const std::vector<float> dout = cpu::test::random_vector<float>(N * C, 32 + s.seq_len);
      const std::vector<float> dqkv_start = cpu::test::random_vector<float>(floats, 33 + s.seq_len);

      std::vector<float> out(N * C), lse(flash::cpu::lse_floats(s)), scratch(flash::cpu::scratch_floats(s));
      std::vector<float> dqkv = dqkv_start;
      const AttentionInputs host_in{qkv.data(), qkv.data() + k_offset, qkv.data() + v_offset, q_stride, kv_stride};
      flash::cpu::forward(s, out.data(), lse.data(), host_in);
      flash::cpu::backward(s, {dqkv.data(), dqkv.data() + k_offset, dqkv.data() + v_offset, q_stride, kv_stride},
                           dout.data(), out.data(), host_in, lse.data(), scratch.data());

      std::vector<float> gpu_out[2], gpu_dqkv[2];
      for (int run = 0; run < 2; ++run) {
        test::BackendBuffers on_gpu(*gpu);
        const float* d_qkv = on_gpu.upload(qkv);
        const float* d_dout = on_gpu.upload(dout);
        float* d_dqkv = on_gpu.upload(dqkv_start);
        float* d_out = on_gpu.upload(std::vector<float>(N * C, NAN));  // every element must be written
        float* d_lse = on_gpu.upload(std::vector<float>(lse.size(), NAN));
        // The tensor-core backward's scratch also holds its bf16 copies of q, k, v and dout.
        const std::int64_t scratch_floats = flash::cuda::scratch_floats(s, operands);
        float* d_scratch = on_gpu.upload(std::vector<float>(scratch_floats, NAN));
        const AttentionInputs in{d_qkv, d_qkv + k_offset, d_qkv + v_offset, q_stride, kv_stride};
        ASSERT_TRUE(flash::cuda::forward(stream, s, d_out, d_lse, in, operands));
        ASSERT_TRUE(flash::cuda::backward(stream, s,
                                          {d_dqkv, d_dqkv + k_offset, d_dqkv + v_offset, q_stride, kv_stride}, d_dout,
                                          d_out, in, d_lse, d_scratch, operands));
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);
        gpu_out[run] = on_gpu.download(d_out, out.size());
        gpu_dqkv[run] = on_gpu.download(d_dqkv, dqkv.size());
      }
      // The gradients' change from their starting values, so that the bound is on what was added.
      std::vector<float> added(floats), gpu_added(floats);
      for (std::int64_t i = 0; i < floats; ++i) {
        added[i] = dqkv[i] - dqkv_start[i];
        gpu_added[i] = gpu_dqkv[0][i] - dqkv_start[i];
      }
      const double out_error = norm_relative_error(gpu_out[0], out);
      const double grad_error = norm_relative_error(gpu_added, added);
      std::printf("flash %s T%d D%d heads %d/%d window %d: relative error out %.2e, gradients %.2e\n",
                  bf16 ? "bf16" : "f32", s.seq_len, s.head_dim, s.n_head, s.n_kv_head, s.window, out_error, grad_error);
      const double bound = bf16 ? 1e-2 : 1e-5;  // bf16 operands: 2^-9 relative rounding of each; f32: sum order
      EXPECT_LT(out_error, bound);
      EXPECT_LT(grad_error, bound);
      EXPECT_EQ(differing(gpu_out[0], gpu_out[1]), 0u) << "a second run gives other bits";
      EXPECT_EQ(differing(gpu_dqkv[0], gpu_dqkv[1]), 0u) << "a second run gives other bits";
    }
#endif
}

}  // namespace
}  // namespace strata
