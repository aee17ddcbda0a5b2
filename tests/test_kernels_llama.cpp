// The kernels LLaMA adds (RMSNorm, RoPE, SwiGLU, grouped-query attention with strided q/k/v,
// embedding without positions, SGD, reductions), in the style of test_kernels.cpp: backward against
// central differences of the double reference forward, then fast against reference in float.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_support.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/reductions.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "legacy_attention.hpp"
#include "plugins/sgd/cpu/sgd_cpu.hpp"

namespace strata::cpu {
namespace {

using namespace test;

void print_gradient_error(const char* what, double error) {
  std::printf("%-34s gradient max relative error %.3g\n", what, error);
}

// The attention kernels' saved probabilities: (B, n_head, T, T).
std::int64_t saved_floats(const AttentionShape& shape) {
  return static_cast<std::int64_t>(shape.batch) * shape.n_head * shape.seq_len * shape.seq_len;
}

TEST(KernelGradients, RmsNorm) {
  const std::int64_t N = 3, C = 8;
  auto inp = random_vector<double>(N * C, 101), weight = random_vector<double>(C, 102);
  const auto upstream = random_vector<double>(N * C, 103);
  std::vector<double> out(N * C), rstd(N);
  auto objective = [&] {
    reference::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), N, C, 1e-6f);
    return dot(out, upstream);
  };
  objective();
  std::vector<double> dinp(N * C), dweight(C);
  reference::rmsnorm_backward(dinp.data(), dweight.data(), upstream.data(), inp.data(), weight.data(), rstd.data(), N,
                              C);
  const double errors[] = {max_relative_error(inp, dinp, objective), max_relative_error(weight, dweight, objective)};
  print_gradient_error("rmsnorm dinp", errors[0]);
  print_gradient_error("rmsnorm dweight", errors[1]);
  for (double error : errors) EXPECT_LT(error, kGradientBound);
}

// RoPE is linear and orthogonal: its gradient is the inverse rotation, which is also its adjoint.
// Rows carry two floats of padding past the heads, which the rotation must leave alone.
TEST(KernelGradients, RopeGradientIsTheInverseRotation) {
  const int T = 3, n_heads = 2, head_dim = 6;
  const std::int64_t rows = 2 * T, stride = n_heads * head_dim + 2;
  auto x = random_vector<double>(rows * stride, 104);
  const auto upstream = random_vector<double>(rows * stride, 105);
  std::vector<double> out(x.size());
  auto objective = [&] {
    out = x;
    reference::rope(out.data(), rows, stride, T, n_heads, head_dim, 10000.0f, false);
    return dot(out, upstream);
  };
  std::vector<double> dx = upstream;
  reference::rope(dx.data(), rows, stride, T, n_heads, head_dim, 10000.0f, true);
  const double error = max_relative_error(x, dx, objective);
  print_gradient_error("rope", error);
  EXPECT_LT(error, kGradientBound);
  // <R x, y> = <x, R^T y>, and R^T R x = x.
  objective();
  const double adjoint_gap = std::abs(dot(out, upstream) - dot(x, dx));
  reference::rope(out.data(), rows, stride, T, n_heads, head_dim, 10000.0f, true);
  double round_trip = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) round_trip = std::max(round_trip, std::abs(out[i] - x[i]));
  std::printf("rope |<Rx,y> - <x,R^T y>| %.3g, max |R^T R x - x| %.3g\n", adjoint_gap, round_trip);
  EXPECT_LT(adjoint_gap, 1e-13);
  EXPECT_LT(round_trip, 1e-15);
}

