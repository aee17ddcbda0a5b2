#pragma once
// A model's activation codes (strata/activation_codec.hpp): the codecs the strategies offer, asked
// once per saved tensor of every block when the model is built, each taken tensor given a code row
// beside it ("h.3.act.fch.code", u8, group activations); then, per micro batch, the codes made after
// a block's forward and the values made back before its backward. The value row and its code row
// are stand-ins for each other in the store (Residency::set_stand_in): residence, moves and drops
// treat a kind as held when either is.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor/tensor_store.hpp"
#include "strata/activation_codec.hpp"

namespace strata {

// A codec and the strategy (its index in manifest order) that offered it.
struct StrategyCodec {
  ActivationCodec* codec = nullptr;
  int strategy = -1;
  std::string label;  // "[[strategy]] #2 'actnn'": a crash in the codec is named with it
};

// A codec's failure, for the executor to word with the strategy's label.
struct CodecFailure {
  int strategy = -1;
  std::string_view call;  // "encode", "decode"
  std::string message;
};

class ActivationCodes {
 public:
  explicit ActivationCodes(TensorStore& store) : store_(store) {}

  // `activation_rows[l][k]`: block l's row of kind k; the output kind is never offered (the next
  // block reads it). recomputed_by(k) names the op that recomputes kind k alone, or is empty.
  void declare(const std::vector<StrategyCodec>& codecs, const std::vector<std::vector<int>>& activation_rows,
               int output_kind, const std::function<std::string_view(int kind)>& recomputed_by);
  bool empty() const noexcept { return coded_ == 0; }
  // Block l's code rows, allocated or not (moved with its activations).
  const std::vector<int>& code_rows(int layer) const { return held_codes_.at(static_cast<std::size_t>(layer)); }
  // Encodes every coded kind of block `layer` whose values are held, and frees the values.
  std::optional<CodecFailure> encode(int layer, Ops& ops, const CodecCall& call);
  // Decodes every held code of block `layer` whose values are not held (recomputed ones are kept),
  // and frees the codes.
  std::optional<CodecFailure> decode(int layer, Ops& ops, const CodecCall& call);
  // Frees the codes of these kinds of block `layer` (their values were dropped).
  void release(int layer, const std::vector<int>& kinds);
  void release_all(int layer);

 private:
  struct Coded {
    int kind = -1;
    int value_row = -1;
    int code_row = -1;
    int codec = -1;  // index into codecs_
  };
  TensorStore& store_;
  std::vector<StrategyCodec> codecs_;
  std::vector<std::vector<Coded>> layers_;  // per block, its coded kinds
  std::vector<std::vector<int>> held_codes_;
  std::size_t coded_ = 0;
};

}  // namespace strata
