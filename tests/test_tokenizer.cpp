// The tokenizer's own rules on small hand-written tokenizer.json files: the merge order, added
// tokens, the byte map, and every refusal. Parity with Hugging Face's implementation on real
// vocabularies is test_tokenizer_parity.cpp's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/tokenizer/tokenizer.hpp"

namespace strata {
namespace {

using Json = nlohmann::json;

// GPT-2's byte-to-character map, written out again here rather than taken from the code under test.
std::string byte_spelling(int byte) {
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int code = printable ? b : next++;
    if (b == byte) {
      std::string out;
      if (code < 0x80) {
        out += static_cast<char>(code);
      } else {
        out += static_cast<char>(0xC0 | code >> 6);
        out += static_cast<char>(0x80 | (code & 0x3F));
      }
      return out;
    }
  }
  return {};
}

// A byte-level vocabulary (id = byte) with `merges` (rank order) appended after it.
Json tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_spelling(b)] = b;
  Json merge_list = Json::array();
  int next = 256;
  for (const auto& [left, right] : merges) {
    if (!vocab.contains(left + right)) vocab[left + right] = next++;
    merge_list.push_back(left + " " + right);
  }
  return Json{{"version", "1.0"},
              {"added_tokens", Json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}, {"merges", merge_list}}}};
}

class TokenizerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ =
        std::filesystem::temp_directory_path() / ("strata_tokenizer_" + std::to_string(::getpid()) + "_" +
                                                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::unique_ptr<Tokenizer> load(const Json& json, const Json& config = Json()) {
    std::ofstream(directory_ / "tokenizer.json") << json.dump();
    if (!config.is_null()) std::ofstream(directory_ / "tokenizer_config.json") << config.dump();
    return load_tokenizer(directory_);
  }
  std::string refusal(const Json& json) {
    try {
      load(json);
    } catch (const TokenizerError& error) {
      return error.what();
    }
    return "(loaded)";
  }
  std::filesystem::path directory_;
};

TEST_F(TokenizerFiles, LowestRankMergesFirstAndLeftmostAmongEquals) {
  // "abc": with (b c) ranked before (a b), the pieces are a + bc; the other order gives ab + c.
  auto bc_first = load(tokenizer_json({{"b", "c"}, {"a", "b"}}));
  EXPECT_EQ(bc_first->encode("abc"), (std::vector<std::uint32_t>{'a', 256}));
  auto ab_first = load(tokenizer_json({{"a", "b"}, {"b", "c"}}));
  EXPECT_EQ(ab_first->encode("abc"), (std::vector<std::uint32_t>{256, 'c'}));
  // "aaa" with (a a): the leftmost pair merges, then nothing is left to merge with.
  auto aa = load(tokenizer_json({{"a", "a"}}));
  EXPECT_EQ(aa->encode("aaa"), (std::vector<std::uint32_t>{256, 'a'}));
  EXPECT_EQ(aa->encode("aaaa"), (std::vector<std::uint32_t>{256, 256}));
  // A merge of merges: (aa aa) after (a a) makes "aaaa" one token.
  auto aaaa = load(tokenizer_json({{"a", "a"}, {"aa", "aa"}}));
  EXPECT_EQ(aaaa->encode("aaaa"), (std::vector<std::uint32_t>{257}));
}

TEST_F(TokenizerFiles, PreTokenizerPiecesNeverMergeAcrossEachOther) {
  // GPT-2's pattern splits "a b" into "a" and " b": the (a, space) merge cannot apply across them.
  auto tokenizer = load(tokenizer_json({{"a", byte_spelling(' ')}, {byte_spelling(' '), "b"}}));
  EXPECT_EQ(tokenizer->encode("a b"), (std::vector<std::uint32_t>{'a', 257}));
}

TEST_F(TokenizerFiles, EveryByteRoundTripsThroughTheByteMap) {
  auto tokenizer = load(tokenizer_json({}));
  std::string all;
  for (int b = 0; b < 256; ++b)
    if (b < 0x80) all += static_cast<char>(b);
  all += "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // é € 😀
  const auto ids = tokenizer->encode(all);
  EXPECT_EQ(tokenizer->decode(ids), all);
  // Byte tokens are the bytes themselves in this vocabulary.
  EXPECT_EQ(tokenizer->encode("\n\xC3\xA9"), (std::vector<std::uint32_t>{'\n', 0xC3, 0xA9}));
}

