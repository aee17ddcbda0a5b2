// Low-bit storage through the real plugins: int8 block matrices (precision "int8") and 8-bit AdamW
// moments ("adamw8bit"). They change the numbers, so each is bounded against f32; they must cut the
// bytes they claim, as the allocator counts them; the memory strategies stay bitwise neutral on top
// of them; and what they cannot hold is refused before training.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_error.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/stack.hpp"
#include "stack_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

using test::expect_bitwise_equal;
using test::kBlockCheckpoint;
using test::kFamilies;
using test::kOptimizerOffload;
using test::kStreaming;
using test::peak;
using test::run_stack;
using test::StackRun;

const std::string kInt8 = "[precision]\nplugin = \"int8\"\nactivations = \"f32\"\nembeddings = \"f32\"\n";
const std::string kInt8Blocks = "[precision]\nplugin = \"int8\"\nblock_size = 16\n";
const std::string kAdamW8bit = "[optimizer]\nplugin = \"adamw8bit\"\nmin_8bit_size = 256\nblock_size = 256\n";

double max_relative_difference(const std::vector<float>& expected, const std::vector<float>& actual) {
  double scale = 0.0, worst = 0.0;
  for (float value : expected) scale = std::max(scale, static_cast<double>(std::abs(value)));
  for (std::size_t i = 0; i < expected.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(expected[i]) - actual[i]));
  return worst / scale;
}

// One step from the same weights: int8 storage perturbs every block matrix by at most half a
// quantization step, so the loss and gradients move a little, not a lot.
TEST(Int8Storage, FirstStepStaysNearF32AndTheBlockMatricesTakeUnderThreeTenthsOfTheBytes) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun f32 = run_stack(family, "f32_one_step", "", 1);
    for (const std::string& precision : {kInt8, kInt8Blocks}) {
      const StackRun int8 = run_stack(family, "int8_one_step", "", 1, precision);
      const double loss_gap = std::abs(int8.losses[0] - f32.losses[0]) / f32.losses[0];
      const double grad_gap = max_relative_difference(f32.grads, int8.grads);
      std::printf("%s %s: loss %.6f vs %.6f (%.2e), gradients within %.2e of their scale\n", family.name.c_str(),
                  precision == kInt8 ? "per channel" : "block 16", int8.losses[0], f32.losses[0], loss_gap, grad_gap);
      EXPECT_NE(int8.losses[0], f32.losses[0]) << "the int8 matmuls ran";
      EXPECT_LT(loss_gap, 1e-3);
      EXPECT_LT(grad_gap, 5e-2);
      // A block's matrices: int8 values plus their f32 scales, against f32: a quarter, plus one scale
      // per output channel or 4 / 16 bytes per value with blocks of 16.
      const double bound = precision == kInt8 ? 0.3 : 0.32;
      EXPECT_LT(static_cast<double>(int8.layer_matrix_bytes), bound * static_cast<double>(f32.layer_matrix_bytes))
          << int8.layer_matrix_bytes << " vs " << f32.layer_matrix_bytes;
    }
  }
}

// The strategies move int8 values, their scales and the f32 masters like any rows: bitwise neutral.
TEST(Int8Storage, CheckpointOffloadAndStreamingKeepTheInt8MathBitwise) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun plain = run_stack(family, "int8_plain", "", 3, kInt8Blocks);
    for (const std::string& strategy : {kBlockCheckpoint, kOptimizerOffload, kStreaming})
      expect_bitwise_equal(plain, run_stack(family, "int8_strategy", strategy, 3, kInt8Blocks));
    const StackRun offloaded = run_stack(family, "int8_offload", kOptimizerOffload, 3, kInt8Blocks);
    EXPECT_EQ(peak(offloaded.device, MemoryCategory::optimizer), 0u) << "the masters live on the host";
  }
}

