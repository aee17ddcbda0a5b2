// CPU offload, in two independent parts (ZeRO-Offload and ZeRO-Infinity's ideas, per layer):
//
//   optimizer_state = "host"   optimizer state lives in host memory for good; gradients leave the
//                              device layer by layer as backward finishes them (overlapping the
//                              next layer's backward), the optimizer updates host weights with the
//                              host's vectorized AdamW, and the new weights stream back to the
//                              device during the next forward.
//   optimizer_state = "disk"   as "host", with the optimizer state (moments, and the f32 masters
//                              of bf16 or quantized weights) in the disk tier's file ([device]
//                              disk_path): the optimizer steps block by block, each block's state
//                              read in ahead of its update and written back behind it.
//   masters = "host" | "disk"  where the f32 masters of bf16 or quantized weights live, when that
//                              differs from the optimizer state's home (host or disk; the default
//                              is the same home).
//   max_resident_layers = K    block weights (and their gradients) live on the host; at most K
//   prefetch = P               blocks are on the device at once, and blocks i+1..i+P (forward) or
//                              i-1..i-P (backward) are fetched on the copy stream while block i
//                              computes.
//   weights = "disk"           with streaming, the block weights live in the disk tier instead of
//                              the host: each block is read into host memory a block ahead of its
//                              fetch, and sent back when it leaves the device (only written when
//                              the update changed it), so host memory holds a few blocks' weights.
//   activations = "host"       activation offloading: once block i+1's forward has run, block i's
//                              activations leave for host memory on the copy stream (one block
//                              in flight at a time); going
//                              backward, block i-1's come back while block i computes. The last
//                              block's stay. Nothing is recomputed, so it cannot share a block with
//                              checkpointing (the host refuses a block both dropped and moved).
//
// Fetched weights keep their host copy until the optimizer changes them, so evicting a block's
// weights frees device memory without copying. Every copy is exact, so the training trajectory
// equals the one without offload, bit for bit.
#include <algorithm>
#include <string>
#include <vector>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

class Offload final : public MemoryStrategy {
 public:
  Offload(ConfigView& config, HostServices& host) : n_layer_(host.model().n_layer) {
    // An empty default tells a refused value (reported by the view) from one not written, so the
    // checks between keys below never complain about a value the user did not write.
    const std::string optimizer_state = config.get_string("optimizer_state", "", {"device", "host", "disk"});
    const bool optimizer_state_refused = config.has("optimizer_state") && optimizer_state.empty();
    disk_optimizer_ = optimizer_state == "disk";
    host_optimizer_ = optimizer_state == "host" || disk_optimizer_;
    const std::string masters = config.get_string("masters", "", {"host", "disk"});
    if (!masters.empty() && !host_optimizer_ && !optimizer_state_refused)
      config.report_error("masters",
                          "the masters live with the optimizer state unless it leaves the device: add "
                          "optimizer_state = \"host\" or \"disk\"");
    masters_on_disk_ = masters.empty() ? disk_optimizer_ : masters == "disk";
    streaming_ = config.has("max_resident_layers");
    const std::string weights = config.get_string("weights", "", {"host", "disk"});
    weights_on_disk_ = weights == "disk";
    if (weights_on_disk_ && !streaming_)
      config.report_error("weights",
                          "block weights leave the device only with layer streaming: set "
                          "max_resident_layers as well");
    if (streaming_) {
      max_resident_ = static_cast<int>(config.get_int("max_resident_layers", n_layer_, 1, n_layer_));
      // Absent: one block ahead where two fit. A refused value (reported) is not checked further.
      const std::int64_t prefetch = config.get_int("prefetch", -1, 0, std::max(n_layer_ - 1, 0));
      const bool prefetch_refused = config.has("prefetch") && prefetch < 0;
      prefetch_ = prefetch >= 0 ? static_cast<int>(prefetch) : std::min(1, max_resident_ - 1);
      if (!prefetch_refused && prefetch_ + 1 > max_resident_)
        config.report_error("prefetch", "prefetch = " + std::to_string(prefetch_) +
                                            " needs max_resident_layers >= " + std::to_string(prefetch_ + 1) +
                                            " (the block computing plus the blocks arriving)");
      if (!host_optimizer_ && !optimizer_state_refused)
        config.report_error("max_resident_layers",
                            "layer streaming keeps block weights on the host, so the optimizer must run there too: "
                            "add optimizer_state = \"host\"");
    } else if (config.has("prefetch")) {
      config.report_error("prefetch", "prefetch is for layer streaming: set max_resident_layers as well");
    }
    const std::string activations = config.get_string("activations", "", {"device", "host"});
    const bool activations_refused = config.has("activations") && activations.empty();
    activations_ = activations == "host";
    if (!host_optimizer_ && !streaming_ && !activations_ && !optimizer_state_refused && !activations_refused)
      config.report_error("optimizer_state",
                          "nothing to offload: set optimizer_state = \"host\", "
                          "max_resident_layers = K, activations = \"host\", or a combination");
  }

