#pragma once
// Helpers shared by the tests: temporary directories, manifests, and plain SDK implementations
// (SGD, fp32) so model-level tests need no plugin.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/model.hpp"
#include "strata/optimizer.hpp"
#include "strata/precision_policy.hpp"

namespace strata::test {

// The largest |actual - expected| / |expected| over two runs' losses, step by step.
inline double worst_relative_difference(const std::vector<double>& expected, const std::vector<double>& actual) {
  double worst = 0.0;
  for (std::size_t i = 0; i < expected.size(); ++i)
    worst = std::max(worst, std::abs(actual[i] - expected[i]) / std::abs(expected[i]));
  return worst;
}

inline std::filesystem::path temporary_directory(const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() / ("strata_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A jsonl telemetry file's step records' `ranks` (a data-parallel run's share per rank), one per
// step; a step without them gives null.
inline std::vector<nlohmann::json> step_rank_records(const std::filesystem::path& jsonl) {
  std::vector<nlohmann::json> ranks;
  std::ifstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json record = nlohmann::json::parse(line);
    if (record.contains("step")) ranks.push_back(record.contains("ranks") ? record["ranks"] : nlohmann::json());
  }
  return ranks;
}

inline std::string source_path(const std::string& relative) {
  return std::string(STRATA_SOURCE_DIR) + "/" + relative;
}

// A row's f32 values, read in place. Tests run on the CPU backend, whose device memory is host
// memory; engine code never does this (it copies through the backend's ops).
inline std::span<float> f32(const Model& model, int row) {
  const TensorView view = model.store().view(row);
  if (view.empty() || view.dtype != DType::f32) return {};
  return {view.f32(), static_cast<std::size_t>(view.count)};
}
inline std::span<float> values(const Model& model, const ParameterRows& rows) {
  return f32(model, model.store().value_row(rows));
}

// A fixed batch of `count` positions: inputs and targets follow different strides over the vocab,
// so every position has its own (input, target) pair.
struct PatternedBatch {
  std::vector<std::int32_t> inputs;
  std::vector<std::int32_t> targets;
};
inline PatternedBatch patterned_batch(std::size_t count, int vocab) {
  PatternedBatch batch{std::vector<std::int32_t>(count), std::vector<std::int32_t>(count)};
  for (std::size_t i = 0; i < count; ++i) {
    batch.inputs[i] = static_cast<std::int32_t>((i * 7 + 3) % static_cast<std::size_t>(vocab));
    batch.targets[i] = static_cast<std::int32_t>((i * 11 + 5) % static_cast<std::size_t>(vocab));
  }
  return batch;
}

// A tiny model on the shipped corpus; `extra` is appended (more tables or keys).
inline std::string tiny_manifest(const std::string& extra = "", const std::string& train_keys = "") {
  return "[model]\nn_layer = 2\nn_head = 2\nd_model = 32\nvocab = 256\nseq_len = 16\n"
         "[data]\ntrain = \"" +
         source_path("data/kjv.txt") +
         "\"\n"
         "[train]\nsteps = 6\nbatch = 4\nlr = 3e-3\nseed = 7\neval_batches = 2\nthreads = 2\n" +
         train_keys + "[[telemetry]]\nplugin = \"csv\"\npath = \"/dev/null\"\n" + extra;
}

class PlainSgd final : public Optimizer {
 public:
  StateLayout state_layout(const ParamInfo&) const noexcept override { return {}; }
  Status step(const OptimizerStepInfo&, std::span<ParamSlot> slots, OptimizerReport& report) noexcept override {
    report.lr = 0.01;
    for (ParamSlot& slot : slots)  // CPU backend: the views are host memory
      for (std::int64_t i = 0; i < slot.param.count; ++i) slot.param.f32()[i] -= 0.01f * slot.grad.f32()[i];
    return {};
  }
};

class PlainFp32 final : public PrecisionPolicy {
 public:
  DType weight_storage() const noexcept override { return DType::f32; }
  DType activation_storage() const noexcept override { return DType::f32; }
  double loss_scale() const noexcept override { return 1.0; }
  Status unscale_and_check(Ops&, std::span<const TensorView>, PrecisionDecision&) noexcept override { return {}; }
};

}  // namespace strata::test
