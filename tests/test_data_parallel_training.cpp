// Data-parallel training inside one process: two ranks that are threads (tests/thread_ranks.hpp),
// each running run_training, with every call on a thread of the rank's own that lags behind the
// rank's computing, so the sums and zero 3's gathers are still in flight when the executor goes on
// to the next block. Every stage still gives the losses of the blocking calls, bit for bit. Here,
// unlike under mpirun (tests/cli/data_parallel.sh), the sanitized suite watches the overlap: a row
// freed or moved while a call reads or writes it (Residency::guard_rows) is a use after free.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/manifest/manifest.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"
#include "thread_ranks.hpp"

namespace strata::test {
namespace {

struct RankRuns {
  std::vector<std::vector<double>> losses;  // per rank
  std::vector<CategoryBytes> peaks;         // per rank: each category's peak over the run
};

// Four steps of the tiny model with six blocks (enough for zero 2 and 3 to hold fewer than all)
// on two thread ranks; `extra` tables appended to the manifest, `base` the options of each rank.
RankRuns train_on_two_ranks(const std::string& name, int zero, bool overlapped, const std::string& extra = "",
                            const TrainOptions& base = {}) {
  const auto dir = temporary_directory("data_parallel_" + name);
  write_text(dir / "m.toml", tiny_manifest("[distributed]\nzero = " + std::to_string(zero) + "\n" + extra));
  const Manifest manifest =
      load_manifest(dir / "m.toml", {"model.n_layer=6", "train.steps=4", "train.threads=1", "train.eval_every=0"});
  Mailbox mailbox(2);
  RankRuns runs{std::vector<std::vector<double>>(2), std::vector<CategoryBytes>(2)};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      // 1 ms before every call: far longer than a tiny block's backward, so the calls lag.
      ThreadCommunicator communicator(mailbox, r, overlapped, std::chrono::microseconds(overlapped ? 1000 : 0));
      PluginRegistry registry;
      registry.scan_search_path(plugin_search_path({}));
      TrainOptions options = base;
      options.communicator = &communicator;
      try {
        const TrainResult result = run_training(manifest, registry, options);
        runs.losses[static_cast<std::size_t>(r)] = result.losses;
        runs.peaks[static_cast<std::size_t>(r)] = result.summary.peak_device_bytes_by_category;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();  // the other rank waits in vain: see the log
        std::_Exit(1);
      }
    });
  for (std::thread& rank : ranks) rank.join();
  return runs;
}

TEST(DataParallelTraining, OverlappedCallsGiveTheBlockingCallsLossesAtEveryStage) {
  const RankRuns blocking = train_on_two_ranks("blocking", 0, false);
  ASSERT_EQ(blocking.losses[0].size(), 4u);
  EXPECT_EQ(blocking.losses[0], blocking.losses[1]) << "the ranks report different mean losses";
  for (int zero = 0; zero <= 3; ++zero) {
    const RankRuns overlapped = train_on_two_ranks("overlapped_z" + std::to_string(zero), zero, true);
    EXPECT_EQ(overlapped.losses[0], blocking.losses[0]) << "zero " << zero;
    EXPECT_EQ(overlapped.losses[1], blocking.losses[0]) << "zero " << zero;
  }
}

// Recomputation and offloaded optimizer state on top: their moves and frees meet rows in flight.
TEST(DataParallelTraining, OverlappedCallsKeepTheLossesUnderCheckpointingAndOffload) {
  const std::string stacked =
      "[[strategy]]\nplugin = \"checkpoint\"\n[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n";
  const RankRuns blocking = train_on_two_ranks("stacked_blocking", 0, false);
  for (const int zero : {2, 3}) {
    const RankRuns overlapped = train_on_two_ranks("stacked_z" + std::to_string(zero), zero, true, stacked);
    EXPECT_EQ(overlapped.losses[0], blocking.losses[0]) << "zero " << zero;
  }
}

// A save of zero 3's shards: rank 0 receives each row another rank keeps as the save reaches it,
// one at a time, so its peak optimizer state is its own share and one row, not the whole state;
// and the run trains as one without saves.
TEST(DataParallelTraining, RankZeroSavesHoldingOneRowOfAnotherRanksAtATime) {
  const RankRuns unsaved = train_on_two_ranks("unsaved", 3, true);
  const auto saves = temporary_directory("data_parallel_saves");
  const RankRuns saved =
      train_on_two_ranks("saved", 3, true, "[checkpoint]\ndir = \"" + saves.string() + "\"\nevery = 2\n");
  EXPECT_EQ(saved.losses[0], unsaved.losses[0]);
  const auto optimizer = static_cast<std::size_t>(MemoryCategory::optimizer);
  const std::uint64_t own = unsaved.peaks[0][optimizer], other = unsaved.peaks[1][optimizer];
  // The largest row of optimizer state: one moment of the embedding (vocab 256 x d_model 32, f32).
  const std::uint64_t largest_row = 256 * 32 * sizeof(float);
  std::printf("rank 0's optimizer state: %llu bytes without saves, %llu with (rank 1 keeps %llu)\n",
              static_cast<unsigned long long>(own), static_cast<unsigned long long>(saved.peaks[0][optimizer]),
              static_cast<unsigned long long>(other));
  EXPECT_LE(saved.peaks[0][optimizer], own + largest_row);
  EXPECT_GT(other, largest_row) << "holding every shard would show";
  // The bytes: every stage trains zero 0's bits, so zero 3's save, half of it received row by row,
  // is zero 0's save, file for file (trainer.json records each file's checksum).
  const auto zero0_saves = temporary_directory("data_parallel_saves_z0");
  (void)train_on_two_ranks("saved_z0", 0, true, "[checkpoint]\ndir = \"" + zero0_saves.string() + "\"\nevery = 2\n");
  const auto files_of = [](const std::filesystem::path& save) {
    std::ifstream in(save / "step_00000004" / "trainer.json");
    return nlohmann::json::parse(in).at("files");
  };
  const nlohmann::json zero3_files = files_of(saves), zero0_files = files_of(zero0_saves);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(zero3_files.at(file), zero0_files.at(file)) << file;
}

