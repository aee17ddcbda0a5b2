// The checkpoint, offload and flash-attention plugins, loaded from the build tree and driven by the real executor:
// they must not change the math (bitwise), must move the measured peaks the way they claim, and
// must refuse bad settings before training.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/data/dataset.hpp"
#include "core/device/backend.hpp"
#include "core/executor/executor.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_error.hpp"
#include "core/model/make_model.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/stack.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

struct StackRun {
  std::vector<double> losses;
  std::vector<float> grads;    // every gradient after the last backward
  std::vector<float> weights;  // every weight after the last update
  ArenaStats device;
  ArenaStats host;
  std::uint64_t layer_weight_bytes = 0;     // one block's weights
  std::uint64_t global_weight_bytes = 0;    // embeddings and final LayerNorm
  std::uint64_t logits_bytes = 0;           // the logits row, as the strategies sized it
  std::int64_t attention_saved_floats = 0;  // one block's attention-kernel row
  std::uint64_t attention_saved_bytes = 0;  // the same, as allocated (padded)
};

// The model families every equivalence runs on: the tiny GPT-2, and a LLaMA of the same size with
// grouped-query attention (two query heads share one key/value head).
struct Family {
  std::string name;
  std::vector<std::string> overrides;
};
const std::vector<Family> kFamilies = {{"gpt2", {}},
                                       {"llama", {"model.arch=\"llama\"", "model.n_kv_head=1", "model.d_ff=48"}}};

// Four blocks, AdamW, `steps` steps of 2 micro batches, with the given [[strategy]] tables (and
// `precision`, a [precision] table, when not empty).
StackRun run_stack(const Family& family, const std::string& name, const std::string& strategies, int steps = 3,
                   const std::string& precision = "", const std::vector<std::string>& overrides = {}) {
  const auto dir = test::temporary_directory("strategies_" + family.name + "_" + name);
  test::write_text(dir / "m.toml", test::tiny_manifest("[optimizer]\nplugin = \"adamw\"\n" + precision + strategies,
                                                       "micro_batches = 2\n"));
  std::vector<std::string> all_overrides = {"model.n_layer=4"};
  all_overrides.insert(all_overrides.end(), family.overrides.begin(), family.overrides.end());
  all_overrides.insert(all_overrides.end(), overrides.begin(), overrides.end());
  const Manifest manifest = load_manifest(dir / "m.toml", all_overrides);
  PluginRegistry registry;
  registry.scan(plugin_search_path({}));
  HostServicesImpl host(manifest.model.info(), manifest.device.kind);
  Stack stack = build_stack(manifest, registry, host);
  const int rows = manifest.train.batch / manifest.train.micro_batches;
  auto device = make_cpu_backend(0);
  const std::unique_ptr<Model> model_owner =
      make_model(manifest.model, *device, stack.attention_on(*device, manifest.model.attention_shape(1)),
                 ModelOptions{rows, state_layout_of(*stack.optimizer), Allocation::deferred, stack.storage_on(*device),
                              Purpose::training});
  Model& model = *model_owner;
  Executor executor(model, *stack.optimizer, *stack.precision, stack.strategy_pointers(),
                    ExecutorOptions{steps, 0, manifest.train.lr});
  executor.attach();
  model.init_weights(manifest.train.seed);
  const Dataset dataset({manifest.data.train, std::nullopt, 0.1, 256, manifest.model.seq_len(), rows});

  const std::size_t micro_size = static_cast<std::size_t>(rows) * manifest.model.seq_len();
  std::vector<std::int32_t> inputs(2 * micro_size), targets(2 * micro_size);
  const std::span<const std::int32_t> in(inputs), out(targets);
  const std::vector<MicroBatch> micro_batches = {{in.first(micro_size), out.first(micro_size)},
                                                 {in.last(micro_size), out.last(micro_size)}};
  StackRun run;
  for (int step = 1; step <= steps; ++step) {
    for (int m = 0; m < 2; ++m)
      dataset.train_batch(manifest.train.seed, step, m, inputs.data() + m * micro_size,
                          targets.data() + m * micro_size);
    run.losses.push_back(executor.train_step(step, micro_batches).loss);
  }
  model.store().complete_all_moves();
  for (const ParameterRows& rows_of : model.parameters()) {
    const auto grad = test::f32(model, rows_of.grad);
    const auto weight = test::values(model, rows_of);  // the f32 master under bf16 storage
    run.grads.insert(run.grads.end(), grad.begin(), grad.end());
    run.weights.insert(run.weights.end(), weight.begin(), weight.end());
    const std::uint64_t stored_bytes = model.table().row(rows_of.param).bytes();
    if (rows_of.layer == 0) run.layer_weight_bytes += stored_bytes;
    if (rows_of.layer < 0) run.global_weight_bytes += stored_bytes;
  }
  run.logits_bytes = model.table().row(*model.table().find("act.logits")).bytes();
  for (const TensorRow& row : model.table().rows())
    if (row.name.ends_with("attention_saved")) {
      run.attention_saved_floats = row.elements();
      run.attention_saved_bytes = row.bytes();
    }
  run.device = device->device_memory().stats();
  run.host = device->host_memory().stats();
  return run;
}

std::uint64_t peak(const ArenaStats& stats, MemoryCategory category) {
  return stats.peak[category_index(category)];
}

void expect_bitwise_equal(const StackRun& expected, const StackRun& actual) {
  ASSERT_EQ(expected.losses.size(), actual.losses.size());
  for (std::size_t i = 0; i < expected.losses.size(); ++i) EXPECT_EQ(expected.losses[i], actual.losses[i]) << i;
  ASSERT_EQ(expected.grads.size(), actual.grads.size());
  EXPECT_EQ(0, std::memcmp(expected.grads.data(), actual.grads.data(), expected.grads.size() * sizeof(float)))
      << "gradients differ";
  EXPECT_EQ(0, std::memcmp(expected.weights.data(), actual.weights.data(), expected.weights.size() * sizeof(float)))
      << "weights differ";
}

const std::string kBlockCheckpoint = "[[strategy]]\nplugin = \"checkpoint\"\nevery = 1\n";
const std::string kSelectiveCheckpoint = "[[strategy]]\nplugin = \"checkpoint\"\nmode = \"selective\"\n";
const std::string kCheapCheckpoint = "[[strategy]]\nplugin = \"checkpoint\"\nmode = \"cheap\"\n";
const std::string kOptimizerOffload = "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n";
const std::string kStreaming =
    "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\nmax_resident_layers = 2\nprefetch = 1\n";

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
// reason before anything runs; the CPU version runs any head dim.
TEST(FlashAttentionPlugin, RefusesWhatItCannotRunBeforeTraining) {
  const auto build = [](const std::string& device_kind) {
    const auto dir = test::temporary_directory("flash_refused");
    // d_model 192 over 2 heads: head dim 96.
    test::write_text(dir / "m.toml", test::tiny_manifest("[kernels]\nattention = \"flash\"\n[device]\nkind = \"" +
                                                         device_kind + "\"\n"));
    const Manifest manifest = load_manifest(dir / "m.toml", {"model.d_model=192"});
    PluginRegistry registry;
    registry.scan(plugin_search_path({}));
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
}

void expect_refused(const std::string& table, const std::string& key, const std::string& range,
                    const std::string& header = "[[strategy]]\n") {
  const auto dir = test::temporary_directory("refused");
  test::write_text(dir / "m.toml", test::tiny_manifest(header + table));
  const Manifest manifest = load_manifest(dir / "m.toml");
  PluginRegistry registry;
  registry.scan(plugin_search_path({}));
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
