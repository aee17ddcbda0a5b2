// The plugin host against plugin mistakes: exceptions thrown from hooks, declared keys never read,
// key lists with a null entry, symlink loops and missing directories on the plugin path.
#include <gtest/gtest.h>

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include <filesystem>
#include <stdexcept>

#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/toml_config_view.hpp"
#include "core/plugin/elf_check.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/plugin/stack.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

const std::filesystem::path kFixtures = STRATA_FIXTURE_PLUGIN_DIR;

// Trains two steps of the tiny model with the fixture strategy configured by `table_keys`;
// returns what the run threw ("" when it finished).
std::string train_with_throwing_hook(const std::string& table_keys) {
  const auto dir = test::temporary_directory("throwing_hook");
  test::write_text(dir / "m.toml",
                   test::tiny_manifest("[[strategy]]\nplugin = \"fixture_throwing_hook\"\n" + table_keys));
  const Manifest manifest = load_manifest(dir / "m.toml", {"train.steps=2"});
  PluginRegistry registry;
  registry.scan({kFixtures, STRATA_BUILD_PLUGIN_DIR_FOR_TESTS});
  try {
    run_training(manifest, registry, TrainOptions{});
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A kernel plugin reads its own keys from [kernels.attention] and is told each call: the block, the
// step, the micro batch and the pass, a recompute under checkpointing, an evaluation's own.
TEST(PluginHost, AKernelTakesItsKeysAndIsToldEachCall) {
  const auto dir = test::temporary_directory("recording_kernel");
  const std::string log = (dir / "calls.log").string();
  test::write_text(dir / "m.toml",
                   test::tiny_manifest("[kernels.attention]\nplugin = \"fixture_recording_kernel\"\nlog = \"" + log +
                                           "\"\ntag = \"t\"\n[[strategy]]\nplugin = \"checkpoint\"\n",
                                       "eval_every = 2\n"));
  const Manifest manifest = load_manifest(dir / "m.toml", {"train.steps=2"});
  PluginRegistry registry;
  registry.scan({kFixtures, STRATA_BUILD_PLUGIN_DIR_FOR_TESTS});
  run_training(manifest, registry, TrainOptions{});
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* line : {"t forward layer 0 step 1 micro 0 training", "t forward layer 1 step 2 micro 0 recompute",
                           "t backward layer 1 step 2 micro 0 training", "t forward layer 0 step 2 micro 0 evaluation"})
    EXPECT_NE(text.find(line), std::string::npos) << line << " not in:\n" << text;

  // A key the kernel does not declare is refused, naming the table.
  test::write_text(dir / "bad.toml", test::tiny_manifest("[kernels.attention]\nplugin = \"fixture_recording_kernel\"\n"
                                                         "log = \"" +
                                                         log + "\"\nlgo = 1\n"));
  try {
    PluginRegistry again;
    again.scan({kFixtures, STRATA_BUILD_PLUGIN_DIR_FOR_TESTS});
    run_training(load_manifest(dir / "bad.toml"), again, TrainOptions{});
    FAIL() << "an undeclared kernel key was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("[kernels.attention] (fixture_recording_kernel) unknown key 'lgo'"),
              std::string::npos)
        << e.what();
  }
}

TEST(PluginHost, AStdExceptionFromAHookNamesThePluginHookLayerAndStep) {
  const std::string error = train_with_throwing_hook("hook = \"before_forward\"\n");
  EXPECT_NE(error.find("[[strategy]] #1 'fixture_throwing_hook' threw in before_forward (layer 1, step 1): "
                       "fixture hook exploded"),
            std::string::npos)
      << error;
}

TEST(PluginHost, ANonStandardExceptionIsCaughtToo) {
  const std::string error = train_with_throwing_hook("hook = \"after_step\"\nkind = \"other\"\n");
  EXPECT_NE(error.find("'fixture_throwing_hook' threw in after_step (step 1): an exception that is not a "
                       "std::exception"),
            std::string::npos)
      << error;
}

// An optimizer that throws from its step, for the SDK's own adapter.
class ThrowingOptimizer final : public Optimizer {
 public:
  ThrowingOptimizer(ConfigView&, HostServices&) {}
  StateLayout state_layout(const ParamInfo&) const noexcept override { return {}; }
  Status step(const OptimizerStepInfo&, std::span<ParamSlot>, OptimizerReport&) override {
    throw std::runtime_error("optimizer exploded");
  }
};