  Status on_attach(HookContext& context) override {
    if (!host_optimizer_) return {};
    for (int layer = kGlobalParameters; layer < n_layer_; ++layer) {
      // Nothing is allocated yet: these only choose where each group will live.
      if (Status s = context.evict(layer, TensorGroup::optimizer_state); !s) return s;
      if (disk_optimizer_)
        if (Status s = context.evict_to_disk(layer, TensorGroup::optimizer_state); !s) return s;
      if (masters_on_disk_ != disk_optimizer_) {
        const Status s = masters_on_disk_ ? context.evict_to_disk(layer, TensorGroup::masters)
                                          : context.evict(layer, TensorGroup::masters);
        if (!s) return s;
      }
      if (Status s = context.evict(layer, TensorGroup::grads); !s) return s;
      if (streaming_ && layer >= 0)
        if (Status s = context.evict(layer, TensorGroup::weights); !s) return s;
      if (weights_on_disk_ && layer >= 0)
        if (Status s = context.evict_to_disk(layer, TensorGroup::weights); !s) return s;
    }
    return {};
  }

  Status before_forward(HookContext& context) override {
    if (!streaming_) return {};
    const int layer = context.layer();
    return bring_blocks(context, layer, std::min(layer + prefetch_, n_layer_ - 1), /*forward=*/true, false);
  }

  Status after_forward(HookContext& context) override {
    // The block below has been read by this one: its activations can go. The copy before it must
    // have landed, so that at most one block's activations are in flight, however slow the copies.
    if (activations_ && context.layer() > 0) {
      if (Status s = context.evict_async(context.layer() - 1, TensorGroup::activations); !s) return s;
      if (context.layer() > 1)
        if (Status s = context.wait_for(context.layer() - 2, TensorGroup::activations); !s) return s;
    }
    if (!host_optimizer_ || context.layer() != n_layer_ - 1) return {};
    // The head's backward comes next: start the gradients it and the last block accumulate into.
    if (Status s = context.fetch_async(kGlobalParameters, TensorGroup::grads); !s) return s;
    if (!streaming_) return context.fetch_async(n_layer_ - 1, TensorGroup::grads);
    return {};
  }

  Status before_backward(HookContext& context) override {
    const int layer = context.layer();
    // The host brings back this block's activations and its input; the rest of the block below's
    // come back on the copy stream while this one computes.
    if (activations_)
      if (layer > 0 && context.residence(layer - 1, TensorGroup::activations) == Residence::host)
        if (Status s = context.fetch_async(layer - 1, TensorGroup::activations); !s) return s;
    if (!host_optimizer_) return {};
    // The block above finished its backward and its gradients left for the host: wait until they
    // have (and with them every earlier move, such as the previous micro batch's), so at most two
    // blocks' gradients are ever on the device, however slow the copies.
    const Status landed =
        layer + 1 < n_layer_ ? context.wait_for(layer + 1, TensorGroup::grads) : context.wait_transfers();
    if (!landed) return landed;
    // The block above has stepped (under the fused update) and left the device: back to disk with it.
    if (weights_on_disk_ && layer + 1 < n_layer_)
      if (Status s = context.write_to_disk_async(layer + 1, TensorGroup::weights); !s) return s;
    if (streaming_) return bring_blocks(context, std::max(layer - prefetch_, 0), layer, /*forward=*/false, true);
    // Only gradients travel: fetch the next block's while this one computes.
    if (layer > 0) return context.fetch_async(layer - 1, TensorGroup::grads);
    return {};
  }

  Status after_backward(HookContext& context) override {
    if (!host_optimizer_) return {};
    const int layer = context.layer();
    const bool last_micro_batch = context.micro_batch() == context.micro_batches() - 1;
    // Gradients leave after every micro batch (and come back for the next one's accumulation, as
    // ZeRO-Offload accumulates on the host), so at most a few blocks' gradients are on the device.
    if (Status s = context.evict_async(layer, TensorGroup::grads); !s) return s;
    // This step needs the block's weights no more: free the device copy (the host copy is current).
    if (last_micro_batch) return context.evict_async(layer, TensorGroup::weights);
    return {};
  }

  Status before_step(HookContext& context) override {
    if (!host_optimizer_) return {};
    // The optimizer runs where the state is: bring everything it touches to the host (weights on
    // disk stay there: the update reads each block in with its state).
    for (int layer = kGlobalParameters; layer < n_layer_; ++layer) {
      if (context.residence(layer, TensorGroup::weights) != Residence::disk)
        if (Status s = context.evict_async(layer, TensorGroup::weights); !s) return s;
      if (Status s = context.evict_async(layer, TensorGroup::grads); !s) return s;
    }
    return context.wait_transfers();
  }

