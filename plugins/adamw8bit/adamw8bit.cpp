// AdamW with 8-bit moments (block-wise dynamic quantization, Dettmers et al. 2022): the first moment
// is stored as u8 codes of a signed dynamic map, the second as codes of an unsigned one, each block of
// block_size values with its own f32 absmax. A step dequantizes a block, runs AdamW's f32 update
// (the same formula as adamw), and quantizes the new moments with the block's new absmax: 2 bytes of
// state per parameter plus 8 per block, instead of adamw's 8.
//
//   block_size = 2048        values per quantization block (256..4096)
//   min_8bit_size = 4096     tensors with fewer elements keep f32 moments (biases, norm gains)
//   and adamw's keys: betas, eps, weight_decay, grad_clip, schedule, min_lr_ratio
//
// The state is four host-allocated rows per parameter (codes m, codes v, absmax m, absmax v), so it
// is accounted, offloaded and checkpointed byte for byte like any optimizer state: a resumed run is
// bitwise the uninterrupted one. One kernel per backend, each working where the rows are (the
// device arena or, with offload, the host arena):
//   cpu      cpu/adamw8bit_cpu.cpp, threaded over blocks;
//   cuda:N   cuda/adamw8bit_cuda.cu on the backend's compute stream, bit for bit the CPU's;
//            compiled when the build has nvcc (STRATA_ADAMW8BIT_CUDA).
#include <memory>
#include <string>

#include "cpu/adamw8bit_cpu.hpp"
#include "cpu/dynamic_quantization.hpp"
#include "strata/plugin.hpp"
#include "strata/plugin_support/adamw_config.hpp"

#if STRATA_ADAMW8BIT_CUDA
#include <cuda_runtime_api.h>

#include "cuda/adamw8bit_cuda.hpp"
#endif

namespace {

using namespace strata;

class AdamW8bit final : public Optimizer {
 public:
  AdamW8bit(ConfigView& config, HostServices& host)
      : host_(host),
        config_(config),
        block_size_(config.get_int("block_size", 2048, 256, 4096)),
        min_8bit_size_(config.get_int("min_8bit_size", 4096, 1, std::int64_t{1} << 40)) {
    const std::string_view backend = host.target().backend;
    if (backend == "cpu") return;
#if STRATA_ADAMW8BIT_CUDA
    if (backend.starts_with("cuda:")) {
      cuda_tables_ = std::make_unique<adamw8bit::cuda::QuantizationTables>(adamw8bit::cuda::quantization_tables());
      return;
    }
    config.report_error("plugin", "adamw8bit has kernels for the cpu and cuda backends, not for device.kind = \"" +
                                      std::string(backend) + "\"");
#else
    config.report_error("plugin",
                        "adamw8bit runs on the cpu backend here: this build has no CUDA kernels for "
                        "device.kind = \"" +
                            std::string(backend) +
                            "\" (it was built without nvcc; use "
                            "adamw there)");
#endif
  }

  StateLayout state_layout(const ParamInfo& param) const noexcept override {
    const std::int64_t count = param.count;
    if (count < min_8bit_size_) return f32_state(2, count);
    const std::int64_t blocks = adamw8bit::block_count(count, block_size_);
    return {StateBuffer{DType::u8, count}, StateBuffer{DType::u8, count}, StateBuffer{DType::f32, blocks},
            StateBuffer{DType::f32, blocks}};
  }

  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) override {
    return guarded([&] {
      begin(info, slots, report);
      update(info, slots);
    });
  }

  // In parts (the disk tier): the norm, the lr and the clipping first, then block by block.
  bool steps_in_parts() const noexcept override {
    return true;
  }
  Status begin_step(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, OptimizerReport& report) override {
    return guarded([&] { begin(info, slots, report); });
  }
  Status step_part(const OptimizerStepInfo& info, std::span<ParamSlot> slots) override {
    return guarded([&] { update(info, slots); });
  }
  // The fused update's clipping by the previous step's norm.
  bool clips_by_given_norm() const noexcept override {
    return true;
  }
  // Its update touches the slots alone, and its CPU kernel gives the CUDA kernel's bits: the host may
  // run it on offloaded rows (SDK 9.10), the kernel picked by where ops() computes.
  bool can_update_on_host() const noexcept override {
    return true;
  }
  Status begin_step_with_norm(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, double clip_norm,
                              OptimizerReport& report) override {
    return guarded([&] { begin(info, slots, report, clip_norm); });
  }

