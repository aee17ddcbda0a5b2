#pragma once
// One tiny training run through the real plugins and executor, with everything the strategy and
// storage tests compare: losses, the last gradients and weights, and the allocator's peaks.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/device/allocator.hpp"
#include "core/residency/disk_tier.hpp"

namespace strata::test {

struct StackRun {
  std::vector<double> losses;
  std::vector<double> loss_scales;  // each step's, as the precision policy reported it
  std::vector<bool> skipped;        // each step's: the policy found non-finite gradients
  std::vector<float> grads;         // every gradient after the last backward (frozen parameters have none)
  std::vector<float> weights;       // every weight after the last update
  std::map<std::string, std::vector<float>> named_grads;  // the same, per parameter
  std::map<std::string, std::vector<float>> named_weights;
  ArenaStats device;
  ArenaStats host;
  std::uint64_t layer_weight_bytes = 0;     // one block's weights (with the scales of quantized ones)
  std::uint64_t layer_matrix_bytes = 0;     // the same, matrices only
  std::uint64_t global_weight_bytes = 0;    // embeddings and final LayerNorm
  std::uint64_t logits_bytes = 0;           // the logits row, as the strategies sized it
  std::int64_t attention_saved_floats = 0;  // one block's attention-kernel row
  std::uint64_t attention_saved_bytes = 0;  // the same, as allocated (padded)
  std::uint64_t layer_state_bytes = 0;      // one block's optimizer state (masters included)
  std::uint64_t global_state_bytes = 0;     // the same, outside the blocks
  std::optional<DiskTierStats> disk;        // when a strategy put rows on disk ([device] disk_path)
  std::uint64_t bytes_to_device = 0;        // the copy stream's moves, over the run
  std::uint64_t stored_weight_bytes = 0;    // every parameter's stored weights (with scales)
  std::uint64_t block_gradient_bytes = 0;   // the blocks' gradient rows
  std::uint64_t global_gradient_bytes = 0;  // the globals' gradient rows
};

// The model families every equivalence runs on: the tiny GPT-2, and a LLaMA of the same size with
// grouped-query attention (two query heads share one key/value head).
struct Family {
  std::string name;
  std::vector<std::string> overrides;
};
extern const std::vector<Family> kFamilies;

// Four blocks, `steps` steps of 2 micro batches, with the given [[strategy]] tables, `precision` (a
// [precision] table, when not empty) and `optimizer` (an [optimizer] table; AdamW when empty).
StackRun run_stack(const Family& family, const std::string& name, const std::string& strategies, int steps = 3,
                   const std::string& precision = "", const std::vector<std::string>& overrides = {},
                   const std::string& optimizer = "");

std::uint64_t peak(const ArenaStats& stats, MemoryCategory category);

// The [[strategy]] tables the equivalence tests put on top of a stack.
inline const std::string kBlockCheckpoint = "[[strategy]]\nplugin = \"checkpoint\"\nevery = 1\n";
inline const std::string kOptimizerOffload = "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n";
inline const std::string kStreaming =
    "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\nmax_resident_layers = 2\nprefetch = 1\n";

void expect_bitwise_equal(const StackRun& expected, const StackRun& actual);

// Why build_stack refuses a tiny manifest with these tables (ManifestError's text), or "".
std::string stack_refusal(const std::string& tables, const std::vector<std::string>& overrides = {});

}  // namespace strata::test
