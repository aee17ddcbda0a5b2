// LoRA fine-tuning end to end (run_training, run_eval, export_merged): a fine-tune from a trained
// base saves only its adapters and the base's fingerprint, resumes bitwise, evaluates as it trained,
// exports a merged file that evaluates as the adapted model without the plugin (on an f32 and an
// int8 base), and refuses adapters loaded onto a different base or under other adapter keys.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/safetensors.hpp"
#include "core/manifest/manifest.hpp"
#include "core/training/merged_export.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kLlama = {"model.arch=\"llama\"", "model.n_kv_head=1", "model.d_ff=48"};

PluginRegistry registry_with_plugins() {
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  return registry;
}

TrainResult train(const fs::path& manifest_path, const std::vector<std::string>& overrides = {},
                  std::optional<fs::path> resume = std::nullopt, std::int64_t stop_after = 0) {
  const Manifest manifest = load_manifest(manifest_path, overrides);
  PluginRegistry registry = registry_with_plugins();
  TrainOptions options;
  options.resume = resume;
  options.stop_after_step = stop_after;
  return run_training(manifest, registry, options);
}

double eval(const fs::path& manifest_path, const fs::path& checkpoint, const std::vector<std::string>& overrides) {
  const Manifest manifest = load_manifest(manifest_path, overrides);
  PluginRegistry registry = registry_with_plugins();
  return run_eval(manifest, registry, checkpoint, std::nullopt);
}

// A base trained for 20 steps, and a LoRA manifest that fine-tunes it (checkpoints in `tuned`).
struct FineTune {
  fs::path dir;
  fs::path base;
  fs::path manifest;
};

FineTune fine_tune(const std::string& name, const std::string& extra, const std::vector<std::string>& family) {
  FineTune run;
  run.dir = test::temporary_directory(name);
  run.base = run.dir / "base";
  test::write_text(run.dir / "base.toml", test::tiny_manifest("[checkpoint]\ndir = \"" + run.base.string() + "\"\n"));
  std::vector<std::string> overrides = family;
  overrides.push_back("train.steps=20");
  train(run.dir / "base.toml", overrides);
  const std::string targets = family.empty() ? "[\"qkv\", \"fc\"]" : "[\"q\", \"v\", \"gate\"]";
  run.manifest = run.dir / "lora.toml";
  test::write_text(run.manifest,
                   test::tiny_manifest(extra + "[[strategy]]\nplugin = \"lora\"\nrank = 4\ndropout = 0.1\ntargets = " +
                                           targets + "\n[checkpoint]\ndir = \"" + (run.dir / "tuned").string() + "\"\n",
                                       "init_from = \"" + run.base.string() + "\"\neval_every = 6\n"));
  return run;
}

TEST(LoraTraining, ResumeFromAnAdapterCheckpointContinuesBitwise) {
  for (const auto& family : {std::vector<std::string>{}, kLlama}) {
    SCOPED_TRACE(family.empty() ? "gpt2" : "llama");
    const FineTune run = fine_tune("lora_resume", "", family);
    std::vector<std::string> to_full = family;
    to_full.push_back("checkpoint.dir=\"" + (run.dir / "full").string() + "\"");
    const TrainResult uninterrupted = train(run.manifest, to_full);
    const TrainResult first_half = train(run.manifest, family, std::nullopt, 3);
    ASSERT_TRUE(first_half.last_checkpoint);
    // The save holds the adapters only, beside the base's fingerprint.
    const SafetensorsFile saved = SafetensorsFile::read(*first_half.last_checkpoint / "model.safetensors");
    for (const auto& [name, entry] : saved.entries())
      EXPECT_TRUE(name.ends_with(".lora_A") || name.ends_with(".lora_B")) << name;
    EXPECT_EQ(saved.entries().size(), family.empty() ? 2u * 2u * 2u : 2u * 3u * 2u);  // blocks x targets x (A, B)
    EXPECT_TRUE(saved.metadata().contains("strata_frozen_parameters"));
    const TrainResult second_half = train(run.manifest, family, run.dir / "tuned");
    ASSERT_EQ(second_half.losses.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(first_half.losses[i], uninterrupted.losses[i]);
      EXPECT_EQ(second_half.losses[i], uninterrupted.losses[i + 3]) << "step " << i + 4;
    }
    EXPECT_LT(uninterrupted.summary.first_loss, 5.0) << "it starts from the base (20 steps), not at ln(256) = 5.55";
  }
}

