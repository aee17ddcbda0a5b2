#pragma once
// What every storage-only precision policy shares: no loss scale (f32 and bf16 keep f32's exponent
// range), and a step whose gradients are not finite is skipped and counted, unless
// skip_nonfinite = false makes it an error.
#include "strata/plugin.hpp"

namespace strata::plugin_support {

class StoragePrecision : public PrecisionPolicy {
 public:
  StoragePrecision(ConfigView& config, DType weights, DType activations)
      : weights_(weights), activations_(activations), skip_nonfinite_(config.get_bool("skip_nonfinite", true)) {}
  DType weight_storage() const noexcept override { return weights_; }
  DType activation_storage() const noexcept override { return activations_; }
  double loss_scale() const noexcept override { return 1.0; }
  Status unscale_and_check(Ops& ops, std::span<const TensorView> grads, PrecisionDecision& decision) override {
    decision.loss_scale = 1.0;
    bool finite = true;
    for (const TensorView& grad : grads) finite = finite && ops.all_finite(grad.f32(), grad.count);
    decision.skip_step = !finite && skip_nonfinite_;
    if (!finite && !skip_nonfinite_) return Status::error("non-finite gradients (skip_nonfinite = false)");
    return {};
  }

 private:
  DType weights_;
  DType activations_;
  bool skip_nonfinite_;
};

// A "bf16" | "f32" storage key.
inline DType storage_key(ConfigView& config, std::string_view key) {
  return config.get_string(key, "bf16", {"bf16", "f32"}) == "f32" ? DType::f32 : DType::bf16;
}

}  // namespace strata::plugin_support
