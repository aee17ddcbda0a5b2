// The planner's prediction (core/planner/) against the run itself: for 100 random stacks of both
// families, the peak `strata plan` predicts from its dry run and the peak the allocator measures in
// `strata train` agree per category and in total, on the device, the host and the disk, within the
// bound promised to users; and the prediction is never below the run. (A run's peak may fall a
// little below it: the dry run's copies land only when waited for, and a real copy that lands early
// frees its source sooner.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "core/device/memory_limit_exceeded.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/planner/calibration.hpp"
#include "core/planner/memory_prediction.hpp"
#include "core/training/memory_timeline.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

// Within 5% of the measured bytes, or 64 KiB where that is larger (the bound).
bool within_bound(std::uint64_t predicted, std::uint64_t measured) {
  const double difference = std::abs(static_cast<double>(predicted) - static_cast<double>(measured));
  return difference <= std::max(0.05 * static_cast<double>(measured), 65536.0);
}

template <typename T>
const T& pick(std::mt19937& random, const std::vector<T>& choices) {
  return choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(random)];
}

struct RandomStack {
  std::string tables;                  // appended to the tiny manifest
  std::vector<std::string> overrides;  // model and train keys
  std::string label;
};

// One stack: a family, a shape, a precision, an optimizer, and any of checkpointing, offload (to
// host or disk), layer streaming, flash attention, LoRA, sparse layers, the fused update and the
// predictor. Combinations the host refuses are drawn too; the caller skips them.
RandomStack random_stack(std::mt19937& random, const std::filesystem::path& disk_dir) {
  RandomStack stack;
  const bool llama = random() % 2 == 0;
  const int n_head = pick(random, std::vector<int>{1, 2, 4});
  const int head_dim = pick(random, std::vector<int>{8, 16});
  const int batch = pick(random, std::vector<int>{1, 2, 4});
  const int micro = batch % 2 == 0 ? pick(random, std::vector<int>{1, 2}) : 1;
  stack.overrides = {"model.n_layer=" + std::to_string(pick(random, std::vector<int>{1, 2, 3, 4})),
                     "model.n_head=" + std::to_string(n_head),
                     "model.d_model=" + std::to_string(n_head * head_dim),
                     "model.seq_len=" + std::to_string(pick(random, std::vector<int>{8, 16, 32})),
                     "train.batch=" + std::to_string(batch),
                     "train.micro_batches=" + std::to_string(micro),
                     "train.steps=3"};
  stack.label = llama ? "llama" : "gpt2";
  if (llama) {
    stack.overrides.push_back("model.arch=\"llama\"");
    stack.overrides.push_back("model.n_kv_head=" + std::to_string(n_head == 1 ? 1 : n_head / 2));
    stack.overrides.push_back("model.d_ff=" + std::to_string(16 * pick(random, std::vector<int>{2, 3, 5})));
  }
  const std::string precision = pick(random, std::vector<std::string>{"fp32", "bf16", "fp16", "int8", "nf4"});
  const std::string optimizer = pick(random, std::vector<std::string>{"adamw", "sgd", "adamw8bit"});
  stack.tables = "[optimizer]\nplugin = \"" + optimizer + "\"\n" +
                 (optimizer == "adamw8bit" ? "block_size = 256\n" : "") + "[precision]\nplugin = \"" + precision +
                 "\"\n";
  stack.label += " " + precision + " " + optimizer;
  switch (random() % 4) {
    case 1: stack.tables += "[[strategy]]\nplugin = \"checkpoint\"\nevery = 1\n", stack.label += " ckpt"; break;
    case 2:
      stack.tables += "[[strategy]]\nplugin = \"checkpoint\"\nmode = \"selective\"\n", stack.label += " sel";
      break;
    case 3: stack.tables += "[[strategy]]\nplugin = \"checkpoint\"\nmode = \"cheap\"\n", stack.label += " cheap"; break;
    default: break;
  }
  switch (random() % 5) {
    case 1:
      stack.tables += "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n", stack.label += " off";
      break;
    case 2: {
      const int prefetch = static_cast<int>(random() % 2);
      stack.tables += "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\nmax_resident_layers = " +
                      std::to_string(1 + prefetch) + "\nprefetch = " + std::to_string(prefetch) + "\n";
    }
      stack.label += " stream";
      break;
    case 3:
      stack.tables += "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"disk\"\n";
      stack.overrides.push_back("device.disk_path=\"" + disk_dir.string() + "\"");
      stack.label += " disk";
      break;
    default: break;
  }
  if (random() % 4 == 0) stack.tables += "[kernels]\nattention = \"flash\"\n", stack.label += " flash";
  if (random() % 6 == 0) stack.tables += "[[strategy]]\nplugin = \"lora\"\nrank = 4\n", stack.label += " lora";
  if (random() % 6 == 0)
    stack.tables += "[[strategy]]\nplugin = \"sparse_layers\"\ntrain_first = 1\ntrain_last = 0\nmiddle = \"freeze\"\n",
        stack.label += " sparse";
  if (random() % 5 == 0) stack.overrides.push_back("train.update=\"fused\""), stack.label += " fused";
  if (optimizer == "adamw" && random() % 6 == 0)
    stack.tables += "[predictor]\nplugin = \"rssm_predictor\"\n", stack.label += " rssm";
  return stack;
}

