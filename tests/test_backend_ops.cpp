// Backend conformance: one table of ops x shapes x dtypes, each case run on every backend this build
// has (core/device/backends.hpp) against the reference kernels (kernels/cpu, plain loops in double
// or float). Inputs go to the backend's memory and results come back through its copy ops, as
// they would from a GPU. Each line prints the op, shape, dtype, backend, the error and its bound;
// a backend that lacks an op says so. A new backend joins by being listed in available_backends();
// the sealed CPU backend (sealed_backend.hpp) runs the table as well.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend_buffers.hpp"
#include "conformance_case.hpp"
#include "core/device/backends.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "sealed_backend.hpp"

namespace strata {
namespace {

using namespace test::conformance;

// matmul forward and backward (dinp overwritten, dweight and dbias accumulated); bf16 weights are
// compared with the reference on the widened weight.
Case matmul_case(std::int64_t N, std::int64_t C, std::int64_t OC, WeightLayout layout, DType dtype) {
  const std::string shape = std::to_string(N) + "x" + std::to_string(C) + "->" + std::to_string(OC) +
                            (layout == WeightLayout::in_out ? " in_out" : " out_in");
  return {
      "matmul", shape, std::string(dtype_name(dtype)), Op::matmul_forward, 2e-5, [=](Backend& backend) {
        Ops& ops = backend.ops();
        test::BackendBuffers memory(backend);
        const Floats inp = random_floats(N * C, 1), bias = random_floats(OC, 2), dout = random_floats(N * OC, 3);
        Floats weight = random_floats(C * OC, 4);
        std::vector<std::uint16_t> weight_bf16 = to_bf16(weight);
        if (dtype == DType::bf16) weight = from_bf16(weight_bf16);
        const Weight w = dtype == DType::bf16 ? Weight{memory.upload(weight_bf16), DType::bf16}
                                              : Weight{memory.upload(weight), DType::f32};
        float* scratch = memory.upload(Floats(256));  // small: forces several widened chunks
        const MatmulShape ms{N, C, OC, layout};
        float* out = memory.upload(Floats(N * OC));
        ops.matmul_forward(out, memory.upload(inp), w, memory.upload(bias), ms, Scratch{scratch, 256});
        float* dinp = memory.upload(Floats(N * C, 7.0f));
        float* dweight = memory.upload(Floats(C * OC));
        float* dbias = memory.upload(Floats(OC));
        ops.matmul_backward(dinp, dweight, dbias, memory.upload(dout), memory.upload(inp), w, ms, Scratch{scratch, 256},
                            GradientWrite::overwrite);
        std::vector<double> out_r(N * OC), dinp_r(N * C), dw_r(C * OC), db_r(OC);
        const auto inp_d = widen_to_double(inp), w_d = widen_to_double(weight), b_d = widen_to_double(bias),
                   dout_d = widen_to_double(dout);
        cpu::reference::matmul_forward(out_r.data(), inp_d.data(), w_d.data(), b_d.data(), N, C, OC, layout);
        cpu::reference::matmul_backward(dinp_r.data(), dw_r.data(), db_r.data(), dout_d.data(), inp_d.data(),
                                        w_d.data(), N, C, OC, layout);
        return std::max({error_of(memory.download(out, N * OC), out_r), error_of(memory.download(dinp, N * C), dinp_r),
                         error_of(memory.download(dweight, C * OC), dw_r), error_of(memory.download(dbias, OC), db_r)});
      }};
}

// The optional bf16-input matmuls (SDK 9.9) against the same backend's matmuls on the widened
// input: bit for bit (bound 0), forward with its bias, backward with dinp overwritten and then
// accumulated, dweight and dbias accumulated. On the sealed backend both paths end in the same CPU
// kernel, so the row holds trivially there; it bites on a GPU's own implementation.
Case matmul_bf16_input_case(std::int64_t N, std::int64_t C, std::int64_t OC, WeightLayout layout) {
  const std::string shape = std::to_string(N) + "x" + std::to_string(C) + "->" + std::to_string(OC) +
                            (layout == WeightLayout::in_out ? " in_out" : " out_in");
  return {"matmul_bf16in", shape, "bf16", Op::matmul_forward_bf16_input, 0.0, [=](Backend& backend) {
            Ops& ops = backend.ops();
            test::BackendBuffers memory(backend);
            const std::vector<std::uint16_t> inp16 = to_bf16(random_floats(N * C, 11)),
                                             weight16 = to_bf16(random_floats(C * OC, 12));
            const Floats bias = random_floats(OC, 13), dout = random_floats(N * OC, 14);
            const Weight w{memory.upload(weight16), DType::bf16};
            const MatmulShape ms{N, C, OC, layout};
            // Room for the whole widened weight, as the sealed backend's bf16-input ops give the CPU
            // kernel (a smaller one sums the CPU's products in other chunks).
            const Scratch scratch{memory.upload(Floats(C * OC)), C * OC};
            const float* widened = memory.upload(from_bf16(inp16));
            const std::uint16_t* stored = memory.upload(inp16);
            const float *b = memory.upload(bias), *dy = memory.upload(dout);
            std::vector<Floats> results[2];  // [widened, stored]: out, dinp, dweight, dbias
            for (int path = 0; path < 2; ++path) {
              float* out = memory.upload(Floats(N * OC));
              float* dinp = memory.upload(Floats(N * C, 7.0f));
              float* dweight = memory.upload(random_floats(C * OC, 15));
              float* dbias = memory.upload(random_floats(OC, 16));
              for (const GradientWrite write : {GradientWrite::overwrite, GradientWrite::accumulate}) {
                if (path == 0) {
                  if (write == GradientWrite::overwrite) ops.matmul_forward(out, widened, w, b, ms, scratch);
                  ops.matmul_backward(dinp, dweight, dbias, dy, widened, w, ms, scratch, write);
                } else {
                  if (write == GradientWrite::overwrite) ops.matmul_forward_bf16_input(out, stored, w, b, ms);
                  ops.matmul_backward_bf16_input(dinp, dweight, dbias, dy, stored, w, ms, write);
                }
              }
              results[path] = {memory.download(out, N * OC), memory.download(dinp, N * C),
                               memory.download(dweight, C * OC), memory.download(dbias, OC)};
            }
            double worst = 0.0;
            for (std::size_t i = 0; i < results[0].size(); ++i)
              worst = std::max(worst, error_of(results[1][i], results[0][i]));
            return worst;
          }};
}

Case layernorm_case(std::int64_t N, std::int64_t C) {
  return {
      "layernorm",
      std::to_string(N) + "x" + std::to_string(C),
      "f32",
      Op::layernorm_forward,
      2e-5,
      [=](Backend& backend) {
        Ops& ops = backend.ops();
        test::BackendBuffers memory(backend);
        const Floats inp = random_floats(N * C, 5, 2.0f), w = random_floats(C, 6), b = random_floats(C, 7),
                     dout = random_floats(N * C, 8);
        float *out = memory.upload(Floats(N * C)), *mean = memory.upload(Floats(N)), *rstd = memory.upload(Floats(N));
        float *inp_b = memory.upload(inp), *w_b = memory.upload(w);
        ops.layernorm_forward(out, mean, rstd, inp_b, w_b, memory.upload(b), N, C, 1e-5f);
        float *dinp = memory.upload(Floats(N * C)), *dw = memory.upload(Floats(C)), *db = memory.upload(Floats(C));
        ops.layernorm_backward(dinp, dw, db, memory.upload(dout), inp_b, w_b, mean, rstd, N, C);
        std::vector<double> out_r(N * C), mean_r(N), rstd_r(N), dinp_r(N * C), dw_r(C), db_r(C);
        const auto inp_d = widen_to_double(inp), w_d = widen_to_double(w), b_d = widen_to_double(b),
                   dout_d = widen_to_double(dout);
        cpu::reference::layernorm_forward(out_r.data(), mean_r.data(), rstd_r.data(), inp_d.data(), w_d.data(),
                                          b_d.data(), N, C, 1e-5);
        cpu::reference::layernorm_backward(dinp_r.data(), dw_r.data(), db_r.data(), dout_d.data(), inp_d.data(),
                                           w_d.data(), mean_r.data(), rstd_r.data(), N, C);
        return std::max({error_of(memory.download(out, N * C), out_r), error_of(memory.download(dinp, N * C), dinp_r),
                         error_of(memory.download(dw, C), dw_r), error_of(memory.download(db, C), db_r)});
      }};
}

Case rmsnorm_case(std::int64_t N, std::int64_t C) {
  return {
      "rmsnorm", std::to_string(N) + "x" + std::to_string(C), "f32", Op::rmsnorm_forward, 2e-5, [=](Backend& backend) {
        Ops& ops = backend.ops();
        test::BackendBuffers memory(backend);
        const Floats inp = random_floats(N * C, 9, 2.0f), w = random_floats(C, 10), dout = random_floats(N * C, 11);
        float *out = memory.upload(Floats(N * C)), *rstd = memory.upload(Floats(N));
        float *inp_b = memory.upload(inp), *w_b = memory.upload(w);
        ops.rmsnorm_forward(out, rstd, inp_b, w_b, N, C, 1e-6f);
        float *dinp = memory.upload(Floats(N * C)), *dw = memory.upload(Floats(C));
        ops.rmsnorm_backward(dinp, dw, memory.upload(dout), inp_b, w_b, rstd, N, C);
        std::vector<double> out_r(N * C), rstd_r(N), dinp_r(N * C), dw_r(C);
        const auto inp_d = widen_to_double(inp), w_d = widen_to_double(w), dout_d = widen_to_double(dout);
        cpu::reference::rmsnorm_forward(out_r.data(), rstd_r.data(), inp_d.data(), w_d.data(), N, C, 1e-6);
        cpu::reference::rmsnorm_backward(dinp_r.data(), dw_r.data(), dout_d.data(), inp_d.data(), w_d.data(),
                                         rstd_r.data(), N, C);
        return std::max({error_of(memory.download(out, N * C), out_r), error_of(memory.download(dinp, N * C), dinp_r),
                         error_of(memory.download(dw, C), dw_r)});
      }};
}

// Attention on q, k, v in separate buffers (GQA) or three views of one packed qkv (GPT-2), against
// the reference kernel in float; window > 0: Mistral's sliding window.
Case attention_case(int B, int T, int H, int KV, int D, bool packed, int window = 0) {
  const std::string shape = "B" + std::to_string(B) + " T" + std::to_string(T) + " H" + std::to_string(H) + " KV" +
                            std::to_string(KV) + " D" + std::to_string(D) + (packed ? " packed" : "") +
                            (window > 0 ? " window" + std::to_string(window) : "");
  return {
      "attention", shape, "f32", Op::attention_forward, 2e-5, [=](Backend& backend) {
        Ops& ops = backend.ops();
        test::BackendBuffers memory(backend);
        const AttentionShape s{B, T, H, KV, D, window};
        const std::int64_t N = static_cast<std::int64_t>(B) * T, qw = H * D, kvw = KV * D;
        const std::int64_t row = packed ? qw + 2 * kvw : 0;
        const Floats q = random_floats(N * (packed ? row : qw), 12), k = random_floats(N * kvw, 13),
                     v = random_floats(N * kvw, 14), dout = random_floats(N * qw, 15);
        auto inputs = [&](const float* qb, const float* kb, const float* vb) {
          return packed ? AttentionInputs{qb, qb + qw, qb + qw + kvw, row, row} : AttentionInputs{qb, kb, vb, qw, kvw};
        };
        auto grads = [&](float* dq, float* dk, float* dv) {
          return packed ? AttentionGrads{dq, dq + qw, dq + qw + kvw, row, row} : AttentionGrads{dq, dk, dv, qw, kvw};
        };
        const std::int64_t saved_count = ops.attention_saved_floats(s);
        float *out = memory.upload(Floats(N * qw)), *saved = memory.upload(Floats(saved_count));
        const AttentionInputs in = inputs(memory.upload(q), memory.upload(k), memory.upload(v));
        ops.attention_forward(s, out, saved, in);
        const std::size_t q_count = q.size();
        float *dq = memory.upload(Floats(q_count)), *dk = memory.upload(Floats(N * kvw)),
              *dv = memory.upload(Floats(N * kvw));
        float* scratch = memory.upload(Floats(ops.attention_scratch_floats(s)));
        ops.attention_backward(s, grads(dq, dk, dv), memory.upload(dout), in, saved, scratch);

        auto reference = cpu::make_attention_kernel(cpu::AttentionImpl::reference);
        Floats out_r(N * qw), saved_r(reference->saved_floats(s)), dq_r(q_count), dk_r(N * kvw), dv_r(N * kvw),
            scratch_r(reference->backward_scratch_floats(s));
        const AttentionInputs in_r = inputs(q.data(), k.data(), v.data());
        EXPECT_TRUE(reference->attention_forward({}, s, out_r.data(), saved_r.data(), in_r));
        EXPECT_TRUE(reference->attention_backward({}, s, grads(dq_r.data(), dk_r.data(), dv_r.data()), dout.data(),
                                                  out_r.data(), in_r, saved_r.data(), scratch_r.data()));
        double worst =
            std::max(error_of(memory.download(out, N * qw), out_r), error_of(memory.download(dq, q_count), dq_r));
        if (!packed)
          worst = std::max(
              {worst, error_of(memory.download(dk, N * kvw), dk_r), error_of(memory.download(dv, N * kvw), dv_r)});
        return worst;
      }};
}

Case pointwise_case(const std::string& op, std::int64_t count) {
  const Op kind = op == "gelu" ? Op::gelu_forward : Op::swiglu_forward;
  return {op, std::to_string(count), "f32", kind, 1e-5, [=](Backend& backend) {
            Ops& ops = backend.ops();
            test::BackendBuffers memory(backend);
            const Floats x = random_floats(count, 16, 4.0f), y = random_floats(count, 17, 2.0f),
                         dout = random_floats(count, 18);
            const auto x_d = widen_to_double(x), y_d = widen_to_double(y), dout_d = widen_to_double(dout);
            float *xb = memory.upload(x), *yb = memory.upload(y), *out = memory.upload(Floats(count));
            float *d1 = memory.upload(Floats(count)), *d2 = memory.upload(Floats(count));
            std::vector<double> out_r(count), d1_r(count), d2_r(count);
            if (kind == Op::gelu_forward) {
              ops.gelu_forward(out, xb, count);
              ops.gelu_backward(d1, xb, memory.upload(dout), count, GradientWrite::overwrite);
              cpu::reference::gelu_forward(out_r.data(), x_d.data(), count);
              cpu::reference::gelu_backward(d1_r.data(), x_d.data(), dout_d.data(), count);
              return std::max(error_of(memory.download(out, count), out_r), error_of(memory.download(d1, count), d1_r));
            }
            ops.swiglu_forward(out, xb, yb, count);
            ops.swiglu_backward(d1, d2, memory.upload(dout), xb, yb, count, GradientWrite::overwrite);
            cpu::reference::swiglu_forward(out_r.data(), x_d.data(), y_d.data(), count);
            cpu::reference::swiglu_backward(d1_r.data(), d2_r.data(), dout_d.data(), x_d.data(), y_d.data(), count);
            return std::max({error_of(memory.download(out, count), out_r), error_of(memory.download(d1, count), d1_r),
                             error_of(memory.download(d2, count), d2_r)});
          }};
}

Case rope_case(std::int64_t rows, int seq_len, int heads, int head_dim, std::int64_t stride) {
  const std::string shape = std::to_string(rows) + " rows T" + std::to_string(seq_len) + " H" + std::to_string(heads) +
                            " D" + std::to_string(head_dim) + " stride " + std::to_string(stride);
  return {"rope", shape, "f32", Op::rope, 1e-5, [=](Backend& backend) {
            Ops& ops = backend.ops();
            test::BackendBuffers memory(backend);
            const Floats x = random_floats(rows * stride, 19);
            float* xb = memory.upload(x);
            ops.rope(xb, rows, stride, seq_len, heads, head_dim, 10000.0f, false);
            const Floats turned = memory.download(xb, x.size());
            ops.rope(xb, rows, stride, seq_len, heads, head_dim, 10000.0f, true);
            std::vector<double> turned_r = widen_to_double(x);
            cpu::reference::rope(turned_r.data(), rows, stride, seq_len, heads, head_dim, 10000.0, false);
            // Forward against the reference, and the inverse brings the input back.
            return std::max(error_of(turned, turned_r), error_of(memory.download(xb, x.size()), x));
          }};
}

Case embedding_case(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V, DType dtype, bool positions) {
  const std::string shape = "B" + std::to_string(B) + " T" + std::to_string(T) + " C" + std::to_string(C) + " V" +
                            std::to_string(V) + (positions ? " +wpe" : " no wpe");
  return {"embedding", shape, std::string(dtype_name(dtype)), Op::embedding_forward, 1e-6, [=](Backend& backend) {
            Ops& ops = backend.ops();
            test::BackendBuffers memory(backend);
            std::vector<std::int32_t> tokens(B * T);
            for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 7 + 1) % V);
            Floats wte = random_floats(V * C, 20), wpe = positions ? random_floats(T * C, 21) : Floats(T * C, 0.0f);
            const auto wte_bf = to_bf16(wte), wpe_bf = to_bf16(wpe);
            if (dtype == DType::bf16) wte = from_bf16(wte_bf), wpe = from_bf16(wpe_bf);
            Weight wte_w{}, wpe_w{};
            if (dtype == DType::bf16) {
              wte_w = {memory.upload(wte_bf), DType::bf16};
              if (positions) wpe_w = {memory.upload(wpe_bf), DType::bf16};
            } else {
              wte_w = {memory.upload(wte), DType::f32};
              if (positions) wpe_w = {memory.upload(wpe), DType::f32};
            }
            const std::int32_t* tokens_b = memory.upload(tokens);
            float* out = memory.upload(Floats(B * T * C));
            ops.embedding_forward(out, tokens_b, wte_w, wpe_w, B, T, C);
            const Floats dout = random_floats(B * T * C, 22);
            float *dwte = memory.upload(Floats(V * C)), *dwpe = positions ? memory.upload(Floats(T * C)) : nullptr;
            ops.embedding_backward(dwte, dwpe, memory.upload(dout), tokens_b, B, T, C);
            std::vector<double> out_r(B * T * C), dwte_r(V * C), dwpe_r(T * C);
            const auto wte_d = widen_to_double(wte), wpe_d = widen_to_double(wpe), dout_d = widen_to_double(dout);
            cpu::reference::embedding_forward(out_r.data(), tokens.data(), wte_d.data(), wpe_d.data(), B, T, C);
            cpu::reference::embedding_backward(dwte_r.data(), dwpe_r.data(), dout_d.data(), tokens.data(), B, T, C);
            double worst = std::max(error_of(memory.download(out, B * T * C), out_r),
                                    error_of(memory.download(dwte, V * C), dwte_r));
            if (positions) worst = std::max(worst, error_of(memory.download(dwpe, T * C), dwpe_r));
            return worst;
          }};
}

