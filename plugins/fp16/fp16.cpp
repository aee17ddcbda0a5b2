// Precision policy `fp16`: mixed precision as on fp16 tensor cores, with dynamic loss scaling.
//
// The blocks' weight matrices are stored as IEEE f16 (half the bytes of f32; the optimizer updates
// an f32 master copy, re-rounded after every update), and every matmul that reads them multiplies
// f16 operands with f32 accumulation: the activation operand is rounded to f16 on the way in (the
// input in forward; the incoming gradient and the input in backward). f16 keeps 10 mantissa bits
// but only 5 exponent bits: gradients under 2^-24 flush to zero and values over 65504 overflow. So
// the loss is multiplied by a scale before backward, the gradients are divided by it before the
// update, and a step whose gradients overflowed is skipped (counted in telemetry) while the scale
// backs off (loss_scaler.hpp).
//
//   initial_scale   = 65536   the first loss scale (> 0)
//   growth_interval = 2000    finite steps in a row before the scale grows
//   growth_factor   = 2.0     (> 1)
//   backoff         = 0.5     the factor after an overflow, in (0, 1)
//   <phase>_compute = "f16" | "bf16" | "f32"   the matmul operands in steps of that phase
//                     (warmup, full, predict, correct; default f16). The phase comes from the
//                     [predictor] (a phase controller); without one every step is full, and the
//                     other three have no effect (logged): e.g. predict_compute = "bf16". Only f16
//                     steps that run backward scale the loss: never under bf16, never in predict.
//
// Activations and embeddings stay f32: bf16 storage under fp16 is refused (bf16 has f32's exponent
// range and needs no loss scale: use the bf16 policy). The kernels:
//   cpu      cpu/fp16_matmul_cpu.hpp: operands rounded and the weight widened in the model's scratch;
//   cuda:N   (a build with nvcc, STRATA_FP16_CUDA) cuda/fp16_cuda.hpp: the weight widened and the
//            activation operand rounded on the device, in a workspace of the plugin's own
//            (precision/device_workspace.hpp), then the backend's f32 product, which holds those
//            values exactly (TF32 too): f16 tensor cores' products up to summation order.
#include <array>
#include <string>

#include "cpu/fp16_matmul_cpu.hpp"
#include "loss_scaler.hpp"
#include "strata/plugin.hpp"
#include "strata/plugin_support/device_workspace.hpp"
#include "strata/plugin_support/kernel_backends.hpp"

#ifndef STRATA_FP16_CUDA
#define STRATA_FP16_CUDA 0  // a build without nvcc
#endif
#if STRATA_FP16_CUDA
#include "cuda/fp16_cuda.hpp"
#include "strata/plugin_support/cuda_launch_check.hpp"
#endif

namespace {

using namespace strata;
using fp16::Operands;

constexpr std::array<Phase, 4> kPhases = {Phase::warmup, Phase::full, Phase::predict, Phase::correct};

class Fp16Weights final : public WeightQuantizer {
 public:
  Fp16Weights(const Operands& operands, HostServices& host)
      : operands_(operands), host_(host), workspace_(host, "fp16.operands") {}

  DType dtype() const noexcept override { return DType::f16; }

  Status layout(const MatmulShape&, QuantizedLayout& layout) const override {
    layout = {};  // f16 values carry their own exponent: no side data
    return {};
  }

  // Every row's rounded operands and the widened matrix at once: one pass over the rows, and the
  // weight gradient as one product instead of one per row block.
  std::int64_t scratch_floats(const MatmulShape& shape) const noexcept override {
    const std::int64_t floats =
        shape.rows * (shape.in_features + shape.out_features) + shape.in_features * shape.out_features;
    if (!on_cuda_) return floats;
    // On a GPU the products work in the plugin's own device workspace, sized once to the largest
    // product's need (backward's: the weight, dout and the input); the host asks for every matrix
    // before the first step.
    workspace_.expect(floats);
    return 0;
  }

  Status check(const KernelTarget& target) const override {
    return plugin_support::cpu_or_cuda(target, STRATA_FP16_CUDA != 0, "f16 weights");
  }

  Status bind(const KernelTarget& target) override {
    on_cuda_ = plugin_support::on_cuda(target);
    return {};
  }

  void quantize(QuantizedMatrix out, const float* master, const MatmulShape& shape) noexcept override {
    auto* values = static_cast<std::uint16_t*>(out.values);
#if STRATA_FP16_CUDA
    if (on_cuda_) {
      fp16::cuda::narrow(stream(), values, master, shape.in_features * shape.out_features);
      plugin_support::log_failed_launch(host_, "fp16's narrowing kernel");
      return;
    }
#endif
    fp16::narrow(values, master, shape.in_features * shape.out_features);
  }

