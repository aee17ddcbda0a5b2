// strata ab's comparison logic, without running anything: which manifests can be compared, how
// the loss series compare (last-k mean and worst step, train and val), and what each verdict says.
#include <gtest/gtest.h>

#include <cmath>

#include "core/manifest/manifest.hpp"
#include "hosts/strata/ab_conditions.hpp"
#include "hosts/strata/ab_run.hpp"
#include "hosts/strata/ab_verdict.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

constexpr const char* kManifest = R"([model]
arch = "gpt2"
n_layer = 2
n_head = 2
d_model = 32
vocab = 256
seq_len = 16

[data]
train = "data/kjv.txt"

[train]
steps = 8
batch = 4
lr = 2e-3
seed = 42

[optimizer]
plugin = "adamw"
betas = [0.9, 0.95]
weight_decay = 0.1
)";

Manifest manifest(const std::vector<std::string>& overrides = {}) {
  const auto dir = test::temporary_directory("ab");
  test::write_text(dir / "m.toml", kManifest);
  return load_manifest(dir / "m.toml", overrides);
}

AbConditions conditions(const std::vector<std::string>& overrides) {
  return compare_conditions(manifest(), manifest(overrides));
}

TEST(AbConditions, SameManifestIsComparable) {
  const AbConditions same = conditions({});
  EXPECT_FALSE(same.not_comparable);
  EXPECT_TRUE(same.optimizer_changes.empty());
  EXPECT_FALSE(same.val_not_comparable);
}

TEST(AbConditions, ModelDataBatchSeedAndStepsMakeRunsNotComparable) {
  EXPECT_EQ(conditions({"model.n_layer=4"}).not_comparable.value_or(""), "model.n_layer 2 vs 4");
  EXPECT_EQ(conditions({"model.seq_len=32"}).not_comparable.value_or(""), "model.seq_len 16 vs 32");
  EXPECT_EQ(conditions({"model.arch=\"llama\""}).not_comparable.value_or(""), "model.arch \"gpt2\" vs \"llama\"");
  EXPECT_EQ(conditions({"train.batch=8"}).not_comparable.value_or(""), "train.batch 4 vs 8");
  EXPECT_EQ(conditions({"train.micro_batches=2"}).not_comparable.value_or(""), "train.micro_batches 1 vs 2");
  EXPECT_EQ(conditions({"train.seed=7"}).not_comparable.value_or(""), "train.seed 42 vs 7");
  EXPECT_EQ(conditions({"train.steps=9"}).not_comparable.value_or(""), "train.steps 8 vs 9");
  EXPECT_EQ(conditions({"data.val_fraction=0.2"}).not_comparable.value_or(""), "data.val_fraction 0.1 vs 0.2");
  const std::string data = conditions({"data.train=\"data/other.txt\""}).not_comparable.value_or("");
  EXPECT_EQ(data.rfind("data.train ", 0), 0u) << data;
  EXPECT_NE(data.find("other.txt"), std::string::npos) << data;
  // The first difference, in manifest order, is the one named.
  EXPECT_EQ(conditions({"train.seed=7", "model.d_model=64"}).not_comparable.value_or(""), "model.d_model 32 vs 64");
}

TEST(AbConditions, TheSameDataFileSpelledTwoWaysIsTheSameData) {
  const std::string absolute = (std::filesystem::current_path() / "data/kjv.txt").string();
  EXPECT_FALSE(conditions({"data.train=\"" + absolute + "\""}).not_comparable);
}

TEST(AbConditions, OptimizerSettingsMakeAnOptimizerComparison) {
  const AbConditions lr = conditions({"train.lr=4e-3"});
  EXPECT_FALSE(lr.not_comparable);
  ASSERT_EQ(lr.optimizer_changes.size(), 1u);
  EXPECT_EQ(lr.optimizer_changes[0], "train.lr 0.002 vs 0.004");
  EXPECT_EQ(conditions({"train.warmup_steps=3"}).optimizer_changes.at(0), "train.warmup_steps 0 vs 3");
  EXPECT_EQ(conditions({"optimizer.weight_decay=0.0"}).optimizer_changes.at(0), "optimizer.weight_decay 0.1 vs 0");
  EXPECT_EQ(conditions({"optimizer.betas=[0.9, 0.99]"}).optimizer_changes.at(0),
            "optimizer.betas [0.9, 0.95] vs [0.9, 0.99]");
  EXPECT_EQ(conditions({"optimizer.eps=1e-6"}).optimizer_changes.at(0), "optimizer.eps (default) vs 1e-06");
  EXPECT_EQ(conditions({"optimizer.plugin=\"sgd\""}).optimizer_changes.at(0), "optimizer.plugin \"adamw\" vs \"sgd\"");
}

