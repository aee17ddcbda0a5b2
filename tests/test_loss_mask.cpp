// Loss masks (core/data/loss_mask.hpp): the file round-trips and is refused, naming both files,
// when it does not belong to its token file; batches leave out exactly the masked targets; an
// all-ones mask trains bit for bit as no mask; and a step's loss is the mean over its targets (two
// complementary masks add up to the unmasked loss), also over micro batches with different target
// counts, the count being summed before the backward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/data/dataset.hpp"
#include "core/data/loss_mask.hpp"
#include "core/data/token_file.hpp"
#include "core/data/token_sequence.hpp"
#include "core/errors/data_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/training/training_run.hpp"
#include "stack_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::vector<std::uint32_t> corpus_bytes(std::size_t count) {
  std::ifstream in(test::source_path("data/kjv.txt"), std::ios::binary);
  std::vector<std::uint32_t> tokens;
  for (char c; tokens.size() < count && in.get(c);) tokens.push_back(static_cast<unsigned char>(c));
  return tokens;
}

// Writes tokens.bin and, unless `mask` is empty, tokens.bin.mask beside it.
fs::path write_tokens(const fs::path& dir, const std::vector<std::uint32_t>& tokens,
                      const std::vector<std::uint8_t>& mask) {
  fs::create_directories(dir);
  const fs::path path = dir / "tokens.bin";
  TokenFileWriter writer(path, false);
  writer.append(tokens);
  if (!mask.empty()) {
    LossMaskWriter mask_writer(loss_mask_path(path));
    mask_writer.append(mask);
    mask_writer.commit(writer.token_hash());
  }
  writer.commit();
  return path;
}

// Targets in runs of 200 tokens, one run in three: windows of 16 hold anywhere from 0 to 16.
std::vector<std::uint8_t> striped_mask(std::size_t count, int phase) {
  std::vector<std::uint8_t> mask(count);
  for (std::size_t i = 0; i < count; ++i) mask[i] = (i / 200 + static_cast<std::size_t>(phase)) % 3 == 0 ? 1 : 0;
  return mask;
}

std::string refusal(const std::function<void()>& call) {
  try {
    call();
  } catch (const DataError& error) {
    return error.what();
  }
  return "";
}

TEST(LossMask, RoundTripsAndIsRefusedWhenItDoesNotBelongToItsTokens) {
  const fs::path dir = test::temporary_directory("loss_mask_file");
  const std::vector<std::uint32_t> tokens = corpus_bytes(5000);
  const std::vector<std::uint8_t> mask = striped_mask(tokens.size(), 0);
  const fs::path path = write_tokens(dir, tokens, mask);
  EXPECT_TRUE(is_loss_mask_file(dir / "tokens.bin.mask"));
  const TokenSequence sequence = TokenSequence::map_token_file(path, 256);
  ASSERT_TRUE(sequence.has_loss_mask());
  for (std::size_t i = 0; i < tokens.size(); ++i) ASSERT_EQ(sequence.is_target(i), mask[i] != 0) << i;
  const TokenSequence tail = sequence.slice(1000, 2000);
  for (std::size_t i = 0; i < 1000; ++i) ASSERT_EQ(tail.is_target(i), mask[1000 + i] != 0) << "a slice's mask";

  const auto load = [&] { (void)TokenSequence::map_token_file(path, 256); };
  const fs::path mask_file = dir / "tokens.bin.mask";
  // The token file written again with one token changed: the mask is another's.
  std::vector<std::uint32_t> edited = tokens;
  edited[17] = 'Q';
  {
    TokenFileWriter writer(path, false);
    writer.append(edited);
    writer.commit();
  }
  std::string why = refusal(load);
  EXPECT_NE(why.find("tokens.bin.mask (the loss mask of " + path.string() + "): written for other tokens"),
            std::string::npos)
      << why;
  // Fewer tokens than the mask has positions.
  write_tokens(dir, tokens, mask);
  {
    TokenFileWriter writer(path, false);
    writer.append(std::span(tokens).first(4000));
    writer.commit();
  }
  why = refusal(load);
  EXPECT_NE(why.find("5000 positions for 4000 tokens"), std::string::npos) << why;
  // A byte that is neither 0 nor 1, and a truncated file.
  write_tokens(dir, tokens, mask);
  {
    std::fstream edit(mask_file, std::ios::in | std::ios::out | std::ios::binary);
    edit.seekp(1024 + 33);
    edit.put(2);
  }
  why = refusal(load);
  EXPECT_NE(why.find("byte 2 at position 33"), std::string::npos) << why;
  write_tokens(dir, tokens, mask);
  fs::resize_file(mask_file, 1024 + 4999);
  why = refusal(load);
  EXPECT_NE(why.find("a truncated or extended file"), std::string::npos) << why;
  test::write_text(mask_file, std::string(2048, 'x'));
  why = refusal(load);
  EXPECT_NE(why.find("not a loss mask"), std::string::npos) << why;
  EXPECT_FALSE(is_loss_mask_file(mask_file));
}

