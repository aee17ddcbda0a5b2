// The checkpoint, offload and flash-attention plugins, loaded from the build tree and driven by the real executor:
// they must not change the math (bitwise), must move the measured peaks the way they claim, and
// must refuse bad settings before training.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/stack.hpp"
#include "stack_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

using test::expect_bitwise_equal;
using test::Family;
using test::kBlockCheckpoint;
using test::kFamilies;
using test::kOptimizerOffload;
using test::kStreaming;
using test::peak;
using test::run_stack;
using test::StackRun;

const std::string kSelectiveCheckpoint = "[[strategy]]\nplugin = \"checkpoint\"\nmode = \"selective\"\n";
const std::string kCheapCheckpoint = "[[strategy]]\nplugin = \"checkpoint\"\nmode = \"cheap\"\n";

TEST(CheckpointPlugin, EveryModeKeepsTheMathAndCutsActivations) {
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun plain = run_stack(family, "plain", "");
    const StackRun block = run_stack(family, "block", kBlockCheckpoint);
    const StackRun selective = run_stack(family, "selective", kSelectiveCheckpoint);
    const StackRun cheap = run_stack(family, "cheap", kCheapCheckpoint);
    expect_bitwise_equal(plain, block);
    expect_bitwise_equal(plain, selective);
    expect_bitwise_equal(plain, cheap);
    const auto activations = [](const StackRun& run) { return peak(run.device, MemoryCategory::activations); };
    std::printf(
        "peak activation bytes: none %llu, selective %llu, cheap %llu, block %llu\n",
        static_cast<unsigned long long>(activations(plain)), static_cast<unsigned long long>(activations(selective)),
        static_cast<unsigned long long>(activations(cheap)), static_cast<unsigned long long>(activations(block)));
    // Four blocks: block mode keeps one block's activations plus four outputs, under half of all four.
    EXPECT_LT(activations(block), activations(plain) / 2);
    EXPECT_LT(activations(cheap), activations(plain));
    EXPECT_GT(activations(cheap), activations(block));
    // Selective keeps at most one block's attention rows (the one being recomputed) of four.
    EXPECT_GE(activations(plain) - activations(selective), 3 * plain.attention_saved_bytes);
    EXPECT_GT(activations(selective), activations(block));
  }
}

TEST(CheckpointPlugin, LayersListAndPhasesSelectWhatIsDropped) {
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun plain = run_stack(family, "plain_layers", "");
    const StackRun one = run_stack(family, "one_layer", "[[strategy]]\nplugin = \"checkpoint\"\nlayers = [1]\n");
    const StackRun none =
        run_stack(family, "no_phase", "[[strategy]]\nplugin = \"checkpoint\"\nphases = [\"predict\"]\n");
    expect_bitwise_equal(plain, one);
    const auto activations = [](const StackRun& run) { return peak(run.device, MemoryCategory::activations); };
    EXPECT_LT(activations(one), activations(plain));
    EXPECT_EQ(activations(none), activations(plain)) << "every step here is a full step, which the plugin skips";
  }
}

// A 40000-token vocabulary (the corpus uses 256 of them) spans two head chunks at d_model 32, so
// dropping the logits keeps one chunk's room: the measured activation peak falls by exactly the
// difference, and the math is bitwise unchanged, with f32 and with bf16 weights (widened per chunk).
TEST(CheckpointPlugin, RecomputedLogitsKeepTheMathAndDropAllButOneChunk) {
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const std::vector<std::string> wide = {"model.vocab=40000"};
    const std::string drop_logits = "[[strategy]]\nplugin = \"checkpoint\"\nlayers = []\nlogits = \"recompute\"\n";
    for (const std::string precision : {"", "[precision]\nplugin = \"bf16\"\n"}) {
      const StackRun kept = run_stack(family, "logits_keep", "", 2, precision, wide);
      const StackRun dropped = run_stack(family, "logits_recompute", drop_logits, 2, precision, wide);
      expect_bitwise_equal(kept, dropped);
      ASSERT_LT(dropped.logits_bytes, kept.logits_bytes);
      std::printf("logits row %llu -> %llu bytes; peak activations %llu -> %llu\n",
                  static_cast<unsigned long long>(kept.logits_bytes),
                  static_cast<unsigned long long>(dropped.logits_bytes),
                  static_cast<unsigned long long>(peak(kept.device, MemoryCategory::activations)),
                  static_cast<unsigned long long>(peak(dropped.device, MemoryCategory::activations)));
      EXPECT_EQ(peak(kept.device, MemoryCategory::activations) - peak(dropped.device, MemoryCategory::activations),
                kept.logits_bytes - dropped.logits_bytes);
    }
  }
}