TEST(AbConditions, NeutralSettingsChangeNothing) {
  const AbConditions neutral = conditions(
      {"precision.plugin=\"bf16\"", "device.memory_limit=\"1GiB\"", "train.threads=1", "train.eval_every=2"});
  EXPECT_FALSE(neutral.not_comparable);
  EXPECT_TRUE(neutral.optimizer_changes.empty());
  EXPECT_FALSE(neutral.val_not_comparable);
  EXPECT_EQ(conditions({"train.eval_batches=3"}).val_not_comparable.value_or(""), "train.eval_batches 8 vs 3");
}

// A finished run with these train losses at steps 1..n, and val losses at the given steps.
AbRun run(const std::vector<double>& losses, const std::vector<std::pair<std::int64_t, double>>& val = {}) {
  AbRun r;
  r.label = "run";
  r.complete = true;
  for (std::size_t i = 0; i < losses.size(); ++i) {
    AbStep step;
    step.step = static_cast<std::int64_t>(i + 1);
    step.loss = losses[i];
    for (const auto& [at, loss] : val)
      if (at == step.step) step.val_loss = loss;
    r.steps.push_back(step);
  }
  return r;
}

AbVerdict verdict(const AbRun& reference, const AbRun& other, const AbConditions& c = {}, AbSettings s = {}) {
  return compare_runs(reference, other, c, s);
}

// A data-parallel run's JSONL (strata ab --ranks): each rank's largest step peak, by category too,
// and its median communication and hidden time per step.
TEST(AbRun, ReadsEveryRanksShareOfTheSteps) {
  const auto dir = test::temporary_directory("ab_ranks");
  std::string jsonl;
  const double communication[3][2] = {{40, 30}, {10, 8}, {12, 9}};
  const double hidden[3][2] = {{0, 0}, {4, 2}, {6, 3}};
  const unsigned long long peaks[3][2] = {{900, 700}, {1000, 600}, {800, 650}};
  for (int step = 0; step < 3; ++step) {
    jsonl += "{\"step\": " + std::to_string(step + 1) + ", \"loss\": 5.0, \"ms\": 100.0, \"ranks\": [";
    for (int rank = 0; rank < 2; ++rank)
      jsonl += std::string(rank ? ", " : "") + "{\"rank\": " + std::to_string(rank) +
               ", \"zero\": 3, \"communication_ms\": " + std::to_string(communication[step][rank]) +
               ", \"hidden_ms\": " + std::to_string(hidden[step][rank]) +
               ", \"peak_device_bytes\": " + std::to_string(peaks[step][rank]) +
               ", \"peak_device_bytes_by_category\": {\"weights\": " + std::to_string(peaks[step][rank] / 2) + "}}";
    jsonl += "]}\n";
  }
  test::write_text(dir / "run.jsonl", jsonl);
  const AbRun run = read_ab_run(dir / "run.jsonl");
  ASSERT_EQ(run.ranks.size(), 2u);
  EXPECT_EQ(run.ranks[1].rank, 1);
  EXPECT_EQ(run.ranks[0].zero, 3);
  EXPECT_EQ(run.ranks[0].peak_device_bytes, 1000u);
  EXPECT_EQ(run.ranks[1].peak_device_bytes, 700u);
  EXPECT_EQ(run.ranks[0].peak_device_bytes_by_category[category_index(MemoryCategory::weights)], 500u);
  EXPECT_EQ(run.ranks[0].communication_ms, 12.0);  // the median of 40, 10 and 12
  EXPECT_EQ(run.ranks[1].hidden_ms, 2.0);          // of 0, 2 and 3
  EXPECT_TRUE(read_ab_run(dir / "missing.jsonl").ranks.empty());
  for (const char* rank : {"-1", "1.5", "4096"}) {
    test::write_text(dir / "bad.jsonl",
                     std::string("{\"step\": 1, \"loss\": 5.0, \"ranks\": [{\"rank\": ") + rank + "}]}\n");
    EXPECT_THROW(read_ab_run(dir / "bad.jsonl"), std::runtime_error) << rank;
  }
}

