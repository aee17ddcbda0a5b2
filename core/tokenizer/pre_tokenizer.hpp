#pragma once
// A tokenizer.json's pre-tokenizer: how a normalized stretch of text is cut into the pieces the BPE
// model encodes one at a time (Hugging Face's pre-tokenizers). Implemented, alone or in a Sequence:
//   Split: a regex or a literal string, with every behaviour (Removed, Isolated, MergedWithPrevious,
//     MergedWithNext, Contiguous) and invert, as Hugging Face's Rust library defines them;
//   Metaspace: spaces become the replacement character ("▁"), which is put first by the prepend
//     scheme (always; first: only before the text's first piece; never), then, with split, each
//     piece is cut before every replacement character;
//   ByteLevel, last: a space put first where add_prefix_space says so, GPT-2's regex with
//     use_regex, and the pieces read as bytes by the model (byte_level()).
// Anything else is refused by name.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tokenizer/pretokenizer_regex.hpp"

namespace strata {

class PreTokenizer {
 public:
  // `pre_tokenizer` is tokenizer.json's "pre_tokenizer" (null: the whole stretch is one piece).
  // Throws TokenizerError naming `where` (the file) and the step.
  PreTokenizer(const nlohmann::json& pre_tokenizer, const std::string& where);
  ~PreTokenizer();

  // It ends with ByteLevel: the model reads a piece's bytes through GPT-2's byte map.
  bool byte_level() const noexcept { return byte_level_; }
  // Every step splits by a regex into isolated pieces and nothing is rewritten: the patterns in
  // order (what last_exact_cut needs to know); empty otherwise.
  std::vector<std::string_view> isolated_patterns() const;
  // Every step is Metaspace or a Split on the string " ": nothing cuts between two ASCII words
  // that a space does not already separate.
  bool splits_only_at_spaces() const noexcept {
    for (const Step& step : steps_)
      if (!(step.kind == Kind::metaspace || (step.kind == Kind::split && step.literal == " "))) return false;
    return true;
  }

  // One per thread: the regexes' match data and the buffers of rewritten text.
  class Splitter {
   public:
    explicit Splitter(const PreTokenizer& pre_tokenizer);
    ~Splitter();
    Splitter(const Splitter&) = delete;
    Splitter& operator=(const Splitter&) = delete;
    // Cuts `text` (`at_text_start`: it starts the whole text, for Metaspace's "first") into
    // non-empty pieces, [begin, end) byte offsets into the returned text: `text` itself, or its
    // rewrite in the splitter's buffers (valid until the next call). `pieces` is replaced.
    std::string_view split(std::string_view text, bool at_text_start,
                           std::vector<std::pair<std::size_t, std::size_t>>& pieces);

   private:
    using Pieces = std::vector<std::pair<std::size_t, std::size_t>>;
    const PreTokenizer& pre_tokenizer_;
    std::vector<std::unique_ptr<PretokenizerRegex::Matcher>> matchers_;  // per step, null for none
    std::string buffers_[2];
    Pieces current_, next_, parts_;
    std::vector<std::pair<std::size_t, std::size_t>> matches_;
  };

 private:
  enum class Kind { split, metaspace, byte_level };
  enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
  enum class Prepend { always, first, never };
  struct Step {
    Kind kind;
    std::unique_ptr<PretokenizerRegex> regex;  // split (a literal is quoted into one); byte_level's GPT-2 regex
    std::string literal;                       // split: the String pattern, when it is one
    Behavior behavior = Behavior::isolated;
    bool invert = false;
    std::string replacement;  // metaspace
    Prepend prepend = Prepend::always;
    bool split = true;              // metaspace
    bool add_prefix_space = false;  // byte_level
  };
  void read_step(const nlohmann::json& step, bool last, const std::string& where, const std::string& field);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace strata
