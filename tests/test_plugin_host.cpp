// The plugin host against plugin mistakes: exceptions thrown from hooks, declared keys never read,
// key lists with a null entry, symlink loops and missing directories on the plugin path.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_error.hpp"
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

TEST(PluginHost, DeclaredKeysTheFactoryNeverReadsAreWarnedAbout) {
  const auto dir = test::temporary_directory("unread_keys");
  test::write_text(dir / "m.toml", test::tiny_manifest("[[strategy]]\nplugin = \"fixture_throwing_hook\"\n"));
  const Manifest manifest = load_manifest(dir / "m.toml");
  PluginRegistry registry;
  registry.scan({kFixtures, STRATA_BUILD_PLUGIN_DIR_FOR_TESTS});
  HostServicesImpl host(manifest.model.info());
  const Stack stack = build_stack(manifest, registry, host);
  ASSERT_EQ(stack.warnings.size(), 1u);
  EXPECT_NE(stack.warnings[0].find("declares key 'unused' but did not read it"), std::string::npos)
      << stack.warnings[0];

  const auto factory = registry.find(InterfaceKind::memory_strategy, "fixture_throwing_hook");
  ASSERT_TRUE(factory);
  EXPECT_EQ(unread_keys_with_defaults(*factory, host), std::vector<std::string>{"unused"});
  const auto adamw = registry.find(InterfaceKind::optimizer, "adamw");
  ASSERT_TRUE(adamw);
  EXPECT_EQ(unread_keys_with_defaults(*adamw, host), std::vector<std::string>{}) << "adamw reads every key";
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

}  // namespace
}  // namespace strata
