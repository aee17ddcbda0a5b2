// Full precision: f32 storage and compute, no loss scaling; a step whose gradients are not finite
// is skipped (and counted) rather than applied.
#include <cmath>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

class Fp32 final : public PrecisionPolicy {
 public:
  Fp32(ConfigView& config, HostServices&) { skip_nonfinite_ = config.get_bool("skip_nonfinite", true); }
  DType weight_storage() const noexcept override { return DType::f32; }
  double loss_scale() const noexcept override { return 1.0; }
  Status unscale_and_check(std::span<const TensorView> grads, PrecisionDecision& decision) noexcept override {
    decision.loss_scale = 1.0;
    bool finite = true;
    for (const TensorView& grad : grads) {
      float sum = 0.0f;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
      for (std::size_t i = 0; i < grad.data.size(); ++i) sum += grad.data[i] * 0.0f;  // NaN/inf propagate
      if (!std::isfinite(sum)) {
        finite = false;
        break;
      }
    }
    decision.skip_step = !finite && skip_nonfinite_;
    if (!finite && !skip_nonfinite_) return Status::error("non-finite gradients (skip_nonfinite = false)");
    return {};
  }

 private:
  bool skip_nonfinite_ = true;
};

constexpr const char* kKeys[] = {"skip_nonfinite", nullptr};
const FactoryDescriptor kFactories[] = {make_factory<PrecisionPolicy, Fp32>("fp32", "f32 everywhere", kKeys)};

}  // namespace

STRATA_DEFINE_PLUGIN(fp32, "1.0.0", kFactories)
