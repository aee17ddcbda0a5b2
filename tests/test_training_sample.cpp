// train.sample_every: the greedy continuation a run prints at a step is the one `strata generate`
// decodes from that step's checkpoint, and sampling leaves the training bitwise alone, with offload
// and checkpointing moving the weights around it.
#include <gtest/gtest.h>

#include "core/errors/manifest_error.hpp"
#include "core/generate/generator.hpp"
#include "core/manifest/manifest.hpp"
#include "core/training/evaluation_model.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

TrainResult train(const Manifest& manifest) {
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  return run_training(manifest, registry, TrainOptions{});
}

const std::string kStrategies =
    "[[strategy]]\nplugin = \"checkpoint\"\nevery = 1\n"
    "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\nmax_resident_layers = 2\nprefetch = 1\n";

TEST(TrainingSample, IsWhatGenerateDecodesFromTheStepsCheckpoint) {
  const auto dir = test::temporary_directory("training_sample_generate");
  // The tiny manifest, wider and longer: enough training for two samples to differ.
  test::write_text(dir / "m.toml",
                   test::tiny_manifest("[checkpoint]\ndir = \"" + (dir / "ckpt").string() + "\"\nevery = 30\n",
                                       "sample_every = 30\nsample_tokens = 12\nsample_prompt = \"And God \"\n"));
  const std::vector<std::string> wider = {"model.d_model=64", "model.seq_len=32", "train.batch=8", "train.steps=60"};
  const Manifest manifest = load_manifest(dir / "m.toml", wider);
  const TrainResult result = train(manifest);
  ASSERT_EQ(result.samples.size(), 2u);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  for (const TrainingSample& sample : result.samples) {
    EXPECT_EQ(sample.prompt_text, "And God ");
    EXPECT_EQ(sample.tokens.size(), 12u);
    char name[32];
    std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(sample.step));
    EvaluationModel saved = open_for_generation(manifest, registry, dir / "ckpt" / name, std::nullopt);
    GenerationOptions greedy;
    greedy.sampling.temperature = 0.0f;
    greedy.max_new_tokens = 12;
    const GenerationResult expected = generate(*saved.model, sample.prompt, greedy, [](std::int32_t) {});
    EXPECT_EQ(sample.tokens, expected.tokens) << "step " << sample.step;
    EXPECT_EQ(sample.text, std::string(expected.tokens.begin(), expected.tokens.end()));
  }
  // The two steps' weights differ, and so (here) do their continuations: each sample is its step's.
  EXPECT_NE(result.samples[0].tokens, result.samples[1].tokens);
}

TEST(TrainingSample, LeavesTheTrainingBitwiseAlone) {
  const auto dir = test::temporary_directory("training_sample_bitwise");
  test::write_text(dir / "plain.toml", test::tiny_manifest(kStrategies));
  test::write_text(dir / "sampled.toml", test::tiny_manifest(kStrategies, "sample_every = 2\nsample_tokens = 4\n"));
  const TrainResult plain = train(load_manifest(dir / "plain.toml", {}));
  const TrainResult sampled = train(load_manifest(dir / "sampled.toml", {}));
  EXPECT_TRUE(plain.samples.empty());
  ASSERT_EQ(sampled.samples.size(), 3u);
  // No prompt and no tokenizer: the validation split's first 8 bytes.
  EXPECT_EQ(sampled.samples[0].prompt.size(), 8u);
  ASSERT_EQ(plain.losses.size(), sampled.losses.size());
  for (std::size_t i = 0; i < plain.losses.size(); ++i)
    EXPECT_EQ(plain.losses[i], sampled.losses[i]) << "step " << i + 1;
  EXPECT_EQ(plain.summary.final_val_loss, sampled.summary.final_val_loss);
}

TEST(TrainingSample, APromptLongerThanTheContextIsRefused) {
  const auto dir = test::temporary_directory("training_sample_prompt");
  test::write_text(dir / "m.toml",
                   test::tiny_manifest("", "sample_every = 2\nsample_prompt = \"" + std::string(16, 'x') + "\"\n"));
  try {
    train(load_manifest(dir / "m.toml", {}));
    FAIL() << "a 16-token prompt in a 16-position context was accepted";
  } catch (const ManifestError& error) {
    EXPECT_NE(std::string(error.what()).find("train.sample_prompt is 16 tokens"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace strata
