// The flash attention plugin's CPU kernel against the plain reference attention in double:
// output, log-sum-exp and gradients over sequence lengths around the tile size, head dims,
// grouped key/value heads and both q/k/v layouts; a finite-difference check of the gradients;
// bitwise determinism across thread counts; accumulation into the gradients; NaN propagation.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernel_test_support.hpp"
#include "kernels/cpu/attention.hpp"
#include "plugins/flash_attention/cpu/flash_attention_cpu.hpp"

namespace strata {
namespace {

using cpu::test::random_vector;

struct Case {
  AttentionShape shape;
  bool packed;  // q, k, v as column blocks of one (N, (NH + 2 KV) D) buffer, as GPT-2's qkv
};

// Where q, k and v sit in one buffer of either layout, and their row strides.
struct Layout {
  std::int64_t q_offset, k_offset, v_offset, q_stride, kv_stride, floats;
};

Layout layout_of(const Case& c) {
  const std::int64_t N = std::int64_t{c.shape.batch} * c.shape.seq_len;
  const std::int64_t C = std::int64_t{c.shape.n_head} * c.shape.head_dim;
  const std::int64_t KVC = std::int64_t{c.shape.n_kv_head} * c.shape.head_dim;
  if (c.packed) return {0, C, C + KVC, C + 2 * KVC, C + 2 * KVC, N * (C + 2 * KVC)};
  return {0, N * C, N * C + N * KVC, C, KVC, N * (C + 2 * KVC)};
}

AttentionInputs inputs_of(const std::vector<float>& qkv, const Layout& l) {
  return {qkv.data() + l.q_offset, qkv.data() + l.k_offset, qkv.data() + l.v_offset, l.q_stride, l.kv_stride};
}

AttentionGrads grads_of(std::vector<float>& dqkv, const Layout& l) {
  return {dqkv.data() + l.q_offset, dqkv.data() + l.k_offset, dqkv.data() + l.v_offset, l.q_stride, l.kv_stride};
}

std::int64_t out_floats(const AttentionShape& s) {
  return std::int64_t{s.batch} * s.seq_len * s.n_head * s.head_dim;
}

struct FlashResult {
  std::vector<float> out, lse, dqkv;
};

FlashResult run_flash(const Case& c, const std::vector<float>& qkv, const std::vector<float>& dout,
                      std::vector<float> dqkv_start) {
  const Layout l = layout_of(c);
  FlashResult r{std::vector<float>(out_floats(c.shape)), std::vector<float>(flash::cpu::lse_floats(c.shape)),
                std::move(dqkv_start)};
  std::vector<float> scratch(flash::cpu::scratch_floats(c.shape));
  flash::cpu::forward(c.shape, r.out.data(), r.lse.data(), inputs_of(qkv, l));
  flash::cpu::backward(c.shape, grads_of(r.dqkv, l), dout.data(), r.out.data(), inputs_of(qkv, l), r.lse.data(),
                       scratch.data());
  return r;
}

// max |a - b| over max |b|, over `rows` rows of `width` elements, `stride` apart from `offset`. A
// reference that is exactly zero (dq and dk at T = 1, where the softmax is constant) gets the
// absolute error.
double relative_error(const std::vector<float>& a, const std::vector<double>& b, std::int64_t offset, std::int64_t rows,
                      std::int64_t stride, std::int64_t width) {
  double worst = 0.0, largest = 0.0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < width; ++i) {
      const std::int64_t at = offset + r * stride + i;
      worst = std::max(worst, std::abs(a[at] - b[at]));
      largest = std::max(largest, std::abs(b[at]));
    }
  return largest > 0.0 ? worst / largest : worst;
}

// log-sum-exp of every causal score row, (B, NH, T), in double.
std::vector<double> reference_lse(const Case& c, const std::vector<double>& qkv) {
  const Layout l = layout_of(c);
  const std::int64_t B = c.shape.batch, T = c.shape.seq_len, NH = c.shape.n_head, D = c.shape.head_dim;
  const std::int64_t group = NH / c.shape.n_kv_head;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> lse(B * NH * T);
  std::vector<double> row(T);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        const double* q = qkv.data() + l.q_offset + (b * T + t) * l.q_stride + h * D;
        double max_value = -1e300;
        const std::int64_t first = cpu::first_key(t, c.shape);
        for (std::int64_t t2 = first; t2 <= t; ++t2) {
          const double* k = qkv.data() + l.k_offset + (b * T + t2) * l.kv_stride + (h / group) * D;
          double dot = 0.0;
          for (std::int64_t i = 0; i < D; ++i) dot += q[i] * k[i];
          row[t2] = dot * scale;
          max_value = std::max(max_value, row[t2]);
        }
        double sum = 0.0;
        for (std::int64_t t2 = first; t2 <= t; ++t2) sum += std::exp(row[t2] - max_value);
        lse[(b * NH + h) * T + t] = max_value + std::log(sum);
      }
  return lse;
}