TEST(KernelGradients, SwiGlu) {
  const std::int64_t count = 32;
  auto gate = random_vector<double>(count, 106, 4.0), up = random_vector<double>(count, 107, 2.0);
  const auto upstream = random_vector<double>(count, 108);
  std::vector<double> out(count);
  auto objective = [&] {
    reference::swiglu_forward(out.data(), gate.data(), up.data(), count);
    return dot(out, upstream);
  };
  std::vector<double> dgate(count, 0.0), dup(count, 0.0);
  reference::swiglu_backward(dgate.data(), dup.data(), upstream.data(), gate.data(), up.data(), count);
  const double errors[] = {max_relative_error(gate, dgate, objective), max_relative_error(up, dup, objective)};
  print_gradient_error("swiglu dgate", errors[0]);
  print_gradient_error("swiglu dup", errors[1]);
  for (double error : errors) EXPECT_LT(error, kGradientBound);
}

// q, k and v of a grouped-query attention, either three buffers with rows padded past the heads, or
// one fused (N, (n_head + 2 n_kv_head) head_dim) projection output.
template <typename Real>
struct QkvBuffers {
  std::vector<Real> q, k, v;  // v is empty when packed (everything lives in q)
  std::int64_t q_offset = 0, k_offset = 0, v_offset = 0, q_stride = 0, kv_stride = 0;

  QkvBuffers(const AttentionShape& shape, bool packed, std::uint32_t seed) {
    const std::int64_t N = static_cast<std::int64_t>(shape.batch) * shape.seq_len;
    const std::int64_t q_width = static_cast<std::int64_t>(shape.n_head) * shape.head_dim;
    const std::int64_t kv_width = static_cast<std::int64_t>(shape.n_kv_head) * shape.head_dim;
    if (packed) {
      q_stride = kv_stride = q_width + 2 * kv_width;
      k_offset = q_width;
      v_offset = q_width + kv_width;
      q = random_vector<Real>(N * q_stride, seed);
    } else {
      q_stride = q_width + 3;
      kv_stride = kv_width + 5;
      q = random_vector<Real>(N * q_stride, seed);
      k = random_vector<Real>(N * kv_stride, seed + 1);
      v = random_vector<Real>(N * kv_stride, seed + 2);
    }
  }
  bool packed() const { return k.empty(); }
  Real* k_base() { return packed() ? q.data() : k.data(); }
  Real* v_base() { return packed() ? q.data() : v.data(); }
  Real* q_ptr() { return q.data() + q_offset; }
  Real* k_ptr() { return k_base() + k_offset; }
  Real* v_ptr() { return v_base() + v_offset; }
  reference::QkvViews<const Real*> operands() { return {q_ptr(), k_ptr(), v_ptr(), q_stride, kv_stride}; }
  reference::QkvViews<Real*> gradients() { return {q_ptr(), k_ptr(), v_ptr(), q_stride, kv_stride}; }
  AttentionInputs inputs() { return {q_ptr(), k_ptr(), v_ptr(), q_stride, kv_stride}; }
  AttentionGrads grads() { return {q_ptr(), k_ptr(), v_ptr(), q_stride, kv_stride}; }
  void zero() {
    for (auto* buffer : {&q, &k, &v}) std::fill(buffer->begin(), buffer->end(), Real(0));
  }
};

// The worst relative error of the reference attention's gradients against finite differences, over
// every float of q, k and v (padding included; packed, the one fused buffer).
double attention_gradient_error(const AttentionShape& shape, bool packed, std::uint32_t seed) {
  QkvBuffers<double> inputs(shape, packed, seed);
  QkvBuffers<double> grads = inputs;
  grads.zero();
  const std::int64_t rows = std::int64_t{shape.batch} * shape.seq_len;
  const auto upstream = random_vector<double>(rows * shape.n_head * shape.head_dim, seed + 3);
  std::vector<double> out(upstream.size()), att(rows * shape.n_head * shape.seq_len), scratch(att.size());
  auto objective = [&] {
    reference::attention_forward(out.data(), att.data(), inputs.operands(), shape);
    return dot(out, upstream);
  };
  objective();
  reference::attention_backward(grads.gradients(), scratch.data(), upstream.data(), inputs.operands(), att.data(),
                                shape);
  double worst = max_relative_error(inputs.q, grads.q, objective);
  if (!packed) {
    worst = std::max(worst, max_relative_error(inputs.k, grads.k, objective));
    worst = std::max(worst, max_relative_error(inputs.v, grads.v, objective));
  }
  return worst;
}