TEST(AdamW8bit, FirstStepsTrackAdamWAndTheMomentsTakeAQuarterOfTheBytes) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun adamw = run_stack(family, "adamw", "", 3);
    const StackRun adamw8bit = run_stack(family, "adamw8bit", "", 3, "", {}, kAdamW8bit);
    const double weight_gap = max_relative_difference(adamw.weights, adamw8bit.weights);
    std::printf("%s: losses %.6f %.6f %.6f vs %.6f %.6f %.6f, weights within %.2e\n", family.name.c_str(),
                adamw8bit.losses[0], adamw8bit.losses[1], adamw8bit.losses[2], adamw.losses[0], adamw.losses[1],
                adamw.losses[2], weight_gap);
    EXPECT_EQ(adamw8bit.losses[0], adamw.losses[0]) << "the first forward precedes any update";
    EXPECT_NE(adamw8bit.weights, adamw.weights) << "the 8-bit moments ran";
    EXPECT_LT(std::abs(adamw8bit.losses[2] - adamw.losses[2]) / adamw.losses[2], 1e-3);
    // Quantized second moments change each element's step size a little: after three steps of lr
    // 3e-3 the weights differ by 1.5e-2 of the largest weight (gpt2; llama 6e-4).
    EXPECT_LT(weight_gap, 5e-2);
    const auto adamw_bytes = static_cast<double>(peak(adamw.device, MemoryCategory::optimizer));
    const auto adamw8bit_bytes = static_cast<double>(peak(adamw8bit.device, MemoryCategory::optimizer));
    std::printf("%s: optimizer bytes %.0f vs %.0f (%.3fx)\n", family.name.c_str(), adamw8bit_bytes, adamw_bytes,
                adamw8bit_bytes / adamw_bytes);
    EXPECT_LT(adamw8bit_bytes, 0.3 * adamw_bytes);
  }
}

TEST(AdamW8bit, OffloadedStateAndStrategiesKeepTheMathBitwise) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun plain = run_stack(family, "adamw8bit_plain", "", 3, "", {}, kAdamW8bit);
    for (const std::string& strategy : {kBlockCheckpoint, kOptimizerOffload, kStreaming})
      expect_bitwise_equal(plain, run_stack(family, "adamw8bit_strategy", strategy, 3, "", {}, kAdamW8bit));
    // Both at once: 8-bit moments and int8 weights with masters, all on the host.
    const StackRun both = run_stack(family, "low_bit", "", 3, kInt8Blocks, {}, kAdamW8bit);
    expect_bitwise_equal(both, run_stack(family, "low_bit_streamed", kStreaming, 3, kInt8Blocks, {}, kAdamW8bit));
  }
}

// Refused at validate time (build_stack), naming the key.
std::string refusal(const std::string& tables, const std::vector<std::string>& overrides = {}) {
  const auto dir = test::temporary_directory("low_bit_refusal");
  test::write_text(dir / "m.toml", test::tiny_manifest(tables));
  const Manifest manifest = load_manifest(dir / "m.toml", overrides);
  PluginRegistry registry;
  registry.scan(plugin_search_path({}));
  HostServicesImpl host(manifest.model.info(), manifest.device.kind);
  try {
    (void)build_stack(manifest, registry, host);
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "";
}

TEST(LowBitStorage, RefusesWhatItCannotHoldBeforeTraining) {
  // d_model 32: c_attn rows hold 96 values, c_proj rows 32.
  const std::string block = refusal("[precision]\nplugin = \"int8\"\nblock_size = 64\n");
  EXPECT_NE(block.find("block_size = 64 does not divide its rows (96 values each)"), std::string::npos) << block;
  EXPECT_NE(block.find("attn.c_attn.weight"), std::string::npos) << block;
  const std::string llama =
      refusal("[precision]\nplugin = \"int8\"\nblock_size = 64\n", {"model.arch=\"llama\"", "model.d_ff=48"});
  EXPECT_NE(llama.find("block_size = 64 does not divide its rows (32 values each)"), std::string::npos) << llama;
  const std::string cuda = refusal("[precision]\nplugin = \"int8\"\n", {"device.kind=\"cuda:0\""});
  EXPECT_NE(cuda.find("int8 weights run on the cpu backend"), std::string::npos) << cuda;
  const std::string optimizer_on_cuda = refusal("[optimizer]\nplugin = \"adamw8bit\"\n", {"device.kind=\"cuda:0\""});
  EXPECT_NE(optimizer_on_cuda.find("adamw8bit runs on the cpu backend"), std::string::npos) << optimizer_on_cuda;
  const std::string small_block = refusal("[optimizer]\nplugin = \"adamw8bit\"\nblock_size = 128\n");
  EXPECT_NE(small_block.find("block_size"), std::string::npos) << small_block;
  EXPECT_EQ(refusal(kInt8Blocks), "") << "block_size 16 divides every matrix";
}

}  // namespace
}  // namespace strata
