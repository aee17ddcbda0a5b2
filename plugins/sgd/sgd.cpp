// SGD with optional momentum and decoupled weight decay, same schedule as adamw. The norm is the
// backend's reduction; the update is this plugin's kernel for where the op table computes: on the
// host's cores (cpu/sgd_cpu.hpp, run as Ops::host_kernel), or on the CUDA backend's stream
// (cuda/sgd_cuda.hpp), the same bits.
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "cpu/sgd_cpu.hpp"
#include "strata/plugin.hpp"
#include "strata/plugin_support/lr_schedule.hpp"

#ifndef STRATA_SGD_CUDA
#define STRATA_SGD_CUDA 0  // a build without nvcc
#endif
#if STRATA_SGD_CUDA
#include <cuda_runtime_api.h>

#include "cuda/sgd_cuda.hpp"
#endif

namespace {

using namespace strata;

class Sgd final : public Optimizer {
 public:
  Sgd(ConfigView& config, HostServices& host) : host_(host) {
    momentum_ = static_cast<float>(config.get_double("momentum", 0.9, 0.0, 0.999999));
    weight_decay_ = static_cast<float>(config.get_double("weight_decay", 0.0, 0.0, 1.0));
    grad_clip_ = config.get_double("grad_clip", 0.0, 0.0, 1e9);
    schedule_ = config.get_string("schedule", "cosine", {"cosine", "constant"});
    min_lr_ratio_ = config.get_double("min_lr_ratio", 0.1, 0.0, 1.0);
    if (host.target().backend.starts_with("cuda:") && STRATA_SGD_CUDA == 0)
      config.report_error("plugin",
                          "sgd runs on the cpu backend here: this build has no CUDA kernels for device.kind "
                          "= \"" +
                              std::string(host.target().backend) + "\" (it was built without nvcc)");
  }

  StateLayout state_layout(const ParamInfo& param) const noexcept override {
    return f32_state(momentum_ > 0.0f ? 1 : 0, param.count);
  }

  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) override {
    return guarded([&] {
      begin(info, slots, report);
      update(slots);
    });
  }

  // In parts (the disk tier): the norm, the lr and the clipping first, then block by block.
  bool steps_in_parts() const noexcept override { return true; }
  Status begin_step(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, OptimizerReport& report) override {
    return guarded([&] { begin(info, slots, report); });
  }
  Status step_part(const OptimizerStepInfo& info, std::span<ParamSlot> slots) override {
    (void)info;
    return guarded([&] { update(slots); });
  }
  // The fused update's clipping by the previous step's norm.
  bool clips_by_given_norm() const noexcept override { return true; }
  // Its update touches the slots alone, and its host kernel gives the CUDA kernel's bits: the host may
  // run it on offloaded rows.
  bool can_update_on_host() const noexcept override { return true; }
  Status begin_step_with_norm(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, double clip_norm,
                              OptimizerReport& report) override {
    return guarded([&] { begin(info, slots, report, clip_norm); });
  }

 private:
  void begin(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, OptimizerReport& report,
             std::optional<double> clip_norm = std::nullopt) {
    Ops& ops = host_.ops();
    double sum_of_squares = 0.0;
    for (const ParamSlot& slot : slots) sum_of_squares += ops.sum_of_squares(slot.grad.f32(), slot.grad.count);
    report.grad_norm = std::sqrt(sum_of_squares);
    report.lr = plugin_support::scheduled_lr(info, schedule_, min_lr_ratio_);
    lr_ = report.lr;
    scale_ = plugin_support::clip_factor(grad_clip_, clip_norm.value_or(report.grad_norm));
  }
  void update(std::span<ParamSlot> slots) {
    Ops& ops = host_.ops();
    const bool on_host = ops.supports(Op::host_kernel);
    for (ParamSlot& slot : slots) {
      const SgdHyper hyper{static_cast<float>(lr_), momentum_, slot.decay ? weight_decay_ : 0.0f, scale_};
      float* param = slot.param.f32();
      float* velocity = momentum_ > 0.0f ? slot.state[0].f32() : nullptr;
      const float* grad = slot.grad.f32();
      const std::int64_t count = slot.param.count;
      if (on_host) {
        ops.host_kernel("sgd_update", static_cast<double>(count),
                        [&]() noexcept { sgd::cpu::update(param, grad, velocity, count, hyper); });
        continue;
      }
#if STRATA_SGD_CUDA
      sgd::cuda::update(static_cast<cudaStream_t>(host_.target().stream), param, grad, velocity, count, hyper);
      if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess)
        throw std::runtime_error(std::string("sgd's CUDA kernel did not launch: ") + cudaGetErrorString(error));
#else
      throw std::logic_error("sgd has no kernel for backend " + std::string(ops.backend()));
#endif
    }
  }

  HostServices& host_;
  float momentum_ = 0.9f;
  float weight_decay_ = 0.0f;
  double grad_clip_ = 0.0;
  std::string schedule_;
  double min_lr_ratio_ = 0.1;
  double lr_ = 0.0;     // this step's, settled before its first part
  float scale_ = 1.0f;  // the clipping's
};

constexpr const char* kKeys[] = {"momentum", "weight_decay", "grad_clip", "schedule", "min_lr_ratio"};
const FactoryDescriptor kFactories[] = {make_factory<Optimizer, Sgd>("sgd", "SGD with momentum", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(sgd, "1.0.0", kFactories)