void check_against_reference(const Case& c) {
  const AttentionShape& s = c.shape;
  const Layout l = layout_of(c);
  const std::int64_t N = std::int64_t{s.batch} * s.seq_len, D = s.head_dim;
  const auto qkv = random_vector<float>(l.floats, 101 + s.seq_len);
  const auto dout = random_vector<float>(out_floats(s), 202 + s.seq_len);
  const FlashResult flash = run_flash(c, qkv, dout, std::vector<float>(l.floats, 0.0f));

  const std::vector<double> qkv_d(qkv.begin(), qkv.end()), dout_d(dout.begin(), dout.end());
  const cpu::reference::QkvViews<const double*> in{qkv_d.data() + l.q_offset, qkv_d.data() + l.k_offset,
                                                   qkv_d.data() + l.v_offset, l.q_stride, l.kv_stride};
  std::vector<double> out(out_floats(s)), att(std::int64_t{s.batch} * s.n_head * s.seq_len * s.seq_len);
  cpu::reference::attention_forward(out.data(), att.data(), in, s);
  std::vector<double> dqkv(l.floats, 0.0), scratch(att.size());
  const cpu::reference::QkvViews<double*> grads{dqkv.data() + l.q_offset, dqkv.data() + l.k_offset,
                                                dqkv.data() + l.v_offset, l.q_stride, l.kv_stride};
  cpu::reference::attention_backward(grads, scratch.data(), dout_d.data(), in, att.data(), s);

  const double bound = 1e-5;
  const double out_error = relative_error(flash.out, out, 0, N, s.n_head * D, s.n_head * D);
  const double dq_error = relative_error(flash.dqkv, dqkv, l.q_offset, N, l.q_stride, s.n_head * D);
  const double dk_error = relative_error(flash.dqkv, dqkv, l.k_offset, N, l.kv_stride, s.n_kv_head * D);
  const double dv_error = relative_error(flash.dqkv, dqkv, l.v_offset, N, l.kv_stride, s.n_kv_head * D);
  const auto lse = reference_lse(c, qkv_d);
  double lse_error = 0.0;
  for (std::size_t i = 0; i < lse.size(); ++i)
    lse_error = std::max(lse_error, std::abs(flash.lse[i] - lse[i]) / std::max(1.0, std::abs(lse[i])));
  std::printf("B%d T%d NH%d KV%d D%d %s: relative error out %.2g dq %.2g dk %.2g dv %.2g lse %.2g\n", s.batch,
              s.seq_len, s.n_head, s.n_kv_head, s.head_dim, c.packed ? "packed" : "separate", out_error, dq_error,
              dk_error, dv_error, lse_error);
  EXPECT_LT(out_error, bound);
  EXPECT_LT(dq_error, bound);
  EXPECT_LT(dk_error, bound);
  EXPECT_LT(dv_error, bound);
  EXPECT_LT(lse_error, bound);
}

TEST(FlashAttentionCpu, MatchesReferenceAroundTheTileSize) {
  for (const int T : {1, 7, 64, 257})
    for (const int D : {64, 128}) {
      check_against_reference({{2, T, 4, 4, D}, true});
      check_against_reference({{2, T, 4, 2, D}, false});
      check_against_reference({{2, T, 4, 1, D}, true});
    }
}

// Sliding windows (Mistral's) shorter than a key tile, across one and two tile boundaries, and one
// longer than the sequence: query tiles start at a later key tile, and rows meet whole tiles before
// their window.
TEST(FlashAttentionCpu, SlidingWindowMatchesReference) {
  for (const int window : {1, 5, 100, 129, 200, 1000}) {
    check_against_reference({{2, 300, 4, 2, 64, window}, false});
    check_against_reference({{1, 257, 2, 2, 16, window}, true});
  }
}

TEST(FlashAttentionCpu, MatchesReferenceOnLongSequences) {
  check_against_reference({{2, 1024, 2, 2, 64}, true});
  check_against_reference({{2, 1024, 2, 1, 128}, false});
}

TEST(FlashAttentionCpu, OddHeadDims) {
  for (const int D : {1, 3, 17}) check_against_reference({{1, 130, 2, 1, D}, D % 2 == 1});
}

