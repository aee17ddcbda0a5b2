// End-to-end training through run_training with the real plugins: the loss falls, runs are
// bitwise reproducible, resume equals an uninterrupted run, accumulation matches the big batch.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "core/checkpoint/safetensors.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

TrainResult train(const std::filesystem::path& manifest_path, const std::vector<std::string>& overrides = {},
                  std::optional<std::filesystem::path> resume = std::nullopt, std::int64_t stop_after = 0) {
  const Manifest manifest = load_manifest(manifest_path, overrides);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  TrainOptions options;
  options.resume = resume;
  options.stop_after_step = stop_after;
  return run_training(manifest, registry, options);
}

TEST(Training, LowersValidationLossOnTheShippedCorpus) {
  const auto dir = test::temporary_directory("lowers_loss");
  test::write_text(dir / "m.toml", test::tiny_manifest("", "eval_every = 150\n"));
  const TrainResult result = train(dir / "m.toml", {"train.steps=150", "train.batch=8", "model.seq_len=32"});
  ASSERT_TRUE(result.summary.final_val_loss);
  std::printf("train loss %.4f -> %.4f, val loss %.4f\n", result.summary.first_loss, result.summary.final_loss,
              *result.summary.final_val_loss);
  EXPECT_GT(result.summary.first_loss, 5.0);  // ~ln(256) at init
  EXPECT_LT(*result.summary.final_val_loss, 2.9) << "a 2-layer byte model reaches ~2.6 in 150 steps";
}

TEST(Training, SameSeedAndThreadsGiveBitwiseIdenticalLosses) {
  const auto dir = test::temporary_directory("determinism");
  test::write_text(dir / "m.toml", test::tiny_manifest());
  const TrainResult first = train(dir / "m.toml");
  const TrainResult second = train(dir / "m.toml");
  ASSERT_EQ(first.losses.size(), 6u);
  for (std::size_t i = 0; i < first.losses.size(); ++i)
    EXPECT_EQ(first.losses[i], second.losses[i]) << "step " << i + 1;
}

// bf16 storage changes the numbers; over real runs the validation loss must reach the same level
// as f32's. Single runs are compared over three seeds: a 2-layer byte model leaves its ~3.1 plateau
// at a step that small perturbations shift (seed 7: bf16 is 0.14 behind after 150 steps; seeds 8
// and 9: within 0.04), so the bound is on the mean.
TEST(Training, Bf16StorageTracksF32OnTheShippedCorpus) {
  const auto dir = test::temporary_directory("bf16_training");
  test::write_text(dir / "f32.toml", test::tiny_manifest("", "eval_every = 150\n"));
  test::write_text(dir / "bf16.toml", test::tiny_manifest("[precision]\nplugin = \"bf16\"\n", "eval_every = 150\n"));
  double f32_sum = 0.0, bf16_sum = 0.0;
  for (const int seed : {7, 8, 9}) {
    const std::vector<std::string> overrides = {"train.steps=150", "train.batch=8", "model.seq_len=32",
                                                "train.seed=" + std::to_string(seed)};
    const TrainResult f32 = train(dir / "f32.toml", overrides);
    const TrainResult bf16 = train(dir / "bf16.toml", overrides);
    ASSERT_TRUE(f32.summary.final_val_loss && bf16.summary.final_val_loss);
    std::printf("seed %d, val loss after 150 steps: f32 %.4f, bf16 %.4f\n", seed, *f32.summary.final_val_loss,
                *bf16.summary.final_val_loss);
    EXPECT_NE(*bf16.summary.final_val_loss, *f32.summary.final_val_loss);
    EXPECT_LT(*bf16.summary.final_val_loss, 2.9);
    f32_sum += *f32.summary.final_val_loss;
    bf16_sum += *bf16.summary.final_val_loss;
  }
  EXPECT_LT(std::abs(bf16_sum - f32_sum) / 3.0, 0.06);
}

// The tiny LLaMA: the tiny manifest's shape, with two query heads sharing one key/value head.
const std::vector<std::string> kLlama = {"model.arch=\"llama\"", "model.n_kv_head=1", "model.d_ff=48"};

void expect_resume_bitwise(const std::string& name, const std::string& extra,
                           const std::vector<std::string>& family = {}) {
  const auto dir = test::temporary_directory(name);
  test::write_text(dir / "m.toml",
                   test::tiny_manifest(extra + "[checkpoint]\ndir = \"" + (dir / "ckpt").string() + "\"\n"));
  std::vector<std::string> to_full = family;
  to_full.push_back("checkpoint.dir=\"" + (dir / "full").string() + "\"");
  const TrainResult uninterrupted = train(dir / "m.toml", to_full);
  const TrainResult first_half = train(dir / "m.toml", family, std::nullopt, 3);
  ASSERT_TRUE(first_half.last_checkpoint);
  const TrainResult second_half = train(dir / "m.toml", family, dir / "ckpt");
  ASSERT_EQ(second_half.losses.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(first_half.losses[i], uninterrupted.losses[i]);
    EXPECT_EQ(second_half.losses[i], uninterrupted.losses[i + 3]) << "step " << i + 4;
  }
}