TEST(KernelGradients, GroupedQueryAttention) {
  for (const bool packed : {false, true}) {
    const double worst = attention_gradient_error(AttentionShape{2, 4, 4, 2, 3}, packed, 109);
    print_gradient_error(packed ? "GQA attention, packed qkv" : "GQA attention, strided q/k/v", worst);
    EXPECT_LT(worst, kGradientBound);
  }
}

// A sliding window (Mistral's): each position attends to itself and the window - 1 before it.
TEST(KernelGradients, SlidingWindowAttention) {
  const double worst = attention_gradient_error(AttentionShape{2, 6, 4, 2, 3, 2}, false, 119);
  print_gradient_error("GQA attention, sliding window 2", worst);
  EXPECT_LT(worst, kGradientBound);
}

// The window's meaning, from its definition rather than from a second kernel: with window 1 a
// position attends to itself alone, so each head's output is its key/value head's v row; with
// window 3 the probabilities are zero exactly outside the three keys ending at the query.
TEST(KernelGradients, SlidingWindowMasksEverythingBeforeIt) {
  const AttentionShape one{1, 5, 4, 2, 3, 1};
  QkvBuffers<double> inputs(one, false, 121);
  std::vector<double> out(5 * 4 * 3), att(4 * 5 * 5);
  reference::attention_forward(out.data(), att.data(), inputs.operands(), one);
  for (int t = 0; t < 5; ++t)
    for (int h = 0; h < 4; ++h)
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(out[(t * 4 + h) * 3 + i], inputs.v[t * inputs.kv_stride + (h / 2) * 3 + i]) << t << " " << h;
  const AttentionShape three{1, 7, 2, 2, 3, 3};
  QkvBuffers<double> more(three, false, 122);
  std::vector<double> out3(7 * 2 * 3), att3(2 * 7 * 7);
  reference::attention_forward(out3.data(), att3.data(), more.operands(), three);
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < 7; ++t)
      for (int t2 = 0; t2 < 7; ++t2)
        EXPECT_EQ(att3[(h * 7 + t) * 7 + t2] > 0.0, t2 <= t && t - t2 < 3) << t << " " << t2;
}

TEST(KernelGradients, EmbeddingWithoutPositions) {
  const std::int64_t B = 2, T = 3, C = 4, V = 5;
  const std::vector<std::int32_t> tokens = {1, 4, 1, 0, 2, 1};
  auto wte = random_vector<double>(V * C, 113);
  const auto upstream = random_vector<double>(B * T * C, 114);
  std::vector<double> out(B * T * C);
  auto objective = [&] {
    reference::embedding_forward(out.data(), tokens.data(), wte.data(), static_cast<const double*>(nullptr), B, T, C);
    return dot(out, upstream);
  };
  std::vector<double> dwte(V * C);
  reference::embedding_backward(dwte.data(), static_cast<double*>(nullptr), upstream.data(), tokens.data(), B, T, C);
  const double error = max_relative_error(wte, dwte, objective);
  print_gradient_error("embedding without wpe", error);
  EXPECT_LT(error, kGradientBound);
}

// ---- fast kernels against the reference, in float ----