TEST(LossMask, BatchesLeaveOutExactlyTheMaskedTargets) {
  // Token i is i: a window's first input says where it starts.
  const fs::path dir = test::temporary_directory("loss_mask_batches");
  std::vector<std::uint32_t> tokens(20000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint32_t>(i);
  const std::vector<std::uint8_t> mask = striped_mask(tokens.size(), 1);
  const fs::path path = write_tokens(dir, tokens, mask);
  DataOptions options;
  options.train = path;
  options.vocab = 20000;
  options.seq_len = 16;
  options.batch = 4;
  const Dataset dataset(options);
  ASSERT_TRUE(dataset.loss_masked());
  std::vector<std::int32_t> inputs(64), targets(64);
  std::int64_t masked = 0, kept = 0;
  for (std::int64_t step = 1; step <= 50; ++step) {
    dataset.train_batch(7, step, 0, inputs.data(), targets.data());
    for (int row = 0; row < 4; ++row) {
      const auto start = static_cast<std::size_t>(inputs[static_cast<std::size_t>(row * 16)]);
      for (int t = 0; t < 16; ++t) {
        const std::size_t next = start + static_cast<std::size_t>(t) + 1;
        const std::int32_t expected = mask[next] != 0 ? static_cast<std::int32_t>(next) : kNoTarget;
        ASSERT_EQ(targets[static_cast<std::size_t>(row * 16 + t)], expected) << "step " << step << " row " << row;
        (mask[next] != 0 ? kept : masked) += 1;
      }
    }
  }
  EXPECT_GT(masked, 0);
  EXPECT_GT(kept, 0);
  EXPECT_EQ(target_count(targets),
            std::count_if(targets.begin(), targets.end(), [](std::int32_t t) { return t >= 0; }));
  // Validation windows (the last 10%) read the same mask.
  dataset.val_window(3, inputs.data(), targets.data());
  const auto start = static_cast<std::size_t>(inputs[0]);
  for (int t = 0; t < 16; ++t)
    EXPECT_EQ(targets[static_cast<std::size_t>(t)] >= 0, mask[start + static_cast<std::size_t>(t) + 1] != 0) << t;
}

TrainResult train_on(const fs::path& tokens, const std::vector<std::string>& more = {}) {
  const fs::path dir = tokens.parent_path();
  test::write_text(dir / "m.toml", test::tiny_manifest());
  std::vector<std::string> overrides{"data.train=\"" + tokens.string() + "\"", "train.steps=3", "train.batch=8"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  const Manifest manifest = load_manifest(dir / "m.toml", overrides);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  return run_training(manifest, registry, TrainOptions{});
}

TEST(LossMask, AnAllOnesMaskTrainsBitForBitAsNoMask) {
  const std::vector<std::uint32_t> tokens = corpus_bytes(40000);
  const TrainResult plain = train_on(write_tokens(test::temporary_directory("loss_mask_none"), tokens, {}));
  const TrainResult ones = train_on(
      write_tokens(test::temporary_directory("loss_mask_ones"), tokens, std::vector<std::uint8_t>(tokens.size(), 1)));
  EXPECT_EQ(plain.losses, ones.losses);
  ASSERT_TRUE(plain.summary.final_val_loss && ones.summary.final_val_loss);
  EXPECT_EQ(*plain.summary.final_val_loss, *ones.summary.final_val_loss);
}

// The step's targets, as the dataset draws them (this test's manifest: seed 7, batch 8, T 16),
// over every micro batch.
std::int64_t step_targets(const fs::path& tokens, std::int64_t step, int micro_batches) {
  DataOptions options;
  options.train = tokens;
  options.seq_len = 16;
  options.batch = 8 / micro_batches;
  const Dataset dataset(options);
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(16 * options.batch)), targets(inputs.size());
  std::int64_t count = 0;
  for (int m = 0; m < micro_batches; ++m) {
    dataset.train_batch(7, step, m, inputs.data(), targets.data());
    count += target_count(targets);
  }
  return count;
}

// Before any update, the loss of the whole batch is the two halves' losses weighted by their
// target counts: N l = |A| l_A + |B| l_B for complementary masks A and B. A loss normalised by the
// positions rather than the targets fails this by the ratio of the counts; with two micro batches,
// so does one normalised per micro batch (the count is summed over them before the backward).
void expect_complementary_masks_add_up(int micro_batches) {
  const std::string name = "loss_mask_micro" + std::to_string(micro_batches);
  const std::vector<std::uint32_t> tokens = corpus_bytes(40000);
  const std::vector<std::uint8_t> a = striped_mask(tokens.size(), 0);
  std::vector<std::uint8_t> b(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) b[i] = a[i] != 0 ? 0 : 1;
  const fs::path path_a = write_tokens(test::temporary_directory(name + "_a"), tokens, a);
  const fs::path path_b = write_tokens(test::temporary_directory(name + "_b"), tokens, b);
  const std::vector<std::string> keys{"train.micro_batches=" + std::to_string(micro_batches)};
  const TrainResult whole = train_on(write_tokens(test::temporary_directory(name + "_all"), tokens, {}), keys);
  const TrainResult only_a = train_on(path_a, keys);
  const TrainResult only_b = train_on(path_b, keys);
  const auto count_a = static_cast<double>(step_targets(path_a, 1, micro_batches));
  const auto count_b = static_cast<double>(step_targets(path_b, 1, micro_batches));
  ASSERT_EQ(count_a + count_b, 128.0);
  ASSERT_GT(count_a, 0.0);
  ASSERT_GT(count_b, 0.0);
  const double combined = (count_a * only_a.losses[0] + count_b * only_b.losses[0]) / 128.0;
  std::printf("%d micro batches, step 1: whole %.9f, targets A %.0f (%.6f) + B %.0f (%.6f) -> %.9f\n", micro_batches,
              whole.losses[0], count_a, only_a.losses[0], count_b, only_b.losses[0], combined);
  EXPECT_NEAR(combined, whole.losses[0], 1e-9 * whole.losses[0]);
  EXPECT_NE(only_a.losses[0], whole.losses[0]);
}

TEST(LossMask, AStepsLossIsTheMeanOverItsTargets) {
  expect_complementary_masks_add_up(1);
}

TEST(LossMask, MicroBatchesSumTheirTargetsBeforeTheBackward) {
  // The two micro batches' counts differ (checked), so a per-micro-batch mean would not add up.
  const std::vector<std::uint32_t> tokens = corpus_bytes(40000);
  const fs::path path =
      write_tokens(test::temporary_directory("loss_mask_counts"), tokens, striped_mask(tokens.size(), 0));
  const std::int64_t both = step_targets(path, 1, 2);
  DataOptions options;
  options.train = path;
  options.seq_len = 16;
  options.batch = 4;
  std::vector<std::int32_t> inputs(64), targets(64);
  Dataset(options).train_batch(7, 1, 0, inputs.data(), targets.data());
  const std::int64_t first = target_count(targets);
  EXPECT_NE(first * 2, both) << "the micro batches hold different target counts";
  expect_complementary_masks_add_up(2);
}

// The gradient too is the mean over the targets: N g = |A| g_A + |B| g_B for the first step's
// gradients (run_stack: batch 4 in two micro batches of 2 rows, T 16, seed 7). A backward seeded with
// 1/positions instead of 1/targets fails this by the ratio of the counts (the loss alone would not
// show it, nor would AdamW, which forgets the gradient's scale).
TEST(LossMask, TheGradientIsTheMeanOverTheTargetsToo) {
  const std::vector<std::uint32_t> tokens = corpus_bytes(40000);
  const std::vector<std::uint8_t> a = striped_mask(tokens.size(), 1);
  std::vector<std::uint8_t> b(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) b[i] = a[i] != 0 ? 0 : 1;
  const auto run = [&](const std::string& name, const std::vector<std::uint8_t>& mask) {
    const fs::path path = write_tokens(test::temporary_directory(name), tokens, mask);
    return std::make_pair(
        test::run_stack(test::kFamilies[0], name, "", 1, "", {"data.train=\"" + path.string() + "\""}), path);
  };
  const auto [whole, whole_path] = run("loss_mask_grad_all", {});
  const auto [only_a, path_a] = run("loss_mask_grad_a", a);
  const auto [only_b, path_b] = run("loss_mask_grad_b", b);
  const auto count = [](const fs::path& path) {
    const Dataset dataset({path, std::nullopt, 0.1, 256, 16, 2});
    std::vector<std::int32_t> inputs(32), targets(32);
    std::int64_t total = 0;
    for (int m = 0; m < 2; ++m) {
      dataset.train_batch(7, 1, m, inputs.data(), targets.data());
      total += target_count(targets);
    }
    return static_cast<double>(total);
  };
  const double count_a = count(path_a), count_b = count(path_b);
  ASSERT_EQ(count_a + count_b, 64.0);
  ASSERT_GT(count_a, 0.0);
  ASSERT_GT(count_b, 0.0);
  ASSERT_EQ(whole.grads.size(), only_a.grads.size());
  double worst = 0.0, largest = 0.0;
  for (std::size_t i = 0; i < whole.grads.size(); ++i) {
    const double expected = 64.0 * whole.grads[i];
    worst = std::max(worst, std::abs(count_a * only_a.grads[i] + count_b * only_b.grads[i] - expected));
    largest = std::max(largest, std::abs(expected));
  }
  std::printf("targets %.0f + %.0f of 64: N g vs |A| g_A + |B| g_B within %.2e of the largest (%.3g)\n", count_a,
              count_b, worst / largest, largest);
  EXPECT_LT(worst, 1e-5 * largest);
}

}  // namespace
}  // namespace strata