TEST(PluginHost, TheSdkFactoryWrapsObjectsSoExceptionsStopInsideThePlugin) {
  const toml::table empty;
  TomlConfigView view(&empty, {"m.toml", "[optimizer]", "optimizer", nullptr}, {"plugin"});
  HostServicesImpl host(ModelInfo{"gpt2", 2, 2, 2, 32, 256, 16, 0});
  std::string error;
  const std::unique_ptr<Optimizer> optimizer(
      static_cast<Optimizer*>(create_plugin_object<Optimizer, ThrowingOptimizer>(view, host, &error)));
  ASSERT_TRUE(optimizer) << error;
  OptimizerReport report;
  const Status status = optimizer->step(OptimizerStepInfo{}, {}, report);  // must not throw
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "threw: optimizer exploded");
}

TEST(PluginHost, DeclaredKeysTheFactoryNeverReadsAreWarnedAbout) {
  const auto dir = test::temporary_directory("unread_keys");
  const std::string table = "[[strategy]]\nplugin = \"fixture_throwing_hook\"\n";
  test::write_text(dir / "quiet.toml", test::tiny_manifest(table));
  test::write_text(dir / "set.toml", test::tiny_manifest(table + "unused = 3\n"));
  PluginRegistry registry;
  registry.scan({kFixtures, STRATA_BUILD_PLUGIN_DIR_FOR_TESTS});
  HostServicesImpl host(ModelInfo{"gpt2", 2, 2, 2, 32, 256, 16, 0});
  EXPECT_TRUE(build_stack(load_manifest(dir / "quiet.toml"), registry, host).warnings.empty())
      << "a key the manifest does not set draws no warning in a run";
  const Stack stack = build_stack(load_manifest(dir / "set.toml"), registry, host);
  ASSERT_EQ(stack.warnings.size(), 1u);
  EXPECT_NE(stack.warnings[0].find("sets key 'unused', which the plugin declares but did not read"), std::string::npos)
      << stack.warnings[0];

  // The author's view (strata plugins): every declared key the factory leaves unread, set or not.
  const auto factory = registry.find(InterfaceKind::memory_strategy, "fixture_throwing_hook");
  ASSERT_TRUE(factory);
  const auto check = check_with_defaults(*factory, host);
  ASSERT_TRUE(check);
  EXPECT_EQ(check->unread_keys, std::vector<std::string>{"unused"});
  const auto adamw = registry.find(InterfaceKind::optimizer, "adamw");
  ASSERT_TRUE(adamw);
  EXPECT_EQ(check_with_defaults(*adamw, host)->unread_keys, std::vector<std::string>{}) << "adamw reads every key";
  const auto sneaky = registry.find(InterfaceKind::memory_strategy, "fixture_undeclared");
  ASSERT_TRUE(sneaky);
  const auto sneaky_check = check_with_defaults(*sneaky, host);
  ASSERT_TRUE(sneaky_check);
  ASSERT_EQ(sneaky_check->problems.size(), 1u);
  EXPECT_NE(sneaky_check->problems[0].find("read key 'secret' that its plugin did not declare"), std::string::npos);
}

TEST(PluginHost, ANullEntryInACountedKeyListIsRefused) {
  PluginRegistry registry;
  const auto error = registry.load(kFixtures / "libfixture-null_key.so");
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("factory 'fixture_null_key': its config key list entry #2 is null"), std::string::npos)
      << *error;
}

TEST(PluginHost, SymlinkLoopsAndDanglingLinksAreFailuresNotCrashes) {
  const auto dir = test::temporary_directory("symlinks");
  std::filesystem::create_symlink("libloop.so", dir / "libloop.so");
  std::filesystem::create_symlink(dir / "nothing-here.so", dir / "libdangling.so");
  std::filesystem::copy_file(kFixtures / "libfixture-good.so", dir / "libgood.so");
  PluginRegistry registry;
  registry.scan({dir});
  EXPECT_TRUE(registry.find(InterfaceKind::memory_strategy, "fixture_noop")) << "the good library still loads";
  std::string reasons;
  for (const LoadFailure& failure : registry.failures())
    reasons += failure.path.filename().string() + ": " + failure.reason + "\n";
  EXPECT_NE(reasons.find("libloop.so: cannot read: "), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("(a symlink loop)"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("libdangling.so: a symlink to nothing (dangling)"), std::string::npos) << reasons;
}

// A library the registry loaded stays mapped after the registry is gone, so that a second
// registry in the same process (a test's next run) finds it loaded instead of loading it again:
// a CUDA plugin's kernels are then registered with the CUDA runtime once per process.
TEST(PluginHost, LoadedLibrariesStayMappedAfterTheirRegistry) {
  std::vector<std::string> names;
  {
    PluginRegistry registry;
    registry.scan({STRATA_BUILD_PLUGIN_DIR_FOR_TESTS});
    for (const auto& plugin : registry.plugins()) names.push_back(plugin->path.filename().string());
  }
  ASSERT_GT(names.size(), 5u);
  std::string maps;
  {
    std::ifstream in("/proc/self/maps");
    maps.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (const std::string& name : names) EXPECT_NE(maps.find("/" + name + "\n"), std::string::npos) << name;
}

TEST(PluginHost, AMissingPluginPathIsAManifestError) {
  const auto dir = test::temporary_directory("missing_plugin_path");
  test::write_text(dir / "m.toml",
                   "plugin_path = [\"" + (dir / "no-such-dir").string() + "\"]\n" + test::tiny_manifest());
  try {
    (void)load_manifest(dir / "m.toml");
    FAIL() << "a plugin_path that is not a directory must be refused";
  } catch (const ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-dir\" is not a directory"), std::string::npos) << e.what();
  }
}

