// The loader against fixture plugins, one per failure, and stack checks with the real plugins.
#include <gtest/gtest.h>

#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/plugin/stack.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

const std::filesystem::path kFixtures = STRATA_FIXTURE_PLUGIN_DIR;

std::string load_error(const std::string& name) {
  PluginRegistry registry;
  const auto error = registry.load(kFixtures / ("libfixture-" + name + ".so"));
  return error.value_or("");
}

TEST(PluginLoader, GoodPluginLoads) {
  PluginRegistry registry;
  EXPECT_EQ(registry.load(kFixtures / "libfixture-good.so"), std::nullopt);
  ASSERT_TRUE(registry.find(InterfaceKind::memory_strategy, "fixture_noop"));
}

TEST(PluginLoader, RefusalsNameThePathAndReason) {
  const std::string host_abi = std::to_string(kAbiMajor) + "." + std::to_string(kAbiMinor);
  const std::string major = load_error("abi_major");
  EXPECT_NE(major.find("plugin 'fixture_abi_major' was built for SDK ABI " + std::to_string(kAbiMajor + 1) + "." +
                       std::to_string(kAbiMinor) + "; this host speaks " + host_abi),
            std::string::npos)
      << major;
  // A plugin built for the previous major is refused too, with both versions named.
  const std::string previous = load_error("previous_major");
  EXPECT_NE(previous.find("plugin 'fixture_previous_major' was built for SDK ABI " + std::to_string(kAbiMajor - 1) +
                          ".0; this host speaks " + host_abi),
            std::string::npos)
      << previous;
  const std::string minor = load_error("newer_minor");
  EXPECT_NE(minor.find("built for SDK ABI " + std::to_string(kAbiMajor) + "." + std::to_string(kAbiMinor + 1) +
                       "; this host speaks " + host_abi),
            std::string::npos)
      << minor;
  EXPECT_NE(load_error("no_descriptor").find("exports no 'strata_plugin' descriptor"), std::string::npos);
  EXPECT_NE(load_error("does_not_exist").find("cannot load"), std::string::npos);
  PluginRegistry registry;
  registry.scan({kFixtures});
  bool named = false;
  for (const LoadFailure& failure : registry.failures()) named |= failure.path.filename() == "libfixture-abi_major.so";
  EXPECT_TRUE(named) << "scan records each failure with its path";
  EXPECT_TRUE(registry.find(InterfaceKind::memory_strategy, "fixture_noop"))
      << "one bad library does not stop the scan";
}

struct StackResult {
  std::string error;
  bool built = false;
  std::string attention;  // the kernel the stack picked: "fast" (the backend's own) or a kernel's name
  bool attention_is_default = false;
};

StackResult build(const std::string& extra, const std::vector<std::string>& overrides = {}) {
  const auto dir = test::temporary_directory("stack");
  test::write_text(dir / "m.toml", test::tiny_manifest(extra));
  PluginRegistry registry;
  registry.scan({kFixtures, STRATA_BUILD_PLUGIN_DIR_FOR_TESTS});
  try {
    const Manifest manifest = load_manifest(dir / "m.toml", overrides);
    HostServicesImpl host(ModelInfo{"gpt2", 2, 2, 2, 32, 256, 16, 0});
    const Stack stack = build_stack(manifest, registry, host);
    return {"", stack.optimizer != nullptr, stack.attention_name, stack.attention_is_default};
  } catch (const ManifestError& e) {
    return {e.what(), false, "", false};
  }
}

TEST(Stack, BuildsWithDefaultsAndFixture) {
  const StackResult result = build("[[strategy]]\nplugin = \"fixture_noop\"\nlevel = 2\n");
  EXPECT_TRUE(result.built) << result.error;
}

// A weight quantizer the host would never call is refused before anything runs, never ignored.
TEST(Stack, AQuantizerTheHostWouldNotCallIsRefused) {
  const StackResult bf16 = build("[precision]\nplugin = \"fixture_bf16_quantizer\"\n");
  EXPECT_FALSE(bf16.built);
  EXPECT_NE(bf16.error.find("its weight quantizer is for bf16, which the host stores itself, so it would never be "
                            "called"),
            std::string::npos)
      << bf16.error;
  const StackResult unstored = build("[precision]\nplugin = \"fixture_unstored_quantizer\"\n");
  EXPECT_FALSE(unstored.built);
  EXPECT_NE(unstored.error.find("its weight quantizer is for i8, but the policy stores the block matrices as f32 and "
                                "the embeddings as f32, so the quantizer would never be called"),
            std::string::npos)
      << unstored.error;
}

