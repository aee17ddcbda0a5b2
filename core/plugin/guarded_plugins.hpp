#pragma once
// Every plugin object the host calls is wrapped in one of these adapters. The adapter forwards
// each call and words an error Status so that it names the plugin, the hook and where the step
// was: "[[strategy]] #1 'offload' threw in before_forward (layer 3, step 5): ...". Exceptions are
// caught inside the plugin, by the SDK's adapter make_factory wraps each object in
// (strata/plugin_guard.hpp), and arrive here as a Status; this adapter also catches, for an
// object made without make_factory.
#include <memory>
#include <string>

#include "strata/kernel.hpp"
#include "strata/memory_strategy.hpp"
#include "strata/optimizer.hpp"
#include "strata/phase_controller.hpp"
#include "strata/precision_policy.hpp"
#include "strata/telemetry_sink.hpp"

namespace strata {

// `label` names the plugin as the manifest does: "[optimizer] 'adamw'", "[[strategy]] #2 'offload'".
std::shared_ptr<MemoryStrategy> guard_plugin(std::shared_ptr<MemoryStrategy> plugin, std::string label);
std::shared_ptr<Optimizer> guard_plugin(std::shared_ptr<Optimizer> plugin, std::string label);
std::shared_ptr<PrecisionPolicy> guard_plugin(std::shared_ptr<PrecisionPolicy> plugin, std::string label);
std::shared_ptr<TelemetrySink> guard_plugin(std::shared_ptr<TelemetrySink> plugin, std::string label);
std::shared_ptr<Kernel> guard_plugin(std::shared_ptr<Kernel> plugin, std::string label);
std::shared_ptr<PhaseController> guard_plugin(std::shared_ptr<PhaseController> plugin, std::string label);

}  // namespace strata
