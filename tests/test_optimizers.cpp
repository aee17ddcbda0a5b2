// The optimizer and precision plugins, loaded from the build tree and driven directly: the
// learning-rate schedule, global-norm clipping, the weight-decay mask, SGD's arithmetic and the
// skip_nonfinite decision, each against the formula it implements.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "core/manifest/manifest.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/stack.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

// A stack built from the tiny manifest plus `tables`; the host outlives the plugins.
struct PluginStack {
  explicit PluginStack(const std::string& tables) {
    const auto dir = test::temporary_directory("optimizers");
    test::write_text(dir / "m.toml", test::tiny_manifest(tables));
    const Manifest manifest = load_manifest(dir / "m.toml");
    PluginRegistry registry;
    registry.scan_search_path(plugin_search_path({}));
    stack = build_stack(manifest, registry, host);
  }
  HostServicesImpl host{ModelInfo{"gpt2", 2, 2, 2, 32, 256, 16, 0}};
  Stack stack;
};

// One parameter with its gradient and optimizer state, in host vectors (the CPU backend's device
// memory is host memory).
struct Parameter {
  Parameter(std::vector<float> value, std::vector<float> gradient, bool decay)
      : param(std::move(value)), grad(std::move(gradient)), m(param.size()), v(param.size()), decay(decay) {}
  std::vector<float> param, grad, m, v;
  bool decay;
  ParamSlot slot() {
    auto view = [](std::vector<float>& data) {
      return TensorView{"p", 0, data.data(), DType::f32, static_cast<std::int64_t>(data.size())};
    };
    ParamSlot s;
    s.name = "p";
    s.decay = decay;
    s.param = view(param);
    s.grad = view(grad);
    s.state = {view(m), view(v)};
    return s;
  }
};

OptimizerReport step(Optimizer& optimizer, std::vector<Parameter*> parameters, OptimizerStepInfo info) {
  std::vector<ParamSlot> slots;
  for (Parameter* p : parameters) slots.push_back(p->slot());
  OptimizerReport report;
  EXPECT_TRUE(optimizer.step(info, slots, report));
  return report;
}

TEST(LrSchedule, LinearWarmupThenCosineToTheFloor) {
  PluginStack plugins("[optimizer]\nplugin = \"sgd\"\nmomentum = 0.0\nmin_lr_ratio = 0.1\n");
  Parameter p({1.0f}, {0.0f}, false);
  const double base = 0.5;
  const std::int64_t warmup = 4, total = 24;
  for (std::int64_t s = 1; s <= total; ++s) {
    const double lr = step(*plugins.stack.optimizer, {&p}, {s, total, warmup, base}).lr;
    double expected = 0.0;
    if (s <= warmup) {
      expected = base * static_cast<double>(s) / warmup;
    } else {
      const double progress = static_cast<double>(s - warmup) / static_cast<double>(total - warmup);
      expected = 0.05 + 0.5 * (base - 0.05) * (1.0 + std::cos(std::numbers::pi * progress));
    }
    EXPECT_NEAR(lr, expected, 1e-12) << "step " << s;
  }
  EXPECT_NEAR(step(*plugins.stack.optimizer, {&p}, {total, total, warmup, base}).lr, 0.05, 1e-12)
      << "ends at the floor";
}

TEST(GradientClipping, ScalesByTheGlobalNormAndReportsItBeforeClipping) {
  // SGD without momentum or decay: param -= lr * grad * min(1, clip / ||g||) over all parameters.
  PluginStack plugins("[optimizer]\nplugin = \"sgd\"\nmomentum = 0.0\ngrad_clip = 1.0\nschedule = \"constant\"\n");
  Parameter a({1.0f, 2.0f}, {3.0f, 0.0f}, false), b({0.5f}, {4.0f}, false);  // ||g|| = 5
  const OptimizerReport report = step(*plugins.stack.optimizer, {&a, &b}, {1, 10, 0, 0.1});
  EXPECT_DOUBLE_EQ(report.grad_norm, 5.0);
  const float scale = 1.0f / 5.0f, lr = 0.1f;
  EXPECT_EQ(a.param[0], 1.0f * 1.0f - lr * 3.0f * scale);
  EXPECT_EQ(a.param[1], 2.0f);
  EXPECT_EQ(b.param[0], 0.5f * 1.0f - lr * 4.0f * scale);
  // Under the threshold nothing is scaled.
  Parameter c({1.0f}, {0.5f}, false);
  EXPECT_DOUBLE_EQ(step(*plugins.stack.optimizer, {&c}, {1, 10, 0, 0.1}).grad_norm, 0.5);
  EXPECT_EQ(c.param[0], 1.0f - lr * 0.5f * 1.0f);
}

