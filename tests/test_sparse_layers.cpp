// Sparse-layer training (strategy "sparse_layers") through the real plugins: the trained blocks get
// exactly the gradients the full model gives them, frozen weights stay bitwise as they were and
// cost no gradient or optimizer bytes (as the allocator counts them), skipped blocks are the
// identity, the memory strategies stay bitwise neutral on top, and bad keys are refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "stack_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

using test::expect_bitwise_equal;
using test::kBlockCheckpoint;
using test::kFamilies;
using test::kStreaming;
using test::peak;
using test::run_stack;
using test::StackRun;

// Four blocks: 0 and 3 train, 1 and 2 do not.
std::string sparse(const std::string& middle, bool embeddings = true) {
  return "[[strategy]]\nplugin = \"sparse_layers\"\ntrain_first = 1\ntrain_last = 1\nmiddle = \"" + middle +
         "\"\ntrain_embeddings = " + (embeddings ? "true" : "false") + "\n";
}

bool in_middle(const std::string& name) {
  for (const std::string block : {"h.1.", "h.2.", "model.layers.1.", "model.layers.2."})
    if (name.starts_with(block)) return true;
  return false;
}

// Freezing computes no weight gradient for the middle blocks, but the gradient still flows through
// their activations: every trained parameter's gradient is the full model's, bit for bit.
TEST(SparseLayers, TrainedBlocksGetExactlyTheFullModelsGradients) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun full = run_stack(family, "full", "", 1);
    const StackRun frozen = run_stack(family, "sparse_freeze", sparse("freeze"), 1);
    EXPECT_EQ(frozen.losses[0], full.losses[0]) << "the forward is the same";
    std::size_t compared = 0;
    for (const auto& [name, grad] : full.named_grads) {
      const auto found = frozen.named_grads.find(name);
      EXPECT_EQ(found == frozen.named_grads.end(), in_middle(name)) << name << ": gradient row only where it trains";
      if (found == frozen.named_grads.end()) continue;
      EXPECT_EQ(found->second, grad) << name;
      ++compared;
    }
    EXPECT_GT(compared, 0u);
  }
}

TEST(SparseLayers, FrozenWeightsStayAsTheyWereAndCostNoGradientOrOptimizerBytes) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun initial = run_stack(family, "initial", "", 0);
    const StackRun full = run_stack(family, "full", "", 3);
    const StackRun frozen = run_stack(family, "sparse_freeze", sparse("freeze", false), 3);
    for (const auto& [name, weight] : frozen.named_weights) {
      const bool trains = !in_middle(name) && !name.starts_with("wte") && !name.starts_with("wpe") &&
                          name != "model.embed_tokens.weight";
      if (trains) {
        EXPECT_NE(weight, initial.named_weights.at(name)) << name << " trains";
      } else if (name != "wte.weight") {  // GPT-2's token embedding is the tied head, which trains
        EXPECT_EQ(weight, initial.named_weights.at(name)) << name << " is frozen";
      }
    }
    const auto bytes = [](const StackRun& run, MemoryCategory category) {
      return static_cast<double>(peak(run.device, category));
    };
    std::printf("%s: grads %.0f vs %.0f bytes, optimizer %.0f vs %.0f bytes, loss %.4f -> %.4f\n", family.name.c_str(),
                bytes(frozen, MemoryCategory::grads), bytes(full, MemoryCategory::grads),
                bytes(frozen, MemoryCategory::optimizer), bytes(full, MemoryCategory::optimizer), frozen.losses.front(),
                frozen.losses.back());
    EXPECT_LT(bytes(frozen, MemoryCategory::grads), 0.8 * bytes(full, MemoryCategory::grads));
    EXPECT_LT(bytes(frozen, MemoryCategory::optimizer), 0.8 * bytes(full, MemoryCategory::optimizer));
    EXPECT_LT(frozen.losses.back(), frozen.losses.front());
  }
}

// A skipped block is the identity: skipping every block leaves the embedding added to nothing, so
// the loss is the one a model without blocks has, whatever the blocks' weights.
TEST(SparseLayers, SkippedBlocksAreTheIdentityAndStayUntouched) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun initial = run_stack(family, "initial", "", 0);
    const StackRun skipped = run_stack(family, "sparse_skip", sparse("skip"), 3);
    const StackRun frozen = run_stack(family, "sparse_freeze", sparse("freeze"), 1);
    EXPECT_NE(skipped.losses[0], frozen.losses[0]) << "two blocks fewer run";
    for (const auto& [name, weight] : skipped.named_weights) {
      if (in_middle(name)) {
        EXPECT_EQ(weight, initial.named_weights.at(name)) << name;
      }
    }
    const StackRun all_skipped = run_stack(
        family, "skip_all", "[[strategy]]\nplugin = \"sparse_layers\"\ntrain_last = 0\nmiddle = \"skip\"\n", 1);
    const StackRun all_skipped_other_seed = run_stack(
        family, "skip_all_other", "[[strategy]]\nplugin = \"sparse_layers\"\ntrain_last = 0\nmiddle = \"skip\"\n", 1,
        "", {"model.n_layer=2"});
    EXPECT_EQ(all_skipped.losses[0], all_skipped_other_seed.losses[0])
        << "with every block skipped, neither their count nor their weights matter";
    // A skipped block keeps only its output row: the activation peak falls by the two blocks' rest.
    EXPECT_LT(peak(skipped.device, MemoryCategory::activations), peak(frozen.device, MemoryCategory::activations));
  }
}

TEST(SparseLayers, CheckpointAndStreamingStayBitwiseNeutralOnTop) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    for (const std::string middle : {"freeze", "skip"}) {
      const StackRun plain = run_stack(family, "sparse_plain", sparse(middle), 3);
      for (const std::string& strategy :
           {kBlockCheckpoint, kStreaming, std::string("[[strategy]]\nplugin = \"checkpoint\"\nmode = \"selective\"\n"),
            std::string("[[strategy]]\nplugin = \"checkpoint\"\nmode = \"cheap\"\n")})
        expect_bitwise_equal(plain, run_stack(family, "sparse_strategy", sparse(middle) + strategy, 3));
    }
  }
}

TEST(SparseLayers, RefusesMoreTrainedBlocksThanTheModelHas) {
  // The tiny manifest has two blocks.
  const std::string too_many =
      test::stack_refusal("[[strategy]]\nplugin = \"sparse_layers\"\ntrain_first = 2\ntrain_last = 1\n");
  EXPECT_NE(too_many.find("train_first + train_last = 3 is more than the model's n_layer = 2"), std::string::npos)
      << too_many;
  const std::string nothing = test::stack_refusal(
      "[[strategy]]\nplugin = \"sparse_layers\"\ntrain_last = 0\ntrain_head = false\ntrain_embeddings = false\n");
  EXPECT_NE(nothing.find("nothing would train"), std::string::npos) << nothing;
  EXPECT_NE(test::stack_refusal("[[strategy]]\nplugin = \"sparse_layers\"\nmiddle = \"drop\"\n").find("middle"),
            std::string::npos);
  EXPECT_EQ(test::stack_refusal("[[strategy]]\nplugin = \"sparse_layers\"\ntrain_last = 1\n"), "");
}

}  // namespace
}  // namespace strata
