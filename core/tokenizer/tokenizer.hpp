#pragma once
// Text to token ids and back, as the model a user starts from was trained with. Two kinds are
// read from a tokenizer directory (a Hugging Face model directory usually is one):
//   tokenizer.json of the BPE kind, byte-level (GPT-2, LLaMA 3, Qwen, DeepSeek V3, GPT-4o) or with
//     byte fallback (LLaMA 2, Mistral, Gemma): bpe_tokenizer.hpp;
//   tokenizer.model, a SentencePiece model (LLaMA 1/2, Mistral), through libsentencepiece, read
//     when there is no tokenizer.json or it is of another kind (Unigram, WordPiece).
// tokenizer_config.json, when present, names the bos and eos tokens. Anything else a directory
// may describe (WordPiece, Unigram in tokenizer.json, a BertNormalizer) is refused by name.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/errors/data_error.hpp"

namespace strata {

// Raised whenever the same tokenizer files may encode a text differently in a new Strata (2: the
// pre-tokenizers' character classes from ICU's Unicode 15.0 instead of PCRE2's 14), so that token
// caches made by an older one are not read as this one's (core/data/corpus_tokens.hpp).
inline constexpr std::uint64_t kTokenizerEncodingVersion = 2;

// A tokenizer directory Strata cannot read, or text it cannot encode; the message names the file
// and the field. A DataError: bad input, exit 2.
class TokenizerError : public DataError {
 public:
  using DataError::DataError;
};

// The tokens a document is framed with: `bos` first when `add_bos`, `eos` last.
struct SpecialTokens {
  std::optional<std::uint32_t> bos;
  std::optional<std::uint32_t> eos;
  bool add_bos = false;
};

// Where a text is cut: the first part ends at `end`, the second starts at `resume` (after a space
// that the second part's encoding puts back, or at `end`).
struct TextCut {
  std::size_t end;
  std::size_t resume;
};

// Encodes on one thread at a time; it keeps what it has learned (a cache of encoded words), so a
// thread keeps its encoder for the whole text.
class TokenEncoder {
 public:
  virtual ~TokenEncoder() = default;
  // Appends the ids of `text`, which must be valid UTF-8, to `ids`. No bos or eos is added.
  // Throws TokenizerError, naming the byte offset, on invalid UTF-8.
  virtual void encode(std::string_view text, std::vector<std::uint32_t>& ids) = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // One per thread; the tokenizer must outlive it.
  virtual std::unique_ptr<TokenEncoder> make_encoder() const = 0;
  // The text of `ids`; special tokens appear as their text. With tokenizer_config.json's
  // clean_up_tokenization_spaces = true, cleaned as Hugging Face's decode cleans it
  // (clean_up_tokenization below). Throws TokenizerError on an id at or above vocab_size().
  std::string decode(std::span<const std::uint32_t> ids) const;
  // The same, never cleaned: what a stream prints as the tokens come (clean-up may take back a space
  // that a later token follows).
  virtual std::string decode_raw(std::span<const std::uint32_t> ids) const = 0;
  bool cleans_up_spaces() const noexcept { return clean_up_spaces_; }
  // The text `continuation` adds after `prompt`: the raw decoding of both less the prompt's own,
  // so a SentencePiece piece keeps the space it starts with (decoded alone, it would lose it as the
  // first of a text). Cleaned up, on its own, when the tokenizer says so. When not `final`, only
  // as far as it stays whatever ids follow: a trailing U+FFFD (a character whose byte pieces have not
  // all come) waits, and so does what the clean-up may still change (settled_length).
  std::string decode_continuation(std::span<const std::uint32_t> prompt, std::span<const std::uint32_t> continuation,
                                  bool final) const;
  // The largest id it can produce, plus one.
  virtual std::int64_t vocab_size() const = 0;
  // "byte-level BPE (tokenizer.json)", "BPE with byte fallback (tokenizer.json)" or
  // "SentencePiece BPE (tokenizer.model)".
  virtual std::string kind() const = 0;
  // A digest of the files it was read from: a tokenized-data cache made with another is stale.
  virtual std::uint64_t fingerprint() const = 0;
  // The last place in `text` where it may be cut so that encoding text[0, end) and then
  // text[resume, ...) gives exactly the ids of the whole, so a corpus file can be tokenized in
  // chunks on several threads; nothing when there is none or the tokenizer cannot be cut exactly.
  // Byte-level BPE cuts where a line ends after a non-space character and the next line starts with
  // an ASCII letter (GPT-2's and LLaMA 3's patterns end every piece holding a newline at it);
  // SentencePiece BPE, and tokenizer.json BPE with byte fallback, at a single space between ASCII
  // words (sentencepiece_tokenizer.hpp, bpe_tokenizer.hpp).
  virtual std::optional<TextCut> last_exact_cut(std::string_view text) const = 0;
  const SpecialTokens& special() const noexcept { return special_; }