TEST(Planner, PredictsThePeaksOfRandomStacksOfBothFamilies) {
  const auto dir = test::temporary_directory("planner_random");
  const auto disk_dir = dir / "disk";
  std::filesystem::create_directories(disk_dir);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  std::mt19937 random(20261127);
  int compared = 0, refused = 0, exact = 0, checked = 0, same_timelines = 0;
  double worst = 0.0;
  std::string worst_case;
  for (int attempt = 0; compared < 100 && attempt < 800; ++attempt) {
    const RandomStack stack = random_stack(random, disk_dir);
    test::write_text(dir / "m.toml", test::tiny_manifest(stack.tables));
    Manifest manifest;
    MemoryPrediction predicted;
    MemoryTimeline predicted_timeline;
    try {
      manifest = load_manifest(dir / "m.toml", stack.overrides);
      predicted = predict_memory(manifest, registry, nullptr, nullptr, &predicted_timeline);
    } catch (const ManifestError& refusal) {
      ++refused;  // a combination the host refuses, as `strata train` would
      if (std::getenv("STRATA_PLANNER_TEST_REFUSALS") != nullptr) std::printf("refused: %s\n", refusal.what());
      continue;
    }
    TrainOptions options;
    options.memory_timeline = dir / "timeline.json";
    const TrainResult run = run_training(manifest, registry, options);
    ++compared;
    // The within-step timeline (`plan --html` beside `ab --html`): the same step, the same passes in
    // the same order; and, where no copy runs beside compute to land at its own moment, the same
    // bytes after every allocation and release.
    const MemoryTimeline measured_timeline = read_timeline(dir / "timeline.json");
    EXPECT_EQ(predicted_timeline.step, measured_timeline.step) << stack.label;
    ASSERT_EQ(predicted_timeline.marks.size(), measured_timeline.marks.size()) << stack.label;
    for (std::size_t i = 0; i < measured_timeline.marks.size(); ++i)
      EXPECT_TRUE(predicted_timeline.marks[i].pass == measured_timeline.marks[i].pass &&
                  predicted_timeline.marks[i].layer == measured_timeline.marks[i].layer)
          << stack.label << ": mark " << i;
    const bool copies = stack.label.find(" off") != std::string::npos ||
                        stack.label.find(" stream") != std::string::npos ||
                        stack.label.find(" disk") != std::string::npos;
    const auto same_samples = [&] {
      if (predicted_timeline.samples.size() != measured_timeline.samples.size()) return false;
      for (std::size_t i = 0; i < measured_timeline.samples.size(); ++i) {
        const MemoryTimeline::Sample &p = predicted_timeline.samples[i], &m = measured_timeline.samples[i];
        if (p.mark != m.mark || p.device != m.device || p.host != m.host) return false;
      }
      return true;
    };
    const bool same = same_samples();
    same_timelines += same ? 1 : 0;
    if (!copies) {
      EXPECT_TRUE(same) << stack.label << ": the predicted timeline differs from the measured one ("
                        << predicted_timeline.samples.size() << " and " << measured_timeline.samples.size()
                        << " samples)";
    }
    const auto check = [&](const std::string& what, std::uint64_t predicted_bytes, std::uint64_t measured_bytes) {
      EXPECT_TRUE(within_bound(predicted_bytes, measured_bytes))
          << stack.label << ": " << what << " predicted " << predicted_bytes << ", measured " << measured_bytes;
      // An upper bound: a run whose copies land early frees their sources sooner than the plan.
      EXPECT_GE(predicted_bytes, measured_bytes) << stack.label << ": " << what;
      exact += predicted_bytes == measured_bytes ? 1 : 0;
      ++checked;
      const double error = measured_bytes == 0
                               ? (predicted_bytes == 0 ? 0.0 : 1.0)
                               : std::abs(static_cast<double>(predicted_bytes) - static_cast<double>(measured_bytes)) /
                                     static_cast<double>(measured_bytes);
      if (error >= worst) {
        worst = error;
        worst_case = stack.label + " (" +
                     [&] {
                       std::string keys;
                       for (const std::string& key : stack.overrides) keys += key + " ";
                       return keys;
                     }() +
                     "), " + what + ": predicted " + std::to_string(predicted_bytes) + ", measured " +
                     std::to_string(measured_bytes);
      }
    };
    check("device total", predicted.device.peak_total, run.summary.peak_device_bytes);
    for (MemoryCategory category : kAllMemoryCategories)
      check("device " + std::string(category_name(category)), predicted.device.peak[category_index(category)],
            run.summary.peak_device_bytes_by_category[category_index(category)]);
    check("host total", predicted.host.peak_total, run.summary.peak_host_bytes);
    ASSERT_EQ(predicted.disk.has_value(), run.disk.has_value()) << stack.label;
    if (run.disk) check("disk total", predicted.disk->peak_total, run.disk->peak_total);
  }
  std::printf(
      "planner: %d random stacks compared (%d refused combinations skipped); worst relative error %.3g%% (%s)\n",
      compared, refused, 100.0 * worst, worst_case.c_str());
  std::printf("planner: %d of %d peaks predicted to the byte\n", exact, checked);
  std::printf("planner: %d of %d within-step timelines predicted sample for sample\n", same_timelines, compared);
  EXPECT_GE(compared, 100);
}