  void matmul_forward(const op::MatmulForward& call) noexcept override {
    const auto& [out, inp, weight, bias, shape, scratch] = call;
    if (on_cuda_) {
      const std::int64_t weight_floats = shape.in_features * shape.out_features;
      float* widened = workspace_.floats(weight_floats + shape.rows * shape.in_features);
      if (widened == nullptr) return plugin_support::fill_nan(host_.ops(), out, shape.rows * shape.out_features);
      widen_on_device(widened, weight, weight_floats);
      const float* operand = round_on_device(widened + weight_floats, inp, shape.rows * shape.in_features);
      host_.ops().matmul_forward(out, operand, Weight{widened, DType::f32}, bias, shape, {});
      return;
    }
    fp16::matmul_forward(out, inp, static_cast<const std::uint16_t*>(weight.data), bias, shape, scratch.data,
                         scratch.elements, operands_);
  }

  void matmul_backward(const op::MatmulBackward& call) noexcept override {
    const auto& [dinp, dweight, dbias, dout, inp, weight, shape, scratch, dinp_write] = call;
    if (on_cuda_) {
      // The weight only for dinp, the rounded input only for dweight; the rounded dout for all three.
      const std::int64_t weight_floats = dinp != nullptr ? shape.in_features * shape.out_features : 0;
      const std::int64_t dout_floats = shape.rows * shape.out_features;
      const std::int64_t inp_floats = dweight != nullptr ? shape.rows * shape.in_features : 0;
      float* widened = workspace_.floats(weight_floats + dout_floats + inp_floats);
      if (widened == nullptr) {
        if (dinp != nullptr) plugin_support::fill_nan(host_.ops(), dinp, shape.rows * shape.in_features);
        if (dweight != nullptr) plugin_support::fill_nan(host_.ops(), dweight, shape.in_features * shape.out_features);
        return;
      }
      widen_on_device(widened, weight, weight_floats);
      const float* rounded_dout = round_on_device(widened + weight_floats, dout, dout_floats);
      const float* rounded_inp =
          inp_floats > 0 ? round_on_device(widened + weight_floats + dout_floats, inp, inp_floats) : inp;
      host_.ops().matmul_backward(dinp, dweight, dbias, rounded_dout, rounded_inp,
                                  Weight{weight_floats > 0 ? widened : nullptr, DType::f32}, shape, {}, dinp_write);
      return;
    }
    fp16::matmul_backward(dinp, dweight, dbias, dout, inp, static_cast<const std::uint16_t*>(weight.data), shape,
                          scratch.data, scratch.elements, dinp_write, operands_);
  }

 private:
#if STRATA_FP16_CUDA
  cudaStream_t stream() const noexcept {
    return static_cast<cudaStream_t>(host_.target().stream);
  }
#endif

  void widen_on_device(float* out, const Weight& weight, std::int64_t count) noexcept {
#if STRATA_FP16_CUDA
    fp16::cuda::widen(stream(), out, static_cast<const std::uint16_t*>(weight.data), count);
    plugin_support::log_failed_launch(host_, "fp16's widening kernel");
#else
    (void)out, (void)weight, (void)count;
#endif
  }

  // The activation operand as the step's operands say, in `room`; f32 operands are used as they are.
  const float* round_on_device(float* room, const float* in, std::int64_t count) noexcept {
    if (operands_ == Operands::f32) return in;
#if STRATA_FP16_CUDA
    fp16::cuda::round_operand(stream(), room, in, count, operands_);
    plugin_support::log_failed_launch(host_, "fp16's rounding kernel");
#else
    (void)count;
#endif
    return room;
  }

