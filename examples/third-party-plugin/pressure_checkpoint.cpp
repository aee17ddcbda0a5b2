// A third-party memory strategy: activation checkpointing driven by memory pressure. After each
// block's forward it reads the device arena's live bytes; above the high-water mark it drops that
// block's saved activations (the host recomputes them just before the block's backward). Below
// the mark nothing is dropped, so a run that fits pays no recomputation, and one that does not
// drops only as many blocks as it must, from the top of the forward pass, where live memory peaks.
//
//   high_water = 0.8        a fraction of [device] memory_limit, or
//   high_water_mib = 12     an absolute mark in MiB (needed when the run has no memory_limit).
//
// Recomputation runs the same kernels on the same inputs, so the losses are bitwise those of a
// run without this strategy. It includes only SDK headers.
#include <cstdint>
#include <string>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

class PressureCheckpoint final : public MemoryStrategy {
 public:
  PressureCheckpoint(ConfigView& config, HostServices& host) : host_(host) {
    fraction_ = config.get_double("high_water", 0.8, 0.01, 1.0);
    mark_bytes_ = static_cast<std::uint64_t>(config.get_int("high_water_mib", 0, 0, 1 << 30)) << 20;
    if (config.has("high_water") && config.has("high_water_mib"))
      config.report_error("high_water_mib", "set high_water (a fraction of the limit) or high_water_mib, not both");
  }

  Status on_attach(HookContext& context) override {
    if (mark_bytes_ > 0) return {};
    const std::uint64_t limit = context.memory().device_limit;
    if (limit == 0)
      return Status::error("pressure_checkpoint needs [device] memory_limit, or high_water_mib for a run without one");
    mark_bytes_ = static_cast<std::uint64_t>(fraction_ * static_cast<double>(limit));
    return {};
  }

  Status after_forward(HookContext& context) override {
    std::uint64_t live = 0;
    for (std::uint64_t bytes : context.memory().device_live) live += bytes;
    if (live <= mark_bytes_) return {};
    ++dropped_this_step_;
    return context.drop_activations(context.layer());
  }

  // Says once what the mark costs: how many blocks of the first step it dropped.
  Status after_step(HookContext& context) override {
    if (context.step() == 1)
      host_.log(LogLevel::info, "pressure_checkpoint: step 1 dropped the activations of " +
                                    std::to_string(dropped_this_step_) + " of " +
                                    std::to_string(context.n_layer() * context.micro_batches()) +
                                    " block forwards (mark " + std::to_string(mark_bytes_ >> 20) + " MiB live)");
    dropped_this_step_ = 0;
    return {};
  }

 private:
  HostServices& host_;
  double fraction_ = 0.8;
  std::uint64_t mark_bytes_ = 0;
  std::int64_t dropped_this_step_ = 0;
};

constexpr const char* kKeys[] = {"high_water", "high_water_mib"};
const FactoryDescriptor kFactories[] = {make_factory<MemoryStrategy, PressureCheckpoint>(
    "pressure_checkpoint", "drop a block's activations only while live device memory is above a mark",
    name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(pressure_checkpoint, "1.0.0", kFactories)