// A timeline's file holds what was recorded, and a file that is not one is named as such.
TEST(MemoryTimeline, RoundTripsThroughItsFileAndNamesABadOne) {
  const auto dir = test::temporary_directory("memory_timeline");
  MemoryTimeline timeline{7, {{"start", -1}, {"forward", 0}, {"update", -1}}, {}};
  timeline.samples.push_back({0, {1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}});
  timeline.samples.push_back({2, {0, 0, 0, 1ull << 40, 0, 0}, {}});
  write_timeline(dir / "t.json", timeline);
  const MemoryTimeline read = read_timeline(dir / "t.json");
  EXPECT_EQ(read.step, 7);
  ASSERT_EQ(read.marks.size(), 3u);
  EXPECT_EQ(read.marks[1].pass, "forward");
  EXPECT_EQ(read.marks[1].layer, 0);
  ASSERT_EQ(read.samples.size(), 2u);
  EXPECT_EQ(read.samples[0].host, timeline.samples[0].host);
  EXPECT_EQ(read.samples[1].mark, 2u);
  EXPECT_EQ(read.samples[1].device, timeline.samples[1].device);

  test::write_text(dir / "bad.json", "{\"format\": \"something else\"}");
  try {
    (void)read_timeline(dir / "bad.json");
    FAIL() << "a file that is not a timeline was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: not a Strata memory timeline"), std::string::npos) << e.what();
  }
  nlohmann::json broken = timeline_json(timeline);
  broken["samples"][1][0] = 3;  // a mark that is not there
  test::write_text(dir / "broken.json", broken.dump());
  EXPECT_THROW((void)read_timeline(dir / "broken.json"), std::invalid_argument);
}

