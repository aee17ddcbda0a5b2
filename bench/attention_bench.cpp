// Causal attention on the CPU at GPT-2 124M's shape (B1, H12, D64, packed qkv): the built-in
// kernel (kernels/cpu/attention.cpp, the (T, T) probabilities saved) against the flash attention
// plugin's kernel (the log-sum-exp saved). Median ms of forward and backward over rounds that
// alternate which one runs first, the bytes each keeps between forward and backward, and the
// largest difference of their outputs.
//   OMP_NUM_THREADS=2 build/bench/strata_attention_bench [--rounds N] [T ...]   (T: 256 ... 4096)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_timing.hpp"
#include "kernels/cpu/attention.hpp"
#include "plugins/flash_attention/cpu/flash_attention_cpu.hpp"

namespace {

using strata::bench::Clock;
using strata::bench::median;
using strata::bench::ms_since;

struct Timings {
  std::vector<double> forward, backward;
};

struct Buffers {
  std::vector<float> qkv, dqkv, dout, out, saved, scratch;
};

int parse_positive(const char* text, const char* what) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > 1 << 20) {
    std::fprintf(stderr, "strata_attention_bench: %s must be a positive integer, got '%s'\n", what, text);
    std::exit(2);
  }
  return static_cast<int>(value);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  std::vector<int> seq_lens;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc)
      rounds = parse_positive(argv[++i], "--rounds");
    else
      seq_lens.push_back(parse_positive(argv[i], "T"));
  }
  if (seq_lens.empty()) seq_lens = {256, 512, 1024, 2048, 4096};

  const int B = 1, H = 12, D = 64, C = H * D;
  std::printf("%6s %10s %10s %10s %10s %12s %12s %10s\n", "T", "fwd ms", "bwd ms", "flash fwd", "flash bwd",
              "saved MiB", "flash KiB", "max |diff|");
  for (const int T : seq_lens) {
    const strata::AttentionShape shape{B, T, H, H, D};
    const std::int64_t N = std::int64_t{B} * T;
    std::mt19937 generator(1234);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> qkv(N * 3 * C), dout(N * C);
    for (auto& x : qkv) x = uniform(generator);
    for (auto& x : dout) x = uniform(generator);
    const strata::AttentionInputs in{qkv.data(), qkv.data() + C, qkv.data() + 2 * C, 3 * C, 3 * C};
    const std::int64_t probabilities = std::int64_t{B} * H * T * T;
    Buffers builtin{{},
                    std::vector<float>(N * 3 * C),
                    {},
                    std::vector<float>(N * C),
                    std::vector<float>(probabilities),
                    std::vector<float>(probabilities)};
    Buffers flash{{},
                  std::vector<float>(N * 3 * C),
                  {},
                  std::vector<float>(N * C),
                  std::vector<float>(strata::flash::cpu::lse_floats(shape)),
                  std::vector<float>(strata::flash::cpu::scratch_floats(shape))};
    auto grads = [&](Buffers& b) {
      return strata::AttentionGrads{b.dqkv.data(), b.dqkv.data() + C, b.dqkv.data() + 2 * C, 3 * C, 3 * C};
    };
    auto run_builtin = [&](Timings& t) {
      auto start = Clock::now();
      strata::cpu::attention_forward(builtin.out.data(), builtin.saved.data(), in, shape);
      t.forward.push_back(ms_since(start));
      start = Clock::now();
      strata::cpu::attention_backward(grads(builtin), builtin.scratch.data(), dout.data(), in, builtin.saved.data(),
                                      shape);
      t.backward.push_back(ms_since(start));
    };
    auto run_flash = [&](Timings& t) {
      auto start = Clock::now();
      strata::flash::cpu::forward(shape, flash.out.data(), flash.saved.data(), in);
      t.forward.push_back(ms_since(start));
      start = Clock::now();
      strata::flash::cpu::backward(shape, grads(flash), dout.data(), flash.out.data(), in, flash.saved.data(),
                                   flash.scratch.data());
      t.backward.push_back(ms_since(start));
    };
    Timings warmup, builtin_times, flash_times;
    run_builtin(warmup);
    run_flash(warmup);
    double difference = 0.0;
    for (std::int64_t i = 0; i < N * C; ++i)
      difference = std::max(difference, static_cast<double>(std::abs(builtin.out[i] - flash.out[i])));
    for (int round = 0; round < rounds; ++round) {
      if (round % 2 == 0) {
        run_builtin(builtin_times);
        run_flash(flash_times);
      } else {
        run_flash(flash_times);
        run_builtin(builtin_times);
      }
    }
    const double builtin_mib = 2.0 * static_cast<double>(probabilities) * sizeof(float) / (1 << 20);
    const double flash_kib =
        static_cast<double>(strata::flash::cpu::lse_floats(shape) + strata::flash::cpu::scratch_floats(shape)) *
        sizeof(float) / 1024;
    std::printf("%6d %10.2f %10.2f %10.2f %10.2f %12.1f %12.1f %10.2g\n", T, median(builtin_times.forward),
                median(builtin_times.backward), median(flash_times.forward), median(flash_times.backward), builtin_mib,
                flash_kib, difference);
  }
  return 0;
}
