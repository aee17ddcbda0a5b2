// End-to-end training through run_training with the real plugins: the loss falls, runs are
// bitwise reproducible, resume equals an uninterrupted run, accumulation matches the big batch.
#include <gtest/gtest.h>

#include <cmath>

#include "core/manifest/manifest.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

TrainResult train(const std::filesystem::path& manifest_path, const std::vector<std::string>& overrides = {},
                  std::optional<std::filesystem::path> resume = std::nullopt, std::int64_t stop_after = 0) {
  const Manifest manifest = load_manifest(manifest_path, overrides);
  PluginRegistry registry;
  registry.scan(plugin_search_path({}));
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

TEST(Training, ResumeContinuesBitwiseIdentically) {
  const auto dir = test::temporary_directory("resume");
  test::write_text(dir / "m.toml", test::tiny_manifest("[checkpoint]\ndir = \"" + (dir / "ckpt").string() + "\"\n"));
  const TrainResult uninterrupted = train(dir / "m.toml", {"checkpoint.dir=\"" + (dir / "full").string() + "\""});
  const TrainResult first_half = train(dir / "m.toml", {}, std::nullopt, 3);
  ASSERT_TRUE(first_half.last_checkpoint);
  const TrainResult second_half = train(dir / "m.toml", {}, dir / "ckpt");
  ASSERT_EQ(second_half.losses.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(first_half.losses[i], uninterrupted.losses[i]);
    EXPECT_EQ(second_half.losses[i], uninterrupted.losses[i + 3]) << "step " << i + 4;
  }
}

}  // namespace
}  // namespace strata
