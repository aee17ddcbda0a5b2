#pragma once
// The plugin ABI version and the toolchain tag. A plugin whose major differs from the host's is
// refused; a plugin built against a lower minor is accepted (GStreamer's rule). C++ objects cross
// the boundary, so the compiler and standard library must match too: the tag says which.
#include <cstdint>

namespace strata {

// Major 3 (the SDK 3 spine): the backend op table (strata/ops.hpp) replaces KernelLibrary in
// HostServices; TensorView carries dtype, element count and memory space instead of an f32 span;
// optimizers and precision policies reach tensors through ops; the attention Kernel takes
// separate q, k, v with key/value heads. Plugins built for 2.x are refused.
// Major 4: FactoryDescriptor's key, requirement and conflict lists are counted (NameList), not
// nullptr-terminated, and it has reserved room; plugin hooks may throw (make_factory's adapter,
// compiled into the plugin, catches every exception, and the host reports it with the plugin's
// name, the hook and the layer). Plugins built for 3.x are refused.
// Major 5: a Kernel runs on any backend it accepts: check(shape, target) replaces supports(shape)
// and says why not, bind(target) hands it the backend's compute stream, and attention_backward
// reads the forward's output (a flash kernel keeps only the log-sum-exp). HookContext gains
// drop_attention_internals (selective checkpointing). Plugins built for 4.x are refused.
// Major 6: low-bit storage. DType grows i8 and u8; an optimizer lays out its own state per parameter
// (state_layout: dtype and length of up to four buffers) instead of a count of f32 buffers; a
// precision policy may store the blocks' matrices quantized and bring their mechanism
// (WeightQuantizer: scales, quantize, the matmuls) and chooses the embeddings' storage apart;
// HostServices::target() names where kernels run. Plugins built for 5.x are refused.
// Major 7: loss scaling. DType grows f16; a precision policy learns each step's phase (begin_step),
// keeps state that checkpoints save (state, restore_state: a dynamic loss scale); the op table gains
// scale (in-place multiply, to unscale gradients); StepMetrics carries the loss scale and RunSummary
// the count of skipped steps; a strategy may freeze or skip parts of the model before it is built
// (plan_parameters, strata/parameter_plan.hpp) and adapt block matrices with trainable tensors of
// its own (ParameterPlan::adapt, strata/matmul_adapter.hpp: LoRA). Plugins built for 6.x are refused.
// Major 8: phase controllers (strata/phase_controller.hpp, `[predictor]`): a plugin kind that chooses
// each step's phase and, in predict steps, moves the weights itself while the host skips backward
// and the optimizer; the op table gains add_scaled (y += alpha * x); StepMetrics and RunSummary
// carry the controller's phase outcome, time and memory. Plugins built for 7.x are refused.
inline constexpr std::uint32_t kAbiMajor = 8;
inline constexpr std::uint32_t kAbiMinor = 0;

#define STRATA_STRINGIFY_INNER(x) #x
#define STRATA_STRINGIFY(x) STRATA_STRINGIFY_INNER(x)

#if defined(__clang__)
#define STRATA_COMPILER_TAG "clang-" STRATA_STRINGIFY(__clang_major__)
#elif defined(__GNUC__)
#define STRATA_COMPILER_TAG "gcc-" STRATA_STRINGIFY(__GNUC__)
#else
#define STRATA_COMPILER_TAG "unknown-compiler"
#endif

#if defined(_GLIBCXX_RELEASE)
#define STRATA_STDLIB_TAG "libstdc++-" STRATA_STRINGIFY(_GLIBCXX_RELEASE)
#elif defined(_LIBCPP_VERSION)
#define STRATA_STDLIB_TAG "libc++-" STRATA_STRINGIFY(_LIBCPP_VERSION)
#else
#define STRATA_STDLIB_TAG "unknown-stdlib"
#endif

// Compiler major, standard library and language level: what std::string, std::vector and
// vtable layout depend on.
#define STRATA_TOOLCHAIN_TAG STRATA_COMPILER_TAG "/" STRATA_STDLIB_TAG "/c++" STRATA_STRINGIFY(__cplusplus)

}  // namespace strata
