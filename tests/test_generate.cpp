// Decoding with a KV cache (Model::decode, core/generate/): the decoding ops against the training
// ops, the logits of one-token steps against the training forward pass over the whole sequence,
// for each family, and the sampler's rules.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend_buffers.hpp"
#include "core/device/backends.hpp"
#include "core/generate/generator.hpp"
#include "core/generate/sampler.hpp"
#include "core/model/gpt2/gpt2_config.hpp"
#include "core/model/llama/llama_config.hpp"
#include "core/model/make_model.hpp"
#include "kernels/cpu/attention_kernels.hpp"

namespace strata {
namespace {

std::vector<float> random_values(std::size_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(generator);
  return values;
}

// rope_at at an offset is rope() at those positions, to the bit.
TEST(Decoding, RopeAtIsRopeAtTheSamePositions) {
  auto device = make_cpu_backend(0);
  Ops& ops = device->ops();
  const int T = 9, heads = 3, head_dim = 8;
  const std::int64_t stride = heads * head_dim + 5;  // rows with room between them, as packed qkv has
  const std::vector<float> start = random_values(static_cast<std::size_t>(T * stride), 1);
  std::vector<float> whole = start;
  ops.rope(whole.data(), T, stride, T, heads, head_dim, 10000.0f, false);
  std::vector<float> prefix = start, step = start;
  ops.rope_at(prefix.data(), 4, stride, 0, heads, head_dim, 10000.0f);
  for (int position = 4; position < T; ++position)
    ops.rope_at(step.data() + position * stride, 1, stride, position, heads, head_dim, 10000.0f);
  for (int position = 0; position < T; ++position)
    for (int i = 0; i < heads * head_dim; ++i) {
      const auto at = static_cast<std::size_t>(position * stride + i);
      EXPECT_EQ((position < 4 ? prefix : step)[at], whole[at]) << "position " << position << " element " << i;
    }
}

// Initialisation's small weights make attention nearly uniform, where a wrong position or a missed
// key hardly moves the loss: matrices 4 times larger make every position count.
void sharpen(Model& model) {
  for (const ParameterRows& rows : model.parameters()) {
    if (model.table().row(rows.param).shape.size() != 2) continue;
    std::vector<float> values = model.effective_values(rows);
    for (float& v : values) v *= 4.0f;
    model.write_values(rows, values);
  }
  model.store().publish_weights();
}

// rope_frequencies given theta^(-2i/head_dim) is rope() and rope_at, to the bit, forward and back.
TEST(Decoding, RopeFrequenciesWithThetasFrequenciesIsRope) {
  auto device = make_cpu_backend(0);
  Ops& ops = device->ops();
  const int T = 6, heads = 2, head_dim = 8, batch = 2;
  const std::int64_t stride = heads * head_dim;
  std::vector<float> frequencies(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i)
    frequencies[static_cast<std::size_t>(i)] =
        1.0f / std::pow(500.0f, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  const std::vector<float> start = random_values(static_cast<std::size_t>(batch * T * stride), 2);
  for (const bool inverse : {false, true}) {
    std::vector<float> expected = start, got = start;
    ops.rope(expected.data(), batch * T, stride, T, heads, head_dim, 500.0f, inverse);
    ops.rope_frequencies(got.data(), batch * T, stride, T, 0, heads, head_dim, frequencies.data(), inverse);
    EXPECT_EQ(got, expected) << "inverse " << inverse;
  }
  std::vector<float> expected = start, got = start;
  ops.rope_at(expected.data(), 3, stride, 5, heads, head_dim, 500.0f);
  ops.rope_frequencies(got.data(), 3, stride, 3, 5, heads, head_dim, frequencies.data(), false);
  EXPECT_EQ(got, expected);
}

// The training forward pass's mean loss over a sequence, and the same from the logits that decode()
// gives position by position (a prefill of `prefill` tokens, then one token per step).
void expect_decoding_matches_the_forward_pass(const ModelSpec& spec, int prefill) {
  const int T = spec.seq_len();
  auto device = make_cpu_backend(0);
  auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  const std::unique_ptr<Model> model =
      make_model(spec, *device, *attention, ModelOptions{1, {}, Allocation::now, {}, Purpose::evaluation, {}});
  model->init_weights(11);
  sharpen(*model);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(T) + 1);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 37 + 5) % spec.vocab());
  const std::span<const std::int32_t> inputs(tokens.data(), static_cast<std::size_t>(T));
  const std::span<const std::int32_t> targets(tokens.data() + 1, static_cast<std::size_t>(T));
  model->begin_micro_batch(inputs, targets);
  model->embed_forward();
  for (int l = 0; l < model->n_layer(); ++l) {
    model->allocate_layer_activations(l);
    model->layer_forward(l);
  }
  const double forward_loss = model->head_forward();
  model->end_micro_batch();

