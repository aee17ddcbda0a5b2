// Low-bit storage through the real plugins: int8 and NF4 block matrices ("int8", "nf4"), 8-bit AdamW
// moments ("adamw8bit") and f16 matrices with f16 matmul operands and dynamic loss scaling
// ("fp16"). They change the numbers, so each is bounded against f32; they must cut the bytes they
// claim, as the allocator counts them; the memory strategies stay bitwise neutral on top of them;
// and what they cannot hold is refused before training.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/stack.hpp"
#include "plugins/fp16/loss_scaler.hpp"
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
const std::string kNf4 = "[precision]\nplugin = \"nf4\"\nactivations = \"f32\"\nembeddings = \"f32\"\n";
const std::string kNf4Single = "[precision]\nplugin = \"nf4\"\nblock_size = 32\ndouble_quant = false\n";
const std::string kAdamW8bit = "[optimizer]\nplugin = \"adamw8bit\"\nmin_8bit_size = 256\nblock_size = 256\n";
const std::string kFp16 = "[precision]\nplugin = \"fp16\"\n";

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

// nf4 ----------------------------------------------------------------------------------------------

// 16 levels per block's absmax move the weights more than int8's 255 do: the first step's loss stays
// within 2% of f32's; the codes, the 8-bit absmax and their scales take about an eighth of f32's bytes.
TEST(Nf4Storage, FirstStepStaysNearF32AndTheBlockMatricesTakeAnEighthOfTheBytes) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun f32 = run_stack(family, "f32_one_step", "", 1);
    for (const std::string& precision : {kNf4, kNf4Single}) {
      const StackRun nf4 = run_stack(family, "nf4_one_step", "", 1, precision);
      const double loss_gap = std::abs(nf4.losses[0] - f32.losses[0]) / f32.losses[0];
      const double grad_gap = max_relative_difference(f32.grads, nf4.grads);
      const double bytes = static_cast<double>(nf4.layer_matrix_bytes) / static_cast<double>(f32.layer_matrix_bytes);
      std::printf("%s %s: loss %.6f vs %.6f (%.2e), gradients within %.2e of their scale, %.4fx the bytes\n",
                  family.name.c_str(), precision == kNf4 ? "double quantized" : "f32 absmax per 32", nf4.losses[0],
                  f32.losses[0], loss_gap, grad_gap, bytes);
      EXPECT_NE(nf4.losses[0], f32.losses[0]) << "the nf4 matmuls ran";
      EXPECT_LT(loss_gap, 2e-2);
      EXPECT_LT(grad_gap, 0.5);
      // Half a byte a value, plus per 64 values a byte of absmax index and per 256 absmax a scale
      // (0.129x), or an f32 absmax per 32 (0.156x). These matrices are small (32 x 96): each side row
      // is rounded up to the allocator's alignment, which adds up to 0.012x; large ones are 0.129x
      // (Nf4Kernels.StoresFourPointOneThreeBitsAValueWithDoubleQuantization).
      EXPECT_LT(bytes, precision == kNf4 ? 0.1415 : 0.1563);
      EXPECT_GT(bytes, 0.125);
    }
  }
}

// The strategies move codes, their side data and the f32 masters like any rows: bitwise neutral.
TEST(Nf4Storage, CheckpointOffloadAndStreamingKeepTheNf4MathBitwise) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun plain = run_stack(family, "nf4_plain", "", 3, kNf4);
    for (const std::string& strategy : {kBlockCheckpoint, kOptimizerOffload, kStreaming})
      expect_bitwise_equal(plain, run_stack(family, "nf4_strategy", strategy, 3, kNf4));
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
  return test::stack_refusal(tables, overrides);
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
#if STRATA_HAVE_CUDA
  EXPECT_EQ(cuda, "") << "a build with nvcc has int8's CUDA kernels";
#else
  EXPECT_NE(cuda.find("int8 weights have kernels for the cpu backend"), std::string::npos) << cuda;
#endif
  const std::string optimizer_on_cuda = refusal("[optimizer]\nplugin = \"adamw8bit\"\n", {"device.kind=\"cuda:0\""});
#if STRATA_HAVE_CUDA
  EXPECT_EQ(optimizer_on_cuda, "") << "a build with nvcc has adamw8bit's CUDA kernel";
#else
  EXPECT_NE(optimizer_on_cuda.find("adamw8bit runs on the cpu backend here"), std::string::npos) << optimizer_on_cuda;
#endif
  const std::string small_block = refusal("[optimizer]\nplugin = \"adamw8bit\"\nblock_size = 128\n");
  EXPECT_NE(small_block.find("block_size"), std::string::npos) << small_block;
  EXPECT_EQ(refusal(kInt8Blocks), "") << "block_size 16 divides every matrix";
  const std::string odd = refusal("[precision]\nplugin = \"nf4\"\nblock_size = 63\n");
  EXPECT_NE(odd.find("block_size"), std::string::npos) << odd;
  EXPECT_NE(odd.find("must be even"), std::string::npos) << odd;
  EXPECT_EQ(refusal("[precision]\nplugin = \"nf4\"\nblock_size = 96\n"), "")
      << "nf4 reads a matrix flat: a block need not divide its rows";
}