// A truncated library would be mapped past its end and kill the process with SIGBUS inside the
// loader: its ELF headers are checked against its size first, and it is a named load failure.
TEST(PluginHost, ATruncatedLibraryIsALoadFailureNotACrash) {
  const auto dir = test::temporary_directory("truncated_plugin");
  const std::filesystem::path whole = std::filesystem::path(STRATA_BUILD_PLUGIN_DIR_FOR_TESTS) / "libstrata-sgd.so";
  EXPECT_EQ(check_elf_library(whole), "");
  std::filesystem::copy_file(whole, dir / "libstrata-sgd.so");
  std::filesystem::resize_file(dir / "libstrata-sgd.so", std::filesystem::file_size(whole) / 3);
  EXPECT_TRUE(check_elf_library(dir / "libstrata-sgd.so").starts_with("truncated"))
      << check_elf_library(dir / "libstrata-sgd.so");
  test::write_text(dir / "libstrata-random.so", std::string(4096, 'x'));
  PluginRegistry registry;
  registry.scan({dir});
  ASSERT_EQ(registry.failures().size(), 2u);
  EXPECT_NE(registry.failures()[0].reason.find("no ELF magic number"), std::string::npos)
      << registry.failures()[0].reason;
  EXPECT_NE(registry.failures()[1].reason.find("truncated"), std::string::npos) << registry.failures()[1].reason;
}

// A junk dynamic section can end the process in an ld.so assertion that no probe is sure to meet
// first: the entries are checked before dlopen. Every shared library of the system passes, so the
// check refuses none that the loader takes (the plugins, CUDA's and OpenBLAS's among them).
TEST(PluginHost, AJunkDynamicSectionIsRefusedAndEveryRealLibraryPasses) {
  int checked = 0;
  for (const char* root : {"/usr/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64", STRATA_BUILD_PLUGIN_DIR_FOR_TESTS}) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(root, error)) {
      const std::string name = entry.path().filename().string();
      if (name.find(".so") == std::string::npos || !entry.is_regular_file(error)) continue;
      const std::string verdict = check_elf_library(entry.path());
      // Linker scripts and 32-bit objects are not plugins; anything else must pass.
      if (verdict.starts_with("not a") || verdict.starts_with("built for")) continue;
      EXPECT_EQ(verdict, "") << entry.path();
      ++checked;
    }
  }
  EXPECT_GT(checked, 50) << "too few libraries found to say anything";

  const auto dir = test::temporary_directory("junk_dynamic");
  const std::filesystem::path whole = std::filesystem::path(STRATA_BUILD_PLUGIN_DIR_FOR_TESTS) / "libstrata-sgd.so";
  std::string bytes;
  {
    std::ifstream in(whole, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  Elf64_Ehdr header;
  std::memcpy(&header, bytes.data(), sizeof header);
  std::uint64_t state = 42;  // SplitMix-style junk, the same every run
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, bytes.data() + header.e_phoff + i * sizeof segment, sizeof segment);
    if (segment.p_type != PT_DYNAMIC) continue;
    for (std::uint64_t at = segment.p_offset; at < segment.p_offset + segment.p_filesz; ++at) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      bytes[at] = static_cast<char>(state >> 56);
    }
  }
  test::write_text(dir / "libstrata-sgd.so", bytes);
  EXPECT_TRUE(check_elf_library(dir / "libstrata-sgd.so").starts_with("corrupt: its dynamic section"))
      << check_elf_library(dir / "libstrata-sgd.so");
}

}  // namespace
}  // namespace strata
