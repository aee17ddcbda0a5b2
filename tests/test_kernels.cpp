// Every kernel's backward against central finite differences of its reference forward, in double;
// then every fast kernel against its reference, in float. Errors are printed, bounds asserted.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "kernel_test_support.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/reductions.hpp"
#include "kernels/cpu/residual.hpp"
#include "plugins/adamw/cpu/adamw_cpu.hpp"

namespace strata::cpu {
namespace {

using namespace strata::cpu::test;

TEST(KernelGradients, Matmul) {
  for (WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
    const std::int64_t N = 3, C = 4, OC = 5;
    auto inp = random_vector<double>(N * C, 1), weight = random_vector<double>(C * OC, 2),
         bias = random_vector<double>(OC, 3);
    const auto upstream = random_vector<double>(N * OC, 4);
    std::vector<double> out(N * OC);
    auto objective = [&] {
      reference::matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC, layout);
      return dot(out, upstream);
    };
    std::vector<double> dinp(N * C), dweight(C * OC), dbias(OC);
    reference::matmul_backward(dinp.data(), dweight.data(), dbias.data(), upstream.data(), inp.data(), weight.data(), N,
                               C, OC, layout);
    const double errors[] = {max_relative_error(inp, dinp, objective), max_relative_error(weight, dweight, objective),
                             max_relative_error(bias, dbias, objective)};
    for (double error : errors) {
      std::printf("matmul gradient max relative error %.3g\n", error);
      EXPECT_LT(error, kGradientBound);
    }
  }
}

TEST(KernelGradients, LayerNorm) {
  const std::int64_t N = 3, C = 8;
  auto inp = random_vector<double>(N * C, 5), weight = random_vector<double>(C, 6), bias = random_vector<double>(C, 7);
  const auto upstream = random_vector<double>(N * C, 8);
  std::vector<double> out(N * C), mean(N), rstd(N);
  auto objective = [&] {
    reference::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C);
    return dot(out, upstream);
  };
  objective();
  std::vector<double> dinp(N * C), dweight(C), dbias(C);
  reference::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), upstream.data(), inp.data(), weight.data(),
                                mean.data(), rstd.data(), N, C);
  for (double error : {max_relative_error(inp, dinp, objective), max_relative_error(weight, dweight, objective),
                       max_relative_error(bias, dbias, objective)}) {
    std::printf("layernorm gradient max relative error %.3g\n", error);
    EXPECT_LT(error, kGradientBound);
  }
}

TEST(KernelGradients, Gelu) {
  auto inp = random_vector<double>(32, 9, 3.0);
  const auto upstream = random_vector<double>(32, 10);
  std::vector<double> out(32);
  auto objective = [&] {
    reference::gelu_forward(out.data(), inp.data(), 32);
    return dot(out, upstream);
  };
  std::vector<double> dinp(32);
  reference::gelu_backward(dinp.data(), inp.data(), upstream.data(), 32);
  const double error = max_relative_error(inp, dinp, objective);
  std::printf("gelu gradient max relative error %.3g\n", error);
  EXPECT_LT(error, kGradientBound);
}

TEST(KernelGradients, Residual) {
  auto a = random_vector<double>(16, 11), b = random_vector<double>(16, 12);
  const auto upstream = random_vector<double>(16, 13);
  std::vector<double> out(16);
  auto objective = [&] {
    reference::residual_forward(out.data(), a.data(), b.data(), 16);
    return dot(out, upstream);
  };
  std::vector<double> da(16), db(16);
  reference::residual_backward(da.data(), db.data(), upstream.data(), 16);
  EXPECT_LT(max_relative_error(a, da, objective), kGradientBound);
  EXPECT_LT(max_relative_error(b, db, objective), kGradientBound);
}