// fp16 ----------------------------------------------------------------------------------------------

// f16 weights and operands perturb the step a little (10 mantissa bits); the matrices take half the
// bytes of f32's. With the default scale the gradients, unscaled, are f32's within f16's precision.
TEST(Fp16, FirstStepStaysNearF32AndTheBlockMatricesTakeHalfTheBytes) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun f32 = run_stack(family, "f32_one_step", "", 1);
    const StackRun fp16 = run_stack(family, "fp16_one_step", "", 1, kFp16);
    const double loss_gap = std::abs(fp16.losses[0] - f32.losses[0]) / f32.losses[0];
    const double grad_gap = max_relative_difference(f32.grads, fp16.grads);
    std::printf("%s: loss %.6f vs %.6f (%.2e), gradients within %.2e of their scale, loss scale %g\n",
                family.name.c_str(), fp16.losses[0], f32.losses[0], loss_gap, grad_gap, fp16.loss_scales[0]);
    EXPECT_NE(fp16.losses[0], f32.losses[0]) << "the f16 matmuls ran";
    EXPECT_LT(loss_gap, 1e-3);
    EXPECT_LT(grad_gap, 1e-2);
    EXPECT_EQ(fp16.loss_scales[0], 65536.0);
    EXPECT_FALSE(fp16.skipped[0]);
    EXPECT_EQ(2 * fp16.layer_matrix_bytes, f32.layer_matrix_bytes);
  }
}

// The share of gradient elements more than 1% away from f32's: f16 keeps 11 significant bits, so
// an element that moved that far lost them (an f16 subnormal, or flushed to zero).
double share_off_by_a_percent(const std::vector<float>& expected, const std::vector<float>& actual) {
  std::size_t off = 0, counted = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0.0f) continue;
    ++counted;
    off += std::abs(actual[i] - expected[i]) > 0.01f * std::abs(expected[i]) ? 1 : 0;
  }
  return static_cast<double>(off) / static_cast<double>(counted);
}

// Why the scale exists: the loss is a mean over every position, so the gradients that pass through
// f16 operands are small (1024 positions a step here, as the quickstart's). Unscaled, many land
// among f16's subnormals or flush to zero and the weight gradients lose their precision; scaled by
// 2^16 they keep f16's 11 bits.
TEST(Fp16, LossScalingKeepsSmallGradientsFromUnderflowing) {
  const auto& family = kFamilies[0];
  const std::vector<std::string> positions = {"train.batch=16", "model.seq_len=64"};
  const StackRun f32 = run_stack(family, "f32_one_step", "", 1, "", positions);
  const StackRun unscaled = run_stack(family, "fp16_unscaled", "", 1, kFp16 + "initial_scale = 1.0\n", positions);
  const StackRun scaled = run_stack(family, "fp16_scaled", "", 1, kFp16, positions);
  const double unscaled_off = share_off_by_a_percent(f32.grads, unscaled.grads);
  const double scaled_off = share_off_by_a_percent(f32.grads, scaled.grads);
  std::printf("gradient elements more than 1%% from f32's: loss scale 1 %.2f%%, loss scale 65536 %.2f%%\n",
              100.0 * unscaled_off, 100.0 * scaled_off);
  EXPECT_EQ(unscaled.loss_scales[0], 1.0);
  EXPECT_GT(unscaled_off, 4.0 * scaled_off);
}

// A scale so large that the scaled gradients overflow f16: each such step is skipped (the weights
// stay bitwise what they were) and halves the scale, until the gradients fit; then training goes on.
TEST(Fp16, AnOverflowSkipsTheStepAndBacksTheScaleOff) {
  const auto& family = kFamilies[0];
  const std::string huge = kFp16 + "initial_scale = 1099511627776.0\n";  // 2^40
  const StackRun untouched = run_stack(family, "fp16_no_step", "", 0, huge);
  const StackRun one = run_stack(family, "fp16_overflow_once", "", 1, huge);
  ASSERT_TRUE(one.skipped[0]);
  EXPECT_EQ(one.weights, untouched.weights) << "a skipped step leaves every weight as it was";
  const StackRun run = run_stack(family, "fp16_overflow", "", 40, huge);
  int skipped = 0;
  for (std::size_t i = 0; i + 1 < run.skipped.size(); ++i) {
    skipped += run.skipped[i] ? 1 : 0;
    EXPECT_EQ(run.loss_scales[i + 1], run.skipped[i] ? run.loss_scales[i] / 2 : run.loss_scales[i]) << "step " << i;
  }
  std::printf("2^40: %d of %zu steps skipped, final scale %g, loss %.4f -> %.4f\n", skipped, run.skipped.size(),
              run.loss_scales.back(), run.losses.front(), run.losses.back());
  EXPECT_GE(skipped, 10) << "2^40 overflows f16 (65504) by far";
  EXPECT_FALSE(run.skipped.back());
  EXPECT_LT(run.losses.back(), run.losses.front() - 0.5) << "after backing off, the steps train";
}