TEST(FastKernels, RmsNormMatchesReference) {
  const std::int64_t N = 50, C = 136;  // two column blocks of 64 and a partial one
  auto inp = random_vector<float>(N * C, 120), weight = random_vector<float>(C, 121);
  auto dout = random_vector<float>(N * C, 122);
  std::vector<float> out_f(N * C), out_r(N * C), rstd_f(N), rstd_r(N);
  rmsnorm_forward(out_f.data(), rstd_f.data(), inp.data(), weight.data(), N, C, 1e-6f);
  reference::rmsnorm_forward(out_r.data(), rstd_r.data(), inp.data(), weight.data(), N, C, 1e-6f);
  expect_close("rmsnorm_forward out", out_f, out_r, 1e-5);
  expect_close("rmsnorm_forward rstd", rstd_f, rstd_r, 1e-5);
  std::vector<float> dinp_f(N * C, 0.5f), dinp_r = dinp_f, dw_f(C, 0.25f), dw_r = dw_f;  // backward adds on
  rmsnorm_backward(dinp_f.data(), dw_f.data(), dout.data(), inp.data(), weight.data(), rstd_r.data(), N, C);
  reference::rmsnorm_backward(dinp_r.data(), dw_r.data(), dout.data(), inp.data(), weight.data(), rstd_r.data(), N, C);
  expect_close("rmsnorm_backward dinp", dinp_f, dinp_r, 1e-5);
  expect_close("rmsnorm_backward dweight", dw_f, dw_r, 1e-4);
}

// Rows padded past the heads as in a fused qkv projection; two thetas (LLaMA 2's and LLaMA 3's).
TEST(FastKernels, RopeMatchesReference) {
  const int T = 17, n_heads = 3, head_dim = 16;
  const std::int64_t rows = 2 * T, stride = n_heads * head_dim + 8;
  const auto x = random_vector<float>(rows * stride, 123);
  for (const float theta : {10000.0f, 500000.0f}) {
    for (const bool inverse : {false, true}) {
      std::vector<float> fast = x, ref = x;
      rope(fast.data(), rows, stride, T, n_heads, head_dim, theta, inverse);
      reference::rope(ref.data(), rows, stride, T, n_heads, head_dim, theta, inverse);
      expect_close(inverse ? "rope inverse" : "rope", fast, ref, 1e-6);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = n_heads * head_dim; c < stride; ++c) {
          ASSERT_EQ(fast[r * stride + c], x[r * stride + c]) << "padding must stay untouched";
        }
        if (r % T == 0) {  // position 0 turns by nothing
          for (std::int64_t c = 0; c < stride; ++c) ASSERT_EQ(fast[r * stride + c], x[r * stride + c]);
        }
      }
    }
    // HF's convention, against the formula in double: the pair (i, i + d/2) turns by p theta^(-2i/d).
    std::vector<float> fast = x;
    rope(fast.data(), rows, stride, T, n_heads, head_dim, theta, false);
    double worst = 0.0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (int h = 0; h < n_heads; ++h)
        for (int i = 0; i < head_dim / 2; ++i) {
          const double angle = static_cast<double>(r % T) * std::pow(double{theta}, -2.0 * i / head_dim);
          const std::int64_t at = r * stride + h * head_dim + i;
          const double x1 = x[at], x2 = x[at + head_dim / 2];
          worst = std::max(worst, std::abs(fast[at] - (x1 * std::cos(angle) - x2 * std::sin(angle))));
          worst = std::max(worst, std::abs(fast[at + head_dim / 2] - (x2 * std::cos(angle) + x1 * std::sin(angle))));
        }
    std::printf("rope (theta %g) vs the double formula max |diff| %.3g\n", theta, worst);
    EXPECT_LT(worst, 1e-5);
    std::vector<float> back = fast;
    rope(back.data(), rows, stride, T, n_heads, head_dim, theta, true);
    expect_close("rope inverse after rope", back, x, 1e-6);
  }
}