  // encode() through a fresh encoder, for one-off texts.
  std::vector<std::uint32_t> encode(std::string_view text) const;

 protected:
  // What every kind reads from tokenizer_config.json (`config`, null when there is none) beside bos
  // and eos: clean_up_tokenization_spaces, false when absent (Hugging Face's default since
  // transformers 4.45). `directory` names the file in messages.
  void read_common_config(const nlohmann::json& config, const std::filesystem::path& directory);
  // tokenizer_config.json's `key` (bos_token, eos_token): a string, or an object whose "content"
  // is one; nothing when absent or null. Another type is a TokenizerError naming the file and key.
  static std::optional<std::string> config_token_text(const nlohmann::json& config, const char* key,
                                                      const std::filesystem::path& directory);
  // tokenizer_config.json's add_bos_token: true or false; nothing when absent or null.
  static std::optional<bool> config_add_bos(const nlohmann::json& config, const std::filesystem::path& directory);

  SpecialTokens special_;
  bool clean_up_spaces_ = false;
};

// Hugging Face's clean_up_tokenization: the spaces a word-level tokenizer put before punctuation
// and English contractions taken out, " ." " ?" " !" " ," " ' " " n't" " 'm" " 's" " 've" " 're"
// replaced in that order, each everywhere, left to right.
std::string clean_up_tokenization(std::string_view text);

// How much of a text still growing clean_up_tokenization leaves as it will stay whatever follows:
// up to the last 3 characters in a row that are not spaces. The clean-up only takes out spaces,
// each by a rule 2 to 4 characters long that starts at a space, so no rule can match across such
// a boundary, before or after earlier rules have run.
std::size_t settled_length(std::string_view text);

// Cutting a corpus text at a single space between ASCII words (a letter or digit before it, a
// letter after), for tokenizers whose pieces never join two words: the part after the cut resumes
// after the space (the tokenizer puts its word mark back, as a SentencePiece dummy prefix or a
// Prepend does) or at it.
enum class SpaceCut { never, dropping_the_space, keeping_the_space };
bool is_cuttable_space(std::string_view text, std::size_t at);
// Which of the two gives the whole's ids at every such cut of a few probe texts encoded by
// `ids_of`, dropping first; never when neither does.
SpaceCut probe_space_cut(const std::function<std::vector<std::uint32_t>(std::string_view)>& ids_of);
// The last such cut in `text`, or nothing (always nothing for SpaceCut::never).
std::optional<TextCut> last_space_cut(std::string_view text, SpaceCut cut);

// Reads DIR's tokenizer.json when it describes a kind Strata implements, else DIR's
// tokenizer.model; throws TokenizerError naming what it found and could not use.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& directory);

// The readers behind load_tokenizer, from the files' bytes (the fuzz targets' entry points):
// `config` is tokenizer_config.json's text, empty when there is none; `directory` names the files
// in messages.
std::unique_ptr<Tokenizer> read_tokenizer_json(std::string_view json, std::string_view config,
                                               const std::filesystem::path& directory);
std::unique_ptr<Tokenizer> read_sentencepiece_model(std::string_view model, std::string_view config,
                                                    const std::filesystem::path& directory);

// Whether `directory` holds a tokenizer.json or a tokenizer.model.
bool has_tokenizer(const std::filesystem::path& directory);

}  // namespace strata