// The loss over vocabulary chunks, forward and backward, against the one-shot reference.
Case cross_entropy_case(std::int64_t N, std::int64_t V, std::int64_t Vp, std::int64_t chunk) {
  const std::string shape = std::to_string(N) + "x" + std::to_string(V) + " (padded " + std::to_string(Vp) +
                            ", chunks of " + std::to_string(chunk) + ")";
  return {
      "cross_entropy", shape, "f32", Op::cross_entropy_forward_chunk, 1e-5, [=](Backend& backend) {
        Ops& ops = backend.ops();
        test::BackendBuffers memory(backend);
        const Floats logits = random_floats(N * Vp, 23, 5.0f);
        std::vector<std::int32_t> targets(N);
        for (std::int64_t n = 0; n < N; ++n) targets[n] = static_cast<std::int32_t>((n * 13 + 2) % V);
        const std::int32_t* targets_b = memory.upload(targets);
        float *losses = memory.upload(Floats(N)), *lse = memory.upload(Floats(N)), *target = memory.upload(Floats(N));
        std::vector<float*> chunks;
        for (std::int64_t first = 0; first < Vp; first += chunk) {
          const std::int64_t width = std::min(chunk, Vp - first);
          Floats block(N * width);
          for (std::int64_t n = 0; n < N; ++n)
            for (std::int64_t c = 0; c < width; ++c) block[n * width + c] = logits[n * Vp + first + c];
          chunks.push_back(memory.upload(block));
          ops.cross_entropy_forward_chunk(lse, losses, target, chunks.back(), targets_b, N, first, width, V);
        }
        ops.cross_entropy_finish(losses, lse, lse, losses, target, targets_b, N);
        Floats dlogits(N * Vp);
        for (std::int64_t first = 0, c = 0; first < Vp; first += chunk, ++c) {
          const std::int64_t width = std::min(chunk, Vp - first);
          ops.cross_entropy_backward_chunk(chunks[c], chunks[c], lse, targets_b, 0.5f, N, first, width, V);
          const Floats block = memory.download(chunks[c], N * width);
          for (std::int64_t n = 0; n < N; ++n)
            for (std::int64_t i = 0; i < width; ++i) dlogits[n * Vp + first + i] = block[n * width + i];
        }
        std::vector<double> losses_r(N), lse_r(N), dlogits_r(N * Vp);
        const auto logits_d = widen_to_double(logits);
        cpu::reference::cross_entropy_forward(losses_r.data(), lse_r.data(), logits_d.data(), targets.data(), N, V, Vp);
        cpu::reference::cross_entropy_backward(dlogits_r.data(), logits_d.data(), lse_r.data(), targets.data(), 0.5, N,
                                               V, Vp);
        return std::max(error_of(memory.download(losses, N), losses_r), error_of(dlogits, dlogits_r));
      }};
}

