// Standalone check and benchmark of the flash plugin's CUDA kernels on one GPU, the f32 ones
// (plugins/flash_attention/cuda/flash_attention_cuda.cu) and the bf16 tensor-core ones
// (flash_attention_tensor_cores.cu). A build with nvcc makes it as bench/strata_flash_attention_gpu_bench
// (scripts/device-bundle.sh carries it; bench/gpu_check.sh --flash-bench runs it).
// It compares forward out and dq/dk/dv (added into random pre-filled buffers) with a float64 CPU
// reference (kernels/cpu/attention.hpp's templates), checks that two runs agree bit for bit and
// that every output element was written (outputs poisoned with NaN first), then times forward and
// backward at three model shapes (main's list) beside the cuBLAS baseline (kernels/cuda/attention.cu). Bounds:
// max |gpu - ref| / max |ref| < 2e-5 for f32; for bf16 operands ||gpu - ref|| / ||ref|| < 1e-2.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cpu/attention.hpp"
#include "kernels/cuda/attention.hpp"
#include "plugins/flash_attention/cuda/flash_attention_cuda.hpp"

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "CUDA error at %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

struct Case {
  int batch, seq_len, n_head, n_kv_head, head_dim;
  bool packed;  // q, k, v are views of one (N, (n_head + 2 n_kv_head) D) buffer; else separate, rows padded by 3
};

