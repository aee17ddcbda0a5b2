#include "core/plugin/stack.hpp"

#include <spdlog/spdlog.h>

#include "core/errors/manifest_error.hpp"
#include "core/manifest/toml_config_view.hpp"
#include "core/model/ops_attention_kernel.hpp"
#include "core/plugin/guarded_plugins.hpp"
#include "core/util/did_you_mean.hpp"
#include "kernels/cpu/attention_kernels.hpp"

namespace strata {

namespace {

struct Resolved {
  const PluginSpec* spec;
  InterfaceKind kind;
  FactoryRef factory;
};

// Why the manifest's attention kernel cannot run the model on `target`, worded for the user; empty
// when it can.
std::string attention_refusal(const std::string& manifest_path, const std::string& name, const Kernel& kernel,
                              const AttentionShape& shape, const KernelTarget& target) {
  const Status status = kernel.check(shape, target);
  return status ? std::string() : manifest_path + ": [kernels] attention = \"" + name + "\": " + status.message();
}

// Why the precision policy's quantized weight storage cannot hold this model's matrices or run on
// `target`, worded for the user; empty when it can (or when the policy stores no quantized weights).
// The matrices are left unchecked when check_model_shape is false.
std::string storage_refusal(const Manifest& manifest, PrecisionPolicy& precision, const KernelTarget& target,
                            bool check_model_shape) {
  WeightQuantizer* quantizer = precision.weight_quantizer();
  const std::string prefix = manifest.path.string() + ": [precision] plugin = \"" + manifest.precision.plugin + "\": ";
  const DType weights = precision.weight_storage(), embeddings = precision.embedding_storage();
  const auto name = [](DType dtype) { return std::string(dtype_name(dtype)); };
  const auto host_stored = [](DType dtype) { return dtype == DType::f32 || dtype == DType::bf16; };
  // A quantizer or rounding the host would never call is refused, not ignored: the host narrows
  // bf16 itself, only storage of the quantizer's dtype reaches the quantizer, and only bf16
  // storage the rounding.
  if (precision.bf16_rounding() != nullptr && weights != DType::bf16 && embeddings != DType::bf16)
    return prefix + "it brings a bf16 rounding but stores no weights as bf16, so the rounding would never be called";
  // Activations are stored by the host, as f32 or bf16; anything smaller is a codec's to make.
  if (const DType activations = precision.activation_storage(); !host_stored(activations))
    return prefix + "it stores activations as " + name(activations) +
           ", which the host cannot: activations are kept as f32 or bf16 (a strategy's activation codec, "
           "strata/activation_codec.hpp, stores them in an encoding of its own)";
  if (quantizer == nullptr) {
    if (host_stored(weights) && host_stored(embeddings)) return {};
    return prefix + "it stores weights as " + name(weights) + " / " + name(embeddings) +
           " (blocks / embeddings) but brings no weight quantizer for them";
  }
  const DType dtype = quantizer->dtype();
  if (host_stored(dtype))
    return prefix + "its weight quantizer is for " + name(dtype) +
           ", which the host stores itself, so it would never be called (a quantizer is for a dtype of its own: i8, "
           "u8, f16)";
  if (weights != dtype && embeddings != dtype)
    return prefix + "its weight quantizer is for " + name(dtype) + ", but the policy stores the block matrices as " +
           name(weights) + " and the embeddings as " + name(embeddings) + ", so the quantizer would never be called";
  for (const auto& [what, storage] : {std::pair{"block matrices", weights}, std::pair{"embeddings", embeddings}})
    if (!host_stored(storage) && storage != dtype)
      return prefix + "it stores the " + what + " as " + name(storage) +
             ", which neither the host nor its quantizer (for " + name(dtype) + ") stores";
  if (Status status = quantizer->check(target); !status) return prefix + status.message();
  if (!check_model_shape) return {};
  for (const auto& [name, shape] : manifest.model.block_matrices()) {
    QuantizedLayout layout;
    if (Status status = quantizer->layout(shape, layout); !status)
      return prefix + "h.N." + name + ": " + status.message();
  }
  return {};
}

// What the strategies freeze and skip, recorded into the stack's plan (a block both frozen and
// skipped is skipped).
class ParameterPlanRecorder final : public ParameterPlan {
 public:
  ParameterPlanRecorder(const ModelInfo& model, std::vector<AdapterTarget> targets, TrainablePlan& plan)
      : model_(model), targets_(std::move(targets)), plan_(plan) {
    plan_.blocks.assign(static_cast<std::size_t>(model.n_layer), BlockTraining::train);
  }
  const ModelInfo& model() const noexcept override { return model_; }
  void freeze_block(int layer) noexcept override {
    if (inside(layer) && plan_.block(layer) == BlockTraining::train)
      plan_.blocks[static_cast<std::size_t>(layer)] = BlockTraining::freeze;
  }
  void skip_block(int layer) noexcept override {
    if (inside(layer)) plan_.blocks[static_cast<std::size_t>(layer)] = BlockTraining::skip;
  }
  void freeze_embeddings() noexcept override { plan_.embeddings = false; }
  void freeze_head() noexcept override { plan_.head = false; }
  std::vector<std::string> adaptable_targets() const override {
    std::vector<std::string> names;
    for (const AdapterTarget& target : targets_) names.push_back(target.target);
    return names;
  }
  Status adapt(std::string_view target, MatmulAdapter& adapter) override {
    std::string known;
    for (const AdapterTarget& candidate : targets_) {
      if (candidate.target == target) {
        if (Status status = adapter.check(target, candidate.shape); !status) return status;
        for (const PlannedAdapter& planned : plan_.adapters)
          if (planned.target == target) return Status::error("'" + std::string(target) + "' is adapted twice");
        plan_.adapters.push_back({std::string(target), &adapter});
        return {};
      }
      known += (known.empty() ? "" : ", ") + candidate.target;
    }
    return Status::error("'" + std::string(target) + "' is not a matrix of a " + std::string(model_.arch) +
                         " block (it has " + known + ")");
  }

