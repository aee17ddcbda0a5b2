// Hooks fire in the documented order with the documented tensors available, and a strategy that
// drops and recomputes activations through the context gets bitwise-identical gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <cstring>

#include "core/device/backend.hpp"
#include "core/executor/executor.hpp"
#include "core/model/gpt2/gpt2_config.hpp"
#include "core/model/gpt2/gpt2_model.hpp"
#include "core/model/llama/llama_config.hpp"
#include "core/model/make_model.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

class RecordingStrategy final : public MemoryStrategy {
 public:
  RecordingStrategy(std::string name, std::vector<std::string>& log) : name_(std::move(name)), log_(log) {}
  Status on_attach(HookContext&) noexcept override { return record("attach", -1); }
  Status before_forward(HookContext& c) noexcept override {
    // Weights of this layer are usable; its activations are not allocated yet.
    if (c.tensor("h." + std::to_string(c.layer()) + ".attn.c_attn.weight").empty())
      return Status::error("weights missing");
    return record("before_forward", c.layer());
  }
  Status after_forward(HookContext& c) noexcept override {
    if (c.tensor("h." + std::to_string(c.layer()) + ".act.qkv").empty()) return Status::error("qkv missing");
    if (c.residence(c.layer(), TensorGroup::activations) != Residence::device)
      return Status::error("activations absent");
    return record("after_forward", c.layer());
  }
  Status before_backward(HookContext& c) noexcept override {
    if (c.tensor("h." + std::to_string(c.layer()) + ".mlp.c_fc.weight.grad").empty())
      return Status::error("grads missing");
    return record("before_backward", c.layer());
  }
  Status after_backward(HookContext& c) noexcept override {
    if (!c.tensor("h." + std::to_string(c.layer()) + ".act.qkv").empty()) return Status::error("activations not freed");
    return record("after_backward", c.layer());
  }
  Status before_step(HookContext& c) noexcept override { return record("before_step", c.layer()); }
  Status after_step(HookContext& c) noexcept override { return record("after_step", c.layer()); }

 private:
  Status record(const char* hook, int layer) {
    log_.push_back(name_ + ":" + hook + ":" + std::to_string(layer));
    return {};
  }
  std::string name_;
  std::vector<std::string>& log_;
};

class DropAndRecompute final : public MemoryStrategy {
 public:
  Status after_forward(HookContext& c) noexcept override { return c.drop_activations(c.layer()); }
  Status before_backward(HookContext& c) noexcept override {
    if (c.residence(c.layer(), TensorGroup::activations) != Residence::absent)
      return Status::error("drop did not happen");
    return c.recompute_activations(c.layer());
  }
};

struct Fixture {
  GPT2Config config{3, 2, 32, 256, 16};
  std::unique_ptr<Backend> device = make_cpu_backend(0);
  std::unique_ptr<Kernel> attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  GPT2Model model{config, *device, *attention, model_options(2)};
  test::PlainSgd optimizer;
  test::PlainFp32 precision;
  std::vector<std::int32_t> tokens = std::vector<std::int32_t>(2 * 16);
  std::vector<std::int32_t> targets = std::vector<std::int32_t>(2 * 16);
  Fixture() {
    model.init_weights(11);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<std::int32_t>((i * 31) % 256);
      targets[i] = static_cast<std::int32_t>((i * 17 + 1) % 256);
    }
  }
  std::vector<float> gradients(std::vector<MemoryStrategy*> strategies, double* loss = nullptr) {
    Executor executor(model, optimizer, precision, std::move(strategies), {});
    model.store().zero_grads();
    const MicroBatch micro{tokens, targets};
    const double value = executor.forward_backward(1, {&micro, 1}, Phase::full);
    if (loss) *loss = value;
    std::vector<float> all;
    for (const ParameterRows& rows : model.parameters()) {
      auto grad = test::f32(model, rows.grad);
      all.insert(all.end(), grad.begin(), grad.end());
    }
    return all;
  }
};

TEST(ExecutorHooks, FireInDocumentedOrder) {
  Fixture f;
  std::vector<std::string> log;
  RecordingStrategy first("A", log), second("B", log);
  Executor executor(f.model, f.optimizer, f.precision, {&first, &second}, {});
  executor.attach();
  const MicroBatch micro{f.tokens, f.targets};
  executor.train_step(1, {&micro, 1});
  std::vector<std::string> expected = {"A:attach:-1", "B:attach:-1"};
  for (int l = 0; l < 3; ++l)
    for (const char* hook : {"before_forward", "after_forward"})
      for (const char* name : {"A", "B"}) expected.push_back(std::string(name) + ":" + hook + ":" + std::to_string(l));
  for (int l = 2; l >= 0; --l)
    for (const char* hook : {"before_backward", "after_backward"})
      for (const char* name : {"B", "A"}) expected.push_back(std::string(name) + ":" + hook + ":" + std::to_string(l));
  expected.insert(expected.end(), {"A:before_step:-1", "B:before_step:-1", "B:after_step:-1", "A:after_step:-1"});
  EXPECT_EQ(log, expected);
}