TEST(Training, ResumeContinuesBitwiseIdentically) {
  expect_resume_bitwise("resume", "");
}

// Checkpoints hold the f32 masters; the bf16 weights are their rounding, so resume is exact too.
TEST(Training, ResumeWithBf16StorageContinuesBitwiseIdentically) {
  expect_resume_bitwise("resume_bf16", "[precision]\nplugin = \"bf16\"\n");
}

// Resuming from an older save continues the step log from there: the steps the first run took
// past that save, and its summary, are dropped instead of appearing twice.
// The bf16 policy's stochastic rounding (a precision plugin's own Bf16Rounding): it changes the
// trajectory, it is the same on every run, and a resume rounds with the step it continues from, so
// it continues bitwise.
TEST(Training, StochasticBf16RoundingIsDeterministicAndResumesBitwise) {
  const std::string stochastic = "[precision]\nplugin = \"bf16\"\nrounding = \"stochastic\"\n";
  expect_resume_bitwise("resume_bf16_stochastic", stochastic);
  const auto dir = test::temporary_directory("stochastic_rounding");
  test::write_text(dir / "nearest.toml", test::tiny_manifest("[precision]\nplugin = \"bf16\"\n"));
  test::write_text(dir / "stochastic.toml", test::tiny_manifest(stochastic));
  const TrainResult nearest = train(dir / "nearest.toml", {});
  const TrainResult rounded = train(dir / "stochastic.toml", {});
  EXPECT_NE(nearest.losses.back(), rounded.losses.back());
  EXPECT_LT(std::abs(nearest.losses.back() - rounded.losses.back()), 0.05);
}

TEST(Training, ResumeContinuesTheJsonlLogWithoutDuplicateSteps) {
  const auto dir = test::temporary_directory("resume_log");
  const std::string log = (dir / "steps.jsonl").string();
  test::write_text(dir / "m.toml",
                   test::tiny_manifest("[checkpoint]\ndir = \"" + (dir / "ckpt").string() +
                                       "\"\nevery = 2\n[[telemetry]]\nplugin = \"jsonl\"\npath = \"" + log + "\"\n"));
  train(dir / "m.toml", {"train.steps=4"});
  train(dir / "m.toml", {"train.steps=4"}, dir / "ckpt" / "step_00000002");
  std::ifstream in(log);
  std::vector<std::int64_t> steps;
  int summaries = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"record\":\"summary\"") != std::string::npos) ++summaries;
    const std::size_t at = line.find("{\"step\":");
    if (at == 0) steps.push_back(std::stoll(line.substr(8)));
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(summaries, 1) << "only the resumed run's summary remains";
}

TEST(Training, LlamaResumeContinuesBitwiseIdentically) {
  expect_resume_bitwise("resume_llama", "", kLlama);
  expect_resume_bitwise("resume_llama_bf16", "[precision]\nplugin = \"bf16\"\n", kLlama);
}

// 8-bit moments are saved as their codes and block scales, int8 and nf4 weights as their f32
// masters (the codes are re-quantized from them): all resume bitwise, alone, together and offloaded.
TEST(Training, ResumeWithLowBitStorageContinuesBitwiseIdentically) {
  const std::string adamw8bit = "[optimizer]\nplugin = \"adamw8bit\"\nmin_8bit_size = 256\nblock_size = 256\n";
  const std::string int8 = "[precision]\nplugin = \"int8\"\nblock_size = 16\n";
  expect_resume_bitwise("resume_adamw8bit", adamw8bit);
  expect_resume_bitwise("resume_int8", int8);
  expect_resume_bitwise("resume_low_bit_offloaded",
                        adamw8bit + int8 + "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n");
  expect_resume_bitwise("resume_llama_low_bit", adamw8bit + int8, kLlama);
  // nf4 weights likewise, re-quantized from their saved f32 masters.
  expect_resume_bitwise("resume_nf4", "[precision]\nplugin = \"nf4\"\n");
}

// Frozen parameters have no optimizer state: a checkpoint holds their weights only, and a resumed
// sparse run continues bitwise, freezing or skipping.
TEST(Training, ResumeWithSparseLayersContinuesBitwiseIdentically) {
  for (const std::string middle : {"freeze", "skip"}) {
    const std::string sparse =
        "[[strategy]]\nplugin = \"sparse_layers\"\ntrain_first = 1\ntrain_last = 0\nmiddle = \"" + middle + "\"\n";
    expect_resume_bitwise("resume_sparse_" + middle, sparse);
    expect_resume_bitwise("resume_llama_sparse_" + middle, sparse, kLlama);
  }
}