// loss = sum(out ⊙ W) in double over the float forward; its central differences against the
// backward with dout = W, at a few entries of q, k and v on both sides of a tile boundary.
TEST(FlashAttentionCpu, GradientMatchesFiniteDifferences) {
  const Case c{{1, 70, 2, 1, 8}, false};
  const Layout l = layout_of(c);
  auto qkv = random_vector<float>(l.floats, 7);
  const auto weights = random_vector<float>(out_floats(c.shape), 8);
  const FlashResult analytic = run_flash(c, qkv, weights, std::vector<float>(l.floats, 0.0f));
  std::vector<float> out(out_floats(c.shape)), lse(flash::cpu::lse_floats(c.shape));
  auto loss = [&] {
    flash::cpu::forward(c.shape, out.data(), lse.data(), inputs_of(qkv, l));
    double sum = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * weights[i];
    return sum;
  };
  const float h = 1e-2f;
  double worst = 0.0, largest = 0.0;
  for (const std::int64_t block : {l.q_offset, l.k_offset, l.v_offset})
    for (const std::int64_t row : {0, 5, 63, 64, 69})
      for (const std::int64_t column : {0, 7}) {
        const std::int64_t at = block + row * (block == l.q_offset ? l.q_stride : l.kv_stride) + column;
        const float saved = qkv[at];
        qkv[at] = saved + h;
        const double plus = loss();
        qkv[at] = saved - h;
        const double minus = loss();
        qkv[at] = saved;
        const double numeric = (plus - minus) / (2.0 * h);
        worst = std::max(worst, std::abs(numeric - analytic.dqkv[at]));
        largest = std::max(largest, std::abs(numeric));
      }
  std::printf("flash attention gradient vs central differences: max |diff| %.3g, max |gradient| %.3g\n", worst,
              largest);
  EXPECT_GT(largest, 0.1);
  EXPECT_LT(worst, 2e-3 * largest);
}

TEST(FlashAttentionCpu, BitwiseEqualAcrossThreadCounts) {
  const Case c{{2, 257, 4, 2, 64}, true};
  const Layout l = layout_of(c);
  const auto qkv = random_vector<float>(l.floats, 31);
  const auto dout = random_vector<float>(out_floats(c.shape), 32);
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const FlashResult one = run_flash(c, qkv, dout, std::vector<float>(l.floats, 0.0f));
  for (const int threads : {2, 3}) {
    omp_set_num_threads(threads);
    const FlashResult many = run_flash(c, qkv, dout, std::vector<float>(l.floats, 0.0f));
    EXPECT_EQ(std::memcmp(one.out.data(), many.out.data(), one.out.size() * sizeof(float)), 0) << threads;
    EXPECT_EQ(std::memcmp(one.lse.data(), many.lse.data(), one.lse.size() * sizeof(float)), 0) << threads;
    EXPECT_EQ(std::memcmp(one.dqkv.data(), many.dqkv.data(), one.dqkv.size() * sizeof(float)), 0) << threads;
  }
  omp_set_num_threads(saved_threads);
}

TEST(FlashAttentionCpu, BackwardAddsIntoGradients) {
  const Case c{{2, 100, 4, 2, 16}, false};
  const Layout l = layout_of(c);
  const auto qkv = random_vector<float>(l.floats, 41);
  const auto dout = random_vector<float>(out_floats(c.shape), 42);
  const auto start = random_vector<float>(l.floats, 43, 10.0);
  const FlashResult from_zero = run_flash(c, qkv, dout, std::vector<float>(l.floats, 0.0f));
  const FlashResult from_start = run_flash(c, qkv, dout, start);
  double worst = 0.0;
  for (std::int64_t i = 0; i < l.floats; ++i)
    worst = std::max(worst, std::abs(static_cast<double>(from_start.dqkv[i]) - start[i] - from_zero.dqkv[i]));
  std::printf("accumulated minus start vs from zero: max |diff| %.3g\n", worst);
  EXPECT_LT(worst, 1e-4);
}

// A NaN in a key reaches every output row that attends to it, and their gradients, although the
// kernel is compiled with -ffast-math: the divergence guard sees a NaN loss, not a silent zero.
TEST(FlashAttentionCpu, ANanKeyReachesTheRowsThatSeeIt) {
  const Case c{{1, 150, 2, 2, 16}, false};
  const Layout l = layout_of(c);
  auto qkv = random_vector<float>(l.floats, 51);
  const auto dout = random_vector<float>(out_floats(c.shape), 52);
  const std::int64_t nan_position = 70;                              // in the second query tile
  qkv[l.k_offset + nan_position * l.kv_stride + 3] = std::nanf("");  // head 0's key
  const FlashResult r = run_flash(c, qkv, dout, std::vector<float>(l.floats, 0.0f));
  const std::int64_t D = c.shape.head_dim, row_stride = std::int64_t{c.shape.n_head} * D;
  for (std::int64_t t = 0; t < c.shape.seq_len; ++t) {
    const bool sees_it = t >= nan_position;
    EXPECT_EQ(std::isnan(r.out[t * row_stride]), sees_it) << "head 0, position " << t;
    EXPECT_FALSE(std::isnan(r.out[t * row_stride + D])) << "head 1 never reads it, position " << t;
    EXPECT_EQ(std::isnan(r.dqkv[l.q_offset + t * l.q_stride]), sees_it) << "dq, position " << t;
  }
}

}  // namespace
}  // namespace strata
