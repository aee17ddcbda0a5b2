// A third-party memory strategy: activation offloading by a policy of its own. Every `every`-th
// block (0, every, 2 every, ...; never the last, whose backward comes first) sends its saved
// activations to host memory once the next block's forward has read its output, and gets them
// back on the copy stream while the block above computes its backward. The others keep theirs on the device.
// Nothing is recomputed, so the losses are bitwise those of a run without it, and the device
// holds fewer activations: a middle ground between keeping everything and `offload`'s
// activations = "host", which moves every block.
//
//   every = 2        move blocks 0, 2, 4, ...
//
// It learns what a block holds from the host (HookContext::tensors) instead of assuming a model
// family, and logs it once. It includes only SDK headers.
#include <algorithm>
#include <cstdint>
#include <string>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

class AlternateOffload final : public MemoryStrategy {
 public:
  AlternateOffload(ConfigView& config, HostServices& host) : host_(host), n_layer_(host.model().n_layer) {
    every_ = static_cast<int>(config.get_int("every", 2, 1, 1 << 20));
  }

  Status on_attach(HookContext& context) override {
    std::uint64_t bytes = 0;
    int tensors = 0;
    for (const TensorInfo& tensor : context.tensors(0))
      if (tensor.group == TensorGroup::activations && tensor.category == MemoryCategory::activations)
        bytes += tensor.bytes, ++tensors;
    int moved = 0;
    for (int layer = 0; layer < n_layer_; ++layer) moved += moves(layer) ? 1 : 0;
    host_.log(LogLevel::info, "alternate_offload: moves the activations of " + std::to_string(moved) + " of " +
                                  std::to_string(n_layer_) + " blocks to the host (" + std::to_string(tensors) +
                                  " tensors, " + std::to_string(bytes >> 10) + " KiB per block)");
    return {};
  }

  Status after_forward(HookContext& context) override {
    const int below = context.layer() - 1;
    if (below >= 0 && moves(below))
      if (Status s = context.evict_async(below, TensorGroup::activations); !s) return s;
    // A copy frees device memory only once it lands: bound what is in flight to one block.
    if (below >= 1) return context.wait_for(below - 1, TensorGroup::activations);
    return {};
  }

  Status before_backward(HookContext& context) override {
    // The host brings back what this block's backward reads (its activations and its input); the
    // block below's come back on the copy stream while this one computes.
    const int below = context.layer() - 1;
    if (below >= 0 && context.residence(below, TensorGroup::activations) == Residence::host)
      return context.fetch_async(below, TensorGroup::activations);
    return {};
  }

 private:
  bool moves(int layer) const { return layer < n_layer_ - 1 && layer % every_ == 0; }

  HostServices& host_;
  int n_layer_;
  int every_ = 2;
};

constexpr const char* kKeys[] = {"every"};
const FactoryDescriptor kFactories[] = {make_factory<MemoryStrategy, AlternateOffload>(
    "alternate_offload", "moves every k-th block's activations to host memory, bitwise neutral", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(alternate_offload, "1.0.0", kFactories)