TEST(WeightDecay, AppliesToDecayedParametersOnly) {
  // Zero gradients: AdamW's adaptive step is 0, so only decoupled decay moves a parameter.
  PluginStack plugins("[optimizer]\nplugin = \"adamw\"\nweight_decay = 0.5\nschedule = \"constant\"\n");
  Parameter matrix({2.0f, -4.0f}, {0.0f, 0.0f}, true), gain({2.0f, -4.0f}, {0.0f, 0.0f}, false);
  step(*plugins.stack.optimizer, {&matrix, &gain}, {1, 10, 0, 0.1});
  const float shrink = 1.0f - 0.1f * 0.5f;
  EXPECT_EQ(matrix.param[0], 2.0f * shrink);
  EXPECT_EQ(matrix.param[1], -4.0f * shrink);
  EXPECT_EQ(gain.param[0], 2.0f) << "no decay on biases and norm gains";
  EXPECT_EQ(gain.param[1], -4.0f);
}

TEST(Sgd, MomentumAndDecayFollowTheFormulaOverSteps) {
  PluginStack plugins("[optimizer]\nplugin = \"sgd\"\nmomentum = 0.9\nweight_decay = 0.1\nschedule = \"constant\"\n");
  Parameter p({1.0f, -2.0f, 0.25f}, {0.5f, -1.0f, 2.0f}, true);
  std::vector<float> param = p.param, velocity(3, 0.0f);
  const float lr = 0.05f, momentum = 0.9f, decay = 1.0f - lr * 0.1f;
  for (int s = 1; s <= 3; ++s) {
    step(*plugins.stack.optimizer, {&p}, {s, 10, 0, lr});
    for (std::size_t i = 0; i < 3; ++i) {
      velocity[i] = momentum * velocity[i] + p.grad[i] * 1.0f;
      param[i] = param[i] * decay - lr * velocity[i];
      EXPECT_EQ(p.param[i], param[i]) << "step " << s << " element " << i;
      EXPECT_EQ(p.m[i], velocity[i]) << "the velocity is the first state buffer";
    }
  }
}

PrecisionDecision check(PrecisionPolicy& precision, Ops& ops, std::vector<float> grad, Status* status = nullptr) {
  const TensorView view{"g", 0, grad.data(), DType::f32, static_cast<std::int64_t>(grad.size())};
  PrecisionDecision decision;
  const Status result = precision.unscale_and_check(ops, {&view, 1}, decision);
  if (status != nullptr) *status = result;
  return decision;
}

TEST(SkipNonfinite, SkipsNonFiniteGradientsOrFailsWhenAsked) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const char* plugin : {"fp32", "bf16"}) {
    SCOPED_TRACE(plugin);
    PluginStack skipping(std::string("[precision]\nplugin = \"") + plugin + "\"\n");
    Ops& ops = skipping.host.ops();
    EXPECT_FALSE(check(*skipping.stack.precision, ops, {1.0f, 2.0f}).skip_step);
    EXPECT_TRUE(check(*skipping.stack.precision, ops, {1.0f, nan}).skip_step);
    EXPECT_TRUE(check(*skipping.stack.precision, ops, {-inf, 0.0f}).skip_step);
    PluginStack failing(std::string("[precision]\nplugin = \"") + plugin + "\"\nskip_nonfinite = false\n");
    Status status;
    check(*failing.stack.precision, ops, {nan}, &status);
    EXPECT_FALSE(status);
    EXPECT_NE(status.message().find("non-finite"), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace strata
