#pragma once
// A plugin's own kernels under the dry run (core/planner/dry_backend.hpp): what they declare —
// the floats attention saves, a quantizer's scale groups and scratch — is the plugin's, asked of
// it; what they compute is skipped and logged, as the dry backend's ops are. Without them a
// plugin's CPU kernel would run for real on the dry arenas' memory: right, but as slow as a step.
//
// The calibration times the op table, not a plugin's kernels, so when the plan prices the step
// (`timed`), each distinct shape a plugin kernel sees is run for real on operands of its own, at
// most 512 rows (or one sequence) of it, and the log carries that time extended to the call.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/planner/calibration.hpp"
#include "core/planner/dry_backend.hpp"
#include "strata/activation_codec.hpp"
#include "strata/kernel.hpp"
#include "strata/weight_quantizer.hpp"

namespace strata {

class DryKernel final : public Kernel {
 public:
  // `timings`: run the kernel on the spot to price it, keeping its times there under `identity`
  // (null: not priced; nor is the backend's own attention, whose ops the calibration times, and
  // which would compute nothing here).
  DryKernel(Kernel& kernel, DryBackend& backend, KernelTimings* timings, std::string identity)
      : kernel_(kernel), backend_(backend), timings_(timings), identity_(std::move(identity)) {}

  std::string_view op() const noexcept override { return kernel_.op(); }
  Status check(const AttentionShape& shape, const KernelTarget& target) const override {
    return kernel_.check(shape, target);
  }
  Status bind(const KernelTarget& target) override { return kernel_.bind(target); }
  std::int64_t saved_floats(const AttentionShape& shape) const noexcept override { return kernel_.saved_floats(shape); }
  std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept override {
    return kernel_.backward_scratch_floats(shape);
  }
  Status attention_forward(const KernelCall& call, const AttentionShape& shape, float*, float*,
                           const AttentionInputs&) override;
  Status attention_backward(const KernelCall& call, const AttentionShape& shape, const AttentionGrads&, const float*,
                            const float*, const AttentionInputs&, const float*, float*) override;

 private:
  // Seconds of one sequence's forward (or backward) at batch 1 and this shape, measured once.
  double sequence_seconds(const AttentionShape& shape, bool backward);

  Kernel& kernel_;
  DryBackend& backend_;
  KernelTimings* timings_;
  std::string identity_;
};

// A strategy's activation codec under the dry run: its code sizes are its own (they are rows of the
// table), and its encode and decode are logged as a pass over the values, as a copy is.
class DryCodec final : public ActivationCodec {
 public:
  DryCodec(ActivationCodec& codec, DryBackend& backend) : codec_(codec), backend_(backend) {}
  std::uint64_t code_bytes(const TensorInfo& activation) const noexcept override {
    return codec_.code_bytes(activation);
  }
  Status encode(Ops&, const CodecCall&, const TensorView& values, const TensorView&) noexcept override {
    backend_.record("copy", static_cast<double>(values.bytes()));
    return {};
  }
  Status decode(Ops&, const CodecCall&, const TensorView&, const TensorView& values) noexcept override {
    backend_.record("copy", static_cast<double>(values.bytes()));
    return {};
  }

 private:
  ActivationCodec& codec_;
  DryBackend& backend_;
};

class DryQuantizer final : public WeightQuantizer {
 public:
  DryQuantizer(WeightQuantizer& quantizer, DryBackend& backend, KernelTimings* timings, std::string identity)
      : quantizer_(quantizer), backend_(backend), timings_(timings), identity_(std::move(identity)) {}

  DType dtype() const noexcept override { return quantizer_.dtype(); }
  Status layout(const MatmulShape& shape, QuantizedLayout& layout) const override {
    return quantizer_.layout(shape, layout);
  }
  std::int64_t scratch_floats(const MatmulShape& shape) const noexcept override {
    return quantizer_.scratch_floats(shape);
  }
  Status check(const KernelTarget& target) const override { return quantizer_.check(target); }
  Status bind(const KernelTarget& target) override { return quantizer_.bind(target); }
  void quantize(QuantizedMatrix, const float*, const MatmulShape&) noexcept override;
  void matmul_forward(const op::MatmulForward& call) noexcept override;
  void matmul_backward(const op::MatmulBackward& call) noexcept override;

 private:
  // Seconds of the product (0: forward; 1, 2, 3: backward with dinp, dweight, both): measured at
  // the call's rows up to 512; past them, at 256 and 512 rows and extended along that line (a
  // kernel's work per call, such as widening the matrix, stays; its work per row grows). -1 when
  // it could not be measured.
  double product_seconds(const MatmulShape& shape, int kind) noexcept;
  double measure(const MatmulShape& shape, int kind);

  WeightQuantizer& quantizer_;
  DryBackend& backend_;
  KernelTimings* timings_;
  std::string identity_;
};

}  // namespace strata
