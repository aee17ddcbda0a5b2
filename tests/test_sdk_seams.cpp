// The SDK 9.0 seams a third-party plugin builds on, driven by in-process strategies through the
// real executor: listing a layer's tensors for any family, dropping chosen activations by name,
// moving activations to the host and back (bitwise neutral), the version rule's host side, and
// memory a plugin asks the host for, accounted under its name.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "core/executor/executor.hpp"
#include "core/model/gpt2/gpt2_model.hpp"
#include "core/model/llama/llama_model.hpp"
#include "core/plugin/guarded_plugins.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/plugin_memory_impl.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

// Two tiny models, one per family, and one forward and backward with the given strategies.
struct Fixture {
  std::unique_ptr<Backend> device = make_cpu_backend(0);
  std::unique_ptr<Kernel> attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  std::unique_ptr<Model> model;
  test::PlainSgd optimizer;
  test::PlainFp32 precision;
  std::vector<std::int32_t> tokens = std::vector<std::int32_t>(2 * 16);
  std::vector<std::int32_t> targets = std::vector<std::int32_t>(2 * 16);

  explicit Fixture(const std::string& family) {
    if (family == "gpt2")
      model = std::make_unique<GPT2Model>(GPT2Config{3, 2, 32, 256, 16}, *device, *attention, model_options(2));
    else
      model =
          std::make_unique<LlamaModel>(LlamaConfig{3, 4, 2, 32, 48, 256, 16}, *device, *attention, model_options(2));
    model->init_weights(11);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<std::int32_t>((i * 31) % 256);
      targets[i] = static_cast<std::int32_t>((i * 17 + 1) % 256);
    }
  }

  std::vector<float> gradients(std::vector<MemoryStrategy*> strategies, ExecutorOptions options = {}) {
    Executor executor(*model, optimizer, precision, std::move(strategies), std::move(options));
    executor.attach();
    model->store().zero_grads();
    const MicroBatch micro{tokens, targets};
    (void)executor.forward_backward(1, {&micro, 1}, Phase::full);
    std::vector<float> all;
    for (const ParameterRows& rows : model->parameters()) {
      const std::span<float> grad = test::f32(*model, rows.grad);
      all.insert(all.end(), grad.begin(), grad.end());
    }
    return all;
  }
};

const std::vector<std::string> kFamilyNames = {"gpt2", "llama"};

class ListTensors final : public MemoryStrategy {
 public:
  Status on_attach(HookContext& context) override {
    for (int layer : {kGlobalParameters, 1}) {
      std::vector<TensorInfo>& listed = layer < 0 ? globals : block;
      for (const TensorInfo& tensor : context.tensors(layer)) listed.push_back(tensor);
      names[layer < 0 ? 0 : 1].clear();
      for (const TensorInfo& tensor : listed) names[layer < 0 ? 0 : 1].emplace_back(tensor.name);
    }
    outside = context.tensors(context.n_layer()).size();
    return {};
  }
  std::vector<TensorInfo> globals, block;
  std::vector<std::string> names[2];  // the views' names outlive the hook through these copies
  std::size_t outside = 0;
};