  const ModelInfo info = model->info();
  KvCache cache(*device, model->n_layer(), T, static_cast<std::int64_t>(info.n_kv_head) * info.head_dim);
  double loss_sum = 0.0;
  const auto add_loss = [&](const std::vector<float>& logits, int position) {
    ASSERT_EQ(logits.size(), static_cast<std::size_t>(spec.vocab()));
    double largest = -INFINITY, total = 0.0;
    for (float logit : logits) largest = std::max<double>(largest, logit);
    for (float logit : logits) total += std::exp(logit - largest);
    loss_sum +=
        std::log(total) + largest - logits[static_cast<std::size_t>(targets[static_cast<std::size_t>(position)])];
  };
  // The prefill's logits are its last position's; the positions before it come from prefills of
  // their own prefixes (each a fresh start of the cache).
  for (int p = 0; p < prefill; ++p)
    add_loss(model->decode(inputs.subspan(0, static_cast<std::size_t>(p) + 1), 0, cache), p);
  for (int p = prefill; p < T; ++p)
    add_loss(model->decode(inputs.subspan(static_cast<std::size_t>(p), 1), p, cache), p);
  const double decode_loss = loss_sum / T;
  EXPECT_NEAR(decode_loss, forward_loss, 1e-5 * std::abs(forward_loss)) << spec.arch;
}

ModelSpec llama_spec(const std::string& arch) {
  ModelSpec spec;
  spec.arch = arch;
  spec.shape = LlamaConfig{2, 4, 2, 32, 48, 300, 12};
  spec.shape.attention_bias = arch == "qwen2";
  return spec;
}

TEST(Decoding, StepLogitsMatchTheForwardPassGpt2) {
  ModelSpec spec;
  spec.shape = gpt2_shape(GPT2Config{2, 2, 32, 300, 12});
  expect_decoding_matches_the_forward_pass(spec, 5);
}
TEST(Decoding, StepLogitsMatchTheForwardPassLlama) {
  expect_decoding_matches_the_forward_pass(llama_spec("llama"), 5);
}
TEST(Decoding, StepLogitsMatchTheForwardPassQwen2) {
  expect_decoding_matches_the_forward_pass(llama_spec("qwen2"), 3);
}
TEST(Decoding, StepLogitsMatchTheForwardPassLlama3RopeScaling) {
  ModelSpec spec = llama_spec("llama");
  spec.shape.rope_scaling = RopeScaling{8.0, 1.0, 4.0, 4};
  expect_decoding_matches_the_forward_pass(spec, 4);
}

// Each decode step's logits against a fresh prefill of the same prefix (full recomputation):
// within 1e-5 relative, position by position.
TEST(Decoding, StepLogitsMatchAFullRecomputeWithin1e5) {
  const ModelSpec spec = llama_spec("llama");
  auto device = make_cpu_backend(0);
  auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  const auto model =
      make_model(spec, *device, *attention, ModelOptions{1, {}, Allocation::now, {}, Purpose::evaluation, {}});
  model->init_weights(3);
  sharpen(*model);
  std::vector<std::int32_t> tokens(12);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 91 + 17) % 300);
  KvCache stepping(*device, model->n_layer(), 12, 2 * 8), fresh(*device, model->n_layer(), 12, 2 * 8);
  std::vector<float> stepped = model->decode(std::span(tokens).subspan(0, 1), 0, stepping);
  for (std::size_t p = 1; p < tokens.size(); ++p) {
    stepped = model->decode(std::span(tokens).subspan(p, 1), static_cast<std::int64_t>(p), stepping);
    const std::vector<float> recomputed = model->decode(std::span(tokens).subspan(0, p + 1), 0, fresh);
    float scale = 0.0f;
    for (float v : recomputed) scale = std::max(scale, std::abs(v));
    for (std::size_t v = 0; v < recomputed.size(); ++v)
      ASSERT_NEAR(stepped[v], recomputed[v], 1e-5f * scale) << "position " << p << " logit " << v;
  }
}