TEST(ExecutorHooks, DropAndRecomputeGivesIdenticalGradients) {
  Fixture f;
  double plain_loss = 0.0, recomputed_loss = 0.0;
  const std::vector<float> plain = f.gradients({}, &plain_loss);
  DropAndRecompute strategy;
  const std::vector<float> recomputed = f.gradients({&strategy}, &recomputed_loss);
  ASSERT_EQ(plain.size(), recomputed.size());
  EXPECT_EQ(plain_loss, recomputed_loss);
  EXPECT_EQ(std::memcmp(plain.data(), recomputed.data(), plain.size() * sizeof(float)), 0) << "gradients differ";
}

TEST(ExecutorHooks, DroppingLowersPeakActivationBytes) {
  Fixture plain_fixture;
  plain_fixture.gradients({});
  const auto plain_peak =
      plain_fixture.device->device_memory().stats().peak[category_index(MemoryCategory::activations)];
  Fixture drop_fixture;
  DropAndRecompute strategy;
  drop_fixture.gradients({&strategy});
  const auto drop_peak = drop_fixture.device->device_memory().stats().peak[category_index(MemoryCategory::activations)];
  std::printf("peak activation bytes: keep all %llu, drop+recompute %llu\n",
              static_cast<unsigned long long>(plain_peak), static_cast<unsigned long long>(drop_peak));
  EXPECT_LT(drop_peak, plain_peak);
}

TEST(ExecutorHooks, EvictedWeightsAreFetchedBackAndMathIsUnchanged) {
  Fixture f;
  const std::vector<float> plain = f.gradients({});
  class EvictAll final : public MemoryStrategy {
   public:
    Status after_forward(HookContext& c) noexcept override { return c.evict(c.layer(), TensorGroup::weights); }
    Status after_backward(HookContext& c) noexcept override { return c.evict(c.layer(), TensorGroup::grads); }
  } evict;
  const std::vector<float> evicted = f.gradients({&evict});
  EXPECT_EQ(std::memcmp(plain.data(), evicted.data(), plain.size() * sizeof(float)), 0);
  EXPECT_GT(f.device->host_memory().live_total(), 0u);
}

TEST(ExecutorHooks, AFailingHookStopsTheStepWithItsMessage) {
  Fixture f;
  class Failing final : public MemoryStrategy {
   public:
    Status before_backward(HookContext&) noexcept override { return Status::error("out of ideas"); }
  } failing;
  Executor executor(f.model, f.optimizer, f.precision, {&failing}, {});
  const MicroBatch micro{f.tokens, f.targets};
  try {
    executor.train_step(1, {&micro, 1});
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("out of ideas"), std::string::npos);
  }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Gradient accumulation: two micro batches of 2 rows equal one batch of the same 4 rows, for each
// family.
void expect_accumulation_matches(const ModelSpec& spec) {
  std::vector<std::int32_t> tokens(4 * 16), targets(4 * 16);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>((i * 13 + 7) % 256);
    targets[i] = static_cast<std::int32_t>((i * 29 + 3) % 256);
  }
  auto run = [&](int rows, std::vector<MicroBatch> batches, double& loss) {
    auto device = make_cpu_backend(0);
    auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
    const std::unique_ptr<Model> owner =
        make_model(spec, *device, *attention, ModelOptions{rows, {}, Allocation::now, {}, Purpose::training, {}});
    Model& model = *owner;
    model.init_weights(5);
    test::PlainSgd optimizer;
    test::PlainFp32 precision;
    Executor executor(model, optimizer, precision, {}, {});
    model.store().zero_grads();
    loss = executor.forward_backward(1, batches, Phase::full);
    std::vector<float> all;
    for (const ParameterRows& r : model.parameters()) {
      auto grad = test::f32(model, r.grad);
      all.insert(all.end(), grad.begin(), grad.end());
    }
    const auto peak = device->device_memory().stats().peak[category_index(MemoryCategory::activations)];
    return std::make_pair(all, peak);
  };
  const std::span<const std::int32_t> all_tokens(tokens), all_targets(targets);
  double big_loss = 0.0, split_loss = 0.0;
  const auto [big, big_peak] = run(4, {{all_tokens, all_targets}}, big_loss);
  const auto [split, split_peak] =
      run(2, {{all_tokens.first(32), all_targets.first(32)}, {all_tokens.last(32), all_targets.last(32)}}, split_loss);
  EXPECT_NEAR(split_loss, big_loss, 1e-6 * std::abs(big_loss));
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < big.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(big[i] - split[i])));
    scale = std::max(scale, static_cast<double>(std::abs(big[i])));
  }
  std::printf(
      "accumulation: loss %.9f vs %.9f, max |grad diff| %.3g of max |grad| %.3g; activation peak %llu -> %llu\n",
      big_loss, split_loss, worst, scale, static_cast<unsigned long long>(big_peak),
      static_cast<unsigned long long>(split_peak));
  EXPECT_LE(worst, 1e-6 * scale);
  EXPECT_LT(split_peak, big_peak);
}

