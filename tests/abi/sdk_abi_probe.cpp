// A shared library whose one exported function names every type of the SDK a plugin and the host
// exchange, so that its debugging information describes their layouts and vtables. abidiff
// compares it with the description of the last released SDK (tests/abi/sdk.abi.gz): a change a minor
// version may not make (strata/abi.hpp, the version rule) fails the `sdk_abi` test.
#include "strata/forwarding_ops.hpp"
#include "strata/plugin.hpp"

extern "C" __attribute__((visibility("default"))) void strata_sdk_abi_probe(
    strata::Ops*, strata::HookContext*, strata::HostServices*, strata::PluginMemory*, strata::ParameterPlan*,
    strata::MatmulAdapter*, strata::MemoryStrategy*, strata::Optimizer*, strata::PrecisionPolicy*,
    strata::WeightQuantizer*, strata::TelemetrySink*, strata::Kernel*, strata::PhaseController*, strata::ConfigView*,
    strata::PluginDescriptor*, strata::FactoryDescriptor*, strata::StepMetrics*, strata::RunSummary*, strata::RunInfo*,
    strata::TensorInfo*, strata::ParamSlot*, strata::OptimizerStepInfo*, strata::ControlledParameter*,
    strata::StepObservation*, strata::PrecisionDecision*, strata::MemorySnapshot*, strata::AdamWHyper*,
    strata::SgdHyper*, strata::Status*) {}