TEST(OffloadPlugin, HostOptimizerStateKeepsTheMathAndLeavesNoOptimizerBytesOnTheDevice) {
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun plain = run_stack(family, "plain_offload", "");
    const StackRun offload = run_stack(family, "optimizer_host", kOptimizerOffload);
    expect_bitwise_equal(plain, offload);
    EXPECT_EQ(peak(offload.device, MemoryCategory::optimizer), 0u);
    EXPECT_EQ(peak(offload.host, MemoryCategory::optimizer), peak(plain.device, MemoryCategory::optimizer));
    // Gradients stream to the host block by block: at most two blocks' on the device, plus the globals'.
    EXPECT_LE(peak(offload.device, MemoryCategory::grads),
              2 * offload.layer_weight_bytes + offload.global_weight_bytes);
    EXPECT_LT(peak(offload.device, MemoryCategory::grads), peak(plain.device, MemoryCategory::grads));
    // What crosses to the device each step: the updated weights, and the blocks' gradients the second
    // of run_stack's two micro batches accumulates into (the globals' stay on the device between
    // micro batches). The first micro batch's zeros are filled on the device, not copied: copying
    // them would add every gradient once more.
    const auto steps = static_cast<std::uint64_t>(offload.losses.size());
    EXPECT_EQ(offload.bytes_to_device, steps * (offload.stored_weight_bytes + offload.block_gradient_bytes));
  }
}

TEST(OffloadPlugin, LayerStreamingBoundsResidentWeightsAndKeepsTheMath) {
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun plain = run_stack(family, "plain_stream", "");
    const StackRun streamed = run_stack(family, "streamed", kStreaming);
    const StackRun everything = run_stack(family, "everything", kBlockCheckpoint + kStreaming);
    expect_bitwise_equal(plain, streamed);
    expect_bitwise_equal(plain, everything);
    const std::uint64_t bound = 2 * streamed.layer_weight_bytes + streamed.global_weight_bytes;
    std::printf("device weight peak: all resident %llu, K=2 %llu (bound %llu)\n",
                static_cast<unsigned long long>(peak(plain.device, MemoryCategory::weights)),
                static_cast<unsigned long long>(peak(streamed.device, MemoryCategory::weights)),
                static_cast<unsigned long long>(bound));
    EXPECT_LE(peak(streamed.device, MemoryCategory::weights), bound);
    EXPECT_LT(everything.device.peak_total, streamed.device.peak_total) << "checkpointing adds to streaming";
  }
}

// Activation offloading: bitwise the run that keeps everything, with the activations of all but the
// last block (and the block in flight) on the host instead of the device; with bf16 activations
// and with weight streaming too. Every activation byte that left comes back.
TEST(OffloadPlugin, OffloadedActivationsKeepTheMathAndLeaveTheDevice) {
  const std::string activations = "[[strategy]]\nplugin = \"offload\"\nactivations = \"host\"\n";
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun plain = run_stack(family, "plain_activations", "");
    const StackRun moved = run_stack(family, "activations_host", activations);
    expect_bitwise_equal(plain, moved);
    const std::uint64_t kept = peak(plain.device, MemoryCategory::activations);
    const std::uint64_t offloaded = peak(moved.device, MemoryCategory::activations);
    std::printf("peak device activation bytes: kept %llu, offloaded %llu; host %llu\n",
                static_cast<unsigned long long>(kept), static_cast<unsigned long long>(offloaded),
                static_cast<unsigned long long>(peak(moved.host, MemoryCategory::activations)));
    // Four blocks: at most three blocks' worth stays on the device (two in flight, the last one).
    EXPECT_LT(offloaded, kept);
    EXPECT_GT(peak(moved.host, MemoryCategory::activations), 0u);
    EXPECT_EQ(moved.device.live[category_index(MemoryCategory::activations)], 0u);
    expect_bitwise_equal(plain, run_stack(family, "activations_streamed", activations + kStreaming));
    const std::string bf16 = "[precision]\nplugin = \"bf16\"\n";
    expect_bitwise_equal(run_stack(family, "bf16_kept", "", 3, bf16),
                         run_stack(family, "bf16_activations_host", activations, 3, bf16));
  }
}