  const Operands& operands_;  // the policy's: the phase of the step decides
  HostServices& host_;
  bool on_cuda_ = false;
  // cuda: the widened weight and the rounded operands; mutable for scratch_floats' size hint.
  mutable plugin_support::DeviceWorkspace workspace_;
};

// A "f32" storage key: bf16 is refused (its exponent range needs no loss scale), and f16 storage of
// activations and embeddings is not offered.
void require_f32_storage(ConfigView& config, std::string_view key) {
  const std::string value = config.get_string(key, "f32", {"f32", "bf16"});
  if (value == "bf16")
    config.report_error(key,
                        "fp16 with bf16 storage: bf16 keeps f32's exponent range and never needs a loss "
                        "scale; use [precision] plugin = \"bf16\" for bf16 storage (fp16 keeps " +
                            std::string(key) + " in f32)");
}

Operands operands_key(ConfigView& config, HostServices& host, Phase phase) {
  const std::string key = std::string(phase_name(phase)) + "_compute";
  const std::string value = config.get_string(key, "f16", {"f16", "bf16", "f32"});
  // Only a phase controller ([predictor]) runs steps of another phase than full.
  if (phase != Phase::full && config.has(key))
    host.log(LogLevel::info, "fp16: " + key + " = \"" + value + "\" applies to " + std::string(phase_name(phase)) +
                                 " steps, which only a [predictor] runs; without one every step is full");
  return value == "bf16" ? Operands::bf16 : value == "f32" ? Operands::f32 : Operands::f16;
}

plugins::LossScalerConfig scaler_config(ConfigView& config) {
  plugins::LossScalerConfig scaler;
  scaler.initial_scale = config.get_double("initial_scale", scaler.initial_scale);
  if (!(scaler.initial_scale > 0.0))
    config.report_error("initial_scale", "the loss scale must be > 0 (the loss is multiplied by it), e.g. 65536");
  else if (scaler.initial_scale < plugins::LossScaler::kMinScale)
    config.report_error("initial_scale",
                        "the loss scale must be at least 2^-24 (below it every gradient under 1 "
                        "flushes to zero in f16), e.g. 65536");
  scaler.growth_interval = config.get_int("growth_interval", scaler.growth_interval, 1);
  scaler.growth_factor = config.get_double("growth_factor", scaler.growth_factor);
  if (!(scaler.growth_factor > 1.0)) config.report_error("growth_factor", "the growth factor must be > 1, e.g. 2");
  scaler.backoff = config.get_double("backoff", scaler.backoff);
  if (!(scaler.backoff > 0.0 && scaler.backoff < 1.0))
    config.report_error("backoff", "the backoff factor must be in (0, 1), e.g. 0.5");
  return scaler;
}

class Fp16 final : public PrecisionPolicy {
 public:
  Fp16(ConfigView& config, HostServices& host) : scaler_(scaler_config(config)), weights_(operands_, host) {
    require_f32_storage(config, "activations");
    require_f32_storage(config, "embeddings");
    for (Phase phase : kPhases) by_phase_[static_cast<std::size_t>(phase)] = operands_key(config, host, phase);
    operands_ = by_phase_[static_cast<std::size_t>(Phase::full)];
    phase_ = Phase::full;
  }

  // weights_ refers to operands_: an Fp16 stays where it was made.
  Fp16(const Fp16&) = delete;
  Fp16& operator=(const Fp16&) = delete;

  DType weight_storage() const noexcept override { return DType::f16; }
  DType embedding_storage() const noexcept override { return DType::f32; }
  WeightQuantizer* weight_quantizer() noexcept override { return &weights_; }
  DType activation_storage() const noexcept override { return DType::f32; }

  void begin_step(Phase phase) noexcept override {
    phase_ = phase;
    operands_ = by_phase_[static_cast<std::size_t>(phase)];
  }

  // Only a step that runs backward through f16 operands scales its loss.
  double loss_scale() const noexcept override { return scaling() ? scaler_.scale() : 1.0; }

  Status unscale_and_check(Ops& ops, std::span<const TensorView> grads, PrecisionDecision& decision) override {
    const bool scaled = scaling();
    decision.loss_scale = scaled ? scaler_.scale() : 1.0;
    bool finite = true;
    for (const TensorView& grad : grads) finite = finite && ops.all_finite(grad.f32(), grad.count);
    decision.skip_step = !finite;
    if (!finite) return scaled ? scaler_.on_overflow() : Status{};
    if (!scaled) return {};
    const auto inverse = static_cast<float>(1.0 / decision.loss_scale);
    for (const TensorView& grad : grads) ops.scale(grad.f32(), inverse, grad.count);
    scaler_.on_finite_step();
    return {};
  }

  Status state(std::string& out) const override {
    out = scaler_.state();
    return {};
  }
  Status restore_state(std::string_view state) override { return state.empty() ? Status{} : scaler_.restore(state); }

 private:
  bool scaling() const noexcept { return operands_ == Operands::f16 && phase_needs_gradients(phase_); }

  plugins::LossScaler scaler_;
  std::array<Operands, 4> by_phase_{};
  Operands operands_ = Operands::f16;
  Phase phase_ = Phase::full;
  Fp16Weights weights_;
};

constexpr const char* kKeys[] = {"initial_scale",   "growth_interval", "growth_factor",  "backoff",
                                 "activations",     "embeddings",      "warmup_compute", "full_compute",
                                 "predict_compute", "correct_compute"};
const FactoryDescriptor kFactories[] = {make_factory<PrecisionPolicy, Fp16>(
    "fp16", "f16 block matrices and f16 matmul operands with dynamic loss scaling, f32 master", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(fp16, "1.0.0", kFactories)
