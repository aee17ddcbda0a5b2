// train.update = "fused" (core/executor/fused_update.cpp): each block is updated right after its
// backward and its gradients freed. Without clipping the optimizer sees exactly what the full update
// gives it, so the runs are bitwise equal (losses, saved weights and optimizer state) with every
// built-in optimizer, bf16 storage, checkpointing, offload to host or disk and layer streaming; only one block's
// gradients exist at a time; the two clipping choices stay within a bound of exact clipping; the
// previous step's norm survives a resume; non-finite gradients stop the run; and the combinations
// it cannot run are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint_verify.hpp"
#include "core/checkpoint/safetensors.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata::test {
namespace {

constexpr int kSteps = 8;

struct FusedRun {
  TrainResult result;
  std::filesystem::path saved;  // the last checkpoint directory
};

// kSteps steps of the tiny model with four blocks, saved at the end; `extra` tables and overrides.
FusedRun train(const std::string& name, const std::string& extra, std::vector<std::string> overrides,
               const std::string& optimizer = "[optimizer]\nplugin = \"adamw\"\ngrad_clip = 0.0\n") {
  const auto dir = temporary_directory("fused_" + name);
  write_text(dir / "m.toml", tiny_manifest(optimizer + extra + "[checkpoint]\ndir = \"" + (dir / "ckpt").string() +
                                           "\"\nevery = " + std::to_string(kSteps) + "\n"));
  overrides.insert(overrides.begin(), {"model.n_layer=4", "train.steps=" + std::to_string(kSteps)});
  const Manifest manifest = load_manifest(dir / "m.toml", overrides);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  FusedRun run{run_training(manifest, registry, TrainOptions{}), {}};
  if (run.result.last_checkpoint) run.saved = *run.result.last_checkpoint;
  return run;
}

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every tensor a save holds, by name: the safetensors files' and those it keeps in the disk tier's
// files (tier/), so a save that links rows compares with one that copied them.
std::map<std::string, std::string> saved_tensors(const std::filesystem::path& save) {
  const nlohmann::json trainer = nlohmann::json::parse(file_bytes(save / "trainer.json"));
  std::map<std::string, std::string> tensors;
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    std::vector<SafetensorsFile> files = tier_tensors(save, trainer, file, true);
    files.push_back(SafetensorsFile::read(save / file));
    for (const auto& [key, value] : files.back().metadata())  // the frozen weights' and adapters' records
      if (key != kChecksumsKey) tensors[std::string(file) + ":metadata:" + key] = value;
    for (const SafetensorsFile& held : files)
      for (const auto& [name, entry] : held.entries()) {
        const auto bytes = held.raw(name, entry.dtype, entry.shape);
        tensors[std::string(file) + ":" + name] = {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
      }
  }
  return tensors;
}

void expect_same_run(const FusedRun& full, const FusedRun& fused) {
  ASSERT_EQ(full.result.losses.size(), fused.result.losses.size());
  for (std::size_t i = 0; i < full.result.losses.size(); ++i)
    EXPECT_EQ(full.result.losses[i], fused.result.losses[i]) << "step " << i + 1;
  EXPECT_TRUE(saved_tensors(full.saved) == saved_tensors(fused.saved)) << "the saves differ";
}

std::uint64_t peak_grads(const FusedRun& run) {
  return run.result.summary.peak_device_bytes_by_category[category_index(MemoryCategory::grads)];
}

const std::vector<std::string> kLlama = {"model.arch=\"llama\"", "model.n_kv_head=1", "model.d_ff=48"};
const std::string kFused = "train.update=\"fused\"";

TEST(FusedUpdate, WithoutClippingIsBitwiseTheFullUpdate) {
  const std::string adamw8bit =
      "[optimizer]\nplugin = \"adamw8bit\"\ngrad_clip = 0.0\nmin_8bit_size = 64\nblock_size = 256\n";
  const std::string sgd = "[optimizer]\nplugin = \"sgd\"\n";
  const std::string bf16 = "[precision]\nplugin = \"bf16\"\n";
  const std::string checkpoint = "[[strategy]]\nplugin = \"checkpoint\"\nevery = 1\n";
  const std::string host = "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n";
  struct Case {
    std::string name, optimizer, extra;
    std::vector<std::string> family;
  };
  const std::string adamw = "[optimizer]\nplugin = \"adamw\"\ngrad_clip = 0.0\n";
  const std::vector<Case> cases = {
      {"adamw", adamw, "", {}},
      {"adamw_llama", adamw, "", kLlama},
      {"adamw8bit", adamw8bit, "", {}},
      {"sgd", sgd, "", kLlama},
      {"bf16", adamw, bf16, {}},
      {"checkpoint_offload", adamw, checkpoint + host, kLlama},
      {"streamed",
       adamw,
       "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\nmax_resident_layers = 2\n"
       "prefetch = 1\n",
       {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const FusedRun full = train("full_" + c.name, c.extra, c.family, c.optimizer);
    std::vector<std::string> fused_overrides = c.family;
    fused_overrides.push_back(kFused);
    const FusedRun fused = train("fused_" + c.name, c.extra, fused_overrides, c.optimizer);
    expect_same_run(full, fused);
    EXPECT_LT(fused.result.losses.back(), fused.result.losses.front());
  }
}

// Only one block's gradients exist at a time beside the globals': the peak of gradients falls by
// three of the four blocks' (a block's gradients measured as what two more blocks add).
TEST(FusedUpdate, OnlyOneBlocksGradientsExistAtATime) {
  const FusedRun full = train("grads_full", "", {});
  const FusedRun fused = train("grads_fused", "", {kFused});
  const FusedRun full_six = train("grads_full6", "", {"model.n_layer=6"});
  const std::uint64_t block = (peak_grads(full_six) - peak_grads(full)) / 2;
  ASSERT_GT(block, 0u);
  std::printf("peak gradient bytes: full %llu, fused %llu, one block %llu\n",
              static_cast<unsigned long long>(peak_grads(full)), static_cast<unsigned long long>(peak_grads(fused)),
              static_cast<unsigned long long>(block));
  EXPECT_EQ(peak_grads(fused), peak_grads(full) - 3 * block);
}

// grad_clip = 0.5 is below every step's norm here, so clipping acts on every step. Clipping by the
// previous step's norm, or each block by its own, changes the update's scale but not its
// direction within a block: the losses stay within a few percent of exact global-norm clipping.
TEST(FusedUpdate, BothClippingChoicesStayNearExactClipping) {
  const std::string clipped = "[optimizer]\nplugin = \"adamw\"\ngrad_clip = 0.5\n";
  const FusedRun exact = train("clip_exact", "", {}, clipped);
  const FusedRun previous = train("clip_previous", "", {kFused}, clipped);
  const FusedRun per_block = train("clip_per_block", "", {kFused, "train.fused_clip=\"per_block\""}, clipped);
  const double previous_difference = worst_relative_difference(exact.result.losses, previous.result.losses);
  const double per_block_difference = worst_relative_difference(exact.result.losses, per_block.result.losses);
  std::printf("worst relative loss difference from exact clipping: previous %.3g, per_block %.3g\n",
              previous_difference, per_block_difference);
  EXPECT_GT(previous_difference, 0.0) << "the clipping changed nothing: grad_clip is not acting";
  EXPECT_GT(per_block_difference, 0.0);
  EXPECT_LE(previous_difference, 0.02);   // measured: 3.5e-3
  EXPECT_LE(per_block_difference, 0.02);  // measured: 1.9e-3
  // The first step has no previous norm and is not clipped: the loss after it is the unclipped run's.
  const FusedRun unclipped = train("clip_none", "", {kFused});
  EXPECT_EQ(previous.result.losses[1], unclipped.result.losses[1]);
}

// The previous step's norm is saved: a run resumed from step 4 clips its step 5 as the
// uninterrupted run did, so their losses are bitwise equal.
TEST(FusedUpdate, ResumeClipsByTheSavedNorm) {
  const auto dir = temporary_directory("fused_resume");
  write_text(dir / "m.toml", tiny_manifest("[optimizer]\nplugin = \"adamw\"\ngrad_clip = 0.5\n[checkpoint]\ndir = \"" +
                                           (dir / "ckpt").string() + "\"\nevery = 4\n"));
  const std::vector<std::string> overrides = {"model.n_layer=4", "train.steps=8", kFused};
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  const TrainResult whole = run_training(load_manifest(dir / "m.toml", overrides), registry, TrainOptions{});
  ASSERT_EQ(whole.losses.size(), 8u);
  TrainOptions resume;
  resume.resume = dir / "ckpt" / "step_00000004";
  resume.fresh = false;
  const TrainResult resumed = run_training(load_manifest(dir / "m.toml", overrides), registry, resume);
  ASSERT_EQ(resumed.losses.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(whole.losses[4 + i], resumed.losses[i]) << "step " << 5 + i;
}

// Optimizer state on disk under the fused update: each block's state is read in during its
// backward and written back after its update, with the same bits as on the host.
TEST(FusedUpdate, StateOnDiskIsBitwiseStateOnTheHost) {
  const auto tier_dir = temporary_directory("fused_disk_tier");
  const std::string adamw = "[optimizer]\nplugin = \"adamw\"\ngrad_clip = 1.0\n";
  const FusedRun host =
      train("host", "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n", {kFused}, adamw);
  const FusedRun disk = train("disk", "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"disk\"\n",
                              {kFused, "device.disk_path=\"" + tier_dir.string() + "\""}, adamw);
  expect_same_run(host, disk);
  ASSERT_TRUE(disk.result.disk.has_value());
  EXPECT_GT(disk.result.disk->bytes_read, 0u);
  EXPECT_TRUE(std::filesystem::is_empty(tier_dir)) << "the tier's file outlived its run";
}

// Layer streaming with the block weights on disk under the fused update: each block's weights are
// written back once its update has changed them, and read in again by the next pass; the losses
// and the saved files are streaming from host memory's, bit for bit, with f32 and int8 weights.
TEST(FusedUpdate, BlockWeightsOnDiskAreBitwiseWeightsOnTheHost) {
  const auto tier_dir = temporary_directory("fused_disk_weights");
  const std::string adamw = "[optimizer]\nplugin = \"adamw\"\ngrad_clip = 1.0\n";
  const std::string adamw8bit =
      "[optimizer]\nplugin = \"adamw8bit\"\ngrad_clip = 1.0\nmin_8bit_size = 64\nblock_size = 256\n";
  const std::string streaming =
      "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"disk\"\nmax_resident_layers = 2\nprefetch = 1\n";
  const std::string disk_path = "device.disk_path=\"" + tier_dir.string() + "\"";
  for (const bool int8 : {false, true}) {
    SCOPED_TRACE(int8 ? "int8" : "f32");
    const std::string precision = int8 ? "[precision]\nplugin = \"int8\"\n" : "";
    const std::string optimizer = int8 ? adamw8bit : adamw;
    const FusedRun host =
        train(std::string("wh") + (int8 ? "8" : ""), precision + streaming, {kFused, disk_path}, optimizer);
    const FusedRun disk = train(std::string("wd") + (int8 ? "8" : ""), precision + streaming + "weights = \"disk\"\n",
                                {kFused, disk_path}, optimizer);
    expect_same_run(host, disk);
    ASSERT_TRUE(disk.result.disk.has_value() && host.result.disk.has_value());
    EXPECT_GT(disk.result.disk->bytes_written, host.result.disk->bytes_written) << "the weights went to disk too";
    const std::size_t weights = category_index(MemoryCategory::weights);
    EXPECT_GT(disk.result.disk->peak[weights], 0u);
    EXPECT_EQ(host.result.disk->peak[weights], 0u);
    EXPECT_TRUE(std::filesystem::is_empty(tier_dir)) << "the tier's file outlived its run";
  }
}

// A step whose gradients are not finite cannot be skipped once blocks are updated: the run stops,
// naming the step and the block (SGD at lr 10 diverges within a few steps).
TEST(FusedUpdate, NonFiniteGradientsStopTheRun) {
  try {
    (void)train("nonfinite", "", {kFused, "train.lr=10", "train.steps=20"}, "[optimizer]\nplugin = \"sgd\"\n");
    FAIL() << "SGD at lr 10 trained 20 fused steps without a non-finite gradient";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("are not finite"), std::string::npos) << message;
    EXPECT_NE(message.find("cannot skip a step"), std::string::npos) << message;
  }
}

std::string refusal(const std::string& tables, const std::vector<std::string>& overrides) {
  const auto dir = temporary_directory("fused_refusal");
  write_text(dir / "m.toml", tiny_manifest(tables));
  try {
    const Manifest manifest = load_manifest(dir / "m.toml", overrides);
    PluginRegistry registry;
    registry.scan_search_path(plugin_search_path({}));
    (void)run_training(manifest, registry, TrainOptions{});
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "";
}

TEST(FusedUpdate, WhatItCannotRunIsRefused) {
  const std::string adamw = "[optimizer]\nplugin = \"adamw\"\n";
  EXPECT_NE(refusal(adamw, {kFused, "train.micro_batches=2"}).find("micro batches cannot accumulate"),
            std::string::npos);
  EXPECT_NE(refusal(adamw + "[precision]\nplugin = \"fp16\"\n", {kFused}).find("scales the loss and skips every step"),
            std::string::npos);
  EXPECT_NE(refusal(adamw, {"train.fused_clip=\"per_block\""}).find("fused_clip applies to update = \"fused\""),
            std::string::npos);
  EXPECT_NE(refusal(adamw, {"train.update=\"partial\""}).find("update"), std::string::npos);
}

}  // namespace
}  // namespace strata::test