// One strategy drops a block's activations, another moves them: the run stops naming both.
TEST(OffloadPlugin, ABlockBothDroppedAndMovedIsRefusedNamingBoth) {
  const std::string activations = "[[strategy]]\nplugin = \"offload\"\nactivations = \"host\"\n";
  try {
    (void)run_stack(kFamilies.front(), "dropped_and_moved", kBlockCheckpoint + activations);
    FAIL() << "a block both dropped and moved must stop the run";
  } catch (const std::exception& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("dropped by [[strategy]] #1 'checkpoint'"), std::string::npos) << message;
    EXPECT_NE(message.find("moved to the host by [[strategy]] #2 'offload'"), std::string::npos) << message;
  }
}

// bf16 storage changes the numbers, but checkpointing and offload must not change them further:
// under bf16 weights and activations every strategy is still bitwise equal to none.
TEST(Bf16WithStrategies, CheckpointAndOffloadKeepTheBf16MathBitwise) {
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const std::string bf16 = "[precision]\nplugin = \"bf16\"\n";
    const StackRun plain = run_stack(family, "bf16_plain", "", 3, bf16);
    expect_bitwise_equal(plain, run_stack(family, "bf16_block", kBlockCheckpoint, 3, bf16));
    expect_bitwise_equal(plain, run_stack(family, "bf16_selective", kSelectiveCheckpoint, 3, bf16));
    expect_bitwise_equal(plain, run_stack(family, "bf16_cheap", kCheapCheckpoint, 3, bf16));
    const StackRun streamed = run_stack(family, "bf16_streamed", kBlockCheckpoint + kStreaming, 3, bf16);
    expect_bitwise_equal(plain, streamed);
    // The f32 masters are optimizer state: offloaded with it, none of them stays on the device.
    EXPECT_EQ(peak(streamed.device, MemoryCategory::optimizer), 0u);
    EXPECT_LE(peak(streamed.device, MemoryCategory::weights),
              2 * streamed.layer_weight_bytes + streamed.global_weight_bytes);
    const StackRun f32 = run_stack(family, "f32_plain", "");
    EXPECT_NE(plain.losses, f32.losses) << "bf16 storage must change the numbers";
  }
}

// The flash kernel plugin against the built-in kernel, with 70 positions (two 64-query tiles, the
// second partial): one step's gradients agree within 1e-5, every strategy stays bitwise neutral on
// top of it, and its saved rows are the B x n_head x T log-sum-exps, read from the table and the
// allocator.
TEST(FlashAttentionPlugin, MatchesTheBuiltInKernelAndKeepsStrategiesNeutral) {
  const std::string flash = "[kernels]\nattention = \"flash\"\n";
  const std::vector<std::string> shape = {"model.seq_len=70"};
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun fast = run_stack(family, "fast_1", "", 1, "", shape);
    const StackRun flashed = run_stack(family, "flash_1", "", 1, flash, shape);
    ASSERT_EQ(fast.grads.size(), flashed.grads.size());
    double worst = 0, largest = 0;
    for (std::size_t i = 0; i < fast.grads.size(); ++i) {
      worst = std::max(worst, std::abs(double(fast.grads[i]) - double(flashed.grads[i])));
      largest = std::max(largest, std::abs(double(fast.grads[i])));
    }
    std::printf("flash vs built-in, one step: largest gradient difference %.3g of %.3g\n", worst, largest);
    EXPECT_LE(worst, 1e-5 * largest);
    EXPECT_NEAR(fast.losses[0], flashed.losses[0], 1e-6 * std::abs(fast.losses[0]));

    const StackRun plain = run_stack(family, "flash_plain", "", 3, flash, shape);
    expect_bitwise_equal(plain, run_stack(family, "flash_block", kBlockCheckpoint, 3, flash, shape));
    expect_bitwise_equal(plain, run_stack(family, "flash_selective", kSelectiveCheckpoint, 3, flash, shape));
    expect_bitwise_equal(plain, run_stack(family, "flash_streamed", kBlockCheckpoint + kStreaming, 3, flash, shape));
    const std::string bf16 = flash + "[precision]\nplugin = \"bf16\"\n";
    const StackRun bf16_plain = run_stack(family, "flash_bf16", "", 3, bf16, shape);
    expect_bitwise_equal(bf16_plain, run_stack(family, "flash_bf16_selective", kSelectiveCheckpoint, 3, bf16, shape));
    expect_bitwise_equal(bf16_plain, run_stack(family, "flash_bf16_block", kBlockCheckpoint, 3, bf16, shape));

    const std::int64_t batch_rows = 2, n_head = 2, T = 70;  // 4 sequences in 2 micro batches
    EXPECT_EQ(plain.attention_saved_floats, batch_rows * n_head * T);
    EXPECT_EQ(fast.attention_saved_floats, batch_rows * n_head * T * T);
    const auto activations = [](const StackRun& run) { return peak(run.device, MemoryCategory::activations); };
    EXPECT_GE(activations(fast) - activations(flashed), 4 * (fast.attention_saved_bytes - plain.attention_saved_bytes));
  }
}