TEST(KernelGradients, Embedding) {
  const std::int64_t B = 2, T = 3, C = 4, V = 5;
  const std::vector<std::int32_t> tokens = {1, 4, 1, 0, 2, 1};  // repeats: gradients must accumulate
  auto wte = random_vector<double>(V * C, 14), wpe = random_vector<double>(T * C, 15);
  const auto upstream = random_vector<double>(B * T * C, 16);
  std::vector<double> out(B * T * C);
  auto objective = [&] {
    reference::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return dot(out, upstream);
  };
  std::vector<double> dwte(V * C), dwpe(T * C);
  reference::embedding_backward(dwte.data(), dwpe.data(), upstream.data(), tokens.data(), B, T, C);
  EXPECT_LT(max_relative_error(wte, dwte, objective), kGradientBound);
  EXPECT_LT(max_relative_error(wpe, dwpe, objective), kGradientBound);
}

TEST(KernelGradients, CrossEntropyWithPaddedVocab) {
  const std::int64_t N = 3, V = 5, Vp = 8;
  const std::vector<std::int32_t> targets = {0, 4, 2};
  auto logits = random_vector<double>(N * Vp, 17, 2.0);
  std::vector<double> losses(N), lse(N);
  auto objective = [&] {
    reference::cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V, Vp);
    double sum = 0;
    for (double l : losses) sum += l;
    return sum / N;
  };
  objective();
  std::vector<double> dlogits(N * Vp);
  reference::cross_entropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), 1.0 / N, N, V, Vp);
  const double error = max_relative_error(logits, dlogits, objective);
  std::printf("cross-entropy gradient max relative error %.3g\n", error);
  EXPECT_LT(error, kGradientBound);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t v = V; v < Vp; ++v) EXPECT_EQ(dlogits[n * Vp + v], 0.0) << "padded logits must get no gradient";
}

// GPT-2's packed (N, 3C) qkv as the three strided views attention takes.
template <typename Real>
reference::QkvViews<Real*> packed(Real* qkv, std::int64_t C) {
  return {qkv, qkv + C, qkv + 2 * C, 3 * C, 3 * C};
}
template <typename Real>
reference::QkvViews<const Real*> packed_const(const Real* qkv, std::int64_t C) {
  return {qkv, qkv + C, qkv + 2 * C, 3 * C, 3 * C};
}

TEST(KernelGradients, CausalAttention) {
  const AttentionShape shape{2, 4, 2, 2, 3};
  const std::int64_t count = 2 * 4 * 3 * 6;
  auto qkv = random_vector<double>(count, 18);
  const auto upstream = random_vector<double>(2 * 4 * 6, 19);
  std::vector<double> out(2 * 4 * 6), att(2 * 2 * 4 * 4), scratch(att.size());
  auto objective = [&] {
    reference::attention_forward(out.data(), att.data(), packed_const<double>(qkv.data(), 6), shape);
    return dot(out, upstream);
  };
  objective();
  std::vector<double> dqkv(count);
  reference::attention_backward(packed(dqkv.data(), 6), scratch.data(), upstream.data(),
                                packed_const<double>(qkv.data(), 6), att.data(), shape);
  const double error = max_relative_error(qkv, dqkv, objective);
  std::printf("attention gradient max relative error %.3g\n", error);
  EXPECT_LT(error, kGradientBound);
}

TEST(KernelGradients, AdamWMatchesClosedFormFirstStep) {
  // On step 1 with zero state, m_hat = g and v_hat = g^2, so the update is lr * g / (|g| + eps).
  std::vector<double> param = {1.0, -2.0, 0.5}, grad = {0.3, -0.1, 2.0}, m(3), v(3);
  const AdamWHyper hyper{0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1, 1.0f};
  std::vector<double> expected = param;
  for (std::size_t i = 0; i < 3; ++i) {
    expected[i] *= 1.0 - 0.01 * static_cast<double>(0.1f);
    expected[i] -= static_cast<double>(0.01f) * grad[i] / (std::abs(grad[i]) + static_cast<double>(1e-8f));
  }
  adamw::cpu::reference::update(param.data(), grad.data(), m.data(), v.data(), 3, hyper);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(param[i], expected[i], 1e-9);
}

// ---- fast kernels against the reference, in float ----