  // Every code decodes to a valid moment (v's map is unsigned); what can break is a scale: each
  // block's absmax is never negative. Small tensors keep f32 moments, as AdamW.
  Status check_state(std::string_view parameter, std::span<const SavedStateBuffer> buffers) const noexcept override {
    if (buffers[0].dtype == DType::f32)
      return plugin_support::require_non_negative(parameter, "second moment (state1)", buffers[1].f32());
    if (Status status =
            plugin_support::require_non_negative(parameter, "first moment's block scale (state2)", buffers[2].f32());
        !status)
      return status;
    return plugin_support::require_non_negative(parameter, "second moment's block scale (state3)", buffers[3].f32());
  }

 private:
  void begin(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, OptimizerReport& report,
             std::optional<double> clip_norm = std::nullopt) {
    grad_scale_ = config_.begin_step(host_.ops(), info, slots, report, clip_norm);
    report_ = report;
  }
  // Where the host addresses the rows (the CPU backend, the update of offloaded rows on the host),
  // the CPU kernels run as an op (Ops::host_kernel; a plan's dry run skips and prices them); on a
  // CUDA backend, the CUDA kernels, whose bits are the CPU's.
  void update(const OptimizerStepInfo& info, std::span<ParamSlot> slots) {
    Ops& ops = host_.ops();
    const bool on_host = ops.supports(Op::host_kernel);
    for (ParamSlot& slot : slots) {
      const AdamWHyper hyper = config_.hyper(report_, info, slot, grad_scale_);
      float* param = slot.param.f32();
      const float* grad = slot.grad.f32();
      const std::int64_t count = slot.param.count;
      const auto work = static_cast<double>(count);
      if (slot.state[0].dtype == DType::f32) {  // a small tensor: f32 moments
        float *m = slot.state[0].f32(), *v = slot.state[1].f32();
        if (on_host)
          ops.host_kernel("adamw_update", work,
                          [&]() noexcept { adamw8bit::adamw_f32_update(param, grad, m, v, count, hyper); });
        else
          update_on_cuda(slot, hyper);
        continue;
      }
      const adamw8bit::QuantizedMoment m{static_cast<std::uint8_t*>(slot.state[0].data), slot.state[2].f32()};
      const adamw8bit::QuantizedMoment v{static_cast<std::uint8_t*>(slot.state[1].data), slot.state[3].f32()};
      if (on_host)
        ops.host_kernel("adamw8bit_update", work,
                        [&]() noexcept { adamw8bit::adamw8bit_update(param, grad, m, v, count, block_size_, hyper); });
      else
        update_on_cuda(slot, hyper);
    }
  }

#if STRATA_ADAMW8BIT_CUDA
  void update_on_cuda(ParamSlot& slot, const AdamWHyper& hyper) {
    const auto stream = static_cast<cudaStream_t>(host_.target().stream);
    if (slot.state[0].dtype == DType::f32)
      adamw8bit::cuda::adamw_f32_update(stream, slot.param.f32(), slot.grad.f32(), slot.state[0].f32(),
                                        slot.state[1].f32(), slot.param.count, hyper);
    else
      adamw8bit::cuda::adamw8bit_update(
          stream, slot.param.f32(), slot.grad.f32(), static_cast<std::uint8_t*>(slot.state[0].data),
          slot.state[2].f32(), static_cast<std::uint8_t*>(slot.state[1].data), slot.state[3].f32(), slot.param.count,
          block_size_, kernels::adamw_coefficients(hyper), *cuda_tables_);
    if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess)
      throw std::runtime_error(std::string("adamw8bit's CUDA kernel did not launch: ") + cudaGetErrorString(error));
  }
  std::unique_ptr<adamw8bit::cuda::QuantizationTables> cuda_tables_;  // set on a cuda backend
#else
  void update_on_cuda(ParamSlot&, const AdamWHyper&) {
    throw std::logic_error("adamw8bit has no kernel for backend " + std::string(host_.ops().backend()));
  }
#endif

  HostServices& host_;
  plugin_support::AdamWConfig config_;
  std::int64_t block_size_;
  std::int64_t min_8bit_size_;
  OptimizerReport report_;  // this step's lr and norm, settled before its first part
  float grad_scale_ = 1.0f;
};

constexpr const char* kKeys[] = {"betas",    "eps",          "weight_decay", "grad_clip",
                                 "schedule", "min_lr_ratio", "block_size",   "min_8bit_size"};
const FactoryDescriptor kFactories[] = {make_factory<Optimizer, AdamW8bit>(
    "adamw8bit", "AdamW with block-wise 8-bit moments (dynamic quantization)", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(adamw8bit, "1.0.0", kFactories)