// `offset` elements into each buffer: an offset of 1 leaves the pointers off 16-byte alignment (a
// backend may take another path there), and a count not a multiple of 8 leaves a tail.
Case conversion_case(std::int64_t count, std::int64_t offset) {
  return {"convert",
          std::to_string(count) + (offset > 0 ? " at +" + std::to_string(offset) : ""),
          "f32<->bf16",
          Op::widen,
          0.0,
          [=](Backend& backend) {
            Ops& ops = backend.ops();
            test::BackendBuffers memory(backend);
            const Floats values = random_floats(count, 31, 100.0f);
            const auto expected_bits = to_bf16(values);
            Floats padded(static_cast<std::size_t>(offset), 0.0f);
            padded.insert(padded.end(), values.begin(), values.end());
            float* f = memory.upload(padded) + offset;
            auto* narrowed = memory.upload(std::vector<std::uint16_t>(count + offset)) + offset;
            ops.narrow(narrowed, f, count);
            float* widened = memory.upload(Floats(count + offset)) + offset;
            ops.widen(widened, narrowed, count);
            ops.narrow_and_round(narrowed, f, count);  // also rounds f in place
            const auto bits = memory.download(narrowed, count);
            double wrong = 0.0;
            for (std::int64_t i = 0; i < count; ++i) wrong += bits[i] != expected_bits[i];
            return wrong + error_of(memory.download(widened, count), from_bf16(expected_bits)) +
                   error_of(memory.download(f, count), from_bf16(expected_bits));
          }};
}

