#pragma once
// What a memory strategy may do, and see, from inside a hook. The executor implements it; a
// strategy never touches buffers or other plugins directly.
#include <cstdint>
#include <string_view>

#include "strata/memory_category.hpp"
#include "strata/phase.hpp"
#include "strata/status.hpp"
#include "strata/tensor_view.hpp"

namespace strata {

struct MemorySnapshot {
  CategoryBytes device_live{};
  CategoryBytes device_peak{};
  std::uint64_t device_limit = 0;  // 0: no limit
  std::uint64_t host_live = 0;
};

// The layer index that names the parameters outside the blocks (embeddings, final LayerNorm) in
// fetch/evict/residence. Their weights must be on the device for the embedding and the head.
inline constexpr int kGlobalParameters = -1;

class HookContext {
 public:
  virtual ~HookContext() = default;

  // Where the step is.
  virtual int layer() const noexcept = 0;  // the layer the hook is about; -1 for step hooks
  virtual int n_layer() const noexcept = 0;
  virtual Phase phase() const noexcept = 0;
  virtual std::int64_t step() const noexcept = 0;  // 1-based
  virtual int micro_batch() const noexcept = 0;

  // Residency: move a layer's group between device and host memory (layer kGlobalParameters for
  // the parameters outside the blocks). The executor fetches any group it needs that is not on the
  // device, so a strategy only decides *when*. fetch/evict complete before they return.
  virtual Status fetch(int layer, TensorGroup group) noexcept = 0;
  virtual Status evict(int layer, TensorGroup group) noexcept = 0;
  virtual Residence residence(int layer, TensorGroup group) const noexcept = 0;

  // Activations: drop a layer's saved activations (its input, the previous layer's output, is
  // kept) and recompute them from that input. The executor recomputes dropped activations before
  // the layer's backward if no strategy has. A whole block is recomputed when
  // recompute_activations returns; after a partial drop (below) it re-allocates the dropped rows,
  // and the block's backward fills each right before it reads it, so their views hold no values
  // until then.
  virtual Status drop_activations(int layer) noexcept = 0;
  virtual Status recompute_activations(int layer) noexcept = 0;

  // A view of one tensor by its table name ("h.3.ln_1.weight", "h.3.act.qkv"); empty data when it
  // is not allocated, not on the device, or not stored as f32 (bf16 storage).
  virtual TensorView tensor(std::string_view name) noexcept = 0;

  virtual MemorySnapshot memory() const noexcept = 0;

  // ABI 1.1 -------------------------------------------------------------------------------------
  virtual int micro_batches() const noexcept = 0;  // micro batches per step

  // Start a move on the device's copy stream and return at once. The group reads as residing at
  // its destination from now on; the executor waits for the copy before anything touches the
  // group, so compute overlaps the transfer. Moves of one group complete in the order issued.
  virtual Status fetch_async(int layer, TensorGroup group) noexcept = 0;
  virtual Status evict_async(int layer, TensorGroup group) noexcept = 0;
  // Blocks until every move issued so far has completed.
  virtual Status wait_transfers() noexcept = 0;
  // Blocks until the moves of one group (and, the stream being ordered, every move issued before
  // them) have completed, and frees their sources: a strategy bounds memory in flight with it.
  virtual Status wait_for(int layer, TensorGroup group) noexcept = 0;

  // Cheap checkpointing: drop only what is cheap to recompute (the norm and pointwise outputs),
  // keep the matmul and attention results. recompute_activations brings them back (above).
  virtual Status drop_cheap_activations(int layer) noexcept = 0;

  // ABI 2.1 -------------------------------------------------------------------------------------
  // From now on, the LM head keeps only one vocabulary chunk of logits and recomputes each chunk
  // for the backward pass: B x T x padded vocab floats fewer (often the largest activation) for
  // one extra head matmul; bitwise the same results. Call it from on_attach.
  virtual Status drop_logits() noexcept = 0;

  // ABI 5.0 -------------------------------------------------------------------------------------
  // Selective checkpointing (Korthikanti et al. 2022): drop what the attention kernel saved for
  // backward (the built-in kernel's B x n_head x T x T probabilities), keep the matmul outputs;
  // recompute_activations brings them back: the block's backward runs its attention forward again
  // from the kept q, k and v.
  virtual Status drop_attention_internals(int layer) noexcept = 0;
};

}  // namespace strata