// The decoding ops on the GPU against the CPU's: a prefill then one-token steps of attention_decode
// (grouped-query), rope_at and rope_frequencies, within 1e-5 of the largest value.
TEST(Decoding, CudaDecodingOpsMatchTheCpu) {
  STRATA_SKIP_WITHOUT_CUDA();
  const std::unique_ptr<Backend> cpu = make_backend("cpu", 0), gpu = make_backend("cuda:0", 0);
  test::BackendBuffers on_cpu(*cpu), on_gpu(*gpu);
  const int heads = 4, kv_heads = 2, head_dim = 16, capacity = 24, prefill = 7;
  const std::int64_t q_width = heads * head_dim, kv_width = kv_heads * head_dim;
  const auto close = [](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
    float scale = 0.0f, worst = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, std::abs(a[i]));
      worst = std::max(worst, std::abs(a[i] - b[i]));
    }
    EXPECT_LE(worst, 1e-5f * scale) << what;
  };
  std::vector<float> frequencies(head_dim / 2);
  for (std::size_t i = 0; i < frequencies.size(); ++i) frequencies[i] = 0.5f / static_cast<float>(i + 1);
  float* k_cpu = on_cpu.upload(std::vector<float>(capacity * kv_width));
  float* v_cpu = on_cpu.upload(std::vector<float>(capacity * kv_width));
  float* k_gpu = on_gpu.upload(std::vector<float>(capacity * kv_width));
  float* v_gpu = on_gpu.upload(std::vector<float>(capacity * kv_width));
  for (int first = 0; first < 12; first = first == 0 ? prefill : first + 1) {
    const int rows = first == 0 ? prefill : 1;
    const std::vector<float> q = random_values(static_cast<std::size_t>(rows * q_width), 100 + first);
    const std::vector<float> kv = random_values(static_cast<std::size_t>(rows * 2 * kv_width), 200 + first);
    float *q_cpu = on_cpu.upload(q), *q_gpu = on_gpu.upload(q);
    float *kv_on_cpu = on_cpu.upload(kv), *kv_on_gpu = on_gpu.upload(kv);  // keys then values per row
    cpu->ops().rope_at(q_cpu, rows, q_width, first, heads, head_dim, 10000.0f);
    gpu->ops().rope_at(q_gpu, rows, q_width, first, heads, head_dim, 10000.0f);
    cpu->ops().rope_frequencies(kv_on_cpu, rows, 2 * kv_width, rows, first, kv_heads, head_dim, frequencies.data(),
                                false);
    gpu->ops().rope_frequencies(kv_on_gpu, rows, 2 * kv_width, rows, first, kv_heads, head_dim, frequencies.data(),
                                false);
    const DecodeShape shape{rows, first, capacity, heads, kv_heads, head_dim};
    float* out_cpu = on_cpu.upload(std::vector<float>(static_cast<std::size_t>(rows * q_width)));
    float* out_gpu = on_gpu.upload(std::vector<float>(static_cast<std::size_t>(rows * q_width)));
    cpu->ops().attention_decode(
        shape, out_cpu, AttentionInputs{q_cpu, kv_on_cpu, kv_on_cpu + kv_width, q_width, 2 * kv_width}, k_cpu, v_cpu);
    gpu->ops().attention_decode(
        shape, out_gpu, AttentionInputs{q_gpu, kv_on_gpu, kv_on_gpu + kv_width, q_width, 2 * kv_width}, k_gpu, v_gpu);
    const auto n = static_cast<std::size_t>(rows * q_width);
    close(on_cpu.download(q_cpu, n), on_gpu.download(q_gpu, n), "rope_at");
    close(on_cpu.download(out_cpu, n), on_gpu.download(out_gpu, n), "attention_decode");
    const auto cached = static_cast<std::size_t>((first + rows) * kv_width);
    close(on_cpu.download(k_cpu, cached), on_gpu.download(k_gpu, cached), "the key cache (rope_frequencies)");
    close(on_cpu.download(v_cpu, cached), on_gpu.download(v_gpu, cached), "the value cache");
  }
}

TEST(Sampling, GreedyTakesTheLargestLowestIdFirst) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(sample_token(logits, SamplingOptions{0.0f, 0, 1.0f, 1}, 0), 1);
}

TEST(Sampling, ASeededDrawRepeatsAndFollowsTheDistribution) {
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.7f)};
  const SamplingOptions options{1.0f, 0, 1.0f, 7};
  std::array<int, 3> counts{};
  for (std::uint64_t step = 0; step < 20000; ++step) {
    const std::int32_t token = sample_token(logits, options, step);
    EXPECT_EQ(token, sample_token(logits, options, step));
    ++counts[static_cast<std::size_t>(token)];
  }
  EXPECT_NEAR(counts[0] / 20000.0, 0.1, 0.01);
  EXPECT_NEAR(counts[1] / 20000.0, 0.2, 0.01);
  EXPECT_NEAR(counts[2] / 20000.0, 0.7, 0.01);
}

TEST(Sampling, TopKAndTopPCutTheCandidates) {
  const std::vector<float> logits = {std::log(0.05f), std::log(0.15f), std::log(0.3f), std::log(0.5f)};
  for (std::uint64_t step = 0; step < 2000; ++step) {
    const std::int32_t top2 = sample_token(logits, SamplingOptions{1.0f, 2, 1.0f, 3}, step);
    EXPECT_TRUE(top2 == 2 || top2 == 3) << top2;
    // 0.5 + 0.3 reaches 0.75: the nucleus is {3, 2}.
    const std::int32_t nucleus = sample_token(logits, SamplingOptions{1.0f, 0, 0.75f, 3}, step);
    EXPECT_TRUE(nucleus == 2 || nucleus == 3) << nucleus;
    EXPECT_EQ(sample_token(logits, SamplingOptions{1.0f, 0, 0.4f, 3}, step), 3);
  }
}

}  // namespace
}  // namespace strata
