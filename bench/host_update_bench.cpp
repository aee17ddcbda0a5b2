// What the host's update of offloaded optimizer state costs per step (Backend::host_ops): for N
// parameters (default GPT-2 124M's 124,439,808) in host memory, the median ms over rounds of
//   - AdamW over f32 parameters, gradients and both moments (28 bytes read and written per parameter);
//   - the gradients' sum of squares in the CUDA kernels' order (the norm a CUDA run clips by) against
//     the CPU backend's own order;
//   - rounding the f32 masters into bf16 weights.
// The host update overlaps the GPU's backward under the fused update; these are the times it has to
// hide. The first touch of every buffer happens before timing. First, the AdamW kernel (the clone
// this CPU runs) is compared, bit for bit, with the scalar AdamW element the CUDA kernel runs, on
// the first million parameters.
//   OMP_NUM_THREADS=16 build/bench/strata_host_update_bench [--rounds R] [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <omp.h>

#include "bench/bench_timing.hpp"
#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/cuda_order_reductions.hpp"
#include "kernels/cpu/reductions.hpp"
#include "plugins/adamw/cpu/adamw_cpu.hpp"
#include "strata/kernels_common.hpp"

namespace {

using strata::bench::Clock;
using strata::bench::median;
using strata::bench::ms_since;

template <typename Work>
double timed(Work&& work) {
  const auto start = Clock::now();
  work();
  return ms_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  std::int64_t count = 124439808;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (!arg.empty() && arg[0] != '-') {
      count = std::max<std::int64_t>(1, std::atoll(arg.c_str()));
    } else {
      std::fprintf(stderr, "usage: strata_host_update_bench [--rounds R] [N]\n");
      return 2;
    }
  }
  std::vector<float> param(static_cast<std::size_t>(count)), grad(param.size()), m(param.size()), v(param.size());
  std::vector<std::uint16_t> weights(param.size());
  std::mt19937 generator(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (std::size_t i = 0; i < param.size(); ++i) {
    param[i] = normal(generator);
    grad[i] = normal(generator);
  }
  const strata::AdamWHyper hyper{6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f};
  {
    const std::size_t n = std::min<std::size_t>(param.size(), 1000003);
    std::vector<float> p(param.begin(), param.begin() + static_cast<std::ptrdiff_t>(n)), m0(n), v0(n);
    for (std::size_t i = 0; i < n; ++i) {
      m0[i] = 0.05f * grad[i];
      v0[i] = 0.01f * grad[i] * grad[i];
    }
    std::vector<float> p_scalar = p, m_scalar = m0, v_scalar = v0;
    const strata::AdamWHyper later{6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.7f};
    strata::adamw::cpu::update(p.data(), grad.data(), m0.data(), v0.data(), static_cast<std::int64_t>(n), later);
    const strata::kernels::AdamWCoefficients c = strata::kernels::adamw_coefficients(later);
    for (std::size_t i = 0; i < n; ++i)
      strata::kernels::adamw_element(p_scalar[i], grad[i], m_scalar[i], v_scalar[i], c);
    std::size_t differing = 0;
    for (std::size_t i = 0; i < n; ++i)
      differing += std::memcmp(&p[i], &p_scalar[i], sizeof(float)) != 0 ||
                   std::memcmp(&m0[i], &m_scalar[i], sizeof(float)) != 0 ||
                   std::memcmp(&v0[i], &v_scalar[i], sizeof(float)) != 0;
    std::printf("AdamW kernel against the scalar element: %zu of %zu parameters differ\n", differing, n);
  }
  std::vector<double> adamw, cuda_order, cpu_order, narrow;
  double squares_cuda = 0.0, squares_cpu = 0.0;
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms up
    const double a =
        timed([&] { strata::adamw::cpu::update(param.data(), grad.data(), m.data(), v.data(), count, hyper); });
    // Alternate which order of the sum runs first.
    double c = 0.0, p = 0.0;
    if (round % 2 == 0) {
      c = timed([&] { squares_cuda = strata::cpu::sum_of_squares_in_cuda_order(grad.data(), count); });
      p = timed([&] { squares_cpu = strata::cpu::sum_of_squares(grad.data(), count); });
    } else {
      p = timed([&] { squares_cpu = strata::cpu::sum_of_squares(grad.data(), count); });
      c = timed([&] { squares_cuda = strata::cpu::sum_of_squares_in_cuda_order(grad.data(), count); });
    }
    const double n = timed([&] { strata::cpu::narrow(weights.data(), param.data(), count); });
    if (round == 0) continue;
    adamw.push_back(a);
    cuda_order.push_back(c);
    cpu_order.push_back(p);
    narrow.push_back(n);
  }
  const double gb = static_cast<double>(count) / 1e9;
  std::printf("%lld parameters, %d threads, median of %d rounds\n", static_cast<long long>(count),
              omp_get_max_threads(), rounds);
  std::printf("AdamW update                   %9.1f ms  (%.1f GB/s of 28 B per parameter)\n", median(adamw),
              28.0 * gb / (median(adamw) / 1e3));
  std::printf("sum of squares, CUDA order     %9.1f ms  (%.1f GB/s)\n", median(cuda_order),
              4.0 * gb / (median(cuda_order) / 1e3));
  std::printf("sum of squares, CPU order      %9.1f ms  (%.1f GB/s)\n", median(cpu_order),
              4.0 * gb / (median(cpu_order) / 1e3));
  std::printf("narrow masters to bf16         %9.1f ms  (%.1f GB/s of 6 B per parameter)\n", median(narrow),
              6.0 * gb / (median(narrow) / 1e3));
  std::printf("the two sums differ by %.3g (relative)\n", (squares_cuda - squares_cpu) / squares_cpu);
  return 0;
}