Case reduction_case(std::int64_t count) {
  return {"reductions", std::to_string(count), "f32", Op::sum_of_squares, 1e-12, [=](Backend& backend) {
            Ops& ops = backend.ops();
            test::BackendBuffers memory(backend);
            Floats values = random_floats(count, 32);
            float* b = memory.upload(values);
            double squares = 0.0, sum = 0.0;
            for (float value : values) squares += static_cast<double>(value) * value, sum += value;
            double error = std::abs(ops.sum_of_squares(b, count) - squares) / squares +
                           std::abs(ops.sum(b, count) - sum) / std::max(1.0, std::abs(sum));
            EXPECT_TRUE(ops.all_finite(b, count));
            for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
              values[count / 2] = bad;
              EXPECT_FALSE(ops.all_finite(memory.upload(values), count)) << bad;
            }
            return error;
          }};
}

// Multiplying by a power of two is exact: every backend gives the same bits.
// A product rounded, then a sum rounded: the same bits on every backend (no fused multiply-add).
Case add_scaled_case(std::int64_t count) {
  return {"add_scaled", std::to_string(count), "f32", Op::add_scaled, 0.0, [=](Backend& backend) {
            Ops& ops = backend.ops();
            test::BackendBuffers memory(backend);
            const Floats ys = random_floats(count, 34);
            const Floats xs = random_floats(count, 35);
            float* y = memory.upload(ys);
            ops.add_scaled(y, -0.37f, memory.upload(xs), count);
            const Floats result = memory.download(y, count);
            double wrong = 0.0;
            for (std::int64_t i = 0; i < count; ++i) {
              const float product = -0.37f * xs[i];
              wrong += result[i] != ys[i] + product;
            }
            return wrong;
          }};
}

