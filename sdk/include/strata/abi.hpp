#pragma once
// The SDK version and the toolchain tag. C++ objects cross the plugin boundary, so the compiler and
// standard library must match too: the tag says which. What each version added is in
// docs/sdk-changelog.md.
//
// The version rule (one rule, for both sides of the boundary):
//   * The host loads a plugin whose major equals its own and whose minor is at most its own; it
//     refuses any other, naming both versions. A plugin stamps the minor it was built against
//     (STRATA_DEFINE_PLUGIN), or an older one it targets (STRATA_DEFINE_PLUGIN_FOR_MINOR).
//   * A minor version only appends. It may add: an op (an Op id and its record), an entry point at
//     the end of a class, marked `(optional, since 10.N)`, with a default body; an enumerator at the
//     end of an enum (handle unknown values); a field in a struct's reserved room; a new header,
//     class or plugin kind. It never changes or removes anything a plugin built against an earlier
//     minor can see; an op record never changes (a new field is a new op).
//   * Classes the host implements (Ops, HookContext, HostServices, PluginMemory, ParameterPlan):
//     each optional entry answers has() (Ops::supports for ops, HostServices::has and
//     HookContext::has for services), so a plugin built against a newer SDK that stamps an older
//     minor probes before it calls, and runs on every host of that minor or later.
//   * Classes a plugin implements (MemoryStrategy, Optimizer, PrecisionPolicy, TelemetrySink,
//     Kernel, PhaseController, WeightQuantizer, ActivationCodec): a plugin stamped with minor M has
//     no entry points of a later minor in its vtable, so the host reads M from the plugin's
//     descriptor and calls an entry point of minor N only when M >= N; otherwise it acts on the
//     entry point's default.
//   * Anything else (a changed signature or record, a removed or reordered entry point, a new pure
//     virtual) is a major version, and every plugin must be rebuilt. CI compares the SDK's ABI
//     against the released one (tests/abi/) so that a minor cannot break it by accident.
#include <cstdint>

namespace strata {

inline constexpr std::uint32_t kAbiMajor = 10;
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
