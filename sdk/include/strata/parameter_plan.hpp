#pragma once
// What trains (docs/architecture.md, "What trains"): a strategy that trains part of the model says
// so before the model is built. A frozen parameter gets no gradient row, no optimizer state and no
// master copy: its weights stay as loaded or initialised, in their storage dtype (int8 included),
// and still move with residency. Backward still flows through a frozen block's activations; only
// its weight gradients are not computed. A skipped block is the identity (its output is its input,
// its parameters frozen): the cheapest and crudest way to leave a block out. An adapted matrix
// (strata/matmul_adapter.hpp) gains the adapter's trainable tensors and its product.
#include <string>
#include <string_view>
#include <vector>

#include "strata/host_services.hpp"
#include "strata/matmul_adapter.hpp"
#include "strata/status.hpp"

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
  // The block matrices adapt() takes, by the family's names: GPT-2 qkv, attn_proj, fc, fc_proj;
  // LLaMA q, k, v, o, gate, up, down.
  virtual std::vector<std::string> adaptable_targets() const = 0;
  // Adds `adapter` to the matrix named `target` in every block that is not skipped. An error (an
  // unknown target, a target adapted twice, or the adapter's own check() of the matrix's shape) is
  // for the plugin to return from plan_parameters. The adapter must outlive the run: a member of
  // the strategy object.
  virtual Status adapt(std::string_view target, MatmulAdapter& adapter) = 0;
};

}  // namespace strata
