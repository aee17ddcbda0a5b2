// Conformance rows for the ops' options that the model families and fine-tuning use beside the
// plain forms (strata/op_records.hpp): GeGLU (Gemma's gate), RMSNorm's (1 + w) gain, the embedding
// at given positions and with Gemma's scale, RoPE at given positions (packed documents restart at
// 0), targets without a loss (a negative target: loss 0, no gradient) and decoding within a
// sliding window. Each against the reference kernels or a plain loop in double.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend_buffers.hpp"
#include "conformance_case.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/geglu.hpp"
#include "kernels/cpu/rmsnorm.hpp"

namespace strata::test::conformance {

namespace {

Case geglu_case(std::int64_t count) {
  return {
      "geglu", std::to_string(count), "f32", Op::geglu_forward, 1e-5, [=](Backend& backend) {
        Ops& ops = backend.ops();
        BackendBuffers memory(backend);
        const Floats gate = random_floats(count, 51, 4.0f), up = random_floats(count, 52, 2.0f),
                     dout = random_floats(count, 53);
        float *gate_b = memory.upload(gate), *up_b = memory.upload(up), *out = memory.upload(Floats(count));
        float *dgate = memory.upload(Floats(count, 3.0f)), *dup = memory.upload(Floats(count, 3.0f));
        ops.geglu_forward(out, gate_b, up_b, count);
        ops.geglu_backward(dgate, dup, memory.upload(dout), gate_b, up_b, count, GradientWrite::overwrite);
        std::vector<double> out_r(count), dgate_r(count), dup_r(count);
        const auto gate_d = widen_to_double(gate), up_d = widen_to_double(up), dout_d = widen_to_double(dout);
        cpu::reference::geglu_forward(out_r.data(), gate_d.data(), up_d.data(), count);
        cpu::reference::geglu_backward(dgate_r.data(), dup_r.data(), dout_d.data(), gate_d.data(), up_d.data(), count);
        return std::max({error_of(memory.download(out, count), out_r), error_of(memory.download(dgate, count), dgate_r),
                         error_of(memory.download(dup, count), dup_r)});
      }};
}

// Gemma's gain: out = x * rstd * (1 + w).
Case rmsnorm_offset_case(std::int64_t N, std::int64_t C) {
  return {"rmsnorm 1+w",
          std::to_string(N) + "x" + std::to_string(C),
          "f32",
          Op::rmsnorm_forward,
          2e-5,
          [=](Backend& backend) {
            Ops& ops = backend.ops();
            BackendBuffers memory(backend);
            const Floats inp = random_floats(N * C, 54, 2.0f), w = random_floats(C, 55, 0.3f),
                         dout = random_floats(N * C, 56);
            float *out = memory.upload(Floats(N * C)), *rstd = memory.upload(Floats(N));
            float *inp_b = memory.upload(inp), *w_b = memory.upload(w);
            ops.rmsnorm_forward(out, rstd, inp_b, w_b, N, C, 1e-6f, 1.0f);
            float *dinp = memory.upload(Floats(N * C)), *dw = memory.upload(Floats(C));
            ops.rmsnorm_backward(dinp, dw, memory.upload(dout), inp_b, w_b, rstd, N, C, 1.0f);
            std::vector<double> out_r(N * C), rstd_r(N), dinp_r(N * C), dw_r(C);
            const auto inp_d = widen_to_double(inp), w_d = widen_to_double(w), dout_d = widen_to_double(dout);
            cpu::reference::rmsnorm_forward(out_r.data(), rstd_r.data(), inp_d.data(), w_d.data(), N, C, 1e-6, 1.0);
            cpu::reference::rmsnorm_backward(dinp_r.data(), dw_r.data(), dout_d.data(), inp_d.data(), w_d.data(),
                                             rstd_r.data(), N, C, 1.0);
            return std::max({error_of(memory.download(out, N * C), out_r),
                             error_of(memory.download(dinp, N * C), dinp_r), error_of(memory.download(dw, C), dw_r)});
          }};
}

// Two documents in each sequence (positions restart at 0 at the second), the token rows scaled.
Case embedding_positions_case(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t V, DType dtype) {
  const std::string shape =
      "B" + std::to_string(B) + " T" + std::to_string(T) + " C" + std::to_string(C) + " packed, scaled";
  return {"embedding+pos", shape, std::string(dtype_name(dtype)), Op::embedding_forward, 1e-6, [=](Backend& backend) {
            Ops& ops = backend.ops();
            BackendBuffers memory(backend);
            std::vector<std::int32_t> tokens(B * T), positions(B * T);
            for (std::int64_t i = 0; i < B * T; ++i) {
              tokens[i] = static_cast<std::int32_t>((i * 5 + 3) % V);
              const std::int64_t t = i % T, split = 1 + (i / T) % (T - 1);
              positions[i] = static_cast<std::int32_t>(t < split ? t : t - split);
            }
            Floats wte = random_floats(V * C, 57), wpe = random_floats(T * C, 58);
            const auto wte_bf = to_bf16(wte), wpe_bf = to_bf16(wpe);
            if (dtype == DType::bf16) wte = from_bf16(wte_bf), wpe = from_bf16(wpe_bf);
            const Weight wte_w = dtype == DType::bf16 ? Weight{memory.upload(wte_bf), DType::bf16}
                                                      : Weight{memory.upload(wte), DType::f32};
            const Weight wpe_w = dtype == DType::bf16 ? Weight{memory.upload(wpe_bf), DType::bf16}
                                                      : Weight{memory.upload(wpe), DType::f32};
            const float scale = std::sqrt(static_cast<float>(C));
            const std::int32_t *tokens_b = memory.upload(tokens), *positions_b = memory.upload(positions);
            float* out = memory.upload(Floats(B * T * C));
            op::EmbeddingForward forward{out, tokens_b, wte_w, wpe_w, B, T, C, positions_b, scale};
            ops.run(forward);
            const Floats dout = random_floats(B * T * C, 59);
            float *dwte = memory.upload(Floats(V * C)), *dwpe = memory.upload(Floats(T * C));
            op::EmbeddingBackward backward{dwte, dwpe, memory.upload(dout), tokens_b, B, T, C, positions_b, scale};
            ops.run(backward);
            std::vector<double> out_r(B * T * C), dwte_r(V * C), dwpe_r(T * C);
            const auto wte_d = widen_to_double(wte), wpe_d = widen_to_double(wpe), dout_d = widen_to_double(dout);
            cpu::reference::embedding_forward(out_r.data(), tokens.data(), wte_d.data(), wpe_d.data(), B, T, C,
                                              positions.data(), static_cast<double>(scale));
            cpu::reference::embedding_backward(dwte_r.data(), dwpe_r.data(), dout_d.data(), tokens.data(), B, T, C,
                                               positions.data(), static_cast<double>(scale));
            return std::max({error_of(memory.download(out, B * T * C), out_r),
                             error_of(memory.download(dwte, V * C), dwte_r),
                             error_of(memory.download(dwpe, T * C), dwpe_r)});
          }};
}

// Rows at given positions (a second document from row `rows / 2` on), turned and turned back.
Case rope_positions_case(std::int64_t rows, int heads, int head_dim, std::int64_t stride) {
  const std::string shape =
      std::to_string(rows) + " rows H" + std::to_string(heads) + " D" + std::to_string(head_dim) + " given positions";
  return {"rope+pos", shape, "f32", Op::rope, 1e-5, [=](Backend& backend) {
            Ops& ops = backend.ops();
            BackendBuffers memory(backend);
            std::vector<std::int32_t> positions(rows);
            for (std::int64_t r = 0; r < rows; ++r)
              positions[r] = static_cast<std::int32_t>(r < rows / 2 ? r : r - rows / 2);
            const Floats x = random_floats(rows * stride, 60);
            float* xb = memory.upload(x);
            const std::int32_t* positions_b = memory.upload(positions);
            op::Rope turn{xb, rows, stride, rows, 0, heads, head_dim, 10000.0f, nullptr, positions_b, false};
            ops.run(turn);
            const Floats turned = memory.download(xb, x.size());
            turn.inverse = true;
            ops.run(turn);
            std::vector<double> turned_r = widen_to_double(x);
            const int half = head_dim / 2;
            for (std::int64_t r = 0; r < rows; ++r)
              for (int h = 0; h < heads; ++h)
                for (int i = 0; i < half; ++i) {
                  const double angle = positions[r] / std::pow(10000.0, 2.0 * i / head_dim);
                  double* v = turned_r.data() + r * stride + static_cast<std::int64_t>(h) * head_dim;
                  const double a = v[i], b = v[i + half];
                  v[i] = a * std::cos(angle) - b * std::sin(angle);
                  v[i + half] = b * std::cos(angle) + a * std::sin(angle);
                }
            return std::max(error_of(turned, turned_r), error_of(memory.download(xb, x.size()), x));
          }};
}

// Every third row without a target: its loss is 0 and its logits get no gradient.
Case masked_cross_entropy_case(std::int64_t N, std::int64_t V, std::int64_t Vp) {
  const std::string shape =
      std::to_string(N) + "x" + std::to_string(V) + " (padded " + std::to_string(Vp) + ", every third row masked)";
  return {"cross_entropy masked", shape, "f32", Op::cross_entropy_forward_chunk, 1e-5, [=](Backend& backend) {
            Ops& ops = backend.ops();
            BackendBuffers memory(backend);
            const Floats logits = random_floats(N * Vp, 61, 5.0f);
            std::vector<std::int32_t> targets(N);
            for (std::int64_t n = 0; n < N; ++n) targets[n] = n % 3 == 1 ? -1 : static_cast<std::int32_t>((n * 7) % V);
            const std::int32_t* targets_b = memory.upload(targets);
            float *losses = memory.upload(Floats(N)), *lse = memory.upload(Floats(N));
            float *target = memory.upload(Floats(N)), *logits_b = memory.upload(logits);
            ops.cross_entropy_forward_chunk(lse, losses, target, logits_b, targets_b, N, 0, Vp, V);
            ops.cross_entropy_finish(losses, lse, lse, losses, target, targets_b, N);
            ops.cross_entropy_backward_chunk(logits_b, logits_b, lse, targets_b, 0.5f, N, 0, Vp, V);
            std::vector<double> losses_r(N), lse_r(N), dlogits_r(N * Vp);
            const auto logits_d = widen_to_double(logits);
            cpu::reference::cross_entropy_forward(losses_r.data(), lse_r.data(), logits_d.data(), targets.data(), N, V,
                                                  Vp);
            cpu::reference::cross_entropy_backward(dlogits_r.data(), logits_d.data(), lse_r.data(), targets.data(), 0.5,
                                                   N, V, Vp);
            const Floats got_losses = memory.download(losses, N), got_dlogits = memory.download(logits_b, N * Vp);
            for (std::int64_t n = 1; n < N; n += 3) {  // exactly zero, not merely small
              if (got_losses[n] != 0.0f) return 1.0;
              for (std::int64_t v = 0; v < Vp; ++v)
                if (got_dlogits[n * Vp + v] != 0.0f) return 1.0;
            }
            return std::max(error_of(got_losses, losses_r), error_of(got_dlogits, dlogits_r));
          }};
}

// A prompt decoded within a sliding window, against a softmax over the window's positions.
Case decode_window_case(std::int64_t rows, int heads, int kv_heads, int head_dim, int window) {
  const std::string shape = std::to_string(rows) + " rows H" + std::to_string(heads) + " KV" +
                            std::to_string(kv_heads) + " D" + std::to_string(head_dim) + " window " +
                            std::to_string(window);
  return {
      "decode window", shape, "f32", Op::attention_decode, 1e-5, [=](Backend& backend) {
        Ops& ops = backend.ops();
        BackendBuffers memory(backend);
        const std::int64_t qw = static_cast<std::int64_t>(heads) * head_dim, kvw = kv_heads * head_dim;
        const Floats q = random_floats(rows * qw, 62), k = random_floats(rows * kvw, 63),
                     v = random_floats(rows * kvw, 64);
        float* out = memory.upload(Floats(rows * qw));
        float *k_cache = memory.upload(Floats(rows * kvw)), *v_cache = memory.upload(Floats(rows * kvw));
        const AttentionInputs in{memory.upload(q), memory.upload(k), memory.upload(v), qw, kvw};
        ops.attention_decode(DecodeShape{rows, 0, rows, heads, kv_heads, head_dim, window}, out, in, k_cache, v_cache);
        std::vector<double> out_r(rows * qw);
        const int group = heads / kv_heads;
        for (std::int64_t r = 0; r < rows; ++r)
          for (int h = 0; h < heads; ++h) {
            const std::int64_t first = std::max<std::int64_t>(0, r - window + 1);
            std::vector<double> scores;
            double largest = -std::numeric_limits<double>::infinity(), sum = 0.0;
            for (std::int64_t p = first; p <= r; ++p) {
              double dot = 0.0;
              for (int i = 0; i < head_dim; ++i)
                dot += static_cast<double>(q[r * qw + h * head_dim + i]) * k[p * kvw + (h / group) * head_dim + i];
              scores.push_back(dot / std::sqrt(static_cast<double>(head_dim)));
              largest = std::max(largest, scores.back());
            }
            for (double& score : scores) sum += score = std::exp(score - largest);
            for (std::int64_t p = first; p <= r; ++p)
              for (int i = 0; i < head_dim; ++i)
                out_r[r * qw + h * head_dim + i] +=
                    scores[static_cast<std::size_t>(p - first)] / sum * v[p * kvw + (h / group) * head_dim + i];
          }
        return error_of(memory.download(out, rows * qw), out_r);
      }};
}

}  // namespace

std::vector<Case> model_variant_cases() {
  return {geglu_case(1000),
          rmsnorm_offset_case(5, 7),
          rmsnorm_offset_case(64, 192),
          embedding_positions_case(2, 6, 8, 11, DType::f32),
          embedding_positions_case(2, 6, 8, 11, DType::bf16),
          rope_positions_case(10, 2, 8, 16),
          masked_cross_entropy_case(9, 50, 64),
          decode_window_case(7, 4, 2, 16, 3)};
}

}  // namespace strata::test::conformance
