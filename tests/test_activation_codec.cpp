// The activation codec seam (strata/activation_codec.hpp), driven through the real executor: a
// lossless codec (a copy) must leave every gradient bitwise as without it, alone and composed with
// dropping whole blocks, partial drops and offloading; its codes are rows strategies see and move;
// a lossy codec (f32 values halved to bf16 codes) lowers the measured activation peak and keeps the
// gradients near; a codec's error names the strategy, the call, the layer and the step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// Codes every f32 saved activation as a copy of its bytes (or, lossy, as its bf16 rounding).
class CopyCodec final : public ActivationCodec {
 public:
  explicit CopyCodec(bool halve = false) : halve_(halve) {}
  std::uint64_t code_bytes(const TensorInfo& activation) const noexcept override {
    if (activation.dtype != DType::f32) return 0;
    std::int64_t count = 1;
    for (std::int64_t extent : activation.shape) count *= extent;
    offered.emplace_back(activation.name);
    return storage_bytes(halve_ ? DType::bf16 : DType::f32, count);
  }
  Status encode(Ops& ops, const CodecCall& call, const TensorView& values, const TensorView& code) noexcept override {
    ++encodes;
    last_step = call.step;
    if (fail_at_layer == call.layer) return Status::error("cannot encode " + std::string(values.name));
    if (halve_)
      ops.narrow(static_cast<std::uint16_t*>(code.data), values.f32(), values.count);
    else
      ops.copy(code.data, values.data, values.bytes());
    return {};
  }
  Status decode(Ops& ops, const CodecCall&, const TensorView& code, const TensorView& values) noexcept override {
    ++decodes;
    if (halve_)
      ops.widen(values.f32(), static_cast<const std::uint16_t*>(code.data), values.count);
    else
      ops.copy(values.data, code.data, values.bytes());
    return {};
  }
  mutable std::vector<std::string> offered;
  int encodes = 0, decodes = 0, fail_at_layer = -1;
  std::int64_t last_step = 0;

 private:
  bool halve_;
};

// Drops whole blocks (every other), or the kinds recomputed alone, or moves every block's
// activations to the host; records the codes it saw.
class Composer final : public MemoryStrategy {
 public:
  enum class Action { none, drop_blocks, drop_partial, evict };
  explicit Composer(Action action) : action_(action) {}
  Status after_forward(HookContext& context) override {
    const int layer = context.layer();
    for (const TensorInfo& tensor : context.tensors(layer))
      if (std::string_view(tensor.name).ends_with(".code") && tensor.residence == Residence::device) ++codes_seen;
    // A coded kind reads as held: its code stands in for its values.
    if (context.residence(layer, TensorGroup::activations) != Residence::device)
      return Status::error("layer " + std::to_string(layer) + "'s activations do not read as held on the device");
    switch (action_) {
      case Action::none: return {};
      case Action::drop_blocks: return layer % 2 == 0 ? context.drop_activations(layer) : Status{};
      case Action::drop_partial: {
        std::vector<std::string> names;
        for (const TensorInfo& tensor : context.tensors(layer))
          if (!tensor.recomputed_by.empty()) names.emplace_back(tensor.name);
        const std::vector<std::string_view> views(names.begin(), names.end());
        return context.drop_activation_tensors(layer, views);
      }
      case Action::evict: return context.evict(layer, TensorGroup::activations);
    }
    return {};
  }
  Status before_backward(HookContext& context) override {
    if (action_ == Action::evict && context.layer() < context.n_layer() - 1 &&
        context.residence(context.layer(), TensorGroup::activations) != Residence::host)
      return Status::error("the codes of layer " + std::to_string(context.layer()) + " did not move to the host");
    return {};
  }
  bool evaluates() const noexcept { return action_ == Action::none; }
  int codes_seen = 0;

 private:
  Action action_;
};

struct Pass {
  std::vector<float> gradients;
  double loss = 0.0;
  std::uint64_t activation_peak = 0;
};

