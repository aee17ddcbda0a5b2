// The plugin probe (core/plugin/library_probe.hpp) in both of its forms: a forked child, and a
// fresh copy of the program (what a process that has loaded the CUDA driver uses). Both load good
// libraries without a verdict, name the one whose initialiser ends the process or whose finaliser
// crashes it, and go on with the rest.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/plugin/library_probe.hpp"

namespace strata {
namespace {

TEST(PluginProbe, ForkedChildAndFreshProgramBothNameTheLibraryThatEndsTheLoad) {
  const std::filesystem::path good = std::filesystem::path(STRATA_FIXTURE_PLUGIN_DIR) / "libfixture-good.so";
  const std::filesystem::path sgd = std::filesystem::path(STRATA_BUILD_PLUGIN_DIR_FOR_TESTS) / "libstrata-sgd.so";
  const std::filesystem::path exits = STRATA_PROBE_FIXTURE;
  ASSERT_TRUE(std::filesystem::exists(good) && std::filesystem::exists(sgd) && std::filesystem::exists(exits));
  // The fixture's exit code says where it was loaded: 7 in a fresh program, 8 in a forked child.
  for (const auto& [process, code] : {std::pair{ProbeProcess::forked_child, 8}, {ProbeProcess::fresh_program, 7}}) {
    SCOPED_TRACE(code == 7 ? "fresh program" : "forked child");
    const std::vector<std::string> verdicts =
        probe_libraries_in_child({good, exits, sgd}, std::chrono::seconds(20), process);
    ASSERT_EQ(verdicts.size(), 3u);
    EXPECT_EQ(verdicts[0], "");
    EXPECT_NE(verdicts[1].find("crashed the loader (exit code " + std::to_string(code)), std::string::npos)
        << verdicts[1];
    EXPECT_EQ(verdicts[2], "") << "the probe goes on with the libraries after the one that ended it";
  }
}

// The host unloads its plugins when its registry goes: a library whose finaliser crashes is named
// by the probe, which unloads what it loaded, and the libraries after it are still probed.
TEST(PluginProbe, ALibraryThatCrashesWhenUnloadedIsNamed) {
  const std::filesystem::path good = std::filesystem::path(STRATA_FIXTURE_PLUGIN_DIR) / "libfixture-good.so";
  const std::filesystem::path sgd = std::filesystem::path(STRATA_BUILD_PLUGIN_DIR_FOR_TESTS) / "libstrata-sgd.so";
  const std::filesystem::path crashes = STRATA_PROBE_UNLOAD_FIXTURE;
  for (const ProbeProcess process : {ProbeProcess::forked_child, ProbeProcess::fresh_program}) {
    const std::vector<std::string> verdicts =
        probe_libraries_in_child({good, crashes, sgd}, std::chrono::seconds(20), process);
    ASSERT_EQ(verdicts.size(), 3u);
    EXPECT_EQ(verdicts[0], "");
    EXPECT_NE(verdicts[1].find("crashed the loader while unloading (signal 11"), std::string::npos) << verdicts[1];
    EXPECT_EQ(verdicts[2], "");
  }
}

}  // namespace
}  // namespace strata