TEST(GradientAccumulation, MicroBatchesMatchTheLargeBatchWithin1e6) {
  ModelSpec gpt2;
  gpt2.shape = gpt2_shape(GPT2Config{2, 2, 32, 256, 16});
  expect_accumulation_matches(gpt2);
  ModelSpec llama;
  llama.arch = "llama";
  llama.shape = LlamaConfig{2, 2, 1, 32, 48, 256, 16};
  expect_accumulation_matches(llama);
}

// A precision policy that skips non-finite gradients, as skip_nonfinite = true does.
class SkippingPrecision final : public PrecisionPolicy {
 public:
  DType weight_storage() const noexcept override { return DType::f32; }
  DType activation_storage() const noexcept override { return DType::f32; }
  double loss_scale() const noexcept override { return 1.0; }
  Status unscale_and_check(Ops& ops, std::span<const TensorView> grads, PrecisionDecision& decision) noexcept override {
    for (const TensorView& grad : grads) decision.skip_step |= !ops.all_finite(grad.f32(), grad.count);
    return {};
  }
};

// A non-finite loss goes on to the precision policy, which skips the step: no exception first, and
// no weight changes.
TEST(NonFiniteLoss, ReachesThePrecisionPolicyWhichSkipsTheStep) {
  const GPT2Config config{2, 2, 16, 40, 8};
  auto device = make_cpu_backend(0);
  auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  GPT2Model model(config, *device, *attention, model_options(2));
  model.init_weights(5);
  const ParameterRows& ln = model.parameters()[2];  // ln_f.weight
  ASSERT_EQ(ln.name, "ln_f.weight");
  test::f32(model, ln.param)[0] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> before;
  for (const ParameterRows& rows : model.parameters()) {
    const auto value = test::f32(model, rows.param);
    before.insert(before.end(), value.begin(), value.end());
  }
  test::PlainSgd optimizer;
  SkippingPrecision precision;
  Executor executor(model, optimizer, precision, {}, {});
  const test::PatternedBatch fixed = test::patterned_batch(2 * 8, config.vocab);
  const MicroBatch micro{fixed.inputs, fixed.targets};
  StepOutcome outcome;
  ASSERT_NO_THROW(outcome = executor.train_step(1, {&micro, 1}));
  EXPECT_TRUE(std::isnan(outcome.loss));
  EXPECT_TRUE(outcome.skipped);
  std::vector<float> after;
  for (const ParameterRows& rows : model.parameters()) {
    const auto value = test::f32(model, rows.param);
    after.insert(after.end(), value.begin(), value.end());
  }
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)))
      << "a skipped step moved weights";
  // A policy that does not skip turns the same loss into an error naming the step.
  test::PlainFp32 lenient;
  Executor strict(model, optimizer, lenient, {}, {});
  EXPECT_THROW(strict.train_step(2, {&micro, 1}), std::runtime_error);
}

// Evaluation builds no gradients, optimizer state or backward workspace; the forward pass runs
// within the weights, activations and forward staging.
TEST(Evaluation, AllocatesNoGradientsOptimizerStateOrBackwardWorkspace) {
  for (const DType storage : {DType::f32, DType::bf16}) {
    ModelSpec spec;
    spec.shape = gpt2_shape(GPT2Config{2, 2, 16, 40, 8});
    auto device = make_cpu_backend(0);
    auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
    const std::unique_ptr<Model> model =
        make_model(spec, *device, *attention,
                   ModelOptions{2, f32_state_layout(2), Allocation::now, {storage, storage}, Purpose::evaluation, {}});
    for (const TensorRow& row : model->table().rows()) {
      EXPECT_NE(row.category, MemoryCategory::grads) << row.name;
      EXPECT_NE(row.category, MemoryCategory::optimizer) << row.name;
      EXPECT_FALSE(row.name.starts_with("ws.d_")) << row.name << " is backward workspace";
    }
    model->init_weights(1);
    test::PlainSgd optimizer;
    test::PlainFp32 precision;
    Executor executor(*model, optimizer, precision, {}, {});
    const test::PatternedBatch fixed = test::patterned_batch(2 * 8, 40);
    EXPECT_TRUE(std::isfinite(executor.forward_loss_sum({fixed.inputs, fixed.targets}, 2)));
    const ArenaStats stats = device->device_memory().stats();
    EXPECT_EQ(stats.peak[category_index(MemoryCategory::grads)], 0u);
    EXPECT_EQ(stats.peak[category_index(MemoryCategory::optimizer)], 0u);
  }
}

}  // namespace
}  // namespace strata