 private:
  bool inside(int layer) const noexcept { return layer >= 0 && layer < model_.n_layer; }
  const ModelInfo& model_;
  std::vector<AdapterTarget> targets_;
  TrainablePlan& plan_;
};

std::string where(const Manifest& manifest, const PluginSpec& spec) {
  TomlConfigView view(spec.table, {manifest.path.string(), spec.label, spec.dotted_path, &manifest.overridden},
                      {"plugin"});
  return view.where("plugin");
}

template <typename Interface>
std::shared_ptr<Interface> create(const Manifest& manifest, const Resolved& resolved, HostServicesImpl& host,
                                  std::vector<std::string>& problems, std::vector<std::string>& warnings) {
  const FactoryDescriptor& factory = *resolved.factory.factory;
  std::vector<std::string> keys = {"plugin"};
  for (const char* key : factory.config_keys) keys.emplace_back(key);
  const PluginSpec& spec = *resolved.spec;
  const std::string label = spec.label + " (" + spec.plugin + ")";
  TomlConfigView view(spec.table, {manifest.path.string(), label, spec.dotted_path, &manifest.overridden}, keys);
  view.check_unknown_keys();
  (void)view.get_string("plugin", "", {});
  std::string error;
  void* object = factory.create(view, host.for_plugin(spec.plugin), &error);
  for (const std::string& problem : view.problems()) problems.push_back(problem);
  std::shared_ptr<boost::dll::shared_library> library = resolved.factory.plugin->library;
  const DestroyFunction destroy = factory.destroy;
  if (object == nullptr) {
    problems.push_back(where(manifest, spec) + ": " + label + " could not be created: " +
                       (error.empty() ? std::string("its factory returned nothing") : error));
    return nullptr;
  }
  // The deleter owns a reference to the library: the code stays mapped until the object is gone.
  std::shared_ptr<Interface> owned(static_cast<Interface*>(object),
                                   [destroy, library](Interface* pointer) { destroy(pointer); });
  if (!view.problems().empty()) return nullptr;
  // Only keys the manifest sets: those are the settings that silently do nothing. A declared key
  // nobody sets is the plugin author's concern, which `strata plugins` reports.
  for (const std::string& key : view.unread_keys())
    if (spec.table != nullptr && spec.table->contains(key))
      warnings.push_back(view.where(key) + ": " + label + " sets key '" + key +
                         "', which the plugin declares but did not read: it has no effect (" +
                         resolved.factory.plugin->path.string() + ")");
  return guard_plugin(std::move(owned), spec.label + " '" + spec.plugin + "'",
                      resolved.factory.plugin->descriptor->abi_minor);
}

constexpr const char* kDefaultCudaAttention = "flash_bf16";

// On CUDA, a run that keeps bf16 activations gets the flash plugin's tensor-core attention unless
// the manifest names one: it saves B x n_head x T floats where the backend's own saves T x T
// probabilities, and runs faster (docs/benchmarks.md). Only where it can run the model's shape
// (head dims 64 and 128) and the plugin is installed; otherwise null, and the backend's own runs.
std::shared_ptr<Kernel> default_cuda_attention(const Manifest& manifest, PluginRegistry& registry,
                                               HostServicesImpl& host, const PrecisionPolicy* precision) {
  if (!manifest.device.kind.starts_with("cuda:") || precision == nullptr ||
      precision->activation_storage() != DType::bf16)
    return nullptr;
  const std::optional<FactoryRef> factory = registry.find(InterfaceKind::kernel, kDefaultCudaAttention);
  if (!factory) return nullptr;
  const PluginSpec spec{kDefaultCudaAttention, nullptr, "[kernels] attention (default on CUDA)", "kernels"};
  std::vector<std::string> problems, warnings;
  std::shared_ptr<Kernel> kernel =
      create<Kernel>(manifest, {&spec, InterfaceKind::kernel, *factory}, host, problems, warnings);
  if (kernel == nullptr || !problems.empty() ||
      !attention_refusal(manifest.path.string(), kDefaultCudaAttention, *kernel, manifest.model.attention_shape(1),
                         {manifest.device.kind, -1, nullptr})
           .empty())
    return nullptr;
  spdlog::info(
      "attention: {} (the default on CUDA for bf16 activations; [kernels] attention = \"fast\" picks the "
      "backend's own)",
      kDefaultCudaAttention);
  return kernel;
}

}  // namespace

std::optional<DefaultsCheck> check_with_defaults(const FactoryRef& factory, HostServices& host) {
  const FactoryDescriptor& descriptor = *factory.factory;
  std::vector<std::string> keys = {"plugin"};
  for (const char* key : descriptor.config_keys) keys.emplace_back(key);
  const toml::table empty;
  TomlConfigView view(&empty, {"(defaults)", descriptor.name, descriptor.name, nullptr}, keys);
  std::string error;
  void* object = descriptor.create(view, host, &error);
  if (object == nullptr) return std::nullopt;
  descriptor.destroy(object);
  return DefaultsCheck{view.unread_keys(), view.problems()};
}

std::vector<MemoryStrategy*> Stack::strategy_pointers() const {
  std::vector<MemoryStrategy*> pointers;
  for (const auto& strategy : strategies) pointers.push_back(strategy.get());
  return pointers;
}

Kernel& Stack::attention_on(Backend& backend, const AttentionShape& shape) {
  // The backend's own attention, refused by name where it cannot run this shape (a sliding window
  // on CUDA), rather than run without what the shape asks.
  const auto backends_own = [&]() -> Kernel& {
    attention = std::make_shared<OpsAttentionKernel>(backend.ops());
    if (const std::string refusal =
            attention_refusal(manifest_path, attention_name, *attention, shape, backend.kernel_target());
        !refusal.empty())
      throw ManifestError(refusal);
    return *attention;
  };
  if (!attention) return backends_own();
  if (const std::string refusal =
          attention_refusal(manifest_path, attention_name, *attention, shape, backend.kernel_target());
      !refusal.empty()) {
    if (!attention_is_default) throw ManifestError(refusal);
    // plan and validate size the rows on the CPU, where the default is not meant to run.
    if (backend.name() != "cpu") spdlog::info("attention: the backend's own ({})", refusal);
    return backends_own();
  }
  if (const Status status = attention->bind(backend.kernel_target()); !status) {
    if (!attention_is_default)
      throw std::runtime_error("could not bind the attention kernel to " + backend.name() + ": " + status.message());
    spdlog::info("attention: the backend's own ({} could not bind: {})", attention_name, status.message());
    return backends_own();
  }
  return *attention;
}

StorageTypes Stack::storage_on(Backend& backend) {
  if (WeightQuantizer* quantizer = precision->weight_quantizer()) {
    const KernelTarget target = backend.kernel_target();
    if (const Status status = quantizer->check(target); !status)
      throw ManifestError(manifest_path + ": [precision] " + status.message());
    if (const Status status = quantizer->bind(target); !status)
      throw std::runtime_error("could not bind the weight quantizer to " + backend.name() + ": " + status.message());
  }
  StorageTypes storage = storage_types(*precision);
  for (std::size_t i = 0; i < strategies.size(); ++i)
    if (ActivationCodec* codec = strategies[i]->activation_codec())
      storage.codecs.push_back({codec, static_cast<int>(i), i < strategy_labels.size() ? strategy_labels[i] : ""});
  storage.quantizer_label = "[precision] '" + precision_name + "' weight quantizer";
  return storage;
}

Stack build_stack(const Manifest& manifest, PluginRegistry& registry, HostServicesImpl& host,
                  const std::string& default_telemetry, bool check_model_shape) {
  std::vector<std::string> problems;
  std::vector<Resolved> resolved;
  PluginSpec default_sink{default_telemetry, nullptr, "[[telemetry]] (default)", "telemetry"};
  std::vector<const PluginSpec*> sinks;
  for (const PluginSpec& spec : manifest.telemetry) sinks.push_back(&spec);
  if (sinks.empty() && !default_telemetry.empty()) sinks.push_back(&default_sink);

  auto resolve = [&](const PluginSpec& spec, InterfaceKind kind) {
    if (spec.plugin.empty()) return;
    if (auto factory = registry.find(kind, spec.plugin)) {
      resolved.push_back({&spec, kind, *factory});
      return;
    }
    const std::vector<std::string> available = registry.names(kind);
    std::string message = where(manifest, spec) + ": " + spec.label + " names unknown " +
                          std::string(interface_name(kind)) + " plugin '" + spec.plugin +
                          "'; available: " + (available.empty() ? std::string("(none found)") : join_words(available));
    if (const std::string near = closest_match(spec.plugin, available); !near.empty())
      message += " (did you mean '" + near + "'?)";
    for (const LoadFailure& failure : registry.failures())
      if (failure.path.stem().string().find(spec.plugin) != std::string::npos)
        message += "\n  note: " + failure.path.string() + " failed to load: " + failure.reason;
    problems.push_back(message);
  };
  resolve(manifest.optimizer, InterfaceKind::optimizer);
  resolve(manifest.precision, InterfaceKind::precision);
  for (const PluginSpec& spec : manifest.strategies) resolve(spec, InterfaceKind::memory_strategy);
  resolve(manifest.predictor, InterfaceKind::phase_controller);
  for (const PluginSpec* spec : sinks) resolve(*spec, InterfaceKind::telemetry);

  // The attention kernel: built in ("fast", "reference") or a kernel plugin.
  // A [kernels.attention] table hands its keys to the kernel, as a plugin table does.
  std::string attention = manifest.kernels.contains("attention") ? manifest.kernels.at("attention") : "fast";
  const PluginSpec attention_spec = manifest.attention_kernel.table != nullptr
                                        ? manifest.attention_kernel
                                        : PluginSpec{attention, nullptr, "[kernels] attention", "kernels"};
  if ((attention == "fast" || attention == "reference") && attention_spec.table != nullptr &&
      attention_spec.table->size() > 1)
    problems.push_back(manifest.path.string() + ": [kernels.attention] the built-in kernel '" + attention +
                       "' takes no keys besides plugin");
  Stack stack;
  stack.attention_name = attention;
  stack.manifest_path = manifest.path.string();
  if (attention == "fast") {
    // The backend's own attention op, bound once the backend exists (attention_on).
  } else if (attention == "reference") {
    stack.attention = cpu::make_attention_kernel(cpu::AttentionImpl::reference);
  } else if (auto factory = registry.find(InterfaceKind::kernel, attention)) {
    resolved.push_back({&attention_spec, InterfaceKind::kernel, *factory});
  } else {
    std::vector<std::string> available = registry.names(InterfaceKind::kernel);
    available.insert(available.begin(), {"fast", "reference"});
    problems.push_back(manifest.path.string() + ": [kernels] attention = \"" + attention +
                       "\" is not a known implementation; available: " + join_words(available));
  }
  // Every problem is listed at once: what resolved is still checked and created below.

  // Requirements and conflicts, before anything is created.
  for (const Resolved& r : resolved) {
    const FactoryDescriptor& factory = *r.factory.factory;
    for (const char* required : factory.requires_plugins) {
      const bool present = std::any_of(resolved.begin(), resolved.end(),
                                       [&](const Resolved& other) { return other.spec->plugin == required; });
      if (!present)
        problems.push_back(where(manifest, *r.spec) + ": " + r.spec->label + " '" + r.spec->plugin +
                           "' requires plugin '" + required + "', which the stack does not include");
    }
    for (const char* conflict : factory.conflicts_with)
      for (const Resolved& other : resolved)
        if (&other != &r && other.spec->plugin == conflict)
          problems.push_back(where(manifest, *r.spec) + ": incompatible stack: " + r.spec->label + " '" +
                             r.spec->plugin + "' conflicts with " + other.spec->label + " '" + other.spec->plugin +
                             "'");
  }

  // Each plugin reads its keys against the model (n_layer ranges, targets): with the model's keys
  // refused, those would be checked against defaults the user never wrote.
  for (const Resolved& r : resolved) {
    if (!check_model_shape) break;
    switch (r.kind) {
      case InterfaceKind::optimizer:
        stack.optimizer = create<Optimizer>(manifest, r, host, problems, stack.warnings);
        break;
      case InterfaceKind::precision:
        stack.precision = create<PrecisionPolicy>(manifest, r, host, problems, stack.warnings);
        break;
      case InterfaceKind::memory_strategy:
        stack.strategies.push_back(create<MemoryStrategy>(manifest, r, host, problems, stack.warnings));
        stack.strategy_labels.push_back(r.spec->label + " '" + r.spec->plugin + "'");
        break;
      case InterfaceKind::telemetry:
        stack.telemetry.push_back(create<TelemetrySink>(manifest, r, host, problems, stack.warnings));
        break;
      case InterfaceKind::kernel: stack.attention = create<Kernel>(manifest, r, host, problems, stack.warnings); break;
      case InterfaceKind::phase_controller:
        stack.predictor = create<PhaseController>(manifest, r, host, problems, stack.warnings);
        break;
    }
  }
  if (stack.attention && stack.attention->op() != "attention")
    problems.push_back(manifest.path.string() + ": [kernels] attention = \"" + attention + "\" implements op '" +
                       std::string(stack.attention->op()) + "', not 'attention'");
  // The kernel must run this model's attention on the manifest's device: refused before anything
  // runs (attention_on asks again with the backend itself).
  if (stack.attention && check_model_shape)
    if (std::string refusal = attention_refusal(manifest.path.string(), attention, *stack.attention,
                                                manifest.model.attention_shape(1), {manifest.device.kind, -1, nullptr});
        !refusal.empty())
      problems.push_back(std::move(refusal));
  if (!manifest.kernels.contains("attention") && check_model_shape)
    if (std::shared_ptr<Kernel> kernel = default_cuda_attention(manifest, registry, host, stack.precision.get())) {
      stack.attention = std::move(kernel);
      attention = stack.attention_name = kDefaultCudaAttention;
      stack.attention_is_default = true;
    }
  if (stack.precision)
    if (std::string refusal =
            storage_refusal(manifest, *stack.precision, {manifest.device.kind, -1, nullptr}, check_model_shape);
        !refusal.empty())
      problems.push_back(std::move(refusal));
  if (check_model_shape) {
    const ModelInfo model = manifest.model.info();
    ParameterPlanRecorder recorder(model, manifest.model.adapter_targets(), stack.trainable);
    for (const auto& strategy : stack.strategies)
      if (strategy)  // null: its table had problems, listed already
        if (Status status = strategy->plan_parameters(recorder); !status)
          problems.push_back(manifest.path.string() + ": " + status.message());
  }
  if (!problems.empty()) throw ManifestError(problems);
  stack.description = manifest.optimizer.plugin + " + " + manifest.precision.plugin;
  stack.precision_name = manifest.precision.plugin;
  for (const PluginSpec& spec : manifest.strategies) stack.description += " + " + spec.plugin;
  // The kernel the manifest names: a default pick depends on the device and is not the stack's, so
  // a checkpoint resumes across it (its description is what a resume compares).
  if (attention != "fast" && !stack.attention_is_default) stack.description += " + attention:" + attention;
  if (!manifest.predictor.plugin.empty()) stack.description += " + predictor:" + manifest.predictor.plugin;
  for (const std::string& warning : stack.warnings) spdlog::warn("{}", warning);
  return stack;
}

}  // namespace strata
