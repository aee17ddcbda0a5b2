#include <gtest/gtest.h>

#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  const auto dir = test::temporary_directory("manifest");
  test::write_text(dir / "m.toml", text);
  try {
    load_manifest(dir / "m.toml", overrides);
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "";
}

TEST(Manifest, ReadsTheQuickstart) {
  const Manifest manifest = load_manifest(test::source_path("examples/quickstart.toml"));
  EXPECT_EQ(manifest.model.n_layer(), 4);
  EXPECT_EQ(manifest.device.memory_limit, 256u * 1024 * 1024);
  EXPECT_EQ(manifest.optimizer.plugin, "adamw");
  EXPECT_EQ(manifest.telemetry.size(), 2u);
}

TEST(Manifest, MalformedTomlNamesLineAndColumn) {
  const std::string error = error_of("[model]\nn_layer = = 3\n");
  EXPECT_NE(error.find("m.toml:2:"), std::string::npos) << error;
  EXPECT_NE(error.find("malformed TOML"), std::string::npos) << error;
}

TEST(Manifest, UnknownKeyCarriesLineColumnAcceptedKeysAndSuggestion) {
  const std::string error = error_of("[data]\ntrain = \"x.txt\"\n[train]\nsteps = 3\nstpes = 4\n");
  EXPECT_NE(error.find("m.toml:5:1: [train] unknown key 'stpes'"), std::string::npos) << error;
  EXPECT_NE(error.find("accepted keys: steps, batch"), std::string::npos) << error;
  EXPECT_NE(error.find("did you mean 'steps'?"), std::string::npos) << error;
}

TEST(Manifest, WrongTypeAndOutOfRange) {
  const std::string type = error_of("[data]\ntrain = \"x\"\n[train]\nsteps = \"many\"\n");
  EXPECT_NE(type.find("steps must be an integer, not a string"), std::string::npos) << type;
  const std::string range = error_of("[data]\ntrain = \"x\"\n[train]\nbatch = 0\n");
  EXPECT_NE(range.find("batch = 0 is out of range [1,"), std::string::npos) << range;
}

TEST(Manifest, MemoryUnits) {
  const std::string bad = error_of("[data]\ntrain = \"x\"\n[device]\nmemory_limit = \"4 gigs\"\n");
  EXPECT_NE(bad.find("memory_limit = \"4 gigs\" is not a size"), std::string::npos) << bad;
  const auto dir = test::temporary_directory("units");
  test::write_text(dir / "m.toml", "[data]\ntrain = \"x\"\n[device]\nmemory_limit = \"1.5GiB\"\n");
  EXPECT_EQ(load_manifest(dir / "m.toml").device.memory_limit, 1610612736u);
}

TEST(Manifest, CrossFieldChecks) {
  const std::string heads = error_of("[model]\nn_head = 5\nd_model = 64\n[data]\ntrain = \"x\"\n");
  EXPECT_NE(heads.find("n_head = 5 must divide d_model = 64"), std::string::npos) << heads;
  const std::string micro = error_of("[data]\ntrain = \"x\"\n[train]\nbatch = 6\nmicro_batches = 4\n");
  EXPECT_NE(micro.find("micro_batches = 4 must divide batch = 6"), std::string::npos) << micro;
  EXPECT_NE(error_of("[model]\nn_layer = 2\n").find("needs train"), std::string::npos);
}

TEST(Manifest, SetOverridesAreValidatedTheSameWay) {
  const std::string base = "[data]\ntrain = \"x\"\n[train]\nsteps = 3\n";
  const auto dir = test::temporary_directory("set");
  test::write_text(dir / "m.toml", base);
  EXPECT_EQ(load_manifest(dir / "m.toml", {"train.steps=30"}).train.steps, 30);
  EXPECT_EQ(load_manifest(dir / "m.toml", {"data.train=other.txt"}).data.train, "other.txt");
  const std::string typo = error_of(base, {"train.stesp=30"});
  EXPECT_NE(typo.find("--set train.stesp"), std::string::npos) << typo;
  EXPECT_NE(typo.find("did you mean 'steps'"), std::string::npos) << typo;
  EXPECT_NE(error_of(base, {"train.steps"}).find("expected key.path=value"), std::string::npos);
  EXPECT_NE(error_of(base, {"train.steps=-4"}).find("--set train.steps: [train] steps = -4 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of(base, {"train.steps.x=1"}).find("is not a table"), std::string::npos);
  // A line break in a value would inject more TOML: refused, naming the key.
  const std::string injected = error_of(base, {"data.train=\"x\"\n[device]\nmemory_limit = 1"});
  EXPECT_NE(injected.find("--set data.train: the value contains a line break"), std::string::npos) << injected;
}

}  // namespace
}  // namespace strata