TEST(FastKernels, MatmulMatchesReference) {
  for (WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
    const std::int64_t N = 37, C = 64, OC = 96;
    auto inp = random_vector<float>(N * C, 20), weight = random_vector<float>(C * OC, 21),
         bias = random_vector<float>(OC, 22);
    auto dout = random_vector<float>(N * OC, 23);
    std::vector<float> out_fast(N * OC), out_ref(N * OC);
    matmul_forward(out_fast.data(), inp.data(), weight.data(), bias.data(), N, C, OC, layout);
    reference::matmul_forward(out_ref.data(), inp.data(), weight.data(), bias.data(), N, C, OC, layout);
    expect_close("matmul_forward", out_fast, out_ref, 1e-4);
    std::vector<float> dinp_f(N * C, 0.5f), dw_f(C * OC, 0.5f), db_f(OC, 0.5f);
    std::vector<float> dinp_r = dinp_f, dw_r = dw_f, db_r = db_f;
    matmul_backward(dinp_f.data(), dw_f.data(), db_f.data(), dout.data(), inp.data(), weight.data(), N, C, OC, layout);
    reference::matmul_backward(dinp_r.data(), dw_r.data(), db_r.data(), dout.data(), inp.data(), weight.data(), N, C,
                               OC, layout);
    expect_close("matmul_backward dinp", dinp_f, dinp_r, 1e-4);
    expect_close("matmul_backward dweight", dw_f, dw_r, 1e-4);
    expect_close("matmul_backward dbias", db_f, db_r, 1e-4);
  }
}

// Overwriting an input gradient must equal accumulating into zeros, and must not read the buffer:
// it starts full of NaN here.
TEST(FastKernels, OverwrittenGradientsEqualAccumulationIntoZeros) {
  const std::int64_t N = 9, C = 16, OC = 24;
  const auto inp = random_vector<float>(N * C, 40), weight = random_vector<float>(C * OC, 41);
  const auto dout = random_vector<float>(N * OC, 42);
  std::vector<std::uint16_t> stored(weight.size());
  std::vector<float> rounded = weight, scratch(100);
  narrow_and_round(stored.data(), rounded.data(), static_cast<std::int64_t>(rounded.size()));
  for (WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
    std::vector<float> accumulated(N * C, 0.0f), overwritten(N * C, std::nanf(""));
    matmul_backward(accumulated.data(), nullptr, nullptr, dout.data(), inp.data(), weight.data(), N, C, OC, layout);
    matmul_backward(overwritten.data(), nullptr, nullptr, dout.data(), inp.data(), weight.data(), N, C, OC, layout,
                    GradientWrite::overwrite);
    EXPECT_EQ(accumulated, overwritten);
  }
  // The bf16 weight widened in chunks of 100 floats: several chunks, each writing its own columns.
  std::vector<float> accumulated(N * C, 0.0f), overwritten(N * C, std::nanf(""));
  matmul_backward_bf16(accumulated.data(), nullptr, nullptr, dout.data(), inp.data(), stored.data(), N, C, OC,
                       WeightLayout::in_out, scratch.data(), 100);
  matmul_backward_bf16(overwritten.data(), nullptr, nullptr, dout.data(), inp.data(), stored.data(), N, C, OC,
                       WeightLayout::in_out, scratch.data(), 100, GradientWrite::overwrite);
  EXPECT_EQ(accumulated, overwritten);
  std::fill(accumulated.begin(), accumulated.end(), 0.0f);
  std::fill(overwritten.begin(), overwritten.end(), std::nanf(""));
  gelu_backward(accumulated.data(), inp.data(), dout.data(), N * C);
  gelu_backward(overwritten.data(), inp.data(), dout.data(), N * C, GradientWrite::overwrite);
  EXPECT_EQ(accumulated, overwritten);
}