Case scale_case(std::int64_t count) {
  return {"scale", std::to_string(count), "f32", Op::scale, 0.0, [=](Backend& backend) {
            Ops& ops = backend.ops();
            test::BackendBuffers memory(backend);
            const Floats values = random_floats(count, 33);
            float* b = memory.upload(values);
            ops.scale(b, 0.0078125f, count);
            const Floats scaled = memory.download(b, count);
            double wrong = 0.0;
            for (std::int64_t i = 0; i < count; ++i) wrong += scaled[i] != values[i] * 0.0078125f;
            return wrong;
          }};
}

// The optimizers' elementwise ops, in place (outputs alias inputs) and out of place: correctly
// rounded, so every backend gives the reference's bits; sign's zeros and NaN included.
Case elementwise_case(std::int64_t count) {
  return {"elementwise", std::to_string(count) + " sign mul div sqrt", "f32", Op::sign, 0.0, [=](Backend& backend) {
            Ops& ops = backend.ops();
            test::BackendBuffers memory(backend);
            Floats a = random_floats(count, 36), b = random_floats(count, 37);
            a[0] = 0.0f, a[1] = -0.0f, a[2] = std::numeric_limits<float>::quiet_NaN();
            double wrong = 0.0;
            auto compare = [&](const Floats& got, auto&& expected) {
              for (std::int64_t i = 0; i < count; ++i) {
                const float want = expected(i);
                wrong += std::isnan(want) ? !std::isnan(got[i]) : got[i] != want;
              }
            };
            float* in_place = memory.upload(a);
            ops.sign(in_place, in_place, count);
            compare(memory.download(in_place, count), [&](std::int64_t i) {
              return a[i] > 0 ? 1.0f : a[i] < 0 ? -1.0f : a[i] == 0 ? 0.0f : a[i];
            });
            float* da = memory.upload(a);
            float* db = memory.upload(b);
            float* out = memory.upload(Floats(count));
            ops.mul(out, da, db, count);
            compare(memory.download(out, count), [&](std::int64_t i) { return a[i] * b[i]; });
            ops.div(db, da, db, 0.25f, count);  // into b: an alias of the divisor
            compare(memory.download(db, count), [&](std::int64_t i) { return a[i] / (b[i] + 0.25f); });
            ops.mul(out, da, da, count);
            ops.sqrt(out, out, count);
            compare(memory.download(out, count), [&](std::int64_t i) { return std::sqrt(a[i] * a[i]); });
            return wrong;
          }};
}