TEST(TensorListing, EveryFamilyListsALayersTensorsWithWhatRecomputesThem) {
  for (const std::string& family : kFamilyNames) {
    SCOPED_TRACE(family);
    Fixture f(family);
    ListTensors list;
    (void)f.gradients({&list});
    EXPECT_EQ(list.outside, 0u) << "a layer outside the model lists nothing";
    std::size_t weights = 0, activations = 0, recomputable = 0;
    for (const TensorInfo& tensor : list.block) {
      EXPECT_EQ(tensor.layer, 1);
      EXPECT_GT(tensor.bytes, 0u);
      weights += tensor.group == TensorGroup::weights;
      if (tensor.group == TensorGroup::activations && tensor.category == MemoryCategory::activations) {
        ++activations;
        EXPECT_EQ(tensor.residence, Residence::absent) << "before the first step nothing is computed";
        recomputable += !tensor.recomputed_by.empty();
      }
    }
    // GPT-2: 12 parameters and 13 activations; LLaMA: 9 and 14. Each recomputes two norms, one
    // pointwise output and the attention kernel's saved rows alone.
    EXPECT_EQ(weights, family == "gpt2" ? 12u : 9u);
    EXPECT_EQ(activations, family == "gpt2" ? 13u : 14u);
    EXPECT_EQ(recomputable, 4u);
    const std::string prefix = family == "gpt2" ? "h.1." : "model.layers.1.";
    const std::string matrix = family == "gpt2" ? "attn.c_attn.weight" : "self_attn.q_proj.weight";
    const auto found = std::find_if(list.block.begin(), list.block.end(),
                                    [&](const TensorInfo& t) { return t.name == prefix + matrix; });
    ASSERT_NE(found, list.block.end()) << prefix + matrix;
    EXPECT_EQ(found->residence, Residence::device);
    EXPECT_EQ(found->dtype, DType::f32);
    EXPECT_EQ(found->shape.size(), 2u);
    EXPECT_FALSE(list.globals.empty());
  }
}

// Drops the chosen tensors (the norm outputs) after each forward; the backward recomputes them.
class DropNorms final : public MemoryStrategy {
 public:
  Status after_forward(HookContext& context) override {
    std::vector<std::string> names;
    for (const TensorInfo& tensor : context.tensors(context.layer()))
      if (tensor.recomputed_by == "layernorm" || tensor.recomputed_by == "rmsnorm") names.emplace_back(tensor.name);
    const std::vector<std::string_view> views(names.begin(), names.end());
    return context.drop_activation_tensors(context.layer(), views);
  }
};

class DropWrongTensor final : public MemoryStrategy {
 public:
  Status after_forward(HookContext& context) override {
    const std::string name = "h." + std::to_string(context.layer()) + ".act.qkv";
    const std::string_view views[] = {name};
    return context.drop_activation_tensors(context.layer(), views);
  }
};

TEST(PartialDrop, ChosenTensorsAreRecomputedBitwiseAndOthersAreRefusedByName) {
  for (const std::string& family : kFamilyNames) {
    SCOPED_TRACE(family);
    Fixture f(family);
    const std::vector<float> kept = f.gradients({});
    DropNorms drop;
    EXPECT_EQ(kept, f.gradients({&drop}));
  }
  Fixture f("gpt2");
  DropWrongTensor wrong;
  try {
    (void)f.gradients({&wrong});
    FAIL() << "qkv is not recomputed alone";
  } catch (const std::exception& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'h.0.act.qkv' is not an activation of layer 0 that is recomputed alone (those are: "
                           "h.0.act.ln1, h.0.act.attention_saved, h.0.act.ln2, h.0.act.fch_gelu"),
              std::string::npos)
        << message;
  }
}

// Moves every block's activations to the host once the next block has read them, synchronously,
// and checks where they are.
class EvictBelow final : public MemoryStrategy {
 public:
  Status after_forward(HookContext& context) override {
    const int layer = context.layer();
    // The block just computed keeps its output on the device while the next has not read it.
    if (Status s = context.evict(layer, TensorGroup::activations); !s) return s;
    if (context.tensor("h." + std::to_string(layer) + ".act.output").space != MemorySpace::device)
      return Status::error("the output the next block reads left the device");
    if (context.tensor("h." + std::to_string(layer) + ".act.qkv").space != MemorySpace::host)
      return Status::error("qkv did not move");
    if (layer > 0) return context.evict(layer - 1, TensorGroup::activations);
    return {};
  }
  Status before_backward(HookContext& context) override {
    if (context.layer() < context.n_layer() - 1 &&
        context.residence(context.layer(), TensorGroup::activations) != Residence::host)
      return Status::error("layer " + std::to_string(context.layer()) + " is not on the host before its backward");
    return {};
  }
};

