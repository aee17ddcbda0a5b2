#pragma once
// A SentencePiece model (tokenizer.model: LLaMA 1 and 2, Mistral), encoded and decoded by
// Debian's libsentencepiece, the library that trained it. bos and eos come from
// tokenizer_config.json when it names them, else from the model itself.
#include <filesystem>
#include <memory>
#include <string>

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
  std::string decode(std::span<const std::uint32_t> ids) const override;
  std::int64_t vocab_size() const override;
  std::string kind() const override { return "SentencePiece (tokenizer.model)"; }
  std::uint64_t fingerprint() const override { return fingerprint_; }
  bool splits_exactly_at_line_starts() const override { return false; }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::uint64_t fingerprint_;
};

}  // namespace strata