// The plugin keeps its settings in each checkpoint (strategy_1_lora.bin): a resume with other
// settings the adapters' shapes do not show (dropout) is refused naming both, and a checkpoint
// saved before strategies kept state (no such file) still resumes, bitwise.
TEST(LoraTraining, ItsCheckpointStateRefusesOtherSettingsAndOlderSavesStillResume) {
  const FineTune run = fine_tune("lora_state", "", {});
  const TrainResult uninterrupted = train(run.manifest, {"checkpoint.dir=\"" + (run.dir / "full").string() + "\""});
  const TrainResult first_half = train(run.manifest, {}, std::nullopt, 3);
  ASSERT_TRUE(first_half.last_checkpoint);
  const fs::path state = *first_half.last_checkpoint / "strategy_1_lora.bin";
  ASSERT_TRUE(fs::exists(state));
  std::ifstream saved(state);
  const std::string settings((std::istreambuf_iterator<char>(saved)), std::istreambuf_iterator<char>());
  EXPECT_EQ(settings, "rank 4, alpha 16, dropout 0.1, targets qkv fc");
  try {
    (void)train(run.manifest, {"strategy.0.dropout=0.0"}, run.dir / "tuned");
    FAIL() << "a resume under another dropout must be refused";
  } catch (const std::exception& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("saved by lora with rank 4, alpha 16, dropout 0.1, targets qkv fc; this manifest's lora has "
                           "rank 4, alpha 16, dropout 0, targets qkv fc"),
              std::string::npos)
        << message;
  }
  // As a save before SDK 9.0 left it: no strategy state, and no list of side files in trainer.json.
  fs::remove(state);
  const fs::path trainer_path = *first_half.last_checkpoint / "trainer.json";
  nlohmann::json trainer = nlohmann::json::parse(std::ifstream(trainer_path));
  trainer.erase("files");
  trainer["format"] = "strata-checkpoint-1";
  std::ofstream(trainer_path) << trainer.dump(2);
  const TrainResult second_half = train(run.manifest, {}, run.dir / "tuned");
  ASSERT_EQ(second_half.losses.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(second_half.losses[i], uninterrupted.losses[i + 3]) << "step " << i + 4;
}

// Without `targets`, the adapters go on the attention's query and value projections, found among the
// model's adaptable targets rather than chosen by family name: GPT-2's fused qkv; q and v for the
// LLaMA-based families (Gemma's q_proj is n_head * head_dim wide, not d_model).
TEST(LoraTraining, DefaultTargetsAreTheQueryAndValueProjections) {
  const std::vector<std::string> gemma = {"model.arch=\"gemma\"", "model.n_kv_head=1", "model.d_ff=48",
                                          "model.head_dim=24"};
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "qkv"}, {kLlama, "q v"}, {gemma, "q v"}};
  for (const auto& [family, expected] : cases) {
    SCOPED_TRACE(expected);
    const fs::path dir = test::temporary_directory("lora_defaults");
    test::write_text(dir / "m.toml",
                     test::tiny_manifest("[[strategy]]\nplugin = \"lora\"\nrank = 2\n[checkpoint]\ndir = \"" +
                                         (dir / "ckpt").string() + "\"\n"));
    std::vector<std::string> overrides = family;
    overrides.push_back("train.steps=2");
    const TrainResult result = train(dir / "m.toml", overrides);
    ASSERT_TRUE(result.last_checkpoint);
    std::ifstream saved(*result.last_checkpoint / "strategy_1_lora.bin");
    const std::string settings((std::istreambuf_iterator<char>(saved)), std::istreambuf_iterator<char>());
    EXPECT_EQ(settings, "rank 2, alpha 16, dropout 0, targets " + expected);
  }
}

