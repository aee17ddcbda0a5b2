#pragma once
// What a memory strategy may do, and see, from inside a hook. The executor implements it; a
// strategy never touches buffers or other plugins directly.
#include <cstdint>
#include <span>
#include <string_view>

#include "strata/host_services.hpp"
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
  //
  // Activations move too (activation offloading): evict moves the activations a block holds to
  // accounted host memory, on the copy stream for the async form, and the executor brings them
  // back before the block's backward (and a block's output before the next block's backward or
  // recomputation reads it). While the next block's forward has not run yet, the block's output
  // stays on the device (that block reads it); evict the block again later to move it. In a pass
  // that goes no backward (evaluation, a predict step) activations go as soon as they are read,
  // and evicting them does nothing. A block whose activations one strategy drops and another
  // evicts in the same micro batch stops the run with an error naming both (one strategy may do
  // both). residence() of
  // activations: host when any of the block's is there, device when all are held on the device,
  // absent when some are not held (dropped or not yet computed).
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
  // is not allocated. `space` says whether it is backend or host memory, `dtype` how it is stored;
  // a tensor being moved is viewed once its copy has landed.
  virtual TensorView tensor(std::string_view name) noexcept = 0;

  virtual MemorySnapshot memory() const noexcept = 0;
  // Whether the host offers `service` in this run (strata/host_services.hpp): the disk tier's
  // entry points below work only when has(Service::disk_tier).
  virtual bool has(Service service) const noexcept = 0;

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

  // ABI 2.1 -------------------------------------------------------------------------------------
  // From now on, the LM head keeps only one vocabulary chunk of logits and recomputes each chunk
  // for the backward pass: B x T x padded vocab floats fewer (often the largest activation) for
  // one extra head matmul; bitwise the same results. Call it from on_attach.
  virtual Status drop_logits() noexcept = 0;

  // ABI 9.0 -------------------------------------------------------------------------------------
  // Every tensor of a layer (kGlobalParameters: those outside the blocks), for any model family:
  // names as tensor() takes them, shapes, storage dtypes, groups and where each is now. Valid
  // during the hook call.
  virtual std::span<const TensorInfo> tensors(int layer) noexcept = 0;
  // Partial checkpointing: drop some of a block's activations, each one its TensorInfo lists as
  // `recomputed_by` an op (the norm and pointwise outputs: cheap to recompute; the attention
  // kernel's saved rows: Korthikanti et al. 2022's selective recomputation); the others stay. The
  // block's backward recomputes each right above its first read, from what was kept, bit for bit
  // (recompute_activations, above). A name that is not such a tensor of this block is an error
  // naming it and those that are.
  virtual Status drop_activation_tensors(int layer, std::span<const std::string_view> names) noexcept = 0;

  // ABI 9.3 -------------------------------------------------------------------------------------
  // (optional, since 9.3) The disk tier: moves a layer's group to the file the run keeps in
  // [device] disk_path, and waits. From then on residence() reads disk (for optimizer_state, the
  // home of its first row: the moments'). Call it from on_attach, where it only changes the rows'
  // home. What may go:
  //   * optimizer_state: the moments and the f32 masters of bf16 or quantized weights; the
  //     optimizer then steps one block at a time (Optimizer::steps_in_parts), each block's rows
  //     read in ahead of its update and written back behind it, so at most two blocks' state is
  //     in host memory at once;
  //   * masters (since 9.7): the masters alone (the moments stay where they are), stepped the same
  //     way;
  //   * weights (since 9.7) of a block, not the global parameters': the disk holds the block's
  //     weights, and memory only the blocks a strategy has brought in. It brings them in with read_from_disk_async and
  //     fetch_async (the executor reads any it needs that are still on disk, synchronously) and
  //     sends them back with write_to_disk_async; an update that finds them on disk reads them in.
  // Grads and activations, a run without disk_path, or an optimizer that cannot step in parts is an
  // error.
  virtual Status evict_to_disk(int layer, TensorGroup group) noexcept {
    (void)layer;
    (void)group;
    return Status::error("this host has no disk tier");
  }

  // ABI 9.7 -------------------------------------------------------------------------------------
  // (optional, since 9.7) The two halves of a disk round trip, on the disk tier's thread: reading a
  // layer's rows that are on disk into host memory (residence() then reads host; fetch_async takes
  // them on to the device), and sending a layer's rows held in host memory back to disk. A row
  // whose disk copy is still current (weights read in and not updated since) is only dropped; the
  // others are written, and their memory goes when the write lands. Rows not on disk, or not in
  // host memory, are left alone.
  virtual Status read_from_disk_async(int layer, TensorGroup group) noexcept {
    (void)layer;
    (void)group;
    return Status::error("this host has no asynchronous disk reads (SDK 9.7)");
  }
  virtual Status write_to_disk_async(int layer, TensorGroup group) noexcept {
    (void)layer;
    (void)group;
    return Status::error("this host has no asynchronous disk writes (SDK 9.7)");
  }
};

}  // namespace strata
