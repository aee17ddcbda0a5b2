// Parameters described to optimizers (SDK 10, strata/optimizer.hpp ParamInfo): state_layout and
// every update see each parameter's name, block, kind, stored shape and layout, for both families
// and for an adapter's factors, so a technique such as GaLore never infers a shape from a count;
// and ModelInfo carries d_ff, the head size and the padded vocabulary.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "core/executor/executor.hpp"
#include "core/model/gpt2/gpt2_model.hpp"
#include "core/model/llama/llama_model.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

struct Described {
  int layer = -2;
  ParamKind kind = ParamKind::other;
  std::vector<std::int64_t> shape;
  WeightLayout layout = WeightLayout::in_out;
  std::int64_t count = 0;
  bool decay = false;
  bool operator==(const Described&) const = default;
};

Described described(const ParamInfo& info) {
  return {info.layer, info.kind, {info.shape.begin(), info.shape.end()}, info.layout, info.count, info.decay};
}

// Records what state_layout and step were told, and keeps AdamW's two moments.
class RecordingOptimizer final : public Optimizer {
 public:
  StateLayout state_layout(const ParamInfo& param) const noexcept override {
    laid_out[std::string(param.name)] = described(param);
    return f32_state(2, param.count);
  }
  Status step(const OptimizerStepInfo&, std::span<ParamSlot> slots, OptimizerReport&) override {
    for (const ParamSlot& slot : slots) {
      stepped[std::string(slot.name)] = described(slot);
      if (slot.param.count != slot.count || slot.grad.count != slot.count || slot.state[0].count != slot.count)
        mismatched.emplace_back(slot.name);
    }
    return {};
  }
  mutable std::map<std::string, Described> laid_out;
  std::map<std::string, Described> stepped;
  std::vector<std::string> mismatched;
};

struct StepRun {
  std::unique_ptr<Backend> device = make_cpu_backend(0);
  std::unique_ptr<Kernel> attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  RecordingOptimizer optimizer;
  test::PlainFp32 precision;
  std::unique_ptr<Model> model;

  void step() {
    model->init_weights(3);
    Executor executor(*model, optimizer, precision, {}, {});
    executor.attach();
    std::vector<std::int32_t> tokens(2 * 16, 5), targets(2 * 16, 7);
    const MicroBatch micro{tokens, targets};
    (void)executor.train_step(1, {&micro, 1});
  }
};

TEST(ParamInfo, GptTwoParametersAreDescribedByKindShapeAndLayout) {
  StepRun run;
  const GPT2Config config{2, 2, 32, 250, 16};  // vocab 250 pads to 256 rows
  run.model = std::make_unique<GPT2Model>(config, *run.device, *run.attention,
                                          model_options(2, state_layout_of(run.optimizer)));
  run.step();
  const auto& laid_out = run.optimizer.laid_out;
  using K = ParamKind;
  EXPECT_EQ(laid_out.at("wte.weight"), (Described{-1, K::embedding, {256, 32}, WeightLayout::out_in, 8192, true}));
  EXPECT_EQ(laid_out.at("wpe.weight"), (Described{-1, K::embedding, {16, 32}, WeightLayout::out_in, 512, true}));
  EXPECT_EQ(laid_out.at("ln_f.bias"), (Described{-1, K::norm, {32}, WeightLayout::out_in, 32, false}));
  EXPECT_EQ(laid_out.at("h.1.attn.c_attn.weight"),
            (Described{1, K::matrix, {32, 96}, WeightLayout::in_out, 3072, true}));
  EXPECT_EQ(laid_out.at("h.1.attn.c_attn.bias"), (Described{1, K::bias, {96}, WeightLayout::in_out, 96, false}));
  EXPECT_EQ(laid_out.at("h.0.ln_2.weight"), (Described{0, K::norm, {32}, WeightLayout::in_out, 32, false}));
  EXPECT_EQ(laid_out.size(), run.model->parameters().size());
  // The update sees the same description, and the views it gets have the described length.
  EXPECT_EQ(run.optimizer.stepped, laid_out);
  EXPECT_TRUE(run.optimizer.mismatched.empty());
  const ModelInfo info = run.model->info();
  EXPECT_EQ(info.d_ff, 128);
  EXPECT_EQ(info.head_dim, 16);
  EXPECT_EQ(info.padded_vocab, 256);
  EXPECT_TRUE(info.tied_embeddings);
}

// LLaMA's k_proj of a grouped-query model: (n_kv_head * head_dim, d_model), out_in; the untied head
// is a matrix, the token table an embedding.
TEST(ParamInfo, LlamaParametersAreDescribedByKindShapeAndLayout) {
  StepRun run;
  const LlamaConfig config{2, 4, 2, 32, 48, 256, 16};
  run.model = std::make_unique<LlamaModel>(config, *run.device, *run.attention,
                                           model_options(2, state_layout_of(run.optimizer)));
  run.step();
  const auto& laid_out = run.optimizer.laid_out;
  using K = ParamKind;
  EXPECT_EQ(laid_out.at("model.layers.1.self_attn.k_proj.weight"),
            (Described{1, K::matrix, {16, 32}, WeightLayout::out_in, 512, true}));
  EXPECT_EQ(laid_out.at("model.layers.0.mlp.down_proj.weight"),
            (Described{0, K::matrix, {32, 48}, WeightLayout::out_in, 1536, true}));
  EXPECT_EQ(laid_out.at("lm_head.weight"), (Described{-1, K::matrix, {256, 32}, WeightLayout::out_in, 8192, true}));
  EXPECT_EQ(laid_out.at("model.embed_tokens.weight"),
            (Described{-1, K::embedding, {256, 32}, WeightLayout::out_in, 8192, true}));
  EXPECT_EQ(laid_out.at("model.norm.weight"), (Described{-1, K::norm, {32}, WeightLayout::out_in, 32, false}));
  EXPECT_EQ(run.optimizer.stepped, laid_out);
  const ModelInfo info = run.model->info();
  EXPECT_EQ(info.d_ff, 48);
  EXPECT_EQ(info.head_dim, 8);
  EXPECT_EQ(info.n_kv_head, 2);
  EXPECT_FALSE(info.tied_embeddings);
}

}  // namespace
}  // namespace strata