TEST(ActivationOffload, MovedActivationsComeBackBitwiseAndLeaveNothingOnTheDevice) {
  Fixture f("gpt2");
  const std::vector<float> kept = f.gradients({});
  const std::uint64_t kept_peak = f.device->device_memory().stats().peak[category_index(MemoryCategory::activations)];
  Fixture g("gpt2");
  EvictBelow evict;
  EXPECT_EQ(kept, g.gradients({&evict}));
  EXPECT_LT(g.device->device_memory().stats().peak[category_index(MemoryCategory::activations)], kept_peak);
  EXPECT_EQ(g.device->device_memory().live()[category_index(MemoryCategory::activations)], 0u);
  EXPECT_EQ(g.device->host_memory().live()[category_index(MemoryCategory::activations)], 0u)
      << "released activations return to the device as their home";
}

// The host calls an entry point added in minor N only on plugins built against N or later.
TEST(VersionRule, TheHostCallsOnlyEntryPointsThePluginsMinorHas) {
  const HostCallPolicy built_for_9_0{"[[strategy]] #1 'old'", 0};
  EXPECT_TRUE(built_for_9_0.has(0));
  EXPECT_FALSE(built_for_9_0.has(1));
  const HostCallPolicy built_for_9_2{"[[strategy]] #1 'new'", 2};
  EXPECT_TRUE(built_for_9_2.has(1));
  EXPECT_TRUE(built_for_9_2.has(2));
  EXPECT_FALSE(built_for_9_2.has(3));
  // And it words a failure with the plugin, the hook and the moment.
  const Status failed = built_for_9_0.call("state", forwarding::at_moment("saving a checkpoint"),
                                           [] { return Status::error("disk full"); });
  EXPECT_EQ(failed.message(), "[[strategy]] #1 'old' failed in state (saving a checkpoint): disk full");
}

// Every entry point of 10.0 reaches a plugin built against 10.0 (none is gated by a minor yet):
// the forwarder hands on check_state and can_update_on_host, which 9.x gated by its minors.
TEST(VersionRule, EveryEntryPointOfTenZeroReachesPluginsBuiltForIt) {
  struct Refusing final : Optimizer {
    StateLayout state_layout(const ParamInfo& param) const noexcept override { return f32_state(2, param.count); }
    Status step(const OptimizerStepInfo&, std::span<ParamSlot>, OptimizerReport&) override { return {}; }
    Status check_state(std::string_view parameter, std::span<const SavedStateBuffer>) const noexcept override {
      return Status::error(std::string(parameter) + ": refused");
    }
    bool can_update_on_host() const noexcept override { return true; }
  };
  const std::vector<float> values(4, 1.0f);
  const SavedStateBuffer buffer{DType::f32, std::as_bytes(std::span(values))};
  const auto plugin = guard_plugin<Optimizer>(std::make_shared<Refusing>(), "[optimizer] 'refusing'", 0);
  EXPECT_EQ(plugin->check_state("w", std::span(&buffer, 1)).message(), "w: refused");
  EXPECT_TRUE(plugin->can_update_on_host());
}

TEST(PluginMemory, BuffersAndCopiesAreAccountedUnderThePluginsName) {
  std::unique_ptr<Backend> device = make_cpu_backend(0);
  PluginMemoryImpl memory(*device, "lion");
  const TensorView scratch = memory.device_floats("lion.direction", 1000, MemoryCategory::optimizer);
  const std::span<std::byte> host = memory.host_bytes(4000);
  EXPECT_GE(memory.device_bytes_live(), 4000u);
  EXPECT_GE(memory.host_bytes_live(), 4000u);
  EXPECT_GE(device->device_memory().live()[category_index(MemoryCategory::optimizer)], 4000u);
  memory.copy_to_host(host.data(), scratch);
  memory.copy_from_host(scratch, host.data());
  EXPECT_EQ(memory.bytes_to_host(), 4000u);
  EXPECT_EQ(memory.bytes_to_device(), 4000u);
  EXPECT_THROW(memory.copy_to_host(host.data(), TensorView{"h", -1, host.data(), DType::f32, 10, MemorySpace::host}),
               std::invalid_argument);
}

