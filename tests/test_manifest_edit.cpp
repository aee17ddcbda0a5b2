// The manifest editor (core/manifest/manifest_edit.hpp): the user's text with only what differs
// changed, or nothing where it cannot edit in place.
#include <gtest/gtest.h>

#include <string>

#include "core/manifest/manifest_edit.hpp"

namespace strata {
namespace {

const std::string kOriginal =
    "# my run\n"
    "[train]\n"
    "lr = 3e-4        # tuned by hand\n"
    "steps = 10\n"
    "\n"
    "[precision]\n"
    "plugin = \"bf16\"\n"
    "activations = \"bf16\"\n"
    "\n"
    "[[strategy]]\n"
    "plugin = \"checkpoint\"\n";

TEST(ManifestEdit, ChangesOnlyWhatDiffersAndKeepsTheRest) {
  toml::table wanted = toml::parse(kOriginal);
  wanted["train"].as_table()->insert_or_assign("steps", 20);
  wanted["train"].as_table()->insert_or_assign("micro_batches", 2);
  wanted.insert_or_assign("precision", toml::table{{"plugin", "fp32"}});
  wanted.insert_or_assign("strategy", toml::array{toml::table{{"plugin", "offload"}, {"optimizer_state", "host"}}});
  wanted.insert_or_assign("device", toml::table{{"memory_limit", "40MiB"}});
  const auto edited = edit_manifest_text(kOriginal, wanted);
  ASSERT_TRUE(edited);
  EXPECT_EQ(*edited,
            "# my run\n"
            "[train]\n"
            "lr = 3e-4        # tuned by hand\n"
            "steps = 20\n"
            "micro_batches = 2\n"
            "\n"
            "[precision]\n"
            "plugin = \"fp32\"\n"
            "\n"
            "\n"
            "[device]\n"
            "memory_limit = \"40MiB\"\n"
            "\n"
            "[[strategy]]\n"
            "plugin = \"offload\"\n"
            "optimizer_state = \"host\"\n");
  EXPECT_TRUE(toml::parse(*edited) == wanted);
}

TEST(ManifestEdit, AValueChangedKeepsItsLinesComment) {
  toml::table wanted = toml::parse(kOriginal);
  wanted["train"].as_table()->insert_or_assign("lr", 1e-3);
  const auto edited = edit_manifest_text(kOriginal, wanted);
  ASSERT_TRUE(edited);
  EXPECT_NE(edited->find("lr = 0.001  # tuned by hand\n"), std::string::npos) << *edited;
}

// A key written as a dotted key at the root is not edited in place: the caller writes the document.
TEST(ManifestEdit, AFormItDoesNotEditIsLeftToTheCaller) {
  const std::string dotted = "train.steps = 10\n[model]\nn_layer = 2\n";
  toml::table wanted = toml::parse(dotted);
  wanted["train"].as_table()->insert_or_assign("steps", 20);
  EXPECT_FALSE(edit_manifest_text(dotted, wanted));
  EXPECT_TRUE(edit_manifest_text(dotted, toml::parse(dotted)));  // nothing to change
}

}  // namespace
}  // namespace strata