TEST_F(TokenizerFiles, AddedTokensAreCutOutFirstLongestAndStripWhereAsked) {
  Json json = tokenizer_json({});
  json["added_tokens"] =
      Json::array({{{"id", 300}, {"content", "<|end|>"}, {"special", true}},
                   {{"id", 301}, {"content", "<|end|>x"}, {"special", true}},
                   {{"id", 302}, {"content", "[M]"}, {"special", true}, {"lstrip", true}, {"rstrip", true}}});
  auto tokenizer = load(json, Json{{"eos_token", "<|end|>"}});
  EXPECT_EQ(tokenizer->encode("a<|end|>b"), (std::vector<std::uint32_t>{'a', 300, 'b'}));
  EXPECT_EQ(tokenizer->encode("<|end|>x"), (std::vector<std::uint32_t>{301}));
  EXPECT_EQ(tokenizer->encode("a  [M]  b"), (std::vector<std::uint32_t>{'a', 302, 'b'}));
  EXPECT_EQ(tokenizer->vocab_size(), 303);
  EXPECT_EQ(tokenizer->special().eos, 300u);
  EXPECT_FALSE(tokenizer->special().bos.has_value());
  EXPECT_EQ(tokenizer->decode(std::vector<std::uint32_t>{'a', 300}), "a<|end|>");
}