Case memory_case(std::uint64_t bytes) {
  return {"fill/copy", std::to_string(bytes) + " bytes", "bytes", Op::copy, 0.0, [=](Backend& backend) {
            Ops& ops = backend.ops();
            test::BackendBuffers memory(backend);
            std::vector<std::uint8_t> source(bytes);
            for (std::uint64_t i = 0; i < bytes; ++i) source[i] = static_cast<std::uint8_t>(i * 31 + 7);
            std::uint8_t* a = memory.upload(source);
            std::uint8_t* b = memory.upload(std::vector<std::uint8_t>(bytes));
            ops.copy(b, a, bytes);
            double wrong = memory.download(b, bytes) != source;
            ops.fill(b, 0xAB, bytes);
            for (std::uint8_t byte : memory.download(b, bytes)) wrong += byte != 0xAB;
            return wrong;
          }};
}

// The CPU's bound, except for bf16 weights on a GPU (and the sealed backend that rounds as one): the
// tensor cores take the input (and, backward, dout) in bf16 too, so each product carries bf16 rounding of both operands
// (8 significant bits, f32 accumulation): about 2^-9 relative per operand, well inside 1e-2 of the result's scale.
double bound_on(const std::string& kind, const Case& c) {
  if ((kind.rfind("cuda:", 0) == 0 || kind == "sealed-bf16") && c.kind == Op::matmul_forward && c.dtype == "bf16")
    return 1e-2;
  return c.bound;
}