TEST(AbVerdict, DefaultLastKIsAQuarterOfTheStepsUpToTen) {
  EXPECT_EQ(default_last_k(1), 1);
  EXPECT_EQ(default_last_k(4), 1);
  EXPECT_EQ(default_last_k(6), 2);
  EXPECT_EQ(default_last_k(12), 3);
  EXPECT_EQ(default_last_k(40), 10);
  EXPECT_EQ(default_last_k(1000), 10);
  AbSettings given;
  given.last_k = 3;
  EXPECT_EQ(last_k_for(given, 1000), 3);
}

TEST(AbVerdict, BitwiseEqualIsIdentical) {
  const AbRun a = run({5.0, 4.0, 3.0, 2.0}, {{4, 2.5}});
  const AbVerdict v = verdict(a, a);
  EXPECT_EQ(v.kind, AbVerdict::Kind::identical);
  EXPECT_EQ(v.text, "identical: 4 train losses and 1 val loss bitwise equal");
}

TEST(AbVerdict, LastKMeanAndWorstStepBothAppearAndBothDecide) {
  // 8 steps: k = 2. A 5% excursion at step 3 that recovers: the last-2 mean agrees, the worst
  // step does not, so the stack is not neutral.
  const AbRun reference = run({8, 7, 6, 5, 4, 3, 2, 1});
  const AbRun spike = run({8, 7, 6.3, 5, 4, 3, 2, 1});
  AbVerdict v = verdict(reference, spike);
  EXPECT_EQ(v.kind, AbVerdict::Kind::diverged) << v.text;
  EXPECT_NE(v.text.find("train last-2 mean +0.0e+00, worst 5.0e-02 at step 3 (over)"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("tolerance 1.0e-02 (default)"), std::string::npos) << v.text;
  ASSERT_TRUE(v.train);
  EXPECT_EQ(v.train->last_k, 2);
  EXPECT_EQ(v.train->worst_step, 3);

  // 0.1% off over the last two steps: within the default tolerance, with the figures stated.
  const AbRun close = run({8, 7, 6, 5, 4, 3, 2.002, 1.001});
  v = verdict(reference, close);
  EXPECT_EQ(v.kind, AbVerdict::Kind::within_tolerance) << v.text;
  EXPECT_NE(v.text.find("train last-2 mean +1.0e-03, worst 1.0e-03 at step 7"), std::string::npos) << v.text;

  // The same run against a tighter tolerance from the command line, which the verdict names.
  AbSettings tight;
  tight.tolerance = 1e-4;
  tight.tolerance_given = true;
  v = verdict(reference, close, {}, tight);
  EXPECT_EQ(v.kind, AbVerdict::Kind::diverged) << v.text;
  EXPECT_NE(v.text.find("tolerance 1.0e-04 (--tolerance)"), std::string::npos) << v.text;

  // --last-k widens the window: the mean over 4 steps.
  AbSettings wide;
  wide.last_k = 4;
  v = verdict(reference, close, {}, wide);
  EXPECT_NE(v.text.find("train last-4 mean +3.0e-04"), std::string::npos) << v.text;
}

TEST(AbVerdict, ValLossDecidesToo) {
  // Train losses bitwise equal, val 3% away: diverged, on the val figures.
  const AbRun reference = run({4, 3, 2, 1}, {{2, 3.0}, {4, 2.0}});
  const AbRun other = run({4, 3, 2, 1}, {{2, 3.0}, {4, 2.06}});
  AbVerdict v = verdict(reference, other);
  EXPECT_EQ(v.kind, AbVerdict::Kind::diverged) << v.text;
  EXPECT_NE(v.text.find("val at step 4 +3.0e-02 (over), worst 3.0e-02 at step 4 (over)"), std::string::npos) << v.text;
  // Evaluations over another number of windows are not compared, and the verdict says why.
  AbConditions other_windows;
  other_windows.val_not_comparable = "train.eval_batches 8 vs 3";
  v = verdict(reference, other, other_windows);
  EXPECT_EQ(v.kind, AbVerdict::Kind::identical) << v.text;
  EXPECT_FALSE(v.val);
}

TEST(AbVerdict, NonFiniteLossIsTheWorstDifference) {
  const AbVerdict v = verdict(run({4, 3, 2, 1}), run({4, 3, NAN, 1}));
  EXPECT_EQ(v.kind, AbVerdict::Kind::diverged) << v.text;
  EXPECT_EQ(v.train->worst_step, 3);
  EXPECT_TRUE(std::isinf(v.train->worst_difference));
}

TEST(AbVerdict, OptimizerChangeIsAComparisonThatNamesTheLowerLoss) {
  AbConditions lr;
  lr.optimizer_changes = {"train.lr 0.002 vs 0.004"};
  const AbRun reference = run({4, 3, 2, 1.5}, {{4, 1.8}});
  AbVerdict v = verdict(reference, run({4, 2.8, 1.7, 1.2}, {{4, 1.5}}), lr);
  EXPECT_EQ(v.kind, AbVerdict::Kind::optimizer_comparison) << v.text;
  EXPECT_EQ(v.label, "optimizer comparison: lower val loss");
  EXPECT_NE(v.text.find("optimizer comparison (train.lr 0.002 vs 0.004): lower val loss than run"), std::string::npos)
      << v.text;
  EXPECT_NE(v.text.find("val at step 4 1.5000 vs 1.8000"), std::string::npos) << v.text;
  v = verdict(reference, run({4, 3.2, 2.4, 1.9}, {{4, 2.0}}), lr);
  EXPECT_EQ(v.label, "optimizer comparison: higher val loss");
  // Without val losses, the train loss over the last k steps decides.
  v = verdict(run({4, 3, 2, 1.5}), run({4, 2.8, 1.7, 1.2}), lr);
  EXPECT_EQ(v.label, "optimizer comparison: lower train loss");
  v = verdict(reference, run({4, 3, 2, 1.501}, {{4, 1.8001}}), lr);
  EXPECT_EQ(v.label, "optimizer comparison: same val loss within tolerance");
}

// LoRA against a full fine-tune: another training, compared like another optimizer, never
// "diverged"; a bitwise pair still says identical, naming the difference.
TEST(AbVerdict, ChangeOfWhatTrainsIsATrainingComparison) {
  AbConditions lora;
  lora.training_change = "what trains: every parameter vs adapters on q v (the base frozen)";
  const AbRun reference = run({4, 3, 2, 1.5}, {{4, 1.8}});
  AbVerdict v = verdict(reference, run({4, 3.5, 3.2, 3.0}, {{4, 3.1}}), lora);
  EXPECT_EQ(v.kind, AbVerdict::Kind::training_comparison) << v.text;
  EXPECT_EQ(v.label, "training comparison: higher val loss");
  EXPECT_NE(v.text.find("training comparison (what trains: every parameter vs adapters on q v (the base frozen)): "
                        "higher val loss than run"),
            std::string::npos)
      << v.text;
  lora.optimizer_changes = {"train.lr 0.002 vs 0.0002"};
  v = verdict(reference, run({4, 3.5, 3.2, 3.0}, {{4, 3.1}}), lora);
  EXPECT_EQ(v.kind, AbVerdict::Kind::training_comparison) << v.text;
  EXPECT_NE(v.text.find("(the base frozen); train.lr 0.002 vs 0.0002)"), std::string::npos) << v.text;
  v = verdict(reference, reference, lora);
  EXPECT_EQ(v.kind, AbVerdict::Kind::identical) << v.text;
}

TEST(AbVerdict, NotComparableNamesTheField) {
  AbConditions deeper;
  deeper.not_comparable = "model.n_layer 2 vs 4";
  const AbVerdict v = verdict(run({4, 3}), run({4, 2}), deeper);
  EXPECT_EQ(v.kind, AbVerdict::Kind::not_comparable);
  EXPECT_EQ(v.label, "not comparable: model.n_layer 2 vs 4");
}

TEST(AbVerdict, FailedReferenceGivesNoVerdicts) {
  AbRun reference = run({4, 3});
  reference.label = "base";
  reference.exit_code = 1;
  reference.complete = false;
  reference.failure = "strata train: memory limit exceeded";
  const AbVerdict own = reference_verdict(reference);
  EXPECT_EQ(own.kind, AbVerdict::Kind::failed);
  EXPECT_EQ(own.text, "reference failed (exit 1): strata train: memory limit exceeded");
  const AbVerdict other = verdict(reference, run({4, 3}));
  EXPECT_EQ(other.kind, AbVerdict::Kind::no_reference);
  EXPECT_NE(other.text.find("no reference: base failed (exit 1)"), std::string::npos) << other.text;
  // A run's own failure comes first.
  AbRun failed = run({4});
  failed.exit_code = 1;
  failed.complete = false;
  EXPECT_EQ(verdict(run({4, 3}), failed).kind, AbVerdict::Kind::failed);
  EXPECT_EQ(verdict(reference, failed).kind, AbVerdict::Kind::failed);
}

}  // namespace
}  // namespace strata
