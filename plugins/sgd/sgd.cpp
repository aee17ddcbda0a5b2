// SGD with optional momentum and decoupled weight decay, same schedule as adamw.
#include <cmath>
#include <string>

#include "../adamw/lr_schedule.hpp"
#include "strata/plugin.hpp"

namespace {

using namespace strata;

class Sgd final : public Optimizer {
 public:
  Sgd(ConfigView& config, HostServices& host) : host_(host) {
    momentum_ = static_cast<float>(config.get_double("momentum", 0.9, 0.0, 0.999999));
    weight_decay_ = static_cast<float>(config.get_double("weight_decay", 0.0, 0.0, 1.0));
    grad_clip_ = config.get_double("grad_clip", 0.0, 0.0, 1e9);
    schedule_ = config.get_string("schedule", "cosine", {"cosine", "constant"});
    min_lr_ratio_ = config.get_double("min_lr_ratio", 0.1, 0.0, 1.0);
  }

  int state_buffers() const noexcept override { return momentum_ > 0.0f ? 1 : 0; }

  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) noexcept override {
    return guarded([&] {
      double sum_of_squares = 0.0;
      for (const ParamSlot& slot : slots) sum_of_squares += host_.kernels().sum_of_squares(slot.grad);
      report.grad_norm = std::sqrt(sum_of_squares);
      report.lr = plugins::scheduled_lr(info, schedule_.c_str(), min_lr_ratio_);
      const float scale =
          grad_clip_ > 0.0 && report.grad_norm > grad_clip_ ? static_cast<float>(grad_clip_ / report.grad_norm) : 1.0f;
      const auto lr = static_cast<float>(report.lr);
      for (ParamSlot& slot : slots) {
        const float decay = 1.0f - lr * (slot.decay ? weight_decay_ : 0.0f);
        const std::size_t count = slot.param.size();
        if (momentum_ > 0.0f) {
          float* velocity = slot.state[0].data();
#pragma omp parallel for simd schedule(static)
          for (std::size_t i = 0; i < count; ++i) {
            velocity[i] = momentum_ * velocity[i] + slot.grad[i] * scale;
            slot.param[i] = slot.param[i] * decay - lr * velocity[i];
          }
        } else {
#pragma omp parallel for simd schedule(static)
          for (std::size_t i = 0; i < count; ++i) slot.param[i] = slot.param[i] * decay - lr * slot.grad[i] * scale;
        }
      }
    });
  }

 private:
  HostServices& host_;
  float momentum_ = 0.9f;
  float weight_decay_ = 0.0f;
  double grad_clip_ = 0.0;
  std::string schedule_;
  double min_lr_ratio_ = 0.1;
};

constexpr const char* kKeys[] = {"momentum", "weight_decay", "grad_clip", "schedule", "min_lr_ratio", nullptr};
const FactoryDescriptor kFactories[] = {make_factory<Optimizer, Sgd>("sgd", "SGD with momentum", kKeys)};

}  // namespace

STRATA_DEFINE_PLUGIN(sgd, "1.0.0", kFactories)