// What a plugin probes before it uses a service: memory from the first hook on, the disk tier only
// in a run that keeps one, and nothing the host does not know (an enumerator of a later minor).
TEST(Services, HasAnswersWhatThisRunOffers) {
  std::unique_ptr<Backend> device = make_cpu_backend(0);
  HostServicesImpl host(ModelInfo{}, "cpu");
  HostServices& plugin = host.for_plugin("probe");
  EXPECT_FALSE(plugin.has(Service::memory)) << "no backend yet: a constructor must not ask for memory";
  host.use_backend(*device);
  EXPECT_TRUE(plugin.has(Service::memory));
  EXPECT_FALSE(plugin.has(Service::disk_tier));
  host.set_disk_tier(true);
  EXPECT_TRUE(plugin.has(Service::disk_tier));
  EXPECT_FALSE(plugin.has(static_cast<Service>(999)));

  struct Probe final : MemoryStrategy {
    Status on_attach(HookContext& context) override {
      disk = context.has(Service::disk_tier);
      unknown = context.has(static_cast<Service>(999));
      return {};
    }
    bool disk = true, unknown = true;
  } probe;
  Fixture f("gpt2");
  (void)f.gradients({&probe});
  EXPECT_FALSE(probe.disk) << "this run keeps no disk tier";
  EXPECT_FALSE(probe.unknown);
}

// A plugin frees and resizes what it asked for (GaLore's projection scratch, larger for a later
// block under the fused update): the account follows at once, contents are kept, and memory it was
// not given is refused.
TEST(PluginMemory, ReleasingAndResizingMoveTheAccountAndKeepTheValues) {
  std::unique_ptr<Backend> device = make_cpu_backend(0);
  PluginMemoryImpl memory(*device, "galore");
  const std::uint64_t before = memory.device_bytes_live();
  TensorView scratch = memory.device_floats("galore.projection", 1000, MemoryCategory::optimizer);
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  memory.copy_from_host(scratch, values.data());
  scratch = memory.resize(scratch, 3000);
  EXPECT_EQ(scratch.count, 3000);
  EXPECT_LT(memory.device_bytes_live(), before + 4000 * sizeof(float)) << "the old buffer is freed";
  EXPECT_GE(memory.device_bytes_live(), before + 3000 * sizeof(float));
  std::vector<float> back(3000, -1.0f);
  memory.copy_to_host(back.data(), scratch);
  EXPECT_TRUE(std::equal(values.begin(), values.end(), back.begin()));
  EXPECT_TRUE(std::all_of(back.begin() + 1000, back.end(), [](float v) { return v == 0.0f; }));
  scratch = memory.resize(scratch, 10);
  std::vector<float> kept(10);
  memory.copy_to_host(kept.data(), scratch);
  EXPECT_TRUE(std::equal(kept.begin(), kept.end(), values.begin()));
  memory.release(scratch.data);
  EXPECT_EQ(memory.device_bytes_live(), before);
  EXPECT_EQ(device->device_memory().live()[category_index(MemoryCategory::optimizer)], 0u);
  EXPECT_THROW(memory.release(scratch.data), std::invalid_argument) << "freed twice";
  std::span<float> host = memory.host_floats(64);
  host[63] = 2.5f;
  host = memory.resize(host, 128);
  EXPECT_EQ(host[63], 2.5f);
  EXPECT_EQ(host[64], 0.0f);
  memory.release(host.data());
  EXPECT_EQ(memory.host_bytes_live(), 0u);
  float elsewhere = 0.0f;
  EXPECT_THROW(memory.release(&elsewhere), std::invalid_argument);
}

}  // namespace
}  // namespace strata