// Fine-tuning starts from a trained base: train.init_from loads its weights (not its optimizer
// state), so the first step's loss is the base's level, not a random model's; a base of another
// shape is refused naming the file; a path that is not there is refused at validate time.
TEST(Training, InitFromStartsFromTheBaseWeights) {
  const auto dir = test::temporary_directory("init_from");
  test::write_text(dir / "base.toml", test::tiny_manifest("[checkpoint]\ndir = \"" + (dir / "base").string() + "\"\n"));
  const TrainResult base = train(dir / "base.toml", {"train.steps=30"});
  const std::string from = "init_from = \"" + (dir / "base").string() + "\"\n";
  test::write_text(dir / "tuned.toml",
                   test::tiny_manifest("[[strategy]]\nplugin = \"sparse_layers\"\ntrain_last = 1\n", from));
  const TrainResult tuned = train(dir / "tuned.toml", {"train.steps=3"});
  std::printf("base: %.4f -> %.4f; fine-tune from it starts at %.4f\n", base.summary.first_loss,
              base.summary.final_loss, tuned.summary.first_loss);
  EXPECT_LT(tuned.summary.first_loss, base.summary.first_loss - 1.0);
  EXPECT_THROW(train(dir / "tuned.toml", {"train.steps=3", "model.d_model=64"}), CheckpointError);
  test::write_text(dir / "missing.toml", test::tiny_manifest("", "init_from = \"" + (dir / "nope").string() + "\"\n"));
  try {
    (void)load_manifest(dir / "missing.toml");
    ADD_FAILURE() << "a missing init_from was accepted";
  } catch (const ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find("init_from"), std::string::npos) << e.what();
  }
}

// The loss scaler's state travels in the checkpoint: with a scale that grows 256-fold after every
// finite step, overflows (skipped steps) come and go, and a resume that restarted the scale would
// skip different steps.
TEST(Training, ResumeWithFp16LossScalingContinuesBitwiseIdentically) {
  const std::string fp16 = "[precision]\nplugin = \"fp16\"\ngrowth_interval = 1\ngrowth_factor = 256.0\n";
  expect_resume_bitwise("resume_fp16", fp16);
  expect_resume_bitwise("resume_llama_fp16", fp16, kLlama);
}

// Skipped steps are counted in the run's summary, each step's loss scale in its metrics.
TEST(Training, Fp16OverflowsAreCountedInTheSummary) {
  const auto dir = test::temporary_directory("fp16_skips");
  test::write_text(dir / "m.toml",
                   test::tiny_manifest("[precision]\nplugin = \"fp16\"\ninitial_scale = 1073741824.0\n"));
  const TrainResult result = train(dir / "m.toml", {"train.steps=30"});
  std::printf("initial scale 2^30: %lld of 30 steps skipped\n", static_cast<long long>(result.summary.skipped_steps));
  EXPECT_GE(result.summary.skipped_steps, 10);
  EXPECT_LT(result.summary.skipped_steps, 30);
  EXPECT_LT(result.summary.final_loss, result.summary.first_loss);
}

// A model built for evaluation has no masters: its int8 matrices are quantized from the checkpoint's
// f32 values as it loads them, and give the validation loss training measured with the same bits.
void expect_eval_gives_training_val_loss(const std::string& name, const std::string& precision,
                                         const std::vector<std::string>& family = {}) {
  const auto dir = test::temporary_directory(name);
  test::write_text(
      dir / "m.toml",
      test::tiny_manifest(precision + "[checkpoint]\ndir = \"" + (dir / "ckpt").string() + "\"\n", "eval_every = 6\n"));
  const TrainResult trained = train(dir / "m.toml", family);
  ASSERT_TRUE(trained.summary.final_val_loss);
  const Manifest manifest = load_manifest(dir / "m.toml", family);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  const double evaluated = run_eval(manifest, registry, dir / "ckpt", std::nullopt, {});
  EXPECT_EQ(evaluated, *trained.summary.final_val_loss);
}

TEST(Training, EvalOfAnInt8CheckpointGivesTheTrainingValidationLoss) {
  expect_eval_gives_training_val_loss("eval_int8", "[precision]\nplugin = \"int8\"\nblock_size = 16\n");
  expect_eval_gives_training_val_loss("eval_nf4", "[precision]\nplugin = \"nf4\"\n");
}