// A head dim the CUDA kernels lack, or a backend the plugin has no kernel for, is refused with the
// reason before anything runs; the CPU version runs any head dim, and flash_bf16 (tensor cores)
// is refused on the CPU.
TEST(FlashAttentionPlugin, RefusesWhatItCannotRunBeforeTraining) {
  const auto build = [](const std::string& device_kind, const std::string& kernel = "flash") {
    const auto dir = test::temporary_directory("flash_refused");
    // d_model 192 over 2 heads: head dim 96.
    test::write_text(dir / "m.toml", test::tiny_manifest("[kernels]\nattention = \"" + kernel +
                                                         "\"\n[device]\nkind = \"" + device_kind + "\"\n"));
    const Manifest manifest = load_manifest(dir / "m.toml", {"model.d_model=192"});
    PluginRegistry registry;
    registry.scan_search_path(plugin_search_path({}));
    HostServicesImpl host(manifest.model.info(), manifest.device.kind);
    return build_stack(manifest, registry, host);
  };
  EXPECT_NO_THROW(build("cpu"));
  try {
    build("cuda:0");
    FAIL() << "head dim 96 accepted on cuda:0";
  } catch (const ManifestError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("[kernels] attention = \"flash\""), std::string::npos) << message;
#ifdef STRATA_HAVE_CUDA
    EXPECT_NE(message.find("head dim 96"), std::string::npos) << message;
    EXPECT_NE(message.find("64 and 128"), std::string::npos) << message;
#else
    EXPECT_NE(message.find("no CUDA kernels"), std::string::npos) << message;
#endif
  }
  try {
    build("cpu", "flash_bf16");
    FAIL() << "flash_bf16 accepted on the cpu";
  } catch (const ManifestError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("[kernels] attention = \"flash_bf16\""), std::string::npos) << message;
    EXPECT_NE(message.find("tensor cores, not on the cpu"), std::string::npos) << message;
  }
}

void expect_refused(const std::string& table, const std::string& key, const std::string& range,
                    const std::string& header = "[[strategy]]\n") {
  const auto dir = test::temporary_directory("refused");
  test::write_text(dir / "m.toml", test::tiny_manifest(header + table));
  const Manifest manifest = load_manifest(dir / "m.toml");
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  HostServicesImpl host(manifest.model.info(), manifest.device.kind);
  try {
    build_stack(manifest, registry, host);
    FAIL() << "accepted: " << table;
  } catch (const ManifestError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(key), std::string::npos) << message;
    EXPECT_NE(message.find(range), std::string::npos) << message;
  }
}

TEST(StrategyConfig, BadSettingsAreRefusedBeforeTraining) {
  expect_refused("plugin = \"checkpoint\"\nevery = 0\n", "every", "[1, 2]");
  expect_refused("plugin = \"checkpoint\"\nmode = \"blok\"\n", "mode", "did you mean \"block\"");
  expect_refused("plugin = \"checkpoint\"\nlayers = [5]\n", "layers", "[0, 1]");
  expect_refused("plugin = \"offload\"\noptimizer_state = \"host\"\nmax_resident_layers = 0\n", "max_resident_layers",
                 "[1, 2]");
  expect_refused("plugin = \"offload\"\noptimizer_state = \"host\"\nmax_resident_layers = 2\nprefetch = 2\n",
                 "prefetch", "[0, 1]");
  expect_refused("plugin = \"offload\"\nmax_resident_layers = 2\n", "max_resident_layers", "optimizer_state");
  expect_refused("plugin = \"bf16\"\nweights = \"f16\"\n", "weights", "\"bf16\"", "[precision]\n");
  expect_refused("plugin = \"checkpoint\"\nlogits = \"drop\"\n", "logits", "keep, recompute");
}

}  // namespace
}  // namespace strata
