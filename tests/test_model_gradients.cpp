// Each family's analytic gradients against central finite differences of its loss, on 2-layer
// models: every parameter tensor is probed. Variants cover what the engine does differently on a
// real run: the fast attention kernel, grouped-query attention, several micro batches, an LM head
// over several vocabulary chunks, a tied LLaMA head, and bf16 weight storage.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/device/backend.hpp"
#include "core/executor/executor.hpp"
#include "core/model/gemma/gemma_model.hpp"
#include "core/model/gpt2/gpt2_model.hpp"
#include "core/model/llama/llama_model.hpp"
#include "core/model/qwen2/qwen2_model.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

struct GradientCase {
  int micro_batches = 1;
  bool bf16 = false;        // bf16 weight storage (f32 masters, bf16 weights the model reads)
  double tolerance = 2e-2;  // relative error bound per probe
};

std::size_t stored_count(const Model& model, const ParameterRows& rows) {
  std::size_t count = 1;
  for (std::int64_t extent : model.stored_shape(rows)) count *= static_cast<std::size_t>(extent);
  return count;
}

// Probes 4 entries of every parameter; returns the worst relative error.
double check_gradients(Model& model, int vocab, const GradientCase& options) {
  // Larger weights than the families' init make every gradient visible above float noise.
  for (const ParameterRows& rows : model.parameters()) {
    const bool gain = model.table().row(rows.param).shape.size() == 1;
    for (float& value : test::values(model, rows)) value *= gain ? 1.0f : 8.0f;
  }
  model.store().publish_weights();
  test::PlainSgd optimizer;
  test::PlainFp32 precision;
  Executor executor(model, optimizer, precision, {}, {});

  const std::size_t per_micro = static_cast<std::size_t>(model.batch()) * model.seq_len();
  const test::PatternedBatch fixed = test::patterned_batch(per_micro * options.micro_batches, vocab);
  std::vector<MicroBatch> micro;
  for (int m = 0; m < options.micro_batches; ++m)
    micro.push_back({std::span(fixed.inputs).subspan(m * per_micro, per_micro),
                     std::span(fixed.targets).subspan(m * per_micro, per_micro)});
  model.store().zero_grads();
  executor.forward_backward(1, micro, Phase::full);
  auto loss = [&] {
    double sum = 0.0;
    for (const MicroBatch& batch : micro) sum += executor.forward_loss_sum(batch, model.batch());
    return sum / static_cast<double>(fixed.inputs.size());
  };

  double worst = 0.0;
  for (const ParameterRows& rows : model.parameters()) {
    std::span<float> value = test::values(model, rows);
    std::span<const float> grad = test::f32(model, rows.grad);
    const std::size_t real = stored_count(model, rows);
    for (std::size_t i = real; i < value.size(); ++i) EXPECT_EQ(grad[i], 0.0f) << "padded vocab row has a gradient";
    const bool stored_bf16 = model.table().row(rows.param).element == ElementType::bf16;
    for (std::size_t k = 0; k < 4; ++k) {
      const std::size_t i = (k * 2654435761u) % real;
      const float saved = value[i];
      const float h = 1e-2f * std::max(1.0f, std::abs(saved));  // above bf16 spacing near 1
      // The step the model sees: with bf16 weights, the difference of the rounded values.
      auto seen = [&](float x) { return stored_bf16 ? bf16_to_f32(f32_to_bf16(x)) : x; };
      value[i] = saved + h;
      model.store().publish_weights();
      const double plus = loss();
      value[i] = saved - h;
      model.store().publish_weights();
      const double minus = loss();
      value[i] = saved;
      model.store().publish_weights();
      const double step = static_cast<double>(seen(saved + h)) - static_cast<double>(seen(saved - h));
      const double numeric = (plus - minus) / step;
      // Relative, above the noise floor: the loss is a mean of f32 terms near 10, so its rounding
      // moves the difference quotient by about 1e-5; a gradient that small (a bias's, -9e-4) is
      // judged against 2e-3, not its own size (at 1e-3 the sanitized -O1 build, rounding
      // differently, read 2.09% on h.1.attn.c_proj.bias of the two-chunk GPT-2 case).
      const double error = std::abs(numeric - grad[i]) / std::max(2e-3, std::abs(numeric) + std::abs(grad[i]));
      worst = std::max(worst, error);
      EXPECT_LT(error, options.tolerance)
          << rows.name << "[" << i << "] analytic " << grad[i] << " numeric " << numeric;
    }
  }
  return worst;
}

StorageTypes storage_of(const GradientCase& options) {
  // bf16 activations round what backward reads: the loss is then a step function of each input at
  // finite-difference scale, so they are checked against f32 with bounds instead (test_bf16.cpp).
  return options.bf16 ? StorageTypes{DType::bf16, DType::f32} : StorageTypes{};
}

void gpt2_case(const char* label, const GPT2Config& config, cpu::AttentionImpl impl, const GradientCase& options) {
  auto device = make_cpu_backend(0);
  auto attention = cpu::make_attention_kernel(impl);
  GPT2Model model(config, *device, *attention, model_options(2, {}, storage_of(options)));
  model.init_weights(3);
  std::printf("%s: max relative error %.3g over %zu tensors\n", label, check_gradients(model, config.vocab, options),
              model.parameters().size());
}

