#pragma once
// LoRA (Hu et al. 2021) as a matmul adapter: a frozen matrix W gains a trainable low-rank update,
//   y = x W + s · (dropout(x) A) B,   A (in, r), B (r, out), s = alpha / r,
// with A drawn as PEFT draws it (uniform in ±1/sqrt(in), Kaiming with a = sqrt(5)) and B zero, so
// training starts at the base model exactly. Forward and backward run through the backend's op
// table (two thin matmuls, a scale and an add); the rank-r product h = x A is recomputed in
// backward instead of kept, so activation checkpointing has nothing of the adapter to drop or
// rebuild. Dropout masks are a hash of (micro batch, matrix, element) (dropout_mask.hpp): the same
// in a recomputed forward, on resume, at any thread count and on either device. They are applied
// by a host loop on the CPU backend, and by the device kernel the plugin passes in elsewhere.
#include <cstdint>
#include <functional>

#include "dropout_mask.hpp"
#include "strata/matmul_adapter.hpp"

namespace strata::lora {

struct LoraOptions {
  int rank = 8;
  double alpha = 16.0;
  double dropout = 0.0;
};

// Applies one dropout call on the device the run's tensors live on; empty: on the host.
using DeviceDropout = std::function<void(const DropoutCall&)>;

class LoraAdapter final : public MatmulAdapter {
 public:
  explicit LoraAdapter(LoraOptions options, DeviceDropout device_dropout = {})
      : options_(options), device_dropout_(std::move(device_dropout)) {}
  float scale() const noexcept { return static_cast<float>(options_.alpha / options_.rank); }

  Status check(std::string_view target, const MatmulShape& shape) const override;
  std::string describe() const override;
  std::vector<AdapterTensor> tensors(const MatmulShape& shape) const override;
  std::int64_t scratch_floats(const MatmulShape& shape) const noexcept override;
  void init(const AdaptedMatrix& matrix, std::span<const std::span<float>> values, std::uint64_t seed) const override;
  void forward(Ops& ops, const AdaptedMatrix& matrix, const AdapterPass& pass, float* out, const float* inp,
               AdapterTensors tensors, Scratch scratch) const noexcept override;
  void backward(Ops& ops, const AdaptedMatrix& matrix, const AdapterPass& pass, float* dinp, const float* dout,
                const float* inp, AdapterTensors tensors, Scratch scratch) const noexcept override;
  void merge(std::span<float> weight, const MatmulShape& shape,
             std::span<const std::span<const float>> values) const override;

 private:
  bool drops(const AdapterPass& pass) const noexcept { return pass.training && options_.dropout > 0.0; }
  // x (the input, or its dropped copy at the start of `scratch`) and hs = s (x A) after it (N, r);
  // returns hs. Forward and backward both start here: backward recomputes hs instead of keeping it.
  float* scaled_low_rank(Ops& ops, const AdaptedMatrix& matrix, const AdapterPass& pass, const float* inp,
                         const float* a, float* scratch, const float*& x) const noexcept;
  // into = x ⊙ mask / (1 - p) (forward), or into += x ⊙ mask / (1 - p) (backward).
  void apply_dropout(float* into, const float* x, std::int64_t count, const AdaptedMatrix& matrix,
                     const AdapterPass& pass, bool accumulate) const noexcept;

  LoraOptions options_;
  DeviceDropout device_dropout_;
};

}  // namespace strata::lora
