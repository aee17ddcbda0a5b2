// Saves of a run whose optimizer state (and bf16 masters) live in the disk tier: the tier's rows are
// kept by hard link in the save's tier/ folder instead of copied, the run goes on writing new files
// for those rows, and a resume from an earlier save is bitwise the uninterrupted run. A changed byte
// in a linked file is corruption that `strata verify` and a resume name; a checkpoint directory on
// another filesystem than the tier gets a copy, which resumes the same.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/checkpoint_verify.hpp"
#include "core/manifest/manifest.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/residency/disk_tier.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata::test {
namespace {

namespace fs = std::filesystem;

const std::string kStack =
    "[optimizer]\nplugin = \"adamw\"\n"
    "[precision]\nplugin = \"bf16\"\nweights = \"bf16\"\n"
    "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"disk\"\n";

struct TierRun {
  fs::path checkpoints;
  TrainResult result;
};

// 8 steps, saves every 3 (steps 3 and 6, and the last), with the tier in `tier_dir`.
TierRun train(const std::string& name, const fs::path& tier_dir, const fs::path& checkpoints,
              std::optional<fs::path> resume = std::nullopt) {
  const auto dir = temporary_directory("tier_checkpoints_" + name);
  write_text(dir / "m.toml", tiny_manifest(kStack + "[checkpoint]\ndir = \"" + checkpoints.string() +
                                           "\"\nevery = 3\nkeep_last = 0\n"));
  const Manifest manifest = load_manifest(
      dir / "m.toml", {"model.n_layer=3", "train.steps=8", "device.disk_path=\"" + tier_dir.string() + "\""});
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  TrainOptions options;
  options.resume = resume;
  options.fresh = !resume.has_value();
  return {checkpoints, run_training(manifest, registry, options)};
}

nlohmann::json trainer_of(const fs::path& save) {
  std::ifstream in(save / "trainer.json");
  return nlohmann::json::parse(in);
}

std::uint64_t size_of(const fs::path& file) {
  return static_cast<std::uint64_t>(fs::file_size(file));
}

TEST(TierCheckpoints, SavesLinkTheTiersRowsAndResumeBitwise) {
  const auto tier_dir = temporary_directory("tier_checkpoints_tier");
  const auto root = temporary_directory("tier_checkpoints_saves");
  const TierRun whole = train("whole", tier_dir, root / "whole");
  ASSERT_EQ(whole.result.losses.size(), 8u);
  const fs::path save = whole.checkpoints / "step_00000003";
  const nlohmann::json trainer = trainer_of(save);
  EXPECT_EQ(trainer["format"], kTierCheckpointFormat);
  ASSERT_TRUE(trainer.contains("tier_files"));
  std::uint64_t linked_bytes = 0;
  int in_model = 0, in_optimizer = 0;
  for (const auto& [name, entry] : trainer["tier_files"].items()) {
    const fs::path file = save / entry["file"].get<std::string>();
    ASSERT_TRUE(fs::is_regular_file(file)) << file;
    EXPECT_GE(size_of(file), entry["bytes"].get<std::uint64_t>());
    linked_bytes += entry["bytes"].get<std::uint64_t>();
    (entry["in"] == "model.safetensors" ? in_model : in_optimizer) += 1;
  }
  // Every trained parameter's two moments live in the tier, and the f32 masters of its bf16
  // matrices (biases and gains are stored in f32, as their own values).
  EXPECT_GT(in_model, 0) << "no master was linked";
  EXPECT_GT(in_optimizer, in_model);
  // The safetensors files hold what was in memory only: far less than the rows linked.
  const std::uint64_t copied = size_of(save / "model.safetensors") + size_of(save / "optimizer.safetensors");
  EXPECT_LT(copied, linked_bytes / 4) << "the save copied the tier's rows";
  // The run wrote steps 4..8 after this save: a linked file that followed the row would fail its
  // checksum. Every save verifies, reading each linked file whole.
  const DirectoryVerdict verdict = verify_checkpoint_directory(whole.checkpoints);
  for (const SaveVerdict& one : verdict.saves) EXPECT_EQ(one.fault, "") << one.directory;
  EXPECT_TRUE(verdict.ok());
  EXPECT_TRUE(fs::is_empty(tier_dir)) << "the tier's own files outlived the run";

  // Resumed from step 3 (the tier is a new one): steps 4..8 as the uninterrupted run had them.
  const TierRun resumed = train("resumed", tier_dir, root / "whole", save);
  ASSERT_EQ(resumed.result.losses.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i)
    EXPECT_EQ(resumed.result.losses[i], whole.result.losses[3 + i]) << "step " << 4 + i;
}

TEST(TierCheckpoints, AChangedByteInALinkedFileIsCorruption) {
  const auto tier_dir = temporary_directory("tier_checkpoints_corrupt_tier");
  const auto root = temporary_directory("tier_checkpoints_corrupt");
  const TierRun whole = train("corrupt", tier_dir, root / "run");
  const fs::path save = whole.checkpoints / "step_00000006";
  const nlohmann::json trainer = trainer_of(save);
  const auto entry = trainer["tier_files"].begin();
  const fs::path file = save / (*entry)["file"].get<std::string>();
  {
    std::fstream bytes(file, std::ios::in | std::ios::out | std::ios::binary);
    bytes.seekg(5);
    char value = 0;
    bytes.read(&value, 1);
    value = static_cast<char>(value ^ 0x10);
    bytes.seekp(5);
    bytes.write(&value, 1);
  }
  const DirectoryVerdict verdict = verify_checkpoint_directory(whole.checkpoints);
  EXPECT_FALSE(verdict.ok());
  bool named = false;
  for (const SaveVerdict& one : verdict.saves)
    if (one.directory == save) named = one.fault.find(file.string()) != std::string::npos;
  EXPECT_TRUE(named) << "verify did not name " << file;
  try {
    (void)train("corrupt_resume", tier_dir, root / "run", save);
    FAIL() << "a resume from a save with a changed linked file went ahead";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
  // A linked file gone is an incomplete save.
  fs::remove(file);
  EXPECT_FALSE(verify_checkpoint_directory(whole.checkpoints).ok());
  // tier/ as a link to a folder elsewhere (whose files are sound) is not the save's own.
  const fs::path other = whole.checkpoints / "step_00000003";
  fs::rename(save / "tier", root / "elsewhere");
  fs::create_directory_symlink(other / "tier", save / "tier");
  const DirectoryVerdict linked = verify_checkpoint_directory(whole.checkpoints);
  bool refused = false;
  for (const SaveVerdict& one : linked.saves)
    if (one.directory == save) refused = one.fault.find("not a directory") != std::string::npos;
  EXPECT_TRUE(refused) << "a tier/ that is a symbolic link was accepted";
}

// The checkpoint directory on another filesystem than the tier (here /dev/shm's tmpfs holds the
// tier): no link can be made, so the saves copy the rows, and a resume is as bitwise.
TEST(TierCheckpoints, AnotherFilesystemGetsACopyThatResumesTheSame) {
  const auto root = temporary_directory("tier_checkpoints_copy");
  struct stat here {
  }, there{};
  if (disk_directory_problem("/dev/shm") != "" || ::stat(root.c_str(), &here) != 0 || ::stat("/dev/shm", &there) != 0 ||
      here.st_dev == there.st_dev)
    GTEST_SKIP() << "no /dev/shm on another filesystem than the test directory here";
  const TierRun whole = train("copy", "/dev/shm", root / "run");
  const fs::path save = whole.checkpoints / "step_00000003";
  EXPECT_FALSE(trainer_of(save).contains("tier_files"));
  EXPECT_EQ(trainer_of(save)["format"], kCheckpointFormat);
  EXPECT_TRUE(verify_checkpoint_directory(whole.checkpoints).ok());
  const TierRun resumed = train("copy_resumed", "/dev/shm", root / "run", save);
  ASSERT_EQ(resumed.result.losses.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i)
    EXPECT_EQ(resumed.result.losses[i], whole.result.losses[3 + i]) << "step " << 4 + i;
}

}  // namespace
}  // namespace strata::test