std::vector<Case> conformance_table() {
  std::vector<Case> cases;
  for (const DType dtype : {DType::f32, DType::bf16})
    for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
      cases.push_back(matmul_case(7, 13, 5, layout, dtype));
      cases.push_back(matmul_case(64, 96, 80, layout, dtype));
    }
  for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
    cases.push_back(matmul_bf16_input_case(7, 13, 5, layout));
    cases.push_back(matmul_bf16_input_case(64, 96, 80, layout));
  }
  cases.push_back(layernorm_case(5, 7));
  cases.push_back(layernorm_case(64, 192));
  cases.push_back(rmsnorm_case(5, 7));
  cases.push_back(rmsnorm_case(64, 192));
  cases.push_back(attention_case(2, 5, 2, 2, 4, true));
  cases.push_back(attention_case(2, 7, 4, 2, 8, false));
  cases.push_back(attention_case(1, 16, 6, 1, 16, false));
  cases.push_back(attention_case(2, 40, 4, 2, 8, false, 5));  // window within one 32-lane stride and across
  cases.push_back(pointwise_case("gelu", 1000));
  cases.push_back(pointwise_case("swiglu", 1000));
  cases.push_back(rope_case(10, 5, 2, 8, 16));
  cases.push_back(rope_case(64, 32, 3, 16, 64));
  for (const DType dtype : {DType::f32, DType::bf16}) {
    cases.push_back(embedding_case(2, 4, 8, 11, dtype, true));
    cases.push_back(embedding_case(2, 4, 8, 11, dtype, false));
  }
  cases.push_back(cross_entropy_case(6, 50, 64, 64));
  cases.push_back(cross_entropy_case(6, 50, 64, 24));
  for (auto [count, offset] : {std::pair<std::int64_t, std::int64_t>{1000, 0}, {1003, 0}, {1001, 1}})
    cases.push_back(conversion_case(count, offset));
  cases.push_back(reduction_case(10000));
  cases.push_back(scale_case(10001));
  cases.push_back(add_scaled_case(10001));
  cases.push_back(elementwise_case(10001));
  cases.push_back(memory_case(1000));
  for (Case& c : linear_algebra_cases()) cases.push_back(std::move(c));
  for (Case& c : model_variant_cases()) cases.push_back(std::move(c));
  return cases;
}