template <typename T>
struct DeviceBuffer {
  T* data = nullptr;
  explicit DeviceBuffer(std::int64_t count) {
    check(cudaMalloc(&data, std::max<std::int64_t>(count, 1) * sizeof(T)), "malloc");
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Input layout: one host buffer for q, k, v (packed or three padded regions), the same for grads.
struct Layout {
  std::int64_t q_offset, k_offset, v_offset, q_stride, kv_stride, total;
};

Layout layout_of(const Case& c) {
  const std::int64_t N = static_cast<std::int64_t>(c.batch) * c.seq_len;
  const std::int64_t qw = static_cast<std::int64_t>(c.n_head) * c.head_dim,
                     kw = static_cast<std::int64_t>(c.n_kv_head) * c.head_dim;
  if (c.packed) return {0, qw, qw + kw, qw + 2 * kw, qw + 2 * kw, N * (qw + 2 * kw)};
  const std::int64_t qs = qw + 3, ks = kw + 3;
  return {0, N * qs, N * qs + N * ks, qs, ks, N * qs + 2 * N * ks};
}

double max_abs(const std::vector<double>& values) {
  double m = 0;
  for (double v : values) m = std::max(m, std::abs(v));
  return m;
}

using strata::flash::cuda::Operands;

// max |gpu - ref| / max |ref| over a whole buffer (f32), or ||gpu - ref|| / ||ref|| (bf16); NaN
// (an element never written) is infinitely wrong.
double relative_error(const std::vector<float>& gpu, const std::vector<double>& ref, Operands operands) {
  double worst = 0, diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    if (std::isnan(gpu[i])) return INFINITY;
    const double d = gpu[i] - ref[i];
    worst = std::max(worst, std::abs(d));
    diff2 += d * d;
    ref2 += ref[i] * ref[i];
  }
  if (operands == Operands::bf16) return std::sqrt(diff2 / std::max(ref2, 1e-300));
  return worst / std::max(max_abs(ref), 1e-30);
}

bool run_case(const Case& c, std::mt19937& rng, Operands operands) {
  const strata::AttentionShape shape{c.batch, c.seq_len, c.n_head, c.n_kv_head, c.head_dim};
  const Layout lay = layout_of(c);
  const std::int64_t out_count = static_cast<std::int64_t>(c.batch) * c.seq_len * c.n_head * c.head_dim;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> qkv(lay.total), dqkv0(lay.total), dout(out_count);
  for (auto& x : qkv) x = uniform(rng) * 2.0f;  // scores of a few units, like trained attention
  for (auto& x : dqkv0) x = uniform(rng);
  for (auto& x : dout) x = uniform(rng);

  // float64 reference
  std::vector<double> qkv_d(qkv.begin(), qkv.end()), dout_d(dout.begin(), dout.end());
  std::vector<double> out_ref(out_count), grads_ref(dqkv0.begin(), dqkv0.end());
  const std::int64_t att = static_cast<std::int64_t>(c.batch) * c.n_head * c.seq_len * c.seq_len;
  std::vector<double> att_ref(att), scratch_ref(att);
  const strata::cpu::reference::QkvViews<const double*> in_d{qkv_d.data() + lay.q_offset, qkv_d.data() + lay.k_offset,
                                                             qkv_d.data() + lay.v_offset, lay.q_stride, lay.kv_stride};
  const strata::cpu::reference::QkvViews<double*> grads_d{grads_ref.data() + lay.q_offset,
                                                          grads_ref.data() + lay.k_offset,
                                                          grads_ref.data() + lay.v_offset, lay.q_stride, lay.kv_stride};
  strata::cpu::reference::attention_forward(out_ref.data(), att_ref.data(), in_d, shape);
  strata::cpu::reference::attention_backward(grads_d, scratch_ref.data(), dout_d.data(), in_d, att_ref.data(), shape);

  DeviceBuffer<float> d_qkv(lay.total), d_dqkv(lay.total), d_dout(out_count), d_out(out_count);
  DeviceBuffer<float> d_saved(strata::flash::cuda::lse_floats(shape));
  DeviceBuffer<float> d_scratch(strata::flash::cuda::scratch_floats(shape, operands));
  check(cudaMemcpy(d_qkv.data, qkv.data(), lay.total * 4, cudaMemcpyHostToDevice), "h2d");
  check(cudaMemcpy(d_dout.data, dout.data(), out_count * 4, cudaMemcpyHostToDevice), "h2d");
  const strata::AttentionInputs in{d_qkv.data + lay.q_offset, d_qkv.data + lay.k_offset, d_qkv.data + lay.v_offset,
                                   lay.q_stride, lay.kv_stride};
  const strata::AttentionGrads grads{d_dqkv.data + lay.q_offset, d_dqkv.data + lay.k_offset, d_dqkv.data + lay.v_offset,
                                     lay.q_stride, lay.kv_stride};
  std::vector<float> out[2], dqkv[2];
  for (int run = 0; run < 2; ++run) {
    check(cudaMemcpy(d_dqkv.data, dqkv0.data(), lay.total * 4, cudaMemcpyHostToDevice), "h2d");
    check(cudaMemset(d_out.data, 0xff, out_count * 4), "memset");
    check(cudaMemset(d_saved.data, 0xff, strata::flash::cuda::lse_floats(shape) * 4), "memset");
    check(cudaMemset(d_scratch.data, 0xff, strata::flash::cuda::scratch_floats(shape, operands) * 4), "memset");
    if (!strata::flash::cuda::forward(nullptr, shape, d_out.data, d_saved.data, in, operands)) {
      std::printf("shape refused\n");
      return false;
    }
    check(cudaGetLastError(), "forward");
    strata::flash::cuda::backward(nullptr, shape, grads, d_dout.data, d_out.data, in, d_saved.data, d_scratch.data,
                                  operands);
    check(cudaGetLastError(), "backward");
    check(cudaDeviceSynchronize(), "sync");
    out[run].resize(out_count);
    dqkv[run].resize(lay.total);
    check(cudaMemcpy(out[run].data(), d_out.data, out_count * 4, cudaMemcpyDeviceToHost), "d2h");
    check(cudaMemcpy(dqkv[run].data(), d_dqkv.data, lay.total * 4, cudaMemcpyDeviceToHost), "d2h");
  }
  const bool same = std::memcmp(out[0].data(), out[1].data(), out_count * 4) == 0 &&
                    std::memcmp(dqkv[0].data(), dqkv[1].data(), lay.total * 4) == 0;
  const double e_out = relative_error(out[0], out_ref, operands);
  // Per gradient region (dq, dk, dv), including the padding between rows, which must stay as pre-filled.
  const std::int64_t bounds[4] = {lay.q_offset, lay.k_offset, lay.v_offset, lay.total};
  double e_grad[3];
  for (int r = 0; r < 3; ++r) {
    std::vector<float> g(dqkv[0].begin() + bounds[r], dqkv[0].begin() + bounds[r + 1]);
    std::vector<double> ref(grads_ref.begin() + bounds[r], grads_ref.begin() + bounds[r + 1]);
    if (c.packed) {  // regions interleave: compare whole buffer restricted by column
      g.assign(dqkv[0].begin(), dqkv[0].end());
      ref.assign(grads_ref.begin(), grads_ref.end());
      const std::int64_t lo = r == 0 ? 0 : (r == 1 ? lay.k_offset : lay.v_offset);
      const std::int64_t hi = r == 0 ? lay.k_offset : (r == 1 ? lay.v_offset : lay.q_stride);
      std::vector<float> gs;
      std::vector<double> rs;
      for (std::int64_t i = 0; i < lay.total; ++i) {
        const std::int64_t col = i % lay.q_stride;
        if (col >= lo && col < hi) gs.push_back(g[i]), rs.push_back(ref[i]);
      }
      g.swap(gs);
      ref.swap(rs);
    }
    e_grad[r] = relative_error(g, ref, operands);
  }
  const double worst = std::max({e_out, e_grad[0], e_grad[1], e_grad[2]});
  const bool ok = worst < (operands == Operands::bf16 ? 1e-2 : 2e-5) && same;
  std::printf("%s B%d T%-4d H%d KV%d D%-3d %-6s  out %.2e  dq %.2e  dk %.2e  dv %.2e  rerun %s  %s\n",
              operands == Operands::bf16 ? "bf16" : "f32 ", c.batch, c.seq_len, c.n_head, c.n_kv_head, c.head_dim,
              c.packed ? "packed" : "padded", e_out, e_grad[0], e_grad[1], e_grad[2], same ? "bitwise" : "DIFFERS",
              ok ? "ok" : "FAIL");
  return ok;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename Fn>
float time_ms(Fn fn, int reps) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  fn();
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(start);
    fn();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  check(cudaGetLastError(), "timed op");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(times);
}

void benchmark(const Case& c) {
  const strata::AttentionShape shape{c.batch, c.seq_len, c.n_head, c.n_kv_head, c.head_dim};
  const Layout lay = layout_of(c);
  const std::int64_t out_count = static_cast<std::int64_t>(c.batch) * c.seq_len * c.n_head * c.head_dim;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> host(lay.total);
  for (auto& x : host) x = uniform(rng);
  DeviceBuffer<float> qkv(lay.total), dqkv(lay.total), dout(out_count), out(out_count);
  check(cudaMemcpy(qkv.data, host.data(), lay.total * 4, cudaMemcpyHostToDevice), "h2d");
  check(cudaMemcpy(dout.data, host.data(), out_count * 4, cudaMemcpyHostToDevice), "h2d");
  check(cudaMemset(dqkv.data, 0, lay.total * 4), "memset");
  const strata::AttentionInputs in{qkv.data, qkv.data + lay.k_offset, qkv.data + lay.v_offset, lay.q_stride,
                                   lay.kv_stride};
  const strata::AttentionGrads grads{dqkv.data, dqkv.data + lay.k_offset, dqkv.data + lay.v_offset, lay.q_stride,
                                     lay.kv_stride};
  const double fwd_flop = 2.0 * 2.0 * c.batch * c.n_head * double(c.seq_len) * c.seq_len * c.head_dim / 2.0;
  const double bwd_flop = 2.5 * fwd_flop;
  for (const Operands operands : {Operands::f32, Operands::bf16}) {
    DeviceBuffer<float> saved(strata::flash::cuda::lse_floats(shape));
    DeviceBuffer<float> scratch(strata::flash::cuda::scratch_floats(shape, operands));
    const float f =
        time_ms([&] { strata::flash::cuda::forward(nullptr, shape, out.data, saved.data, in, operands); }, 20);
    const float b = time_ms(
        [&] {
          strata::flash::cuda::backward(nullptr, shape, grads, dout.data, out.data, in, saved.data, scratch.data,
                                        operands);
        },
        20);
    std::printf("flash %s B%d H%d/%d T%d D%d: fwd %.3f ms (%.1f TFLOP/s)  bwd %.3f ms (%.1f TFLOP/s)  total %.3f ms\n",
                operands == Operands::bf16 ? "bf16" : "f32 ", c.batch, c.n_head, c.n_kv_head, c.seq_len, c.head_dim, f,
                fwd_flop / f / 1e9, b, bwd_flop / b / 1e9, f + b);
  }
  {
    cublasHandle_t cublas;
    cublasCreate(&cublas);
    DeviceBuffer<float> saved(strata::cuda::attention_saved_floats(shape));
    DeviceBuffer<float> scratch(strata::cuda::attention_scratch_floats(shape));
    const float f =
        time_ms([&] { strata::cuda::attention_forward(nullptr, cublas, shape, out.data, saved.data, in); }, 10);
    const float b = time_ms(
        [&] {
          strata::cuda::attention_backward(nullptr, cublas, shape, grads, dout.data, in, saved.data, scratch.data);
        },
        10);
    std::printf(
        "baseline   B%d H%d/%d T%d D%d: fwd %.3f ms (%.1f TFLOP/s)  bwd %.3f ms (%.1f TFLOP/s)  total %.3f ms\n",
        c.batch, c.n_head, c.n_kv_head, c.seq_len, c.head_dim, f, fwd_flop / f / 1e9, b, bwd_flop / b / 1e9, f + b);
    cublasDestroy(cublas);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool bench_only = argc > 1 && std::strcmp(argv[1], "--bench-only") == 0;
  bool ok = true;
  if (!bench_only) {
    std::mt19937 rng(1234);
    for (const Operands operands : {Operands::f32, Operands::bf16})
      for (int T : {1, 7, 64, 257, 1024})
        for (int D : {64, 128}) {
          const int B = T >= 1024 ? 1 : 2;
          ok = run_case({B, T, 4, 4, D, true}, rng, operands) && ok;                // MHA, packed qkv
          ok = run_case({B, T, 6, 2, D, false}, rng, operands) && ok;               // GQA (group 3), padded rows
          if (T == 257) ok = run_case({B, T, 4, 1, D, true}, rng, operands) && ok;  // MQA, packed
        }
  }
  // GPT-2 124M's attention; a TinyLlama-1.1B-shaped LLaMA's (grouped, T 2048); a 7B LLaMA's (head dim 128).
  for (const Case& c :
       {Case{16, 1024, 12, 12, 64, true}, Case{4, 2048, 32, 4, 64, true}, Case{1, 2048, 32, 32, 128, true}})
    benchmark(c);
  std::printf(ok ? "ALL OK\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
