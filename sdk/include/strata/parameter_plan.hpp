#pragma once
// What trains (DESIGN.md §7, frozen parameters): a strategy that trains part of the model says so
// before the model is built. A frozen parameter gets no gradient row, no optimizer state and no
// master copy: its weights stay as loaded or initialised, in their storage dtype (int8 included),
// and still move with residency. Backward still flows through a frozen block's activations; only
// its weight gradients are not computed. A skipped block is the identity (its output is its input,
// its parameters frozen): the cheapest and crudest way to leave a block out.
#include "strata/host_services.hpp"

namespace strata {

class ParameterPlan {
 public:
  virtual ~ParameterPlan() = default;
  virtual const ModelInfo& model() const noexcept = 0;
  // Blocks are 0..n_layer-1; a layer outside is ignored by the host (the plugin checks its keys).
  virtual void freeze_block(int layer) noexcept = 0;
  virtual void skip_block(int layer) noexcept = 0;
  // The token (and position) embeddings; the final norm and the LM head. A head tied to the token
  // embedding (GPT-2) trains while either of the two does.
  virtual void freeze_embeddings() noexcept = 0;
  virtual void freeze_head() noexcept = 0;
};

}  // namespace strata