// The same for f16 matrices: rounded from the checkpoint's f32 values as the model loads them.
TEST(Training, EvalOfAnFp16CheckpointGivesTheTrainingValidationLoss) {
  expect_eval_gives_training_val_loss("eval_fp16", "[precision]\nplugin = \"fp16\"\n");
  expect_eval_gives_training_val_loss("eval_llama_fp16", "[precision]\nplugin = \"fp16\"\n", kLlama);
}

// A checkpoint's optimizer state belongs to the optimizer that wrote it: resuming 8-bit moments into
// adamw, or f32 moments into adamw8bit, is refused, naming both.
TEST(Training, ResumeRefusesAnotherOptimizersState) {
  const auto dir = test::temporary_directory("resume_other_optimizer");
  test::write_text(dir / "m.toml", test::tiny_manifest("[checkpoint]\ndir = \"" + (dir / "ckpt").string() + "\"\n"));
  const std::string eight_bit = "optimizer.plugin=\"adamw8bit\"";
  train(dir / "m.toml", {eight_bit}, std::nullopt, 3);
  try {
    train(dir / "m.toml", {}, dir / "ckpt");
    ADD_FAILURE() << "8-bit state resumed into adamw";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("saved with optimizer 'adamw8bit', but the manifest uses 'adamw'"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir / "ckpt");
  train(dir / "m.toml", {}, std::nullopt, 3);
  EXPECT_THROW(train(dir / "m.toml", {eight_bit}, dir / "ckpt"), CheckpointError);
}

// Low-bit storage changes the numbers; over real runs the validation loss must reach f32's level
// (three seeds, as for bf16; the bound is on the mean). 300 steps: int8 storage leaves the ~3.1
// plateau later on some seeds (seed 7: 3.01 against f32's 2.79 at step 100) and catches up after.
TEST(Training, LowBitStorageTracksF32OnTheShippedCorpus) {
  const auto dir = test::temporary_directory("low_bit_training");
  const std::string keys = "eval_every = 300\n";
  test::write_text(dir / "f32.toml", test::tiny_manifest("", keys));
  test::write_text(dir / "int8.toml", test::tiny_manifest("[precision]\nplugin = \"int8\"\n", keys));
  test::write_text(dir / "adamw8bit.toml",
                   test::tiny_manifest("[optimizer]\nplugin = \"adamw8bit\"\nmin_8bit_size = 256\n", keys));
  double f32_sum = 0.0, int8_sum = 0.0, adamw8bit_sum = 0.0;
  for (const int seed : {7, 8, 9}) {
    const std::vector<std::string> overrides = {"train.steps=300", "train.batch=8", "model.seq_len=32",
                                                "train.seed=" + std::to_string(seed)};
    const TrainResult f32 = train(dir / "f32.toml", overrides);
    const TrainResult int8 = train(dir / "int8.toml", overrides);
    const TrainResult adamw8bit = train(dir / "adamw8bit.toml", overrides);
    ASSERT_TRUE(f32.summary.final_val_loss && int8.summary.final_val_loss && adamw8bit.summary.final_val_loss);
    std::printf("seed %d, val loss after 300 steps: f32 %.4f, int8 %.4f, adamw8bit %.4f\n", seed,
                *f32.summary.final_val_loss, *int8.summary.final_val_loss, *adamw8bit.summary.final_val_loss);
    EXPECT_LT(*int8.summary.final_val_loss, 2.6);
    EXPECT_LT(*adamw8bit.summary.final_val_loss, 2.6);
    f32_sum += *f32.summary.final_val_loss;
    int8_sum += *int8.summary.final_val_loss;
    adamw8bit_sum += *adamw8bit.summary.final_val_loss;
  }
  EXPECT_LT(std::abs(int8_sum - f32_sum) / 3.0, 0.06);
  EXPECT_LT(std::abs(adamw8bit_sum - f32_sum) / 3.0, 0.06);
}

TEST(Training, LlamaLowersValidationLossOnTheShippedCorpus) {
  const auto dir = test::temporary_directory("llama_lowers_loss");
  test::write_text(dir / "m.toml", test::tiny_manifest("", "eval_every = 150\n"));
  std::vector<std::string> overrides = kLlama;
  overrides.insert(overrides.end(), {"train.steps=150", "train.batch=8", "model.seq_len=32"});
  const TrainResult result = train(dir / "m.toml", overrides);
  ASSERT_TRUE(result.summary.final_val_loss);
  std::printf("llama: train loss %.4f -> %.4f, val loss %.4f\n", result.summary.first_loss, result.summary.final_loss,
              *result.summary.final_val_loss);
  EXPECT_GT(result.summary.first_loss, 5.0);  // ~ln(256) at init
  EXPECT_LT(*result.summary.final_val_loss, 3.0);
}

}  // namespace
}  // namespace strata