// Activations the host cannot store (i8) are refused, never kept as f32 in silence.
TEST(Stack, ActivationStorageTheHostCannotKeepIsRefused) {
  const StackResult int8 = build("[precision]\nplugin = \"fixture_int8_activations\"\n");
  EXPECT_FALSE(int8.built);
  EXPECT_NE(int8.error.find("it stores activations as i8, which the host cannot: activations are kept as f32 or bf16"),
            std::string::npos)
      << int8.error;
}

TEST(Stack, ThrowingFactoryIsReportedAndTheHostStaysUp) {
  const StackResult result = build("[[strategy]]\nplugin = \"fixture_throwing\"\n");
  EXPECT_NE(result.error.find("fixture factory exploded"), std::string::npos) << result.error;
}

TEST(Stack, UndeclaredKeyReadIsRefused) {
  const StackResult result = build("[[strategy]]\nplugin = \"fixture_undeclared\"\n");
  EXPECT_NE(result.error.find("read key 'secret' that its plugin did not declare"), std::string::npos) << result.error;
}

TEST(Stack, PluginKeysAreStrictWithLineColumnAndRange) {
  const StackResult unknown = build("[[strategy]]\nplugin = \"fixture_noop\"\nlevle = 2\n");
  EXPECT_NE(unknown.error.find("unknown key 'levle'"), std::string::npos) << unknown.error;
  EXPECT_NE(unknown.error.find("did you mean 'level'"), std::string::npos) << unknown.error;
  EXPECT_NE(unknown.error.find("m.toml:"), std::string::npos) << unknown.error;
  const StackResult range = build("[[strategy]]\nplugin = \"fixture_noop\"\nlevel = 9\n");
  EXPECT_NE(range.error.find("level = 9 is out of range [0, 3]"), std::string::npos) << range.error;
  const StackResult adamw = build("[optimizer]\nplugin = \"adamw\"\nbetas = [0.9]\n");
  EXPECT_NE(adamw.error.find("betas must be two numbers"), std::string::npos) << adamw.error;
}

TEST(Stack, UnknownPluginListsTheAvailableOnes) {
  const StackResult result = build("", {"optimizer.plugin=adamv"});
  EXPECT_NE(result.error.find("unknown optimizer plugin 'adamv'; available: adamw, adamw8bit, fixture_device_sgd, sgd"),
            std::string::npos)
      << result.error;
  EXPECT_NE(result.error.find("did you mean 'adamw'"), std::string::npos) << result.error;
}

TEST(Stack, IncompatibleStacksAreRefusedNamingBothPlugins) {
  const StackResult conflict =
      build("[[strategy]]\nplugin = \"fixture_noop\"\n[[strategy]]\nplugin = \"fixture_conflicting\"\n");
  EXPECT_NE(
      conflict.error.find(
          "incompatible stack: [[strategy]] #2 'fixture_conflicting' conflicts with [[strategy]] #1 'fixture_noop'"),
      std::string::npos)
      << conflict.error;
  const StackResult needy = build("[[strategy]]\nplugin = \"fixture_needy\"\n");
  EXPECT_NE(needy.error.find("requires plugin 'fixture_missing'"), std::string::npos) << needy.error;
}

// On CUDA, bf16 activations get the flash plugin's tensor-core attention unless the manifest names
// a kernel; only where it runs the shape (head dims 64 and 128), and only in a build with nvcc.
TEST(Stack, CudaWithBf16ActivationsDefaultsToFlashBf16) {
  const std::string bf16 = "[precision]\nplugin = \"bf16\"\nweights = \"bf16\"\nactivations = \"bf16\"\n";
  const std::vector<std::string> cuda_head_64 = {"device.kind=\"cuda:0\"", "model.d_model=128"};
  const StackResult picked = build(bf16, cuda_head_64);
  ASSERT_TRUE(picked.built) << picked.error;
#if STRATA_HAVE_CUDA
  EXPECT_EQ(picked.attention, "flash_bf16");
  EXPECT_TRUE(picked.attention_is_default);
#else
  EXPECT_EQ(picked.attention, "fast") << "without nvcc the plugin has no CUDA kernels";
#endif
  EXPECT_EQ(build(bf16, {"device.kind=\"cuda:0\"", "model.d_model=64"}).attention, "fast") << "head dim 32";
  EXPECT_EQ(build("", cuda_head_64).attention, "fast") << "f32 activations";
  EXPECT_EQ(build(bf16 + "[kernels]\nattention = \"fast\"\n", cuda_head_64).attention, "fast") << "named";
  EXPECT_EQ(build(bf16, {"model.d_model=128"}).attention, "fast") << "the cpu backend";
  const StackResult named = build(bf16 + "[kernels]\nattention = \"flash_bf16\"\n", cuda_head_64);
#if STRATA_HAVE_CUDA
  EXPECT_EQ(named.attention, "flash_bf16");
  EXPECT_FALSE(named.attention_is_default) << "a named kernel is refused, not replaced, where it cannot run";
#endif
}

}  // namespace
}  // namespace strata