TEST(FastKernels, SwiGluMatchesReference) {
  const std::int64_t count = 1000;
  auto gate = random_vector<float>(count, 124, 6.0), up = random_vector<float>(count, 125, 2.0);
  auto dout = random_vector<float>(count, 126);
  std::vector<float> out_f(count), out_r(count);
  swiglu_forward(out_f.data(), gate.data(), up.data(), count);
  reference::swiglu_forward(out_r.data(), gate.data(), up.data(), count);
  expect_close("swiglu_forward", out_f, out_r, 1e-5);
  std::vector<float> dg_f(count, 0.5f), dg_r = dg_f, du_f(count, -0.5f), du_r = du_f;
  swiglu_backward(dg_f.data(), du_f.data(), dout.data(), gate.data(), up.data(), count);
  reference::swiglu_backward(dg_r.data(), du_r.data(), dout.data(), gate.data(), up.data(), count);
  expect_close("swiglu_backward dgate", dg_f, dg_r, 1e-5);
  expect_close("swiglu_backward dup", du_f, du_r, 1e-5);
  // Overwriting must not read the buffers (they start as NaN) and equals accumulating into zeros.
  std::vector<float> dg_o(count, std::nanf("")), du_o(count, std::nanf("")), dg_z(count, 0.0f), du_z(count, 0.0f);
  swiglu_backward(dg_o.data(), du_o.data(), dout.data(), gate.data(), up.data(), count, GradientWrite::overwrite);
  swiglu_backward(dg_z.data(), du_z.data(), dout.data(), gate.data(), up.data(), count);
  EXPECT_EQ(dg_o, dg_z);
  EXPECT_EQ(du_o, du_z);
}

// 33 positions fit one query tile of the fast kernel; 300 take three (the last partial), so the
// causal tiling (keys [0, t1) per tile) and the zeroed upper triangle are both checked.
TEST(FastKernels, GroupedQueryAttentionMatchesReference) {
  for (const AttentionShape shape : {AttentionShape{2, 33, 8, 2, 16}, AttentionShape{1, 300, 4, 2, 16}}) {
    SCOPED_TRACE(shape.seq_len);
    const std::size_t T = static_cast<std::size_t>(shape.seq_len);
    const std::size_t out_size = shape.batch * T * shape.n_head * shape.head_dim;
    const std::size_t att_size = shape.batch * shape.n_head * T * T;
    const auto dout = random_vector<float>(out_size, 130);
    for (const bool packed : {false, true}) {
      QkvBuffers<float> inputs(shape, packed, 131);
      QkvBuffers<float> grads_f(shape, packed, 134), grads_r = grads_f;  // backward adds on
      std::vector<float> out_f(out_size), out_r(out_size), att_f(att_size, std::nanf("")), att_r(att_size),
          scratch(att_size, std::nanf(""));
      attention_forward(out_f.data(), att_f.data(), inputs.inputs(), shape);
      reference::attention_forward(out_r.data(), att_r.data(), inputs.operands(), shape);
      expect_close(packed ? "GQA packed forward out" : "GQA strided forward out", out_f, out_r, 1e-5);
      expect_close(packed ? "GQA packed probabilities" : "GQA strided probabilities", att_f, att_r, 1e-6);
      attention_backward(grads_f.grads(), scratch.data(), dout.data(), inputs.inputs(), att_f.data(), shape);
      std::vector<float> scratch_r(att_size);
      reference::attention_backward(grads_r.gradients(), scratch_r.data(), dout.data(), inputs.operands(), att_r.data(),
                                    shape);
      expect_close(packed ? "GQA packed backward dqkv" : "GQA strided backward dq", grads_f.q, grads_r.q, 1e-5);
      if (!packed) {
        expect_close("GQA strided backward dk", grads_f.k, grads_r.k, 1e-5);
        expect_close("GQA strided backward dv", grads_f.v, grads_r.v, 1e-5);
      }
    }
  }
}

