#pragma once
// What the host lends a plugin: logging, the model's shape, and the host's kernels (so an
// optimizer plugin calls the same vectorized AdamW the engine is tested with, without linking
// against core).
#include <cstdint>
#include <span>
#include <string_view>

namespace strata {

enum class LogLevel : std::uint8_t { debug, info, warn, error };

struct ModelInfo {
  int n_layer = 0;
  int n_head = 0;
  int d_model = 0;
  int vocab = 0;
  int seq_len = 0;
  std::int64_t parameter_count = 0;
};

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  std::int64_t step = 1;    // 1-based, for bias correction
  float grad_scale = 1.0f;  // gradients are multiplied by this first (global-norm clipping)
};

class KernelLibrary {
 public:
  virtual ~KernelLibrary() = default;
  // AdamW with decoupled weight decay and bias correction, in place over param/m/v.
  virtual void adamw_update(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
                            const AdamWHyper& hyper) noexcept = 0;
  // Sum of squares in double, for global-norm clipping.
  virtual double sum_of_squares(std::span<const float> values) noexcept = 0;
};

class HostServices {
 public:
  virtual ~HostServices() = default;
  virtual void log(LogLevel level, std::string_view message) noexcept = 0;
  virtual const ModelInfo& model() const noexcept = 0;
  virtual KernelLibrary& kernels() noexcept = 0;
};

}  // namespace strata
