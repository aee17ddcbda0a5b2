#pragma once
// A SentencePiece model (tokenizer.model: LLaMA 1 and 2, Mistral), encoded and decoded by
// Debian's libsentencepiece, the library that trained it. bos and eos come from
// tokenizer_config.json when it names them, else from the model itself.
//
// A corpus text is cut for encoding on several threads at a single space between two ASCII words,
// when that is exact: the model is BPE, and no piece holds "▁" (the escaped space) after another
// character, so no merge can join the word before the cut to the word after it, and the merges on
// either side do not depend on each other. The second part then encodes as the whole does after
// the cut: with the model's dummy "▁" prefix standing for the space, or with the space kept, which a
// probe at load time tells apart. A unigram model is never cut: its Viterbi segmentation breaks
// ties (a run of "=" as 16 + 16 + 1 + 1 or 1 + 1 + 16 + 16) by sums of float scores, which depend
// on where the text starts.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tokenizer/tokenizer.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace strata {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // `bytes` is the model file at `file`; throws TokenizerError naming it when the library refuses it.
  SentencePieceTokenizer(const std::string& bytes, const std::filesystem::path& file, const nlohmann::json& config,
                         std::uint64_t fingerprint);
  ~SentencePieceTokenizer() override;

  std::unique_ptr<TokenEncoder> make_encoder() const override;
  std::string decode_raw(std::span<const std::uint32_t> ids) const override;
  std::int64_t vocab_size() const override;
  std::string kind() const override { return "SentencePiece (tokenizer.model)"; }
  std::uint64_t fingerprint() const override { return fingerprint_; }
  std::optional<TextCut> last_exact_cut(std::string_view text) const override;

  // A control or unknown piece (<s>, </s>, <unk>): spelled in a text, it is its id, as a
  // tokenizer.json reader makes it (its added tokens), whatever the library would make of the text.
  struct SpecialPiece {
    std::string piece;
    std::uint32_t id;
  };

 private:
  std::vector<SpecialPiece> specials_;  // longest first
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::uint64_t fingerprint_;
  SpaceCut choose_cut_at_space(std::string_view model) const;
  SpaceCut cut_at_space_ = SpaceCut::never;
};

// ModelProto.trainer_spec.model_type of a serialized model (1 unigram, 2 BPE, 3 word, 4 char; 1
// when absent, as the format's default says); nothing when the bytes cannot be walked.
std::optional<int> sentencepiece_model_type(std::string_view model);

}  // namespace strata