// The fast kernel under a sliding window: within one query tile (33 positions, window 5) and across
// tiles (300 positions, windows 100 and 129, so a tile's first key moves past 0 and past a tile
// boundary); and a window as long as the sequence is bitwise no window at all.
TEST(FastKernels, SlidingWindowMatchesReference) {
  for (const AttentionShape shape : {AttentionShape{2, 33, 8, 2, 16, 5}, AttentionShape{1, 300, 4, 2, 16, 100},
                                     AttentionShape{1, 300, 4, 1, 8, 129}}) {
    SCOPED_TRACE(shape.seq_len * 1000 + shape.window);
    const std::size_t T = static_cast<std::size_t>(shape.seq_len);
    const std::size_t out_size = shape.batch * T * shape.n_head * shape.head_dim;
    const std::size_t att_size = shape.batch * shape.n_head * T * T;
    const auto dout = random_vector<float>(out_size, 135);
    QkvBuffers<float> inputs(shape, false, 136);
    QkvBuffers<float> grads_f(shape, false, 137), grads_r = grads_f;
    std::vector<float> out_f(out_size), out_r(out_size), att_f(att_size, std::nanf("")), att_r(att_size),
        scratch(att_size, std::nanf("")), scratch_r(att_size);
    attention_forward(out_f.data(), att_f.data(), inputs.inputs(), shape);
    reference::attention_forward(out_r.data(), att_r.data(), inputs.operands(), shape);
    expect_close("windowed forward out", out_f, out_r, 1e-5);
    expect_close("windowed probabilities", att_f, att_r, 1e-6);
    attention_backward(grads_f.grads(), scratch.data(), dout.data(), inputs.inputs(), att_f.data(), shape);
    reference::attention_backward(grads_r.gradients(), scratch_r.data(), dout.data(), inputs.operands(), att_r.data(),
                                  shape);
    expect_close("windowed backward dq", grads_f.q, grads_r.q, 1e-5);
    expect_close("windowed backward dk", grads_f.k, grads_r.k, 1e-5);
    expect_close("windowed backward dv", grads_f.v, grads_r.v, 1e-5);
  }
  AttentionShape whole{1, 300, 4, 2, 16, 300}, none{1, 300, 4, 2, 16, 0};
  QkvBuffers<float> inputs(whole, false, 138);
  const std::size_t out_size = 300 * 4 * 16, att_size = 4 * 300 * 300;
  std::vector<float> out_w(out_size), out_n(out_size), att_w(att_size), att_n(att_size);
  attention_forward(out_w.data(), att_w.data(), inputs.inputs(), whole);
  attention_forward(out_n.data(), att_n.data(), inputs.inputs(), none);
  EXPECT_EQ(out_w, out_n);
  EXPECT_EQ(att_w, att_n);
}

// GPT-2 (n_kv_head = n_head, packed qkv with stride 3C) computes exactly what it did before
// grouped heads existed, for sequences within one query tile of the causal kernel (up to 128
// positions: the same products); longer ones changed in the last bits when the kernel became causal.
TEST(FastKernels, PackedAttentionIsBitwiseThePreviousKernel) {
  for (const AttentionShape shape : {AttentionShape{2, 33, 4, 4, 16}, AttentionShape{3, 20, 6, 6, 8}}) {
    const std::int64_t C = static_cast<std::int64_t>(shape.n_head) * shape.head_dim;
    const std::int64_t N = static_cast<std::int64_t>(shape.batch) * shape.seq_len;
    const auto qkv = random_vector<float>(N * 3 * C, 140);
    const auto dout = random_vector<float>(N * C, 141);
    const std::size_t att_size = static_cast<std::size_t>(saved_floats(shape));
    std::vector<float> out(N * C), out_legacy(N * C), att(att_size), att_legacy(att_size), scratch(att_size);
    const legacy::Shape legacy_shape{shape.batch, shape.seq_len, static_cast<int>(C), shape.n_head};
    const AttentionInputs in{qkv.data(), qkv.data() + C, qkv.data() + 2 * C, 3 * C, 3 * C};
    attention_forward(out.data(), att.data(), in, shape);
    legacy::attention_forward(out_legacy.data(), att_legacy.data(), qkv.data(), legacy_shape);
    EXPECT_EQ(out, out_legacy);
    EXPECT_EQ(att, att_legacy);
    auto dqkv = random_vector<float>(N * 3 * C, 142), dqkv_legacy = dqkv;  // backward adds on
    attention_backward({dqkv.data(), dqkv.data() + C, dqkv.data() + 2 * C, 3 * C, 3 * C}, scratch.data(), dout.data(),
                       in, att.data(), shape);
    legacy::attention_backward(dqkv_legacy.data(), scratch.data(), dout.data(), qkv.data(), att_legacy.data(),
                               legacy_shape);
    EXPECT_EQ(dqkv, dqkv_legacy);
    std::printf("packed attention (B %d, T %d, NH %d, hs %d): out, att and dqkv %s the previous kernel's\n",
                shape.batch, shape.seq_len, shape.n_head, shape.head_dim,
                out == out_legacy && att == att_legacy && dqkv == dqkv_legacy ? "bitwise equal to" : "DIFFER from");
  }
}