// A limit below the predicted peak: the prediction says so (with the refusal the run meets), and
// the run does stop there.
TEST(Planner, SaysWhenTheDevicePeakExceedsTheLimit) {
  const auto dir = test::temporary_directory("planner_limit");
  test::write_text(dir / "m.toml", test::tiny_manifest("[optimizer]\nplugin = \"adamw\"\n"));
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  const Manifest unlimited = load_manifest(dir / "m.toml", {"train.steps=2"});
  const MemoryPrediction fits = predict_memory(unlimited, registry);
  EXPECT_FALSE(fits.over_limit);
  const std::uint64_t limit = fits.device.peak_total - 4096;
  const Manifest limited =
      load_manifest(dir / "m.toml", {"train.steps=2", "device.memory_limit=" + std::to_string(limit)});
  const MemoryPrediction over = predict_memory(limited, registry);
  ASSERT_TRUE(over.over_limit);
  EXPECT_EQ(over.device.peak_total, fits.device.peak_total);
  EXPECT_THROW(run_training(limited, registry, TrainOptions{}), MemoryLimitExceeded);
  const Manifest enough =
      load_manifest(dir / "m.toml", {"train.steps=2", "device.memory_limit=" + std::to_string(fits.device.peak_total)});
  EXPECT_FALSE(predict_memory(enough, registry).over_limit);
  EXPECT_NO_THROW(run_training(enough, registry, TrainOptions{}));
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// One measured size per op: a constant rate.
Calibration constant_rates(double flops_per_second) {
  Calibration calibration;
  for (const char* op : {"matmul_forward_f32", "matmul_backward_f32", "scale"})
    calibration.ops[op] = {{flops_per_second, 1.0}};
  return calibration;
}

TEST(PlannerCalibration, InterpolatesTheRateBetweenMeasuredSizes) {
  Calibration calibration;
  calibration.ops["gelu_forward"] = {{1e3, 1e-6}, {1e6, 1e-4}};  // 1e9/s, then 1e10/s
  EXPECT_DOUBLE_EQ(calibration.seconds("gelu_forward", 1e3), 1e-6);
  EXPECT_DOUBLE_EQ(calibration.seconds("gelu_forward", 1e6), 1e-4);
  // Halfway in log size, halfway in log rate: 10^9.5 per second.
  EXPECT_NEAR(calibration.seconds("gelu_forward", std::sqrt(1e9)), std::sqrt(1e9) / std::pow(10.0, 9.5), 1e-15);
  EXPECT_DOUBLE_EQ(calibration.seconds("gelu_forward", 10.0), 1e-8);  // the smallest size's rate
  EXPECT_DOUBLE_EQ(calibration.seconds("gelu_forward", 1e8), 1e-2);   // the largest size's rate
  EXPECT_DOUBLE_EQ(calibration.seconds("gelu_forward", 0.0), 0.0);
  calibration.ops["scale"] = {{1e6, 1e-3}};
  EXPECT_DOUBLE_EQ(calibration.seconds("never_measured", 1e6), 1e-3);  // priced as a pass over memory
}

TEST(PlannerCalibration, RoundTripsThroughItsFileAndNamesABadOne) {
  const auto dir = test::temporary_directory("planner_calibration");
  Calibration calibration = constant_rates(1e9);
  calibration.machine = "test machine";
  calibration.measured_at = "2026-11-27 11:00 UTC";
  calibration.threads = 2;
  calibration.disk_read_bytes_per_second = 7e8;
  save_calibration(calibration, dir / "sub" / "calibration.json");
  const Calibration loaded = load_calibration(dir / "sub" / "calibration.json");
  EXPECT_EQ(loaded.machine, "test machine");
  EXPECT_EQ(loaded.threads, 2);
  EXPECT_EQ(loaded.ops, calibration.ops);
  EXPECT_EQ(loaded.disk_read_bytes_per_second, 7e8);
  EXPECT_EQ(loaded.path, dir / "sub" / "calibration.json");
  test::write_text(dir / "bad.json", "{\"machine\": 3}");
  try {
    (void)load_calibration(dir / "bad.json");
    FAIL() << "a file Strata did not write was read as a calibration";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "bad.json").string()), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)load_calibration(dir / "missing.json"), std::invalid_argument);
  // A calibration of one op with one point, `point` ("[work, seconds]"): the refusal, or "".
  const auto refusal = [&](const std::string& name, const std::string& op, const std::string& point) {
    test::write_text(dir / name,
                     "{\"machine\": \"m\", \"measured_at\": \"t\", \"threads\": 1, "
                     "\"disk_read_bytes_per_second\": 0, \"disk_write_bytes_per_second\": 0, \"ops\": {\"" +
                         op + "\": [" + point + "]}}");
    try {
      (void)load_calibration(dir / name);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // A size of 0 would price every op of that name as infinite (log 0): refused, naming the op.
  const std::string zero = refusal("zero.json", "gelu_forward", "[0, 1e-6]");
  EXPECT_NE(zero.find("gelu_forward"), std::string::npos) << zero;
  // A time of 0 would price the step at nothing (every op at 0 s predicted a 0.02 ms step): refused.
  const std::string instant = refusal("instant.json", "matmul_forward", "[1e6, 0]");
  EXPECT_NE(instant.find("op 'matmul_forward' has a point of work 1000000.000000 in 0.000000 s"), std::string::npos)
      << instant;
}

// The dry run's forward products, priced at one flop per nanosecond, are the model's own flop
// count: a GPT-2 block's four matrices hold 12 C^2 weights and the tied head C V, each used once
// per token of the batch.
TEST(PlannerCalibration, PricesTheStepsProductsByTheirFlops) {
  const auto dir = test::temporary_directory("planner_flops");
  test::write_text(dir / "m.toml", test::tiny_manifest("[optimizer]\nplugin = \"adamw\"\n"));
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  const Calibration calibration = constant_rates(1e9);
  const auto forward_ms = [&](int batch) {
    const Manifest manifest = load_manifest(dir / "m.toml", {"train.steps=2", "train.batch=" + std::to_string(batch)});
    const MemoryPrediction prediction = predict_memory(manifest, registry, &calibration);
    EXPECT_TRUE(prediction.step);
    return prediction.step ? prediction.step->by_op_ms.at("matmul_forward_f32") : 0.0;
  };
  // tiny_manifest: 2 layers, d_model 32, vocab 256, seq_len 16.
  const double C = 32, L = 2, V = 256, T = 16;
  for (const int batch : {2, 4}) {
    const double flops = 2.0 * batch * T * (12.0 * L * C * C + C * V);
    EXPECT_NEAR(forward_ms(batch), flops / 1e6, 1e-9) << "batch " << batch;
  }
  const Manifest manifest = load_manifest(dir / "m.toml", {"train.steps=2"});
  EXPECT_FALSE(predict_memory(manifest, registry).step);  // no calibration, no step time
}

}  // namespace
}  // namespace strata
