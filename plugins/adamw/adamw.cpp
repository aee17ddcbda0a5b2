// AdamW: decoupled weight decay, bias correction, optional global-norm clipping, warmup + cosine.
// The norm is the backend's reduction (HostServices::ops()); the update is this plugin's kernel for
// where the op table computes: on the host's cores (cpu/adamw_cpu.hpp), run as an op
// (Ops::host_kernel) wherever the host addresses the rows (the CPU backend, the update of offloaded
// rows on the host), or on the CUDA backend's stream (cuda/adamw_cuda.hpp, compiled when the build
// has nvcc). The two give the same bits.
#include <stdexcept>
#include <string>

#include "cpu/adamw_cpu.hpp"
#include "strata/plugin.hpp"
#include "strata/plugin_support/adamw_config.hpp"
#include "strata/plugin_support/kernel_backends.hpp"

#ifndef STRATA_ADAMW_CUDA
#define STRATA_ADAMW_CUDA 0  // a build without nvcc
#endif
#if STRATA_ADAMW_CUDA
#include <cuda_runtime_api.h>

#include "cuda/adamw_cuda.hpp"
#endif

namespace {

using namespace strata;

class AdamW final : public Optimizer {
 public:
  AdamW(ConfigView& config, HostServices& host) : host_(host), config_(config) {
    const KernelTarget target = host.target();
    if (!target.backend.starts_with("cuda:") || STRATA_ADAMW_CUDA != 0) return;
    config.report_error("plugin",
                        "adamw runs on the cpu backend here: this build has no CUDA kernels for device.kind = \"" +
                            std::string(target.backend) + "\" (it was built without nvcc)");
  }

  StateLayout state_layout(const ParamInfo& param) const noexcept override { return f32_state(2, param.count); }

  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) override {
    return guarded([&] {
      begin(info, slots, report);
      update(info, slots);
    });
  }

  // In parts (the disk tier): the norm, the lr and the clipping first, then block by block.
  bool steps_in_parts() const noexcept override { return true; }
  Status begin_step(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, OptimizerReport& report) override {
    return guarded([&] { begin(info, slots, report); });
  }
  Status step_part(const OptimizerStepInfo& info, std::span<ParamSlot> slots) override {
    return guarded([&] { update(info, slots); });
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

  // The second moment is a running mean of squares: a negative value is corruption, and would be a
  // NaN (its square root) at the first step.
  Status check_state(std::string_view parameter, std::span<const SavedStateBuffer> buffers) const noexcept override {
    return plugin_support::require_non_negative(parameter, "second moment (state1)", buffers[1].f32());
  }

 private:
  void begin(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, OptimizerReport& report,
             std::optional<double> clip_norm = std::nullopt) {
    grad_scale_ = config_.begin_step(host_.ops(), info, slots, report, clip_norm);
    report_ = report;
  }
  void update(const OptimizerStepInfo& info, std::span<ParamSlot> slots) {
    Ops& ops = host_.ops();
    const bool on_host = ops.supports(Op::host_kernel);
    for (ParamSlot& slot : slots) {
      const AdamWHyper hyper = config_.hyper(report_, info, slot, grad_scale_);
      float *param = slot.param.f32(), *m = slot.state[0].f32(), *v = slot.state[1].f32();
      const float* grad = slot.grad.f32();
      const std::int64_t count = slot.param.count;
      if (on_host) {
        ops.host_kernel("adamw_update", static_cast<double>(count),
                        [&]() noexcept { adamw::cpu::update(param, grad, m, v, count, hyper); });
        continue;
      }
#if STRATA_ADAMW_CUDA
      adamw::cuda::update(static_cast<cudaStream_t>(host_.target().stream), param, grad, m, v, count, hyper);
      if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess)
        throw std::runtime_error(std::string("adamw's CUDA kernel did not launch: ") + cudaGetErrorString(error));
#else
      throw std::logic_error("adamw has no kernel for backend " + std::string(ops.backend()));
#endif
    }
  }

  HostServices& host_;
  plugin_support::AdamWConfig config_;
  OptimizerReport report_;  // this step's lr and norm, settled before its first part
  float grad_scale_ = 1.0f;
};

const FactoryDescriptor kFactories[] = {make_factory<Optimizer, AdamW>(
    "adamw", "AdamW with warmup + cosine schedule and global-norm clipping", name_list(plugin_support::kAdamWKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(adamw, "1.0.0", kFactories)