// eval rebuilds the run's base and loads the adapters: the validation loss training measured. The
// merged file, evaluated with no plugin at all, gives the adapted model's loss.
void expect_merged_export_evaluates_as_adapted(const std::string& name, const std::string& precision,
                                               double tolerance) {
  const FineTune run = fine_tune(name, precision, {});
  const TrainResult tuned = train(run.manifest);
  ASSERT_TRUE(tuned.summary.final_val_loss);
  const double adapted = eval(run.manifest, run.dir / "tuned", {});
  EXPECT_EQ(adapted, *tuned.summary.final_val_loss);
  const Manifest manifest = load_manifest(run.manifest);
  PluginRegistry registry = registry_with_plugins();
  const fs::path merged = run.dir / "merged.safetensors";
  const MergedExport written = export_merged(manifest, registry, run.dir / "tuned", merged);
  EXPECT_EQ(written.merged_matrices, 2 * 2);
  const double plain = eval(run.dir / "base.toml", merged, {});
  const double base = eval(run.dir / "base.toml", run.base, {});
  std::printf("%s: base %.6f, adapted %.6f, merged file %.6f\n", name.c_str(), base, adapted, plain);
  EXPECT_NEAR(plain, adapted, tolerance);
  EXPECT_NE(adapted, base);
}

TEST(LoraTraining, MergedExportEvaluatesAsTheAdaptedModel) {
  expect_merged_export_evaluates_as_adapted("lora_merge_f32", "", 1e-5);
  // The int8 base is written as the values its matmuls computed with.
  expect_merged_export_evaluates_as_adapted("lora_merge_int8", "[precision]\nplugin = \"int8\"\nblock_size = 16\n",
                                            1e-4);
  // QLoRA: the NF4 base is written dequantized, as its matmuls saw it.
  expect_merged_export_evaluates_as_adapted("lora_merge_nf4", "[precision]\nplugin = \"nf4\"\n", 1e-4);
}

TEST(LoraTraining, AdaptersOntoADifferentBaseAreRefused) {
  const FineTune run = fine_tune("lora_other_base", "", {});
  train(run.manifest, {"train.steps=2"});
  // Another base: the model trained 20 steps with another seed.
  test::write_text(run.dir / "other.toml",
                   test::tiny_manifest("[checkpoint]\ndir = \"" + (run.dir / "other").string() + "\"\n"));
  train(run.dir / "other.toml", {"train.steps=20", "train.seed=8"});
  for (const auto& [what, call] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"eval",
            [&] {
              eval(run.manifest, run.dir / "tuned", {"train.init_from=\"" + (run.dir / "other").string() + "\""});
            }},
           {"resume", [&] {
              train(run.manifest, {"train.steps=4", "train.init_from=\"" + (run.dir / "other").string() + "\""},
                    run.dir / "tuned");
            }}}) {
    try {
      call();
      ADD_FAILURE() << what << ": adapters were loaded onto another base";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("belong to a different base"), std::string::npos) << e.what();
    }
  }
  // Adapters of another rank, alpha or set of targets: the product would differ, so it is refused.
  for (const std::string& other : {std::string("strategy.0.alpha=4.0"), std::string("strategy.0.targets=[\"qkv\"]")}) {
    try {
      eval(run.manifest, run.dir / "tuned", {other});
      ADD_FAILURE() << other << ": accepted";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("saved with adapters 'qkv: lora rank 4 alpha 16, fc: lora rank 4 alpha 16'"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace strata