TEST(Fp16, GrowsTheScaleAfterGrowthIntervalFiniteSteps) {
  plugins::LossScaler scaler({.initial_scale = 8.0, .growth_interval = 3, .growth_factor = 2.0, .backoff = 0.25});
  scaler.on_finite_step();
  scaler.on_finite_step();
  EXPECT_EQ(scaler.scale(), 8.0);
  scaler.on_finite_step();
  EXPECT_EQ(scaler.scale(), 16.0);
  scaler.on_finite_step();
  ASSERT_TRUE(scaler.on_overflow());
  EXPECT_EQ(scaler.scale(), 4.0);
  EXPECT_EQ(scaler.finite_in_a_row(), 0);
  plugins::LossScaler restored({});
  ASSERT_TRUE(restored.restore(scaler.state())) << scaler.state();
  EXPECT_EQ(restored.scale(), 4.0);
  EXPECT_FALSE(restored.restore("scale=banana"));
  plugins::LossScaler tiny({.initial_scale = 0x1p-23, .growth_interval = 10, .growth_factor = 2.0, .backoff = 0.5});
  ASSERT_TRUE(tiny.on_overflow());
  const Status diverged = tiny.on_overflow();
  ASSERT_FALSE(diverged);
  EXPECT_NE(diverged.message().find("diverged"), std::string::npos) << diverged.message();
}

// Per-phase compute: a phase whose matmuls take bf16 or f32 operands never scales its loss, and a
// predict step (no backward) never does.
TEST(Fp16, OnlyStepsWithF16OperandsAndABackwardScaleTheLoss) {
  const auto dir = test::temporary_directory("fp16_phases");
  test::write_text(dir / "m.toml",
                   test::tiny_manifest(kFp16 + "correct_compute = \"bf16\"\nwarmup_compute = \"f32\"\n"));
  const Manifest manifest = load_manifest(dir / "m.toml");
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  HostServicesImpl host(manifest.model.info(), manifest.device.kind);
  Stack stack = build_stack(manifest, registry, host);
  PrecisionPolicy& policy = *stack.precision;
  const std::pair<Phase, double> expected[] = {
      {Phase::full, 65536.0}, {Phase::predict, 1.0}, {Phase::correct, 1.0}, {Phase::warmup, 1.0}};
  for (const auto& [phase, scale] : expected) {
    policy.begin_step(phase);
    EXPECT_EQ(policy.loss_scale(), scale) << phase_name(phase);
  }
  const StackRun bf16_full = run_stack(kFamilies[0], "fp16_bf16_full", "", 1, kFp16 + "full_compute = \"bf16\"\n");
  EXPECT_EQ(bf16_full.loss_scales[0], 1.0) << "never a loss scale under bf16";
}

TEST(Fp16, RefusesBf16StorageAndANonPositiveScale) {
  const std::string activations = refusal(kFp16 + "activations = \"bf16\"\n");
  EXPECT_NE(activations.find("activations"), std::string::npos) << activations;
  EXPECT_NE(activations.find("fp16 with bf16 storage"), std::string::npos) << activations;
  const std::string embeddings = refusal(kFp16 + "embeddings = \"bf16\"\n");
  EXPECT_NE(embeddings.find("embeddings"), std::string::npos) << embeddings;
  for (const std::string value : {"0.0", "-2.0"}) {
    const std::string scale = refusal(kFp16 + "initial_scale = " + value + "\n");
    EXPECT_NE(scale.find("initial_scale"), std::string::npos) << scale;
    EXPECT_NE(scale.find("must be > 0"), std::string::npos) << scale;
  }
  EXPECT_NE(refusal(kFp16 + "backoff = 1.5\n").find("backoff"), std::string::npos);
  EXPECT_NE(refusal(kFp16 + "growth_factor = 1.0\n").find("growth_factor"), std::string::npos);
  const std::string cuda = refusal(kFp16, {"device.kind=\"cuda:0\""});
#if STRATA_HAVE_CUDA
  EXPECT_EQ(cuda, "") << "a build with nvcc has fp16's CUDA kernels";
#else
  EXPECT_NE(cuda.find("f16 weights have kernels for the cpu backend"), std::string::npos) << cuda;
#endif
  EXPECT_EQ(refusal(kFp16), "");
}

// The strategies move f16 values and f32 masters like any rows: bitwise neutral.
TEST(Fp16, CheckpointOffloadAndStreamingKeepTheFp16MathBitwise) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun plain = run_stack(family, "fp16_plain", "", 3, kFp16);
    for (const std::string& strategy : {kBlockCheckpoint, kOptimizerOffload, kStreaming})
      expect_bitwise_equal(plain, run_stack(family, "fp16_strategy", strategy, 3, kFp16));
  }
}

}  // namespace
}  // namespace strata
