// Plugin kernels on the GPU against the CPU's, bit for bit where the CPU's result is exact:
// - AdamW (the CUDA backend's) and adamw8bit run the CPU kernel's own AdamW element
//   (strata/kernels_common.hpp) without contraction, and adamw8bit quantizes with the CPU's
//   decision thresholds: several steps, odd counts (a partial last block), every block size
//   class, and a block whose moments are zero;
// - LoRA's dropout mask (plugins/lora/dropout_mask.hpp), overwriting and accumulating.
// Skips, saying why, where no CUDA device is visible.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <vector>

#include "backend_buffers.hpp"
#include "kernel_test_support.hpp"
#include "plugins/adamw8bit/cpu/adamw8bit_cpu.hpp"
#include "plugins/adamw8bit/cpu/dynamic_quantization.hpp"
#include "plugins/lora/dropout_mask.hpp"

#if STRATA_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "plugins/adamw8bit/cuda/adamw8bit_cuda.hpp"
#include "plugins/lora/cuda/lora_dropout_cuda.hpp"
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

AdamWHyper hyper_at(int step) {
  return AdamWHyper{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.75f};
}

TEST(CudaPluginKernels, AdamWIsBitwiseTheCpus) {
  STRATA_SKIP_WITHOUT_CUDA();
  const std::int64_t count = 100003;
  std::vector<float> param = cpu::test::random_vector<float>(count, 1),
                     m = cpu::test::random_vector<float>(count, 2, 0.1);
  std::vector<float> v = cpu::test::random_vector<float>(count, 3, 0.01);
  for (float& value : v) value = std::abs(value);
  const std::unique_ptr<Backend> cpu = make_backend("cpu", 0), gpu = make_backend("cuda:0", 0);
  test::BackendBuffers on_cpu(*cpu), on_gpu(*gpu);
  float *p_cpu = on_cpu.upload(param), *m_cpu = on_cpu.upload(m), *v_cpu = on_cpu.upload(v);
  float *p_gpu = on_gpu.upload(param), *m_gpu = on_gpu.upload(m), *v_gpu = on_gpu.upload(v);
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> grad = cpu::test::random_vector<float>(count, 10 + step);
    cpu->ops().adamw_update(p_cpu, on_cpu.upload(grad), m_cpu, v_cpu, count, hyper_at(step));
    gpu->ops().adamw_update(p_gpu, on_gpu.upload(grad), m_gpu, v_gpu, count, hyper_at(step));
  }
  EXPECT_EQ(differing(on_cpu.download(p_cpu, count), on_gpu.download(p_gpu, count)), 0u) << "parameters";
  EXPECT_EQ(differing(on_cpu.download(m_cpu, count), on_gpu.download(m_gpu, count)), 0u) << "first moments";
  EXPECT_EQ(differing(on_cpu.download(v_cpu, count), on_gpu.download(v_gpu, count)), 0u) << "second moments";
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

}  // namespace
}  // namespace strata
