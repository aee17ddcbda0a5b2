#include "stack_run.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "core/data/dataset.hpp"
#include "core/device/backend.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/executor/executor.hpp"
#include "core/manifest/manifest.hpp"
#include "core/model/make_model.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/stack.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata::test {

const std::vector<Family> kFamilies = {{"gpt2", {}},
                                       {"llama", {"model.arch=\"llama\"", "model.n_kv_head=1", "model.d_ff=48"}}};

StackRun run_stack(const Family& family, const std::string& name, const std::string& strategies, int steps,
                   const std::string& precision, const std::vector<std::string>& overrides,
                   const std::string& optimizer) {
  const auto dir = temporary_directory("strategies_" + family.name + "_" + name);
  write_text(dir / "m.toml", tiny_manifest((optimizer.empty() ? "[optimizer]\nplugin = \"adamw\"\n" : optimizer) +
                                               precision + strategies,
                                           "micro_batches = 2\n"));
  std::vector<std::string> all_overrides = {"model.n_layer=4"};
  all_overrides.insert(all_overrides.end(), family.overrides.begin(), family.overrides.end());
  all_overrides.insert(all_overrides.end(), overrides.begin(), overrides.end());
  const Manifest manifest = load_manifest(dir / "m.toml", all_overrides);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  HostServicesImpl host(manifest.model.info(), manifest.device.kind);
  Stack stack = build_stack(manifest, registry, host);
  const int rows = manifest.train.micro_batch_rows();
  auto device = make_cpu_backend(0);
  std::unique_ptr<DiskTier> disk_tier;  // outlives the model
  const std::unique_ptr<Model> model_owner =
      make_model(manifest.model, *device, stack.attention_on(*device, manifest.model.attention_shape(1)),
                 ModelOptions{rows, state_layout_of(*stack.optimizer), Allocation::deferred, stack.storage_on(*device),
                              Purpose::training, stack.trainable});
  Model& model = *model_owner;
  Executor executor(model, *stack.optimizer, *stack.precision, stack.strategy_pointers(),
                    ExecutorOptions{steps, 0, manifest.train.lr, nullptr, stack.strategy_labels, UpdateMode::full,
                                    FusedClip::previous});
  executor.attach_without_allocating();
  if (model.store().residency().any_on_disk()) {
    disk_tier = open_disk_tier(manifest, *device);
    model.store().residency().use_disk_tier(*disk_tier);
  }
  model.store().residency().allocate_persistent();
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
    const StepOutcome outcome = executor.train_step(step, micro_batches);
    run.losses.push_back(outcome.loss);
    run.loss_scales.push_back(outcome.loss_scale);
    run.skipped.push_back(outcome.skipped);
  }
  model.store().residency().complete_all_moves();
  for (const ParameterRows& rows_of : model.parameters()) {
    // The f32 master under bf16 or int8 storage; a frozen matrix's values as its matmuls see them.
    const std::vector<float> weight = model.effective_values(rows_of);
    if (rows_of.grad >= 0) {
      const auto grad = f32(model, rows_of.grad);
      run.grads.insert(run.grads.end(), grad.begin(), grad.end());
      run.named_grads[rows_of.name].assign(grad.begin(), grad.end());
    }
    run.weights.insert(run.weights.end(), weight.begin(), weight.end());
    run.named_weights[rows_of.name].assign(weight.begin(), weight.end());
    std::uint64_t stored_bytes = model.table().row(rows_of.param).bytes();
    if (rows_of.scales >= 0) stored_bytes += model.table().row(rows_of.scales).bytes();
    if (rows_of.layer == 0) run.layer_weight_bytes += stored_bytes;
    if (rows_of.layer == 0 && model.table().row(rows_of.param).shape.size() == 2)
      run.layer_matrix_bytes += stored_bytes;
    if (rows_of.layer < 0) run.global_weight_bytes += stored_bytes;
    std::uint64_t state_bytes = rows_of.master >= 0 ? model.table().row(rows_of.master).bytes() : 0;
    for (int row : rows_of.state)
      if (row >= 0) state_bytes += model.table().row(row).bytes();
    if (rows_of.layer == 0) run.layer_state_bytes += state_bytes;
    if (rows_of.layer < 0) run.global_state_bytes += state_bytes;
  }
  run.logits_bytes = model.table().row(*model.table().find("act.logits")).bytes();
  for (const TensorRow& row : model.table().rows())
    if (row.name.ends_with("attention_saved")) {
      run.attention_saved_floats = row.elements();
      run.attention_saved_bytes = row.bytes();
    }
  if (disk_tier) run.disk = disk_tier->stats();
  run.bytes_to_device = model.store().residency().transfers().bytes_to_device;
  for (const ParameterRows& rows_of : model.parameters()) {
    for (int row : stored_weight_rows(rows_of)) run.stored_weight_bytes += model.table().row(row).bytes();
    if (rows_of.grad >= 0)
      (rows_of.layer < 0 ? run.global_gradient_bytes : run.block_gradient_bytes) +=
          model.table().row(rows_of.grad).bytes();
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

std::string stack_refusal(const std::string& tables, const std::vector<std::string>& overrides) {
  const auto dir = temporary_directory("stack_refusal");
  write_text(dir / "m.toml", tiny_manifest(tables));
  const Manifest manifest = load_manifest(dir / "m.toml", overrides);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  HostServicesImpl host(manifest.model.info(), manifest.device.kind);
  try {
    (void)build_stack(manifest, registry, host);
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "";
}

}  // namespace strata::test
