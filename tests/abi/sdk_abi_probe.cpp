// A shared library whose exported functions name every type of the SDK a plugin and the host
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
    strata::SgdHyper*, strata::Status*, strata::KernelCall*, strata::QuantizedLayout*, strata::QuantizedMatrix*) {}

// Every op's record: a record is frozen within a major (strata/op_records.hpp).
extern "C" __attribute__((visibility("default"))) void strata_sdk_op_records_probe(
    strata::op::MatmulForward*, strata::op::MatmulBackward*, strata::op::MatmulForwardBf16Input*,
    strata::op::MatmulBackwardBf16Input*, strata::op::Gemm*, strata::op::LayernormForward*,
    strata::op::LayernormBackward*, strata::op::RmsnormForward*, strata::op::RmsnormBackward*,
    strata::op::AttentionSizes*, strata::op::AttentionForward*, strata::op::AttentionBackward*,
    strata::op::AttentionDecode*, strata::op::GeluForward*, strata::op::GeluBackward*, strata::op::SwigluForward*,
    strata::op::SwigluBackward*, strata::op::GegluForward*, strata::op::GegluBackward*, strata::op::Rope*,
    strata::op::ResidualForward*, strata::op::EmbeddingForward*, strata::op::EmbeddingBackward*,
    strata::op::CrossEntropyForwardChunk*, strata::op::CrossEntropyFinish*, strata::op::CrossEntropyBackwardChunk*,
    strata::op::HostKernel*, strata::op::Widen*, strata::op::Narrow*, strata::op::NarrowAndRound*,
    strata::op::SumOfSquares*, strata::op::AllFinite*, strata::op::Sum*, strata::op::Scale*, strata::op::AddScaled*,
    strata::op::Sign*, strata::op::Mul*, strata::op::Div*, strata::op::Sqrt*, strata::op::Fill*, strata::op::Copy*,
    strata::op::CopyToHost*, strata::op::CopyFromHost*, strata::op::Qr*, strata::op::Eigh*) {}