TEST(FastKernels, LayerNormGeluResidualEmbeddingCrossEntropy) {
  const std::int64_t N = 50, C = 72;
  auto inp = random_vector<float>(N * C, 24), weight = random_vector<float>(C, 25), bias = random_vector<float>(C, 26);
  auto dout = random_vector<float>(N * C, 27);
  std::vector<float> out_f(N * C), out_r(N * C), mean_f(N), mean_r(N), rstd_f(N), rstd_r(N);
  layernorm_forward(out_f.data(), mean_f.data(), rstd_f.data(), inp.data(), weight.data(), bias.data(), N, C);
  reference::layernorm_forward(out_r.data(), mean_r.data(), rstd_r.data(), inp.data(), weight.data(), bias.data(), N,
                               C);
  expect_close("layernorm_forward", out_f, out_r, 1e-5);
  std::vector<float> dinp_f(N * C), dinp_r(N * C), dw_f(C), dw_r(C), db_f(C), db_r(C);
  layernorm_backward(dinp_f.data(), dw_f.data(), db_f.data(), dout.data(), inp.data(), weight.data(), mean_r.data(),
                     rstd_r.data(), N, C);
  reference::layernorm_backward(dinp_r.data(), dw_r.data(), db_r.data(), dout.data(), inp.data(), weight.data(),
                                mean_r.data(), rstd_r.data(), N, C);
  expect_close("layernorm_backward dinp", dinp_f, dinp_r, 1e-5);
  expect_close("layernorm_backward dweight", dw_f, dw_r, 1e-4);
  expect_close("layernorm_backward dbias", db_f, db_r, 1e-4);

  auto x = random_vector<float>(N * C, 28, 4.0);
  gelu_forward(out_f.data(), x.data(), N * C);
  reference::gelu_forward(out_r.data(), x.data(), N * C);
  expect_close("gelu_forward", out_f, out_r, 1e-5);
  std::fill(dinp_f.begin(), dinp_f.end(), 0.0f);
  std::fill(dinp_r.begin(), dinp_r.end(), 0.0f);
  gelu_backward(dinp_f.data(), x.data(), dout.data(), N * C);
  reference::gelu_backward(dinp_r.data(), x.data(), dout.data(), N * C);
  expect_close("gelu_backward", dinp_f, dinp_r, 1e-5);

  residual_forward(out_f.data(), x.data(), inp.data(), N * C);
  reference::residual_forward(out_r.data(), x.data(), inp.data(), N * C);
  expect_close("residual_forward", out_f, out_r, 0.0 + 1e-7);

  const std::int64_t B = 2, T = 5, E = 16, V = 11, Vp = 16;
  std::vector<std::int32_t> tokens = {1, 3, 3, 10, 0, 7, 7, 7, 2, 9};
  auto wte = random_vector<float>(Vp * E, 29), wpe = random_vector<float>(T * E, 30),
       dembed = random_vector<float>(B * T * E, 31);
  std::vector<float> emb_f(B * T * E), emb_r(B * T * E);
  embedding_forward(emb_f.data(), tokens.data(), wte.data(), wpe.data(), B, T, E);
  reference::embedding_forward(emb_r.data(), tokens.data(), wte.data(), wpe.data(), B, T, E);
  expect_close("embedding_forward", emb_f, emb_r, 1e-7);
  std::vector<float> dwte_f(Vp * E), dwte_r(Vp * E), dwpe_f(T * E), dwpe_r(T * E);
  embedding_backward(dwte_f.data(), dwpe_f.data(), dembed.data(), tokens.data(), B, T, E);
  reference::embedding_backward(dwte_r.data(), dwpe_r.data(), dembed.data(), tokens.data(), B, T, E);
  expect_close("embedding_backward dwte", dwte_f, dwte_r, 1e-6);
  expect_close("embedding_backward dwpe", dwpe_f, dwpe_r, 1e-6);

  // The cross-entropy in vocabulary chunks: one chunk, chunks of 4 (the last one all padding) and
  // chunks of 5 (the last one a single column), against the reference over whole rows.
  const std::int64_t rows = B * T;
  auto logits = random_vector<float>(rows * Vp, 32, 3.0);
  std::vector<float> loss_r(rows), lse_r(rows), dl_r(rows * Vp);
  reference::cross_entropy_forward(loss_r.data(), lse_r.data(), logits.data(), tokens.data(), rows, V, Vp);
  reference::cross_entropy_backward(dl_r.data(), logits.data(), lse_r.data(), tokens.data(), 0.1f, rows, V, Vp);
  for (const std::int64_t chunk : {Vp, std::int64_t{4}, std::int64_t{5}}) {
    std::vector<float> running_max(rows), running_sum(rows), target_logits(rows), loss_f(rows), lse_f(rows),
        dl_f(rows * Vp);
    std::vector<std::vector<float>> pieces;
    for (std::int64_t first = 0; first < Vp; first += chunk) {
      const std::int64_t width = std::min(chunk, Vp - first);
      std::vector<float> piece(rows * width);
      for (std::int64_t n = 0; n < rows; ++n)
        for (std::int64_t v = 0; v < width; ++v) piece[n * width + v] = logits[n * Vp + first + v];
      cross_entropy_forward_chunk(running_max.data(), running_sum.data(), target_logits.data(), piece.data(),
                                  tokens.data(), rows, first, width, V);
      pieces.push_back(std::move(piece));
    }
    cross_entropy_finish(loss_f.data(), lse_f.data(), running_max.data(), running_sum.data(), target_logits.data(),
                         tokens.data(), rows);
    expect_close(("cross_entropy_forward, chunk " + std::to_string(chunk)).c_str(), loss_f, loss_r, 1e-5);
    for (std::int64_t first = 0, c = 0; first < Vp; first += chunk, ++c) {
      const std::int64_t width = std::min(chunk, Vp - first);
      std::vector<float>& piece = pieces[static_cast<std::size_t>(c)];
      cross_entropy_backward_chunk(piece.data(), piece.data(), lse_f.data(), tokens.data(), 0.1f, rows, first, width,
                                   V);
      for (std::int64_t n = 0; n < rows; ++n)
        for (std::int64_t v = 0; v < width; ++v) dl_f[n * Vp + first + v] = piece[n * width + v];
    }
    expect_close(("cross_entropy_backward, chunk " + std::to_string(chunk)).c_str(), dl_f, dl_r, 1e-6);
  }
}