void llama_case(const char* label, const LlamaConfig& config, cpu::AttentionImpl impl, const GradientCase& options) {
  auto device = make_cpu_backend(0);
  auto attention = cpu::make_attention_kernel(impl);
  LlamaModel model(config, *device, *attention,
                   ModelOptions{2, {}, Allocation::now, storage_of(options), Purpose::training, {}});
  model.init_weights(3);
  std::printf("%s: max relative error %.3g over %zu tensors\n", label, check_gradients(model, config.vocab, options),
              model.parameters().size());
}

LlamaConfig tiny_llama(bool tied) {
  LlamaConfig config;
  config.n_layer = 2;
  config.n_head = 4;
  config.n_kv_head = 2;  // grouped-query attention
  config.d_model = 16;
  config.d_ff = 24;
  config.vocab = 40;  // pads to 64: padded rows must stay gradient-free
  config.seq_len = 8;
  config.rope_theta = 100.0;  // positions 0..7 turn visibly
  config.norm_eps = 1e-5;
  config.tie_embeddings = tied;
  return config;
}

TEST(ModelGradients, Gpt2ReferenceAttention) {
  gpt2_case("gpt2, reference attention", GPT2Config{2, 2, 16, 40, 8}, cpu::AttentionImpl::reference, {});
}

TEST(ModelGradients, Gpt2FastAttentionSeveralMicroBatchesAndChunkedHead) {
  // d_model 64: head chunks of 16384 columns, so vocab 20000 (padded 20032) takes two chunks.
  gpt2_case("gpt2, fast attention, 2 micro batches, 2 head chunks", GPT2Config{2, 2, 64, 20000, 8},
            cpu::AttentionImpl::fast, {2, false, 2e-2});
}

TEST(ModelGradients, Gpt2Bf16WeightStorage) {
  gpt2_case("gpt2, bf16 weights", GPT2Config{2, 2, 16, 40, 8}, cpu::AttentionImpl::fast, {1, true, 2e-2});
}

TEST(ModelGradients, LlamaUntiedGroupedQueryReferenceAttention) {
  llama_case("llama, untied, GQA, reference attention", tiny_llama(false), cpu::AttentionImpl::reference, {});
}

TEST(ModelGradients, LlamaTiedFastAttentionSeveralMicroBatches) {
  llama_case("llama, tied, GQA, fast attention, 2 micro batches", tiny_llama(true), cpu::AttentionImpl::fast,
             {2, false, 2e-2});
}

// Qwen2: LLaMA with q/k/v biases, whose gradients are checked with the rest.
TEST(ModelGradients, Qwen2BiasesUntiedGroupedQuery) {
  LlamaConfig config = tiny_llama(false);
  apply_qwen2(config);
  auto device = make_cpu_backend(0);
  auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::reference);
  Qwen2Model model(config, *device, *attention, model_options(2));
  model.init_weights(3);
  EXPECT_TRUE(model.table().find("model.layers.1.self_attn.k_proj.bias").has_value());
  std::printf("qwen2: max relative error %.3g over %zu tensors\n", check_gradients(model, config.vocab, {}),
              model.parameters().size());
}

TEST(ModelGradients, LlamaBf16WeightStorage) {
  llama_case("llama, bf16 weights", tiny_llama(false), cpu::AttentionImpl::fast, {1, true, 2e-2});
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Gemma: RMSNorm gains 1 + w, the embedding scaled by sqrt(d_model) (into the tied head's gradient
// too), GeGLU, and heads 6 wide over a d_model of 16 (q_proj 24 x 16), through both attention kernels.
TEST(ModelGradients, GemmaOwnHeadWidthGegluOffsetNormsScaledEmbedding) {
  LlamaConfig config = tiny_llama(true);
  config.own_head_dim = 6;
  for (const auto impl : {cpu::AttentionImpl::reference, cpu::AttentionImpl::fast}) {
    auto device = make_cpu_backend(0);
    auto attention = cpu::make_attention_kernel(impl);
    GemmaModel model(config, *device, *attention, model_options(2));
    model.init_weights(3);
    EXPECT_EQ(model.table().row(model.table().find("model.layers.0.self_attn.q_proj.weight").value()).shape,
              (std::vector<std::int64_t>{24, 16}));
    std::printf("gemma: max relative error %.3g over %zu tensors\n", check_gradients(model, config.vocab, {}),
                model.parameters().size());
  }
}

// Llama 3's rope_scaling: the backward turns gradients back by the same scaled frequencies.
TEST(ModelGradients, LlamaWithLlama3RopeScaling) {
  LlamaConfig config = tiny_llama(false);
  config.rope_scaling = RopeScaling{4.0, 1.0, 4.0, 8};  // head_dim 4: one frequency blended, one divided
  ASSERT_EQ(rope_inverse_frequencies(config).size(), 2u);
  llama_case("llama, llama3 rope_scaling", config, cpu::AttentionImpl::reference, {});
}

}  // namespace
}  // namespace strata
