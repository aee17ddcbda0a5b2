#pragma once
// A plugin's own kernels under the dry run (core/planner/dry_backend.hpp): what they declare —
// the floats attention saves, a quantizer's scale groups and scratch — is the plugin's, asked of
// it; what they compute is skipped and logged, as the dry backend's ops are. Without them a
// plugin's CPU kernel would run for real on the dry arenas' memory: right, but as slow as a step.
#include <cstdint>
#include <string_view>

#include "core/planner/dry_backend.hpp"
#include "strata/kernel.hpp"
#include "strata/weight_quantizer.hpp"

namespace strata {

class DryKernel final : public Kernel {
 public:
  DryKernel(Kernel& kernel, DryBackend& backend) : kernel_(kernel), backend_(backend) {}

  std::string_view op() const noexcept override { return kernel_.op(); }
  Status check(const AttentionShape& shape, const KernelTarget& target) const override {
    return kernel_.check(shape, target);
  }
  Status bind(const KernelTarget& target) override { return kernel_.bind(target); }
  std::int64_t saved_floats(const AttentionShape& shape) const noexcept override { return kernel_.saved_floats(shape); }
  std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept override {
    return kernel_.backward_scratch_floats(shape);
  }
  Status attention_forward(const AttentionShape&, float*, float*, const AttentionInputs&) override;
  Status attention_backward(const AttentionShape&, const AttentionGrads&, const float*, const float*,
                            const AttentionInputs&, const float*, float*) override;

 private:
  Kernel& kernel_;
  DryBackend& backend_;
};

class DryQuantizer final : public WeightQuantizer {
 public:
  DryQuantizer(WeightQuantizer& quantizer, DryBackend& backend) : quantizer_(quantizer), backend_(backend) {}

  DType dtype() const noexcept override { return quantizer_.dtype(); }
  Status scale_groups(const MatmulShape& shape, std::int64_t& group_size, std::int64_t& scales) const override {
    return quantizer_.scale_groups(shape, group_size, scales);
  }
  std::int64_t scratch_floats(const MatmulShape& shape) const noexcept override {
    return quantizer_.scratch_floats(shape);
  }
  Status check(const KernelTarget& target) const override { return quantizer_.check(target); }
  Status bind(const KernelTarget& target) override { return quantizer_.bind(target); }
  void quantize(QuantizedMatrix, const float*, const MatmulShape&) noexcept override;
  void matmul_forward(float*, const float*, Weight, const float*, const MatmulShape&, Scratch) noexcept override;
  void matmul_backward(float*, float*, float*, const float*, const float*, Weight, const MatmulShape&, Scratch,
                       GradientWrite) noexcept override;

 private:
  WeightQuantizer& quantizer_;
  DryBackend& backend_;
};

}  // namespace strata