TEST(BackendConformance, EveryOpOfEveryBackendMatchesTheReference) {
  const std::vector<Case> cases = conformance_table();
  std::vector<std::pair<std::string, std::unique_ptr<Backend>>> backends;
  for (const std::string& kind : available_backends()) backends.emplace_back(kind, make_backend(kind, 0));
  // The sealed CPU backend too: the table must reach backend memory through the ops alone, as it
  // does a GPU's, or this backend crashes.
  backends.emplace_back("sealed", test::make_sealed_cpu_backend(0));
  // And one whose bf16 products round their input, as a GPU's do, and that offers the bf16-input matmuls.
  backends.emplace_back("sealed-bf16", test::make_sealed_cpu_backend(0, test::SealedProducts::bf16_inputs));
  for (const auto& [kind, backend] : backends) {
    std::printf("%-14s %-36s %-11s %-7s %10s %10s\n", "op", "shape", "dtype", "backend", "error", "bound");
    for (const Case& c : cases) {
      if (!backend->ops().supports(c.kind)) {
        std::printf("%-14s %-36s %-11s %-7s %21s\n", c.op.c_str(), c.shape.c_str(), c.dtype.c_str(), kind.c_str(),
                    "not implemented");
        continue;
      }
      const double error = c.run(*backend);
      backend->synchronize();  // a GPU reports an op's failure here
      const double bound = bound_on(kind, c);
      std::printf("%-14s %-36s %-11s %-7s %10.3g %10.3g\n", c.op.c_str(), c.shape.c_str(), c.dtype.c_str(),
                  kind.c_str(), error, bound);
      EXPECT_LE(error, bound) << c.op << " " << c.shape << " " << c.dtype << " on " << kind;
    }
    // The ops' own workspaces (cuBLAS's, bf16 staging) stay for the backend's lifetime.
    const CategoryBytes live = backend->device_memory().live();
    EXPECT_EQ(backend->device_memory().live_total() - live[category_index(MemoryCategory::workspace)], 0u)
        << "a case leaked backend memory";
  }
}

// The CUDA backend is part of the table wherever it is built and a device is visible; where not,
// this says why, so a run without a GPU shows what it did not cover.
TEST(BackendConformance, CudaJoinsTheTableWhenADeviceIsVisible) {
  const std::string why = backend_unavailable_reason("cuda:0");
  if (!why.empty()) GTEST_SKIP() << "cuda:0 is not in the table: " << why;
  const std::vector<std::string> kinds = available_backends();
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "cuda:0"), kinds.end());
}

}  // namespace
}  // namespace strata
