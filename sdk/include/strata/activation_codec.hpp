#pragma once
// Saved activations in a plugin's own encoding (docs/architecture.md, "Activation codecs"), as
// PyTorch's saved-tensor hooks allow: after a block's forward, a codec may replace any activation
// the block keeps for its backward (all but the block's output, which the next block reads) by a
// code of its own, and it gives the values back before the backward that reads them. ActNN-style
// compression (int8 codes with stochastic rounding) is one.
//
// A memory strategy offers a codec (MemoryStrategy::activation_codec); the first codec in manifest
// order that takes a tensor encodes it. The host keeps each code as a row of the tensor table
// ("h.3.act.fch.code", u8, code_bytes bytes, group activations), so it is accounted, planned
// (`strata plan`), moved by offloading and dropped by checkpointing like the values it replaces: a
// block whose activations a strategy drops is recomputed as usual, and its codes go with it. Codes
// are made after the block's forward, before the after_forward hooks, so those hooks see the codes;
// they are decoded before the block's backward, after its before_backward hooks.
//
// The codec computes through the op table it is given or with its own kernels for the backend
// (HostServices::target()), on the backend's memory. encode and decode are noexcept: an error is a
// Status, which the host reports with the plugin's name, the call, the layer and the step. The
// result must depend only on the call and the values (a resumed run encodes the same way).
#include <cstdint>

#include "strata/ops.hpp"
#include "strata/status.hpp"
#include "strata/tensor_view.hpp"

namespace strata {

// Where an encode or decode runs.
struct CodecCall {
  std::int64_t step = 0;       // 1-based training step
  int micro_batch = 0;         // within the step
  int layer = 0;               // the block
  std::uint64_t sequence = 0;  // unique to the micro batch in the run (seeds), the same on resume
};

class ActivationCodec {
 public:
  virtual ~ActivationCodec() = default;
  // The bytes of the code that replaces `activation` (one block's saved tensor as
  // HookContext::tensors describes it: name, layer, shape, stored dtype, bytes), or 0 to leave it as
  // it is. Asked once per tensor, before anything is allocated.
  virtual std::uint64_t code_bytes(const TensorInfo& activation) const noexcept = 0;
  // After the block's forward: the code of `values` (its stored dtype and count) into `code` (u8,
  // code_bytes of them). `values` is freed afterwards.
  virtual Status encode(Ops& ops, const CodecCall& call, const TensorView& values, const TensorView& code) noexcept = 0;
  // Before the backward that reads them: the values back from `code`, into `values` (allocated for
  // the purpose, its stored dtype and count). `code` is freed afterwards.
  virtual Status decode(Ops& ops, const CodecCall& call, const TensorView& code, const TensorView& values) noexcept = 0;
};

}  // namespace strata