TEST(FastKernels, AttentionMatchesReference) {
  const AttentionShape shape{2, 33, 4, 4, 16};
  const std::int64_t count = 2 * 33 * 3 * 64;
  auto qkv = random_vector<float>(count, 33);
  auto dout = random_vector<float>(2 * 33 * 64, 34);
  const std::size_t att_size = 2 * 4 * 33 * 33;
  std::vector<float> out_f(2 * 33 * 64), out_r(out_f.size()), att_f(att_size), att_r(att_size), scratch(att_size);
  const float* q = qkv.data();
  attention_forward(out_f.data(), att_f.data(), AttentionInputs{q, q + 64, q + 128, 192, 192}, shape);
  reference::attention_forward(out_r.data(), att_r.data(), packed_const<float>(q, 64), shape);
  expect_close("attention_forward out", out_f, out_r, 1e-5);
  expect_close("attention_forward probabilities", att_f, att_r, 1e-6);
  std::vector<float> dqkv_f(count), dqkv_r(count);
  float* d = dqkv_f.data();
  attention_backward(AttentionGrads{d, d + 64, d + 128, 192, 192}, scratch.data(), dout.data(),
                     AttentionInputs{q, q + 64, q + 128, 192, 192}, att_f.data(), shape);
  reference::attention_backward(packed(dqkv_r.data(), 64), scratch.data(), dout.data(), packed_const<float>(q, 64),
                                att_r.data(), shape);
  expect_close("attention_backward", dqkv_f, dqkv_r, 1e-5);
}

TEST(FastKernels, AdamWMatchesReference) {
  const std::int64_t count = 1000;
  auto param_f = random_vector<float>(count, 35), grad = random_vector<float>(count, 36);
  auto m_f = random_vector<float>(count, 37, 0.1), v_f = random_vector<float>(count, 38, 0.1);
  for (auto& value : v_f) value = std::abs(value);
  auto param_r = param_f, m_r = m_f, v_r = v_f;
  const AdamWHyper hyper{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7, 0.5f};
  adamw::cpu::update(param_f.data(), grad.data(), m_f.data(), v_f.data(), count, hyper);  // the adamw plugin's kernel
  adamw::cpu::reference::update(param_r.data(), grad.data(), m_r.data(), v_r.data(), count, hyper);
  expect_close("adamw param", param_f, param_r, 1e-6);
  expect_close("adamw m", m_f, m_r, 1e-7);
  expect_close("adamw v", v_f, v_r, 1e-7);
  std::vector<float> values = {3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(sum_of_squares(values.data(), 2), 25.0);
}

}  // namespace
}  // namespace strata::cpu
