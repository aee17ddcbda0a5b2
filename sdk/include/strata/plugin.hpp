#pragma once
// The plugin descriptor: one per shared library, exported under the alias `strata_plugin`.
//
//   constexpr const char* kKeys[] = {"betas", "eps"};
//   const strata::FactoryDescriptor kFactories[] = {
//       strata::make_factory<Optimizer, AdamW>("adamw", "AdamW ...", strata::name_list(kKeys))};
//   STRATA_DEFINE_PLUGIN(adamw, "1.0.0", kFactories)
//
// Version first (LLVM's PassPluginLibraryInfo), required fields validated by the host, reserved
// padding for growth. Factories return raw pointers because only plain types cross the boundary;
// the host wraps each in an owner that calls the matching destroy and keeps the library loaded.
#include <boost/dll/alias.hpp>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

#include "strata/abi.hpp"
#include "strata/config_view.hpp"
#include "strata/host_services.hpp"
#include "strata/kernel.hpp"
#include "strata/memory_strategy.hpp"
#include "strata/optimizer.hpp"
#include "strata/phase_controller.hpp"
#include "strata/plugin_guard.hpp"
#include "strata/precision_policy.hpp"
#include "strata/telemetry_sink.hpp"

namespace strata {

enum class InterfaceKind : std::uint32_t { optimizer, precision, memory_strategy, telemetry, kernel, phase_controller };

constexpr std::string_view interface_name(InterfaceKind kind) noexcept {
  switch (kind) {
    case InterfaceKind::optimizer: return "optimizer";
    case InterfaceKind::precision: return "precision";
    case InterfaceKind::memory_strategy: return "strategy";
    case InterfaceKind::telemetry: return "telemetry";
    case InterfaceKind::kernel: return "kernel";
    case InterfaceKind::phase_controller: return "predictor";
  }
  return "unknown";
}

template <typename Interface>
constexpr InterfaceKind interface_kind_of();
template <>
constexpr InterfaceKind interface_kind_of<Optimizer>() {
  return InterfaceKind::optimizer;
}
template <>
constexpr InterfaceKind interface_kind_of<PrecisionPolicy>() {
  return InterfaceKind::precision;
}
template <>
constexpr InterfaceKind interface_kind_of<MemoryStrategy>() {
  return InterfaceKind::memory_strategy;
}
template <>
constexpr InterfaceKind interface_kind_of<TelemetrySink>() {
  return InterfaceKind::telemetry;
}
template <>
constexpr InterfaceKind interface_kind_of<Kernel>() {
  return InterfaceKind::kernel;
}
template <>
constexpr InterfaceKind interface_kind_of<PhaseController>() {
  return InterfaceKind::phase_controller;
}

// A counted list of names (config keys, required or conflicting plugins). The count travels with
// the pointer, so a host never scans for a terminator and cannot read past the array; build one
// from an array with name_list(kKeys).
struct NameList {
  const char* const* names = nullptr;
  std::size_t count = 0;