TEST_F(TokenizerFiles, IgnoreMergesTakesAWholeVocabularyEntry) {
  // "abc" is in the vocabulary but no merge makes it; with ignore_merges it is one token.
  Json json = tokenizer_json({{"a", "b"}});
  json["model"]["vocab"]["abc"] = 300;
  EXPECT_EQ(load(json)->encode("abc"), (std::vector<std::uint32_t>{256, 'c'}));
  json["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(json)->encode("abc"), (std::vector<std::uint32_t>{300}));
}

TEST_F(TokenizerFiles, AddPrefixSpaceStartsEachStretchWithASpace) {
  Json json = tokenizer_json({{byte_spelling(' '), "a"}});
  json["pre_tokenizer"]["add_prefix_space"] = true;
  EXPECT_EQ(load(json)->encode("a"), (std::vector<std::uint32_t>{256}));
  EXPECT_EQ(load(json)->encode(" a"), (std::vector<std::uint32_t>{256}));
}

TEST_F(TokenizerFiles, SplitStepsOfASequenceApplyInOrder) {
  Json json = tokenizer_json({{"1", "2"}, {"12", "3"}});
  json["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       Json::array(
           {{{"type", "Split"}, {"pattern", {{"Regex", "\\p{N}{1,2}"}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  // Digits in pairs: "123" is "12" + "3", so (12 3) never applies.
  EXPECT_EQ(load(json)->encode("123"), (std::vector<std::uint32_t>{256, '3'}));
}

TEST_F(TokenizerFiles, InvalidUtf8IsRefusedWithItsOffset) {
  auto tokenizer = load(tokenizer_json({}));
  try {
    tokenizer->encode(std::string("ok\xC3(", 4));
    FAIL() << "encoded invalid UTF-8";
  } catch (const TokenizerError& error) {
    EXPECT_NE(std::string(error.what()).find("byte 2"), std::string::npos) << error.what();
  }
  EXPECT_THROW(tokenizer->encode("\xED\xA0\x80"), TokenizerError);  // a surrogate
  EXPECT_THROW(tokenizer->encode("\xC0\x80"), TokenizerError);      // overlong
  EXPECT_THROW(tokenizer->decode(std::vector<std::uint32_t>{256}), TokenizerError);
}

// normalizer NFC (Qwen2's): canonically equivalent texts encode alike, composed; added tokens are
// cut out of the text as given; ASCII and NFC text is left as it is.
TEST_F(TokenizerFiles, NfcNormalizerComposesBeforePreTokenizing) {
  Json json = tokenizer_json({});
  auto plain = load(json);
  json["normalizer"] = {{"type", "Sequence"}, {"normalizers", Json::array({{{"type", "NFC"}}})}};
  auto nfc = load(json);
  const std::string composed = "caf\xC3\xA9 \xC3\x85", decomposed = "cafe\xCC\x81 A\xCC\x8A", angstrom = "\xE2\x84\xAB";
  EXPECT_EQ(nfc->encode(decomposed), plain->encode(composed));
  EXPECT_NE(plain->encode(decomposed), plain->encode(composed)) << "the test needs texts that differ before NFC";
  EXPECT_EQ(nfc->encode(angstrom), plain->encode("\xC3\x85"));  // U+212B ANGSTROM SIGN is U+00C5 in NFC
  EXPECT_EQ(nfc->encode("plain ASCII"), plain->encode("plain ASCII"));
  EXPECT_EQ(nfc->decode(nfc->encode(decomposed)), composed);
}

TEST_F(TokenizerFiles, WhatIsNotImplementedIsRefusedByName) {
  const auto with = [](const char* pointer, Json value) {
    Json json = tokenizer_json({{"a", "b"}});
    json[Json::json_pointer(pointer)] = std::move(value);
    return json;
  };
  EXPECT_NE(refusal(with("/model/type", "WordPiece")).find("model.type = \"WordPiece\""), std::string::npos);
  EXPECT_NE(refusal(with("/model/type", "Unigram")).find("Unigram"), std::string::npos);
  EXPECT_NE(refusal(with("/normalizer", Json{{"type", "BertNormalizer"}})).find("normalizer (BertNormalizer)"),
            std::string::npos);
  EXPECT_NE(
      refusal(with("/normalizer", Json{{"type", "Sequence"},
                                       {"normalizers", Json::array({{{"type", "NFC"}}, {{"type", "Precompiled"}}})}}))
          .find("normalizer.normalizers[1] (Precompiled) is not implemented"),
      std::string::npos);
  // A byte-level vocabulary decoded by Metaspace would print GPT-2's byte characters.
  EXPECT_NE(refusal(with("/decoder", Json{{"type", "Metaspace"}})).find("the decoder is not ByteLevel"),
            std::string::npos);
  EXPECT_NE(refusal(with("/decoder", Json{{"type", "WordPiece"}})).find("decoder (WordPiece) is not implemented"),
            std::string::npos);
  EXPECT_NE(refusal(with("/pre_tokenizer", Json{{"type", "Whitespace"}})).find("Whitespace"), std::string::npos);
  EXPECT_NE(refusal(with("/model/continuing_subword_prefix", "##")).find("continuing_subword_prefix"),
            std::string::npos);
  EXPECT_NE(refusal(with("/model/merges/0", "a zz")).find("merges[0]"), std::string::npos);
  EXPECT_NE(refusal(with("/model/dropout", 0.1)).find("dropout"), std::string::npos);
  Json no_byte = tokenizer_json({});
  no_byte["model"]["vocab"].erase(byte_spelling(0));
  EXPECT_NE(refusal(no_byte).find("byte 0"), std::string::npos);
  Json single_word = tokenizer_json({});
  single_word["added_tokens"] = Json::array({{{"id", 300}, {"content", "x"}, {"single_word", true}}});
  EXPECT_NE(refusal(single_word).find("single_word"), std::string::npos);
  Json bad_split = tokenizer_json({});
  bad_split["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       Json::array({{{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Removed"}, {"invert", false}},
                    {{"type", "ByteLevel"}, {"use_regex", false}}})}};
  bad_split["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  EXPECT_NE(refusal(bad_split).find("behavior \"Sideways\" is not one of"), std::string::npos);
  Json bad_regex = bad_split;
  bad_regex["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Isolated";
  bad_regex["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_NE(refusal(bad_regex).find("does not compile"), std::string::npos);
  EXPECT_NE(refusal(Json::array()).find("not a JSON object"), std::string::npos);
  EXPECT_NE(refusal(with("/model/vocab", 3)).find("model.vocab"), std::string::npos);
}

TEST_F(TokenizerFiles, ANameInTokenizerConfigMustBeAToken) {
  try {
    load(tokenizer_json({}), Json{{"eos_token", "<|not there|>"}});
    FAIL() << "loaded";
  } catch (const TokenizerError& error) {
    EXPECT_NE(std::string(error.what()).find("tokenizer_config.json: eos_token"), std::string::npos) << error.what();
  }
}

// The expected strings are what Hugging Face's clean_up_tokenization (Python's str.replace, in its
// order) gives for the same input.
TEST(CleanUpTokenization, TakesOutSpacesAsHuggingFaceDoes) {
  EXPECT_EQ(
      clean_up_tokenization("Hello , world ! It 's a dog 's life . Is n't it ? I 'm sure they 're here , we 've won ."),
      "Hello, world! It's a dog's life. Isn't it? I'm sure they're here, we've won.");
  EXPECT_EQ(clean_up_tokenization("a ' b ' ' c  . .. ?!"), "a'b'' c ...?!");
  EXPECT_EQ(clean_up_tokenization("no change: it's fine."), "no change: it's fine.");
  EXPECT_EQ(clean_up_tokenization(" .leading and trailing ,"), ".leading and trailing,");
  EXPECT_EQ(clean_up_tokenization("x ' 's y"), "x''s y");
}

TEST_F(TokenizerFiles, CleanUpTokenizationSpacesIsReadFromTheConfig) {
  const std::vector<std::uint32_t> ids = {'a', ' ', ',', ' ', 'b', ' ', '.'};
  EXPECT_EQ(load(tokenizer_json({}))->decode(ids), "a , b .");  // absent: off
  EXPECT_EQ(load(tokenizer_json({}), Json{{"clean_up_tokenization_spaces", false}})->decode(ids), "a , b .");
  const auto cleaning = load(tokenizer_json({}), Json{{"clean_up_tokenization_spaces", true}});
  EXPECT_TRUE(cleaning->cleans_up_spaces());
  EXPECT_EQ(cleaning->decode(ids), "a, b.");
  EXPECT_EQ(cleaning->decode_raw(ids), "a , b .");
  try {
    load(tokenizer_json({}), Json{{"clean_up_tokenization_spaces", "yes"}});
    FAIL() << "loaded";
  } catch (const TokenizerError& error) {
    EXPECT_NE(std::string(error.what()).find("tokenizer_config.json: clean_up_tokenization_spaces = \"yes\""),
              std::string::npos)
        << error.what();
  }
}

// Streamed a character at a time, the settled text only ever grows, and ends as the clean-up of the
// whole: on texts where rules chain (" ' " then " 's" takes a space that a later character decides).
TEST_F(TokenizerFiles, AContinuationStreamedOnlyGrowsAndEndsCleanedUp) {
  const auto cleaning = load(tokenizer_json({}), Json{{"clean_up_tokenization_spaces", true}});
  std::vector<std::string> texts = {"It ' s a , b ' c 's . Is n't x ' ' y .", "Q.  ' s", " ' m .", "  ' ' 's n't"};
  std::uint64_t state = 7;  // and random texts over the rules' characters
  for (int t = 0; t < 3000; ++t) {
    std::string text;
    for (int i = 0; i < 14; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      text += " '.,?!nmtsvrex"[(state >> 33) % 14];
    }
    texts.push_back(text);
  }
  const std::vector<std::uint32_t> prompt = {'>'};
  for (const std::string& text : texts) {
    const std::vector<std::uint32_t> ids(text.begin(), text.end());
    std::string shown;
    for (std::size_t n = 1; n <= ids.size(); ++n) {
      const std::string settled = cleaning->decode_continuation(prompt, std::span(ids).first(n), n == ids.size());
      ASSERT_TRUE(settled.starts_with(shown))
          << "\"" << text << "\" after " << n << ": \"" << settled << "\" does not extend \"" << shown << "\"";
      shown = settled;
    }
    ASSERT_EQ(shown, clean_up_tokenization(text)) << text;
  }
  EXPECT_EQ(cleaning->decode_continuation(prompt, std::vector<std::uint32_t>{' ', ',', ' ', 'a'}, true), ", a");
}

TEST_F(TokenizerFiles, ADirectoryWithoutATokenizerIsRefused) {
  EXPECT_FALSE(has_tokenizer(directory_));
  EXPECT_THROW(load_tokenizer(directory_), TokenizerError);
  EXPECT_THROW(load_tokenizer(directory_ / "missing"), TokenizerError);
}

}  // namespace
}  // namespace strata
