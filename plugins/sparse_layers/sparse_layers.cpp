// Sparse-layer training: train the first N and the last M blocks (and optionally the embeddings and
// the head) and leave the middle alone. A frozen parameter has no gradient row, no optimizer state
// and no master copy, which is where fine-tuning's memory goes; the host builds the model that way
// from this plugin's plan (strata/parameter_plan.hpp).
//
//   train_first      = 0        blocks 0..N-1 train
//   train_last       = 2        blocks L-M..L-1 train
//   middle           = "freeze" the blocks between run forward, and the gradient flows through their
//                               activations to the first ones, but their weight gradients are not
//                               computed; "skip": they are the identity (not run at all)
//   train_embeddings = false    the token (and position) embeddings
//   train_head       = true     the final norm and the LM head (GPT-2's head is tied to the token
//                               embedding, which then trains either way)
#include <string>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

class SparseLayers final : public MemoryStrategy {
 public:
  SparseLayers(ConfigView& config, HostServices& host) : n_layer_(host.model().n_layer) {
    first_ = static_cast<int>(config.get_int("train_first", 0, 0, n_layer_));
    last_ = static_cast<int>(config.get_int("train_last", 2, 0, n_layer_));
    skip_ = config.get_string("middle", "freeze", {"freeze", "skip"}) == "skip";
    embeddings_ = config.get_bool("train_embeddings", false);
    head_ = config.get_bool("train_head", true);
    if (first_ + last_ > n_layer_)
      config.report_error("train_last", "train_first + train_last = " + std::to_string(first_ + last_) +
                                            " is more than the model's n_layer = " + std::to_string(n_layer_));
    if (first_ + last_ == 0 && !embeddings_ && !head_)
      config.report_error("train_first",
                          "nothing would train: set train_first, train_last, train_embeddings or "
                          "train_head");
  }

  Status plan_parameters(ParameterPlan& plan) override {
    for (int layer = first_; layer < n_layer_ - last_; ++layer) {
      if (skip_)
        plan.skip_block(layer);
      else
        plan.freeze_block(layer);
    }
    if (!embeddings_) plan.freeze_embeddings();
    if (!head_) plan.freeze_head();
    return {};
  }

 private:
  int n_layer_;
  int first_ = 0;
  int last_ = 0;
  bool skip_ = false;
  bool embeddings_ = false;
  bool head_ = true;
};

constexpr const char* kKeys[] = {"train_first", "train_last", "middle", "train_embeddings", "train_head"};
const FactoryDescriptor kFactories[] = {make_factory<MemoryStrategy, SparseLayers>(
    "sparse_layers", "train the first and last blocks, freeze or skip the middle", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(sparse_layers, "1.0.0", kFactories)
