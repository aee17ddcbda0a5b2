// The whole model's analytic gradients against central finite differences of its loss, on a
// 2-layer model: every parameter tensor is probed.
#include <gtest/gtest.h>

#include <cmath>

#include "core/device/device.hpp"
#include "core/executor/executor.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

TEST(ModelGradients, TwoLayerModelMatchesFiniteDifferences) {
  const GPT2Config config{2, 2, 16, 40, 8};  // vocab 40 pads to 64: padded rows must stay gradient-free
  const int batch = 2;
  auto device = make_cpu_device(0);
  auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::reference);
  GPT2Model model(config, batch, *device, *attention, 0);
  model.init_weights(3);
  // Larger weights than GPT-2's init make every gradient visible above float noise.
  for (const ParameterRows& rows : model.parameters())
    for (float& value : model.data(rows.param)) value *= rows.name.find("ln_") == std::string::npos ? 8.0f : 1.0f;
  test::PlainSgd optimizer;
  test::PlainFp32 precision;
  Executor executor(model, optimizer, precision, {}, {});

  const test::PatternedBatch fixed =
      test::patterned_batch(static_cast<std::size_t>(batch) * config.seq_len, config.vocab);
  const MicroBatch micro{fixed.inputs, fixed.targets};
  model.zero_grads();
  executor.forward_backward(1, {&micro, 1}, Phase::full);
  const double positions = static_cast<double>(fixed.inputs.size());
  auto loss = [&] { return executor.forward_loss_sum(micro, batch) / positions; };

  double worst = 0.0;
  int probed = 0;
  for (const ParameterRows& rows : model.parameters()) {
    std::span<float> param = model.data(rows.param);
    std::span<const float> grad = model.data(rows.grad);
    const std::size_t real =
        rows.name == "wte.weight" ? static_cast<std::size_t>(config.vocab * config.d_model) : param.size();
    for (std::size_t i = real; i < param.size(); ++i) ASSERT_EQ(grad[i], 0.0f) << "padded vocab row has a gradient";
    for (std::size_t k = 0; k < 4; ++k) {
      const std::size_t i = (k * 2654435761u) % real;
      const float saved = param[i];
      const float h = 1e-2f * std::max(1.0f, std::abs(saved));
      param[i] = saved + h;
      const double plus = loss();
      param[i] = saved - h;
      const double minus = loss();
      param[i] = saved;
      const double numeric = (plus - minus) / (2.0 * static_cast<double>(h));
      const double error = std::abs(numeric - grad[i]) / std::max(1e-3, std::abs(numeric) + std::abs(grad[i]));
      worst = std::max(worst, error);
      ++probed;
      EXPECT_LT(error, 2e-2) << rows.name << "[" << i << "] analytic " << grad[i] << " numeric " << numeric;
    }
  }
  std::printf("whole-model gradient check: %d entries, max relative error %.3g\n", probed, worst);
}

}  // namespace
}  // namespace strata