// The reductions over rows (dweight, dk/dv under grouping, position-free dwte) and sum_of_squares
// give the same bits with one thread and with three.
TEST(FastKernels, NewKernelsRepeatBitwiseForAnyThreadCount) {
  const AttentionShape shape{2, 24, 8, 2, 16};
  const std::int64_t N = 48, C = 136;
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<std::vector<float>> results;
    QkvBuffers<float> inputs(shape, false, 150), grads(shape, false, 153);
    std::vector<float> out(N * 128), att(static_cast<std::size_t>(saved_floats(shape))), scratch(att.size());
    const auto dout = random_vector<float>(N * 128, 156);
    attention_forward(out.data(), att.data(), inputs.inputs(), shape);
    attention_backward(grads.grads(), scratch.data(), dout.data(), inputs.inputs(), att.data(), shape);
    results.insert(results.end(), {out, grads.q, grads.k, grads.v});
    const auto inp = random_vector<float>(N * C, 157), weight = random_vector<float>(C, 158),
               dy = random_vector<float>(N * C, 159);
    std::vector<float> norm(N * C), rstd(N), dinp(N * C), dweight(C);
    rmsnorm_forward(norm.data(), rstd.data(), inp.data(), weight.data(), N, C, 1e-5f);
    rmsnorm_backward(dinp.data(), dweight.data(), dy.data(), inp.data(), weight.data(), rstd.data(), N, C);
    results.insert(results.end(), {norm, dinp, dweight});
    std::vector<std::int32_t> tokens(N);
    for (std::int64_t n = 0; n < N; ++n) tokens[n] = static_cast<std::int32_t>((n * 7) % 5);
    std::vector<float> dwte(5 * C);
    embedding_backward(dwte.data(), nullptr, dy.data(), tokens.data(), 1, N, C);
    results.push_back(dwte);
    const auto big = random_vector<float>(300000, 160);
    results.push_back({static_cast<float>(sum_of_squares(big.data(), 300000))});
    omp_set_num_threads(saved);
    return results;
  };
  EXPECT_EQ(run(1), run(3));
}