Pass run(const std::string& family, ActivationCodec* codec, Composer* composer) {
  std::unique_ptr<Backend> device = make_cpu_backend(0);
  std::unique_ptr<Kernel> attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  StorageTypes storage;
  if (codec != nullptr) storage.codecs.push_back({codec, 0, "[[strategy]] #1 'codec'"});
  std::unique_ptr<Model> model;
  if (family == "gpt2")
    model =
        std::make_unique<GPT2Model>(GPT2Config{3, 2, 32, 256, 16}, *device, *attention, model_options(2, {}, storage));
  else
    model = std::make_unique<LlamaModel>(LlamaConfig{3, 4, 2, 32, 48, 256, 16}, *device, *attention,
                                         model_options(2, {}, storage));
  model->init_weights(11);
  test::PlainSgd optimizer;
  test::PlainFp32 precision;
  std::vector<MemoryStrategy*> strategies;
  if (composer != nullptr) strategies.push_back(composer);
  ExecutorOptions options;
  options.strategy_labels = {"[[strategy]] #1 'codec'"};
  Executor executor(*model, optimizer, precision, strategies, options);
  executor.attach();
  model->store().zero_grads();
  std::vector<std::int32_t> tokens(2 * 16), targets(2 * 16);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>((i * 31) % 256);
    targets[i] = static_cast<std::int32_t>((i * 17 + 1) % 256);
  }
  const MicroBatch micro{tokens, targets};
  Pass pass;
  pass.loss = executor.forward_backward(1, {&micro, 1}, Phase::full);
  for (const ParameterRows& rows : model->parameters()) {
    const std::span<float> grad = test::f32(*model, rows.grad);
    pass.gradients.insert(pass.gradients.end(), grad.begin(), grad.end());
  }
  pass.activation_peak = device->device_memory().stats().peak[category_index(MemoryCategory::activations)];
  // An evaluation pass codes nothing (nothing goes backward), and its hooks still read the
  // activations as held.
  if (composer == nullptr || composer->evaluates()) (void)executor.forward_loss_sum(micro, 2);
  EXPECT_EQ(device->device_memory().live()[category_index(MemoryCategory::activations)], 0u) << "codes left behind";
  return pass;
}

TEST(ActivationCodec, ALosslessCodecIsBitwiseAloneAndUnderEveryStrategy) {
  using A = Composer::Action;
  for (const std::string family : {"gpt2", "llama"})
    for (const A action : {A::none, A::drop_blocks, A::drop_partial, A::evict}) {
      Composer plain_composer(action), coded_composer(action);
      const Pass plain = run(family, nullptr, &plain_composer);
      CopyCodec codec;
      const Pass coded = run(family, &codec, &coded_composer);
      EXPECT_EQ(plain.gradients, coded.gradients) << family << " action " << static_cast<int>(action);
      EXPECT_EQ(plain.loss, coded.loss);
      EXPECT_GT(codec.encodes, 0);
      EXPECT_GT(coded_composer.codes_seen, 0) << "the after_forward hooks see the codes";
      // A block dropped whole is recomputed, so its codes are never decoded.
      if (action == A::drop_blocks) {
        EXPECT_LT(codec.decodes, codec.encodes);
      } else if (action == A::none) {
        EXPECT_EQ(codec.decodes, codec.encodes);
      }
    }
}

// The block's output is never offered (the next block reads it); f32 rows are, bf16 ones declined.
TEST(ActivationCodec, EveryKeptTensorButTheOutputIsOffered) {
  CopyCodec codec;
  (void)run("gpt2", &codec, nullptr);
  EXPECT_NE(std::find(codec.offered.begin(), codec.offered.end(), "h.1.act.fch"), codec.offered.end());
  EXPECT_NE(std::find(codec.offered.begin(), codec.offered.end(), "h.1.act.attention_saved"), codec.offered.end());
  EXPECT_EQ(std::find(codec.offered.begin(), codec.offered.end(), "h.1.act.output"), codec.offered.end());
}

// bf16 codes of f32 values: the measured activation peak falls, the gradients stay near f32's.
TEST(ActivationCodec, AHalvingCodecLowersTheActivationPeakAndKeepsTheGradientsNear) {
  const Pass plain = run("gpt2", nullptr, nullptr);
  CopyCodec halving(true);
  const Pass coded = run("gpt2", &halving, nullptr);
  EXPECT_LT(static_cast<double>(coded.activation_peak), 0.8 * static_cast<double>(plain.activation_peak))
      << plain.activation_peak << " -> " << coded.activation_peak;
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < plain.gradients.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(plain.gradients[i] - coded.gradients[i])));
    scale = std::max(scale, static_cast<double>(std::abs(plain.gradients[i])));
  }
  EXPECT_GT(worst, 0.0) << "bf16 codes change the numbers";
  EXPECT_LT(worst, 0.02 * scale);
}

TEST(ActivationCodec, AFailingCodecNamesTheStrategyTheCallTheLayerAndTheStep) {
  CopyCodec codec;
  codec.fail_at_layer = 1;
  try {
    (void)run("gpt2", &codec, nullptr);
    FAIL() << "the codec's error was not reported";
  } catch (const std::exception& e) {
    EXPECT_NE(
        std::string(e.what()).find("[[strategy]] #1 'codec' failed in encode (layer 1, step 1): cannot encode h.1.act"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace strata