// A resume loads each rank's own rows alone (the others' are read from the save and dropped), so a
// resumed rank's optimizer state is its share, not the whole; and with bf16 weights and their f32
// masters kept by the owners, the resumed steps are the uninterrupted run's, bit for bit.
TEST(DataParallelTraining, ResumedRanksLoadTheirOwnShardsAndTrainAsTheUninterruptedRun) {
  const std::string bf16 = "[precision]\nplugin = \"bf16\"\nweights = \"bf16\"\n";
  for (const int zero : {1, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    const std::string name = "resume_z" + std::to_string(zero);
    const auto whole = temporary_directory(name + "_whole"), parts = temporary_directory(name + "_parts");
    const auto saves_in = [&](const std::filesystem::path& dir) {
      return bf16 + "[checkpoint]\ndir = \"" + dir.string() + "\"\n";
    };
    const RankRuns uninterrupted = train_on_two_ranks(name + "_whole", zero, true, saves_in(whole));
    ASSERT_EQ(uninterrupted.losses[0].size(), 4u);
    TrainOptions first_half;
    first_half.stop_after_step = 2;
    (void)train_on_two_ranks(name + "_first", zero, true, saves_in(parts), first_half);
    TrainOptions second_half;
    second_half.resume = parts;
    const RankRuns resumed = train_on_two_ranks(name + "_second", zero, true, saves_in(parts), second_half);
    ASSERT_EQ(resumed.losses[0].size(), 2u);
    EXPECT_EQ(resumed.losses[0][0], uninterrupted.losses[0][2]);
    EXPECT_EQ(resumed.losses[0][1], uninterrupted.losses[0][3]);
    const auto optimizer = static_cast<std::size_t>(MemoryCategory::optimizer);
    for (std::size_t r = 0; r < 2; ++r)  // both runs save at the end: rank 0 holds a row of rank 1's then
      EXPECT_LE(resumed.peaks[r][optimizer], uninterrupted.peaks[r][optimizer]) << "rank " << r;
  }
}

// One rank through the data-parallel path (TrainOptions::data_parallel_with_one_rank, how a machine
// with one GPU runs NCCL's calls): its sums, gathers and shards are each a copy of its own rows, so
// every stage trains as one process, bit for bit, with recomputation and offload on top.
TEST(DataParallelTraining, OneRankThroughTheDataParallelPathTrainsAsOneProcess) {
  const std::string stacked =
      "[[strategy]]\nplugin = \"checkpoint\"\n[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n";
  for (const std::string& strategies : {std::string(), stacked}) {
    for (int zero = 0; zero <= 3; ++zero) {
      SCOPED_TRACE("zero " + std::to_string(zero) + (strategies.empty() ? "" : ", checkpoint + offload"));
      const auto dir = temporary_directory("data_parallel_one_rank");
      const auto jsonl = dir / "steps.jsonl";
      write_text(dir / "m.toml",
                 tiny_manifest("[distributed]\nzero = " + std::to_string(zero) + "\n" + strategies +
                               "[[telemetry]]\nplugin = \"jsonl\"\npath = \"" + jsonl.string() + "\"\n"));
      const Manifest manifest =
          load_manifest(dir / "m.toml", {"model.n_layer=3", "train.steps=4", "train.eval_every=0"});
      PluginRegistry registry;
      registry.scan_search_path(plugin_search_path({}));
      TrainOptions options;
      options.overwrite_telemetry = true;
      const std::vector<double> alone = run_training(manifest, registry, options).losses;
      EXPECT_EQ(step_rank_records(jsonl), std::vector<nlohmann::json>(4)) << "one process has no ranks";
      options.data_parallel_with_one_rank = true;
      const std::vector<double> one_rank = run_training(manifest, registry, options).losses;
      ASSERT_EQ(alone.size(), 4u);
      EXPECT_EQ(one_rank, alone);
      for (const nlohmann::json& ranks : step_rank_records(jsonl)) {  // the path ran
        ASSERT_EQ(ranks.size(), 1u);
        EXPECT_EQ(ranks[0]["zero"], zero);
      }
    }
  }
}

}  // namespace
}  // namespace strata::test