// The SGD plugin's host kernel: the plain float expressions in this order, bitwise.
TEST(FastKernels, SgdMatchesThePluginsArithmeticBitwise) {
  const std::int64_t count = 1000;
  const auto param = random_vector<float>(count, 170), grad = random_vector<float>(count, 171),
             velocity = random_vector<float>(count, 172, 0.1);
  for (const SgdHyper hyper :
       {SgdHyper{0.01f, 0.9f, 0.1f, 0.5f}, SgdHyper{0.03f, 0.0f, 0.1f, 0.7f}, SgdHyper{0.02f, 0.5f, 0.0f, 1.0f}}) {
    const float decay = 1.0f - hyper.lr * hyper.weight_decay;
    std::vector<float> expected_param = param, expected_velocity = velocity;
    for (std::int64_t i = 0; i < count; ++i) {
      if (hyper.momentum > 0.0f) {
        expected_velocity[i] = hyper.momentum * expected_velocity[i] + grad[i] * hyper.grad_scale;
        expected_param[i] = expected_param[i] * decay - hyper.lr * expected_velocity[i];
      } else {
        expected_param[i] = expected_param[i] * decay - hyper.lr * grad[i] * hyper.grad_scale;
      }
    }
    std::vector<float> actual_param = param, actual_velocity = velocity;
    // Without momentum the velocity is not read: null.
    sgd::cpu::update(actual_param.data(), grad.data(), hyper.momentum > 0.0f ? actual_velocity.data() : nullptr, count,
                     hyper);
    EXPECT_EQ(actual_param, expected_param) << "momentum " << hyper.momentum;
    EXPECT_EQ(actual_velocity, expected_velocity) << "momentum " << hyper.momentum;
    std::vector<float> reference_param = param, reference_velocity = velocity;
    sgd::cpu::reference::update(reference_param.data(), grad.data(), reference_velocity.data(), count, hyper);
    expect_close("sgd param", actual_param, reference_param, 1e-7);
  }
}

TEST(FastKernels, ReductionsSumInOrderAndFindNonFinite) {
  const std::int64_t count = 100003;
  auto values = random_vector<float>(count, 180, 3.0);
  double expected = 0.0;
  for (std::int64_t i = 0; i < count; ++i) expected += values[i];
  EXPECT_EQ(sum(values.data(), count), expected) << "in order, in double";
  const double squares = sum_of_squares(values.data(), count),
               squares_ref = reference::sum_of_squares(values.data(), count);
  std::printf("sum_of_squares relative difference to the plain loop %.3g\n",
              std::abs(squares - squares_ref) / squares_ref);
  EXPECT_LT(std::abs(squares - squares_ref), 1e-12 * squares_ref);
  const std::vector<float> small = {3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(sum_of_squares(small.data(), 2), 25.0);

  values[7] = std::numeric_limits<float>::max();
  values[8] = -std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(all_finite(values.data(), count));
  EXPECT_TRUE(all_finite(values.data(), 0));
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    for (const std::int64_t at : {std::int64_t{0}, count / 2, count - 1}) {
      auto poisoned = values;
      poisoned[at] = bad;
      EXPECT_FALSE(all_finite(poisoned.data(), count)) << bad << " at " << at;
      EXPECT_EQ(all_finite(poisoned.data(), count), reference::all_finite(poisoned.data(), count));
    }
  }
}

TEST(FastKernels, EmbeddingWithoutPositionsMatchesReference) {
  const std::int64_t B = 2, T = 5, E = 72, Vp = 16;
  const std::vector<std::int32_t> tokens = {1, 3, 3, 10, 0, 7, 7, 7, 2, 9};
  const auto wte = random_vector<float>(Vp * E, 190), dembed = random_vector<float>(B * T * E, 191);
  std::vector<float> emb_f(B * T * E), emb_r(B * T * E);
  embedding_forward(emb_f.data(), tokens.data(), wte.data(), nullptr, B, T, E);
  reference::embedding_forward(emb_r.data(), tokens.data(), wte.data(), static_cast<const float*>(nullptr), B, T, E);
  EXPECT_EQ(emb_f, emb_r) << "a copy of the token rows";
  std::vector<float> dwte_f(Vp * E, 0.5f), dwte_r = dwte_f;
  embedding_backward(dwte_f.data(), nullptr, dembed.data(), tokens.data(), B, T, E);
  reference::embedding_backward(dwte_r.data(), static_cast<float*>(nullptr), dembed.data(), tokens.data(), B, T, E);
  expect_close("embedding_backward, no wpe", dwte_f, dwte_r, 1e-6);
}

}  // namespace
}  // namespace strata::cpu
