// Where a bf16 block matmul's time goes on one GPU: GPT-2 124M's four block products at B16 T1024
// (N = 16384 rows), each timed three ways with CUDA events (median of 30 after 5 warm-ups, inputs
// random, never zeros):
//   strata   kernels/cuda/matmul.cu as the backend runs it: f32 input narrowed to bf16, bf16 weight,
//            the bias added in cuBLASLt's epilogue, f32 output (forward; "plain": the bias broadcast
//            into out first, then beta = 1); input and dout narrowed, dinp, dweight (+=) and the
//            dbias gemv (backward; "bwd gemm": its two products alone)
//   gemm     the same cuBLAS product alone, bf16 operands, f32 output (no narrowing, no bias)
//   bf16out  all bf16 (operands and output), as PyTorch's autocast runs it
// and printed with TFLOP/s (2 N C OC a forward product, twice that backward). A build with nvcc
// makes it as bench/strata_matmul_gpu_bench; bench/gpu_check.sh --matmul-bench runs it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/matmul.hpp"

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "CUDA error at %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}
void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cuBLAS error %d at %s\n", static_cast<int>(status), what);
    std::exit(1);
  }
}

template <typename T>
struct DeviceBuffer {
  T* data = nullptr;
  explicit DeviceBuffer(std::int64_t count, std::mt19937& random) {
    check(cudaMalloc(&data, static_cast<std::size_t>(count) * sizeof(T)), "malloc");
    // Random bits of the right kind: f32 in [-1, 1), bf16 as the top halves of such f32s.
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<T> host(static_cast<std::size_t>(count));
    for (T& value : host) {
      const float x = uniform(random);
      if constexpr (sizeof(T) == 4) {
        value = x;
      } else {
        std::uint32_t bits;
        std::memcpy(&bits, &x, 4);
        value = static_cast<T>(bits >> 16);
      }
    }
    check(cudaMemcpy(data, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

template <typename Body>
double median_ms(cudaStream_t stream, Body body) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 5; ++i) body();
  std::vector<float> times;
  for (int i = 0; i < 30; ++i) {
    check(cudaEventRecord(start, stream), "record");
    body();
    check(cudaEventRecord(stop, stream), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    times.push_back(ms);
  }
  check(cudaGetLastError(), "launch");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main() {
  using strata::MatmulShape;
  using strata::WeightLayout;
  constexpr std::int64_t N = 16 * 1024;
  struct Product {
    const char* name;
    std::int64_t in, out;
  };
  const Product products[] = {{"qkv", 768, 2304}, {"attn proj", 768, 768}, {"fc", 768, 3072}, {"fc proj", 3072, 768}};
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  cublasHandle_t handle;
  check(cublasCreate(&handle), "cublas");
  check(cublasSetStream(handle, stream), "cublas stream");
  void* cublas_workspace = nullptr;
  check(cudaMalloc(&cublas_workspace, 32 << 20), "workspace");
  check(cublasSetWorkspace(handle, cublas_workspace, 32 << 20), "cublas workspace");
  std::mt19937 random(7);
  strata::cuda::BiasMatmul bias_matmul;
  const strata::cuda::BiasEpilogue epilogue{&bias_matmul, cublas_workspace, std::size_t{32} << 20};
  std::printf("%-10s %9s %9s %9s %9s | %9s %9s %9s | %8s %8s %8s\n", "product", "fwd ms", "plain ms", "gemm ms",
              "bf16out", "bwd ms", "bwd gemm", "TFLOP/s", "fwd", "gemm", "bf16out");
  double total_forward = 0, total_plain = 0, total_backward = 0, total_backward_gemm = 0, total_gemm = 0,
         total_bf16 = 0, worst_epilogue_difference = 0;
  for (const Product& p : products) {
    const MatmulShape shape{N, p.in, p.out, WeightLayout::in_out};
    DeviceBuffer<float> inp(N * p.in, random), out(N * p.out, random), bias(p.out, random), dout(N * p.out, random),
        dinp(N * p.in, random), dweight(p.in * p.out, random), dbias(p.out, random), ones(N, random);
    DeviceBuffer<std::uint16_t> weight(p.in * p.out, random), inp16(N * p.in, random), out16(N * p.out, random);
    strata::cuda::fill_floats(stream, ones.data, 1.0f, N);
    void* staging = nullptr;
    check(cudaMalloc(&staging, strata::cuda::matmul_bf16_workspace_bytes(shape)), "staging");
    const strata::Weight w{weight.data, strata::DType::bf16, nullptr, 0};
    // The epilogue's bias against the plain path's broadcast: the same sums, so equal to rounding.
    std::vector<float> plain_out(static_cast<std::size_t>(N * p.out)), fused_out(plain_out.size());
    check(strata::cuda::matmul_forward(stream, handle, out.data, inp.data, w, bias.data, shape, staging, true),
          "forward");
    check(cudaMemcpy(plain_out.data(), out.data, plain_out.size() * 4, cudaMemcpyDeviceToHost), "download");
    check(cudaMemset(out.data, 0xff, plain_out.size() * 4), "poison");  // NaNs: every element must be written
    check(
        strata::cuda::matmul_forward(stream, handle, out.data, inp.data, w, bias.data, shape, staging, true, epilogue),
        "forward");
    check(cudaMemcpy(fused_out.data(), out.data, fused_out.size() * 4, cudaMemcpyDeviceToHost), "download");
    double difference = 0, scale = 0;
    for (std::size_t i = 0; i < plain_out.size(); ++i) {
      const double gap = std::isnan(fused_out[i]) ? INFINITY : std::fabs(double{fused_out[i]} - plain_out[i]);
      difference = std::max(difference, gap);
      scale = std::max(scale, static_cast<double>(std::fabs(plain_out[i])));
    }
    worst_epilogue_difference = std::max(worst_epilogue_difference, difference / scale);
    const double forward = median_ms(stream, [&] {
      check(strata::cuda::matmul_forward(stream, handle, out.data, inp.data, w, bias.data, shape, staging, true,
                                         epilogue),
            "forward");
    });
    const double plain = median_ms(stream, [&] {
      check(strata::cuda::matmul_forward(stream, handle, out.data, inp.data, w, bias.data, shape, staging, true),
            "forward");
    });
    const double backward = median_ms(stream, [&] {
      check(strata::cuda::matmul_backward(stream, handle, dinp.data, dweight.data, dbias.data, dout.data, inp.data, w,
                                          shape, strata::GradientWrite::overwrite, ones.data, staging, true),
            "backward");
    });
    const float alpha = 1.0f, beta = 0.0f;
    const int n = static_cast<int>(N), c = static_cast<int>(p.in), oc = static_cast<int>(p.out);
    const double gemm = median_ms(stream, [&] {
      check(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, oc, n, c, &alpha, weight.data, CUDA_R_16BF, oc, inp16.data,
                         CUDA_R_16BF, c, &beta, out.data, CUDA_R_32F, oc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "gemm");
    });
    const double bf16out = median_ms(stream, [&] {
      check(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, oc, n, c, &alpha, weight.data, CUDA_R_16BF, oc, inp16.data,
                         CUDA_R_16BF, c, &beta, out16.data, CUDA_R_16BF, oc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "bf16out");
    });
    // The backward's two products alone, on operands already bf16 (out16 standing in for dout).
    const float one = 1.0f;
    const double backward_gemm = median_ms(stream, [&] {
      check(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, c, n, oc, &alpha, weight.data, CUDA_R_16BF, oc, out16.data,
                         CUDA_R_16BF, oc, &beta, dinp.data, CUDA_R_32F, c, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "dinp gemm");
      check(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, oc, c, n, &alpha, out16.data, CUDA_R_16BF, oc, inp16.data,
                         CUDA_R_16BF, c, &one, dweight.data, CUDA_R_32F, oc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "dweight gemm");
    });
    const double flop = 2.0 * N * p.in * p.out;
    const auto rate = [](double f, double ms) { return f / (ms * 1e-3) / 1e12; };
    std::printf("%-10s %9.3f %9.3f %9.3f %9.3f | %9.3f %9.3f %9.1f | %8.1f %8.1f %8.1f\n", p.name, forward, plain, gemm,
                bf16out, backward, backward_gemm, rate(2 * flop, backward), rate(flop, forward), rate(flop, gemm),
                rate(flop, bf16out));
    total_forward += forward, total_plain += plain, total_backward += backward, total_backward_gemm += backward_gemm;
    total_gemm += gemm, total_bf16 += bf16out;
    cudaFree(staging);
  }
  std::printf(
      "one block: forward %.3f ms (bias broadcast first %.3f, the GEMMs alone %.3f, all-bf16 %.3f), backward %.3f ms "
      "(its GEMMs alone %.3f); x12 blocks: %.1f + %.1f ms\n",
      total_forward, total_plain, total_gemm, total_bf16, total_backward, total_backward_gemm, 12 * total_forward,
      12 * total_backward);
  std::printf("bias in the epilogue against broadcast first: max |difference| / max |out| = %.3g %s\n",
              worst_epilogue_difference, worst_epilogue_difference < 1e-5 ? "ok" : "FAILED");
  cudaFree(cublas_workspace);
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
  return worst_epilogue_difference < 1e-5 ? 0 : 1;
}
