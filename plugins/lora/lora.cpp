// LoRA as a strategy plugin: the base model is frozen (no gradients, optimizer state or masters for
// any of its weights, which may be bf16 or int8 and streamed) and each targeted block matrix gains
// trainable low-rank factors (lora_adapter.hpp). Checkpoints then hold the adapters and a
// fingerprint of the base they were trained on; `strata export --merge` folds them into the base.
// The plugin's own state in each checkpoint is its settings: a resume with other settings (a
// dropout the adapters' shapes do not show) is refused naming both. A checkpoint saved before
// strategies kept state resumes as before.
//
//   rank    = 8          r: A is (in, r), B is (r, out); 1 <= r < min(in, out) of every target
//   alpha   = 16.0       the update is scaled by alpha / r
//   dropout = 0.0        on the adapter's input, training steps only (cpu; cuda:N when the build
//                        has nvcc, STRATA_LORA_CUDA: the same masks, drawn on the device)
//   targets              GPT-2: qkv, attn_proj, fc, fc_proj (default ["qkv"]);
//                        LLaMA: q, k, v, o, gate, up, down (default ["q", "v"])
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "lora_adapter.hpp"
#include "strata/plugin.hpp"

#if STRATA_LORA_CUDA
#include "cuda/lora_dropout_cuda.hpp"
#endif

namespace {

using namespace strata;
using strata::lora::LoraAdapter;
using strata::lora::LoraOptions;

class Lora final : public MemoryStrategy {
 public:
  Lora(ConfigView& config, HostServices& host) : n_layer_(host.model().n_layer) {
    LoraOptions options;
    options.rank = static_cast<int>(config.get_int("rank", 8, 1, 1 << 20));
    options.alpha = config.get_double("alpha", 16.0, 0.0);
    options.dropout = config.get_double("dropout", 0.0, 0.0);
    if (options.dropout >= 1.0)
      config.report_error("dropout", "dropout must be below 1 (it keeps a fraction 1 - dropout)");
    if (options.alpha <= 0.0) config.report_error("alpha", "alpha must be positive");
    // Without `targets`, plan_parameters chooses the family's query and value projections.
    if (config.has("targets")) {
      targets_ = config.get_string_list("targets", {});
      if (targets_.empty()) config.report_error("targets", "name at least one matrix to adapt");
    }
    adapter_ = std::make_unique<LoraAdapter>(options, device_dropout(config, host, options.dropout));
    settings_ = "rank " + std::to_string(options.rank) + ", alpha " + config_number(options.alpha) + ", dropout " +
                config_number(options.dropout) + ", targets";
    if (!targets_.empty()) name_targets();
  }

  // Dropout on a GPU runs the mask's kernel on the compute stream; a build without it refuses
  // dropout there (for eval and export too, which never drop: set dropout = 0.0 there).
  static lora::DeviceDropout device_dropout(ConfigView& config, HostServices& host, double dropout) {
    const std::string_view backend = host.target().backend;
    if (dropout <= 0.0 || backend == "cpu") return {};
#if STRATA_LORA_CUDA
    if (backend.starts_with("cuda:"))
      return [&host](const lora::DropoutCall& call) {
        lora::cuda::apply_dropout(static_cast<cudaStream_t>(host.target().stream), call);
      };
#endif
    config.report_error("dropout", "dropout > 0 has no mask kernel for device.kind = \"" + std::string(backend) +
                                       "\" in this build (cpu, and cuda:N in a build with nvcc); set dropout = 0.0 "
                                       "there");
    return {};
  }

  Status state(std::string& out) override {
    out = settings_;
    return {};
  }

  Status restore_state(std::string_view saved) override {
    if (saved.empty() || saved == settings_) return {};
    return Status::error("saved by lora with " + std::string(saved) + "; this manifest's lora has " + settings_ +
                         " (resume with the same [[strategy]] settings, or start a new run from the checkpoint "
                         "with train.init_from)");
  }

  // Everything the base has is frozen; the adapters are all that trains.
  Status plan_parameters(ParameterPlan& plan) override {
    for (int layer = 0; layer < n_layer_; ++layer) plan.freeze_block(layer);
    plan.freeze_embeddings();
    plan.freeze_head();
    const std::vector<std::string> known = plan.adaptable_targets();
    if (targets_.empty()) {
      targets_ = default_targets(known);
      if (targets_.empty())
        return Status::error("targets: this model has no q and v (or qkv) to adapt by default; name its targets");
      name_targets();
    }
    for (const std::string& target : targets_) {
      // The plan words both refusals; an unknown target is this plugin's key, a rank is check()'s.
      const bool known_target = std::find(known.begin(), known.end(), target) != known.end();
      if (Status status = plan.adapt(target, *adapter_); !status)
        return known_target ? status : Status::error("targets: " + status.message());
    }
    return {};
  }

 private:
  // LoRA's usual choice (Hu et al.): the attention's query and value projections, q and v where the
  // family has them apart, GPT-2's fused qkv where it has not.
  static std::vector<std::string> default_targets(const std::vector<std::string>& known) {
    const auto has = [&](const char* name) { return std::find(known.begin(), known.end(), name) != known.end(); };
    if (has("q") && has("v")) return {"q", "v"};
    if (has("qkv")) return {"qkv"};
    return {};
  }
  void name_targets() {
    for (const std::string& target : targets_) settings_ += " " + target;
  }

  static std::string config_number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
  }

  int n_layer_;
  std::string settings_;  // what state() saves
  std::vector<std::string> targets_;
  std::unique_ptr<LoraAdapter> adapter_;
};

constexpr const char* kKeys[] = {"rank", "alpha", "dropout", "targets"};
const FactoryDescriptor kFactories[] = {make_factory<MemoryStrategy, Lora>(
    "lora", "freeze the base and train low-rank adapters on chosen block matrices", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(lora, "1.0.0", kFactories)