  Status after_step(HookContext& context) override {
    if (!host_optimizer_) return {};
    // Updated weights go back in the order the next forward wants them.
    if (Status s = context.fetch_async(kGlobalParameters, TensorGroup::weights); !s) return s;
    const int first_blocks = streaming_ ? std::min(prefetch_ + 1, n_layer_) : n_layer_;
    if (weights_on_disk_) {
      // Updated blocks still in host memory go back to disk, but the first ones the next forward
      // wants; those already on disk are read in for it.
      for (int layer = first_blocks; layer < n_layer_; ++layer)
        if (Status s = context.write_to_disk_async(layer, TensorGroup::weights); !s) return s;
      for (int layer = 0; layer < first_blocks; ++layer)
        if (Status s = context.read_from_disk_async(layer, TensorGroup::weights); !s) return s;
      return {};
    }
    for (int layer = 0; layer < first_blocks; ++layer)
      if (Status s = context.fetch_async(layer, TensorGroup::weights); !s) return s;
    return {};
  }

 private:
  // Streaming: make blocks [first, last] resident (weights, and gradients going backward), evicting
  // blocks outside that range while more than max_resident_layers would be on the device. Going
  // forward the blocks already computed are the ones to drop; going backward, those above.
  Status bring_blocks(HookContext& context, int first, int last, bool forward, bool with_grads) {
    for (int wanted = forward ? first : last; forward ? wanted <= last : wanted >= first; wanted += forward ? 1 : -1) {
      if (context.residence(wanted, TensorGroup::weights) != Residence::device) {
        while (resident_blocks(context) >= max_resident_)
          if (Status s = evict_one(context, first, last, forward); !s) return s;
        if (Status s = context.fetch_async(wanted, TensorGroup::weights); !s) return s;
      }
      if (with_grads && context.residence(wanted, TensorGroup::grads) != Residence::device)
        if (Status s = context.fetch_async(wanted, TensorGroup::grads); !s) return s;
    }
    // Weights on disk: the block after the window is read into host memory while this one
    // computes, so its fetch, a hook later, finds it there.
    const int next = forward ? last + 1 : first - 1;
    if (weights_on_disk_ && next >= 0 && next < n_layer_ &&
        context.residence(next, TensorGroup::weights) == Residence::disk)
      return context.read_from_disk_async(next, TensorGroup::weights);
    return {};
  }

  int resident_blocks(const HookContext& context) const {
    int count = 0;
    for (int layer = 0; layer < n_layer_; ++layer)
      count += context.residence(layer, TensorGroup::weights) == Residence::device ? 1 : 0;
    return count;
  }

  Status evict_one(HookContext& context, int first, int last, bool forward) {
    std::vector<int> order;  // preferred victims first
    if (forward) {
      for (int layer = 0; layer < first; ++layer) order.push_back(layer);
      for (int layer = n_layer_ - 1; layer > last; --layer) order.push_back(layer);
    } else {
      for (int layer = n_layer_ - 1; layer > last; --layer) order.push_back(layer);
      for (int layer = 0; layer < first; ++layer) order.push_back(layer);
    }
    for (int layer : order) {
      if (context.residence(layer, TensorGroup::weights) != Residence::device) continue;
      if (Status s = context.evict_async(layer, TensorGroup::weights); !s) return s;
      if (weights_on_disk_)  // dropped when unchanged since it was read, else written
        if (Status s = context.write_to_disk_async(layer, TensorGroup::weights); !s) return s;
      if (context.residence(layer, TensorGroup::grads) == Residence::device)
        return context.evict_async(layer, TensorGroup::grads);
      return {};
    }
    return Status::error("offload: no block outside [" + std::to_string(first) + ", " + std::to_string(last) +
                         "] to evict; max_resident_layers is too small for this prefetch");
  }

  int n_layer_;
  bool host_optimizer_ = false;
  bool disk_optimizer_ = false;   // the optimizer state in the disk tier (host_optimizer_ too)
  bool masters_on_disk_ = false;  // the masters in the disk tier (with the state, or alone)
  bool weights_on_disk_ = false;  // the block weights in the disk tier (streaming_ too)
  bool streaming_ = false;
  bool activations_ = false;
  int max_resident_ = 0;
  int prefetch_ = 0;
};

constexpr const char* kKeys[] = {"optimizer_state", "masters", "max_resident_layers",
                                 "prefetch",        "weights", "activations"};
const FactoryDescriptor kFactories[] = {make_factory<MemoryStrategy, Offload>(
    "offload",
    "optimizer state, masters, block weights and activations in host memory or on disk, moved on a copy stream",
    name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(offload, "1.0.0", kFactories)
