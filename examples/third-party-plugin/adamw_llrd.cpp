// A third-party optimizer: AdamW with layer-wise learning-rate decay and an inverse-square-root
// schedule, the usual recipe for fine-tuning a pretrained transformer. Block l of L trains at
// lr * decay^(L - 1 - l): the top block at the full rate, lower blocks (general features worth
// keeping) more slowly; the embeddings at decay^L and the final norm at the full rate. After
// `warmup_steps` of linear warmup the rate falls as 1/sqrt(step).
//
// The contract it follows (docs/plugin-guide.md): the host owns the state buffers (two per
// parameter, laid out by state_layout(), so they are accounted and may be offloaded); the
// tensors are the backend's memory, so the update and the gradient norm go through the op table,
// never through host reads; it includes only SDK headers. Where the backend runs host kernels
// (the CPU, and the host's own table when the update is offloaded) the update is the SDK's AdamW
// loop (strata/plugin_support/adamw_update.hpp) in one pass; elsewhere it is composed from the
// elementwise ops through two scratch chunks (strata/plugin_support/adamw_through_ops.hpp), so it
// runs unchanged on any backend.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "strata/plugin.hpp"
#include "strata/plugin_support/adamw_through_ops.hpp"
#include "strata/plugin_support/adamw_update.hpp"

namespace {

using namespace strata;

class AdamWLlrd final : public Optimizer {
 public:
  AdamWLlrd(ConfigView& config, HostServices& host) : host_(host), n_layer_(host.model().n_layer) {
    decay_ = config.get_double("decay", 0.8, 0.01, 1.0);
    const std::vector<double> betas = config.get_double_list("betas", {0.9, 0.999});
    if (betas.size() != 2 || !(betas[0] >= 0 && betas[0] < 1) || !(betas[1] >= 0 && betas[1] < 1))
      config.report_error("betas", "betas must be two numbers in [0, 1), e.g. [0.9, 0.999]");
    else
      beta1_ = static_cast<float>(betas[0]), beta2_ = static_cast<float>(betas[1]);
    weight_decay_ = static_cast<float>(config.get_double("weight_decay", 0.01, 0.0, 1.0));
    grad_clip_ = config.get_double("grad_clip", 1.0, 0.0, 1e9);
  }

  StateLayout state_layout(const ParamInfo& param) const noexcept override {
    return f32_state(2, param.count);  // first and second moments
  }

  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) override {
    Ops& ops = host_.ops();
    double sum_of_squares = 0.0;
    for (const ParamSlot& slot : slots) sum_of_squares += ops.sum_of_squares(slot.grad.f32(), slot.grad.count);
    report.grad_norm = std::sqrt(sum_of_squares);
    report.lr = scheduled_lr(info);
    const float grad_scale =
        grad_clip_ > 0.0 && report.grad_norm > grad_clip_ ? static_cast<float>(grad_clip_ / report.grad_norm) : 1.0f;
    for (ParamSlot& slot : slots) {
      const double lr = report.lr * layer_factor(slot);
      const AdamWHyper hyper{
          static_cast<float>(lr), beta1_, beta2_, 1e-8f, slot.decay ? weight_decay_ : 0.0f, info.step, grad_scale};
      if (ops.supports(Op::host_kernel)) {
        ops.host_kernel("adamw_llrd.update", 16.0 * static_cast<double>(slot.param.count), [&]() noexcept {
          plugin_support::adamw_update_f32(slot.param.f32(), slot.grad.f32(), slot.state[0].f32(), slot.state[1].f32(),
                                           slot.param.count, hyper);
        });
      } else {
        update_through_elementwise_ops(ops, slot, hyper);
      }
    }
    return {};
  }

 private:
  // AdamW's element (m, v, then param) as a chain of elementwise ops over chunks of the tensor.
  void update_through_elementwise_ops(Ops& ops, ParamSlot& slot, const AdamWHyper& hyper) {
    if (scratch_.empty())
      scratch_ = host_.memory().device_floats("adamw_llrd.scratch", 2 * kChunk, MemoryCategory::optimizer);
    float* g = scratch_.f32();
    for (std::int64_t first = 0; first < slot.param.count; first += kChunk) {
      const std::int64_t n = std::min(kChunk, slot.param.count - first);
      float* param = slot.param.f32() + first;
      ops.copy(g, slot.grad.f32() + first, static_cast<std::uint64_t>(n) * sizeof(float));
      ops.scale(g, hyper.grad_scale, n);
      plugin_support::adamw_direction_through_ops(ops, hyper, g, slot.state[0].f32() + first,
                                                  slot.state[1].f32() + first, g + kChunk, n);
      ops.scale(param, 1.0f - hyper.lr * hyper.weight_decay, n);
      ops.add_scaled(param, -plugin_support::adamw_step_size(hyper), g, n);
    }
  }

  // Linear warmup, then base * sqrt(warmup / step) (the rate is continuous at the end of warmup).
  static double scheduled_lr(const OptimizerStepInfo& info) {
    const double warmup = static_cast<double>(std::max<std::int64_t>(info.warmup_steps, 1));
    const double step = static_cast<double>(info.step);
    if (step <= warmup) return info.base_lr * step / warmup;
    return info.base_lr * std::sqrt(warmup / step);
  }

  // Slots outside the blocks (layer -1): the embeddings sit below block 0, the final norm and an
  // untied head above the last block.
  double layer_factor(const ParamSlot& slot) const {
    if (slot.layer >= 0) return std::pow(decay_, n_layer_ - 1 - slot.layer);
    const bool embedding = slot.name.find("wte") != std::string_view::npos ||
                           slot.name.find("wpe") != std::string_view::npos ||
                           slot.name.find("embed_tokens") != std::string_view::npos;
    return embedding ? std::pow(decay_, n_layer_) : 1.0;
  }

  HostServices& host_;
  int n_layer_;
  double decay_ = 0.8;
  float beta1_ = 0.9f;
  float beta2_ = 0.999f;
  float weight_decay_ = 0.01f;
  double grad_clip_ = 1.0;
  TensorView scratch_;  // two chunks, only where the backend runs no host kernels

  static constexpr std::int64_t kChunk = 256 * 1024;
};

constexpr const char* kKeys[] = {"decay", "betas", "weight_decay", "grad_clip"};
const FactoryDescriptor kFactories[] = {make_factory<Optimizer, AdamWLlrd>(
    "adamw_llrd", "AdamW with layer-wise learning-rate decay and an inverse-sqrt schedule", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(adamw_llrd, "1.0.0", kFactories)
