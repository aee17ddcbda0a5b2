// Activation checkpointing (Chen et al. 2016; torch.utils.checkpoint): after a chosen block's
// forward, drop what it saved for backward, and rebuild it just before that block's backward.
//   mode = "block"      keeps only the block's output (the next block's input) and recomputes the
//                        whole block: the most memory saved, one extra block forward each.
//   mode = "selective"  Korthikanti et al. 2022: keeps the matmul outputs and drops the attention
//                        internals, the kernel's saved rows (the built-in kernel's B x n_head x T x T
//                        probabilities, the T^2 part), and runs attention's forward again.
//   mode = "cheap"      drops only the norm and pointwise (GELU, SwiGLU) outputs, which are cheap
//                        to recompute, and keeps the matmul and attention results.
// The partial modes choose by what the host says of each tensor (HookContext::tensors: which op
// recomputes it alone), so they work for any model family without naming its tensors.
//   logits = "recompute" also drops the LM head's logits (B x T x vocab floats, on GPT-2 the
//                        largest activation): the head keeps one vocabulary chunk and recomputes
//                        each chunk for the backward pass, one extra head matmul.
// The executor recomputes a block's missing activations just before its backward, after every
// strategy's before_backward hook (so an offload strategy has brought the weights back first).
// Recomputation runs the same kernels on the same inputs, so gradients are bitwise unchanged.
#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

std::vector<std::string> all_phase_names() {
  std::vector<std::string> names;
  for (Phase phase : {Phase::warmup, Phase::full, Phase::predict, Phase::correct})
    names.emplace_back(phase_name(phase));
  return names;
}

class Checkpoint final : public MemoryStrategy {
 public:
  Checkpoint(ConfigView& config, HostServices& host) {
    const int n_layer = host.model().n_layer;
    selected_.assign(static_cast<std::size_t>(n_layer), false);
    if (config.has("every") && config.has("layers")) config.report_error("layers", "set every or layers, not both");
    if (config.has("layers")) {
      for (std::int64_t layer : config.get_int_list("layers", {})) {
        if (layer < 0 || layer >= n_layer) {
          config.report_error("layers", "layers holds " + std::to_string(layer) + ", outside the model's layers [0, " +
                                            std::to_string(n_layer - 1) + "]");
          continue;
        }
        selected_[static_cast<std::size_t>(layer)] = true;
      }
    } else {
      const std::int64_t every = config.get_int("every", 1, 1, std::max(n_layer, 1));
      for (int layer = 0; layer < n_layer; layer += static_cast<int>(std::max<std::int64_t>(every, 1)))
        selected_[static_cast<std::size_t>(layer)] = true;
    }
    const std::string mode = config.get_string("mode", "block", {"block", "selective", "cheap"});
    mode_ = mode == "selective" ? Mode::selective : mode == "cheap" ? Mode::cheap : Mode::block;
    drop_logits_ = config.get_string("logits", "keep", {"keep", "recompute"}) == "recompute";
    const std::vector<std::string> names = all_phase_names();
    for (const std::string& name : config.get_string_list("phases", names, names))
      for (Phase phase : {Phase::warmup, Phase::full, Phase::predict, Phase::correct})
        if (phase_name(phase) == name) phases_[static_cast<std::size_t>(phase)] = true;
  }

  Status on_attach(HookContext& context) override {
    if (mode_ != Mode::block) {
      chosen_.resize(selected_.size());
      for (int layer = 0; layer < static_cast<int>(selected_.size()); ++layer)
        for (const TensorInfo& tensor : context.tensors(layer))
          if (chosen_by_mode(tensor.recomputed_by)) chosen_[static_cast<std::size_t>(layer)].emplace_back(tensor.name);
      if (chosen_.empty() || chosen_.front().empty())
        return Status::error(std::string("mode = \"") + (mode_ == Mode::cheap ? "cheap" : "selective") +
                             "\": this model's blocks have no activation that mode recomputes alone");
    }
    return drop_logits_ ? context.drop_logits() : Status{};
  }

  Status after_forward(HookContext& context) override {
    if (!applies(context)) return {};
    if (mode_ == Mode::block) return context.drop_activations(context.layer());
    const std::vector<std::string>& names = chosen_[static_cast<std::size_t>(context.layer())];
    const std::vector<std::string_view> views(names.begin(), names.end());
    return context.drop_activation_tensors(context.layer(), views);
  }

 private:
  // cheap: what a norm or a pointwise op recomputes; selective: the attention kernel's saved rows.
  bool chosen_by_mode(std::string_view op) const {
    if (mode_ == Mode::selective) return op == "attention";
    return op == "layernorm" || op == "rmsnorm" || op == "gelu" || op == "swiglu" || op == "geglu";
  }

  bool applies(const HookContext& context) const {
    return selected_[static_cast<std::size_t>(context.layer())] && phases_[static_cast<std::size_t>(context.phase())];
  }

  std::vector<bool> selected_;
  std::array<bool, 4> phases_{};
  enum class Mode { block, selective, cheap };
  Mode mode_ = Mode::block;
  bool drop_logits_ = false;
  std::vector<std::vector<std::string>> chosen_;  // per layer, the partial modes' tensor names
};

constexpr const char* kKeys[] = {"every", "layers", "mode", "phases", "logits"};
const FactoryDescriptor kFactories[] = {make_factory<MemoryStrategy, Checkpoint>(
    "checkpoint", "drop activations after a block's forward and recompute them for its backward", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(checkpoint, "2.0.0", kFactories)