  constexpr const char* const* begin() const noexcept { return names; }
  constexpr const char* const* end() const noexcept { return names + count; }
  constexpr bool empty() const noexcept { return count == 0; }
};

template <std::size_t N>
constexpr NameList name_list(const char* const (&names)[N]) noexcept {
  return NameList{names, N};
}

// Returns an object of the factory's interface type, or nullptr with *error set.
using CreateFunction = void* (*)(ConfigView& config, HostServices& host, std::string* error) noexcept;
using DestroyFunction = void (*)(void* object) noexcept;

struct FactoryDescriptor {
  InterfaceKind kind;
  const char* name;  // what manifests write: plugin = "adamw"
  const char* summary;
  NameList config_keys;       // the keys its table may hold; `plugin` is implied
  NameList requires_plugins;  // plugins that must also be in the stack
  NameList conflicts_with;    // plugins that must not be in the stack
  CreateFunction create;
  DestroyFunction destroy;
  const void* reserved[4];  // zero; room to grow within a major version
};

struct PluginDescriptor {
  std::uint32_t abi_major;
  std::uint32_t abi_minor;
  const char* toolchain;  // STRATA_TOOLCHAIN_TAG of the plugin's build
  const char* name;
  const char* version;
  const FactoryDescriptor* factories;
  std::size_t factory_count;
  const void* reserved[8];
};

// Factory helpers: `Impl` has a constructor (ConfigView&, HostServices&) and derives from
// `Interface`. Exceptions stop here: the constructor's, and (through plugin_guard's adapter, which
// the object is wrapped in) every hook's.
template <typename Interface, typename Impl>
void* create_plugin_object(ConfigView& config, HostServices& host, std::string* error) noexcept {
  try {
    std::unique_ptr<Interface> object =
        plugin_guard::wrap(std::unique_ptr<Interface>(std::make_unique<Impl>(config, host)));
    return object.release();  // ownership passes to the host, which calls destroy_plugin_object
  } catch (const std::exception& e) {
    if (error != nullptr) *error = e.what();
  } catch (...) {
    if (error != nullptr) *error = "unknown exception";
  }
  return nullptr;
}

template <typename Interface>
void destroy_plugin_object(void* object) noexcept {
  std::unique_ptr<Interface> owned(static_cast<Interface*>(object));
}

template <typename Interface, typename Impl>
constexpr FactoryDescriptor make_factory(const char* name, const char* summary, NameList config_keys = {},
                                         NameList requires_plugins = {}, NameList conflicts_with = {}) {
  return FactoryDescriptor{interface_kind_of<Interface>(),
                           name,
                           summary,
                           config_keys,
                           requires_plugins,
                           conflicts_with,
                           &create_plugin_object<Interface, Impl>,
                           &destroy_plugin_object<Interface>,
                           {}};
}

}  // namespace strata

#define STRATA_PLUGIN(describe_function) BOOST_DLL_ALIAS(describe_function, strata_plugin)

// Defines the library's descriptor (this host's ABI and toolchain) and exports it. `plugin_name`
// is an identifier; `factory_array` an array of FactoryDescriptor in the same translation unit.
#define STRATA_DEFINE_PLUGIN(plugin_name, version_text, factory_array) \
  STRATA_DEFINE_PLUGIN_WITH_ABI(plugin_name, version_text, factory_array, ::strata::kAbiMajor, ::strata::kAbiMinor)

// The same stamped with an older minor of this major, for a plugin that also runs on hosts of that
// minor: it calls a later minor's entry points only after has() (or Ops::supports) says the host
// offers them, and the host calls none of its entry points newer than `minor` (strata/abi.hpp).
#define STRATA_DEFINE_PLUGIN_FOR_MINOR(plugin_name, version_text, factory_array, minor)               \
  static_assert((minor) <= ::strata::kAbiMinor, "a plugin cannot target a minor newer than its SDK"); \
  STRATA_DEFINE_PLUGIN_WITH_ABI(plugin_name, version_text, factory_array, ::strata::kAbiMajor, minor)

// The same with an explicit ABI version; the host's tests use it to build plugins it must refuse.
#define STRATA_DEFINE_PLUGIN_WITH_ABI(plugin_name, version_text, factory_array, abi_major, abi_minor) \
  namespace strata_plugin_##plugin_name {                                                             \
    const ::strata::PluginDescriptor* describe() noexcept {                                           \
      static const ::strata::PluginDescriptor descriptor = {                                          \
          abi_major,    abi_minor,     STRATA_TOOLCHAIN_TAG,     STRATA_STRINGIFY(plugin_name),       \
          version_text, factory_array, std::size(factory_array), {}};                                 \
      return &descriptor;                                                                             \
    }                                                                                                 \
  }                                                                                                   \
  STRATA_PLUGIN(strata_plugin_##plugin_name::describe)
