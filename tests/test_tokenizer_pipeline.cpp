// The parts of a tokenizer.json pipeline on their own, where the hub's files do not reach them or
// the JavaScript reference differs from Hugging Face's Rust library (which these follow): every
// Split behaviour and invert, Metaspace's split and prepend schemes, byte fallback with the unknown
// token, the decoder's steps, and character classes from ICU's tables (Unicode 15.0).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tokenizer/pre_tokenizer.hpp"
#include "core/tokenizer/pretokenizer_regex.hpp"
#include "core/tokenizer/text_normalizer.hpp"
#include "core/tokenizer/token_decoder.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace strata {
namespace {

using Json = nlohmann::json;

std::vector<std::string> pieces_of(const Json& pre_tokenizer, const std::string& text, bool at_start = true) {
  const PreTokenizer pre(pre_tokenizer, "test");
  PreTokenizer::Splitter splitter(pre);
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  const std::string_view rewritten = splitter.split(text, at_start, pieces);
  std::vector<std::string> out;
  for (const auto& [begin, end] : pieces) out.emplace_back(rewritten.substr(begin, end - begin));
  return out;
}

Json split(const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
}

using Pieces = std::vector<std::string>;

// The examples of Hugging Face's SplitDelimiterBehavior documentation.
TEST(TokenizerPipeline, SplitBehavioursCutAsHuggingFaceDefinesThem) {
  const std::string text = "The-final--countdown";
  EXPECT_EQ(pieces_of(split("Removed"), text), (Pieces{"The", "final", "countdown"}));
  EXPECT_EQ(pieces_of(split("Isolated"), text), (Pieces{"The", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pieces_of(split("MergedWithPrevious"), text), (Pieces{"The-", "final-", "-", "countdown"}));
  EXPECT_EQ(pieces_of(split("MergedWithNext"), text), (Pieces{"The", "-final", "-", "-countdown"}));
  EXPECT_EQ(pieces_of(split("Contiguous"), text), (Pieces{"The", "-", "final", "--", "countdown"}));
  // invert: what the pattern matches is what stays (GPT-4o's Removed + invert keeps the matches).
  EXPECT_EQ(pieces_of(split("Removed", true), text), (Pieces{"-", "-", "-"}));
  EXPECT_EQ(pieces_of(split("Isolated", true), text), (Pieces{"The", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pieces_of(split("MergedWithPrevious", true), "a-b"), (Pieces{"a", "-b"}));
  const Json regex = {{"type", "Split"}, {"pattern", {{"Regex", "\\d+"}}}, {"behavior", "Removed"}, {"invert", true}};
  EXPECT_EQ(pieces_of(regex, "ab12cd345"), (Pieces{"12", "345"}));
}

TEST(TokenizerPipeline, MetaspaceReplacesPrependsAndSplits) {
  const Json always = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}};
  EXPECT_EQ(pieces_of(always, "Hey  friend"), (Pieces{"\xE2\x96\x81Hey", "\xE2\x96\x81",
                                                      "\xE2\x96\x81"
                                                      "friend"}));
  EXPECT_EQ(pieces_of(always, " Hey"), (Pieces{"\xE2\x96\x81Hey"}));  // a leading space is the prefix
  Json first = always;
  first["prepend_scheme"] = "first";
  EXPECT_EQ(pieces_of(first, "Hey", true), (Pieces{"\xE2\x96\x81Hey"}));
  EXPECT_EQ(pieces_of(first, "Hey", false), (Pieces{"Hey"}));  // a stretch after an added token
  Json never = always;
  never["prepend_scheme"] = "never";
  never["split"] = false;
  EXPECT_EQ(pieces_of(never, "a b"), (Pieces{"a\xE2\x96\x81"
                                             "b"}));
  // Files from before prepend_scheme: add_prefix_space.
  EXPECT_EQ(pieces_of(Json{{"type", "Metaspace"}, {"add_prefix_space", false}}, "a"), (Pieces{"a"}));
}

TEST(TokenizerPipeline, ByteLevelPutsASpaceBeforeEachPieceWithAddPrefixSpace) {
  const Json sequence = {
      {"type", "Sequence"},
      {"pretokenizers", Json::array({split("Removed"), {{"type", "ByteLevel"}, {"add_prefix_space", true}}})}};
  EXPECT_EQ(pieces_of(sequence, "ab-cd"), (Pieces{" ab", " cd"}));
}

TEST(TokenizerPipeline, NormalizersRunInOrderAndEmptySequencesChangeNothing) {
  const TextNormalizer none(Json{{"type", "Sequence"}, {"normalizers", Json::array()}}, "test");
  EXPECT_TRUE(none.empty());
  const TextNormalizer steps(
      Json{{"type", "Sequence"},
           {"normalizers",
            Json::array(
                {{{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}},
                 {{"type", "Sequence"},
                  {"normalizers",
                   Json::array({{{"type", "Lowercase"}},
                                {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}})}},
                 {{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                 {{"type", "NFKD"}}})}},
      "test");
  std::string scratch;
  // U+3000 is White_Space; "ΟΔΟΣ" lower-cases with a final sigma; "ﬁ" decomposes under NFKD.
  EXPECT_EQ(steps.apply("\xE3\x80\x80 ΟΔΟΣ ﬁ ", scratch),
            "\xE2\x96\x81οδος\xE2\x96\x81"
            "fi\xE2\x96\x81");
  EXPECT_EQ(steps.apply(" \t", scratch), "");  // nothing left: Prepend adds nothing
}

TEST(TokenizerPipeline, DecoderStepsUndoSentencePieceSpelling) {
  const TokenDecoder decoder(
      Json{{"type", "Sequence"},
           {"decoders", Json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                     {{"type", "ByteFallback"}},
                                     {{"type", "Fuse"}},
                                     {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}},
      "test");
  EXPECT_EQ(decoder.decode({"\xE2\x96\x81Hi", "<0xE2>", "<0x82>", "<0xAC>",
                            "\xE2\x96\x81"
                            "x"}),
            "Hi€ x");
  // Bytes that are not UTF-8 read as one U+FFFD each (Hugging Face's Rust library).
  EXPECT_EQ(decoder.decode({"a", "<0xE2>", "<0x82>", "b"}),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
  const TokenDecoder metaspace(Json{{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}}, "test");
  EXPECT_EQ(metaspace.decode({"\xE2\x96\x81Hey",
                              "\xE2\x96\x81"
                              "friend"}),
            "Hey friend");
}

// Characters new in Unicode 15.0 are letters, digits and symbols to ICU's tables; PCRE2 10.42's
// own (Unicode 14) call them unassigned.
TEST(TokenizerPipeline, CharacterClassesComeFromIcusTables) {
  const Json letters = {{"type", "Split"},
                        {"pattern", {{"Regex", "\\p{L}+|\\p{N}+|[^\\s\\p{L}\\p{N}]+"}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  // U+31350 (CJK Extension H), U+11F50 (a Kawi digit), U+1D2C0 (a Kaktovik numeral, No).
  EXPECT_EQ(pieces_of(letters, "a\U00031350b 1\U00011F50\U0001D2C0"),
            (Pieces{"a\U00031350b", " ", "1\U00011F50\U0001D2C0"}));
  const Json shorthand = {
      {"type", "Split"}, {"pattern", {{"Regex", "\\pL+|\\P{L}+"}}}, {"behavior", "Isolated"}, {"invert", false}};
  EXPECT_EQ(pieces_of(shorthand, "ab12\U00031350"), (Pieces{"ab", "12", "\U00031350"}));
  EXPECT_THROW(PretokenizerRegex("\\p{NoSuchProperty}", "test"), TokenizerError);
}

}  // namespace
}  // namespace strata
