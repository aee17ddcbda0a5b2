#include "lora_adapter.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "strata/counter_random.hpp"

namespace strata::lora {

namespace {

Weight f32_weight(const float* data) {
  return Weight{data, DType::f32, nullptr, 0};
}

}  // namespace

Status LoraAdapter::check(std::string_view target, const MatmulShape& shape) const {
  const std::int64_t smallest = std::min(shape.in_features, shape.out_features);
  if (options_.rank >= smallest)
    return Status::error("rank = " + std::to_string(options_.rank) +
                         " must be below min(in, out) = " + std::to_string(smallest) + " of target '" +
                         std::string(target) + "' (" + std::to_string(shape.in_features) + " x " +
                         std::to_string(shape.out_features) + "): a full-rank update is no longer low-rank");
  return {};
}

// Dropout is left out: it changes training, not the trained adapter's product.
std::string LoraAdapter::describe() const {
  char text[64];
  std::snprintf(text, sizeof text, "lora rank %d alpha %g", options_.rank, options_.alpha);
  return text;
}

std::vector<AdapterTensor> LoraAdapter::tensors(const MatmulShape& shape) const {
  return {{"lora_A", {shape.in_features, options_.rank}}, {"lora_B", {options_.rank, shape.out_features}}};
}

// Forward: [dropped x (N, in) when dropout] [h (N, r)] [x A B (N, out)]. Backward: [dropped x]
// [h (N, r)] [dh (N, r)] [d(dropped x) (N, in) when dropout].
std::int64_t LoraAdapter::scratch_floats(const MatmulShape& shape) const noexcept {
  const std::int64_t N = shape.rows, r = options_.rank;
  const std::int64_t dropped = options_.dropout > 0.0 ? N * shape.in_features : 0;
  return std::max(dropped + N * r + N * shape.out_features, 2 * dropped + 2 * N * r);
}

void LoraAdapter::init(const AdaptedMatrix& matrix, std::span<const std::span<float>> values,
                       std::uint64_t seed) const {
  const std::span<float> a = values[0];
  const float bound = 1.0f / std::sqrt(static_cast<float>(matrix.shape.in_features));
  const std::uint64_t stream = splitmix64(seed ^ splitmix64(0x4c6f5241ull + static_cast<std::uint64_t>(matrix.index)));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = (2.0f * unit_from_bits(splitmix64(stream + i)) - 1.0f) * bound;
  std::fill(values[1].begin(), values[1].end(), 0.0f);
}

void LoraAdapter::apply_dropout(float* into, const float* x, std::int64_t count, const AdaptedMatrix& matrix,
                                const AdapterPass& pass, bool accumulate) const noexcept {
  const auto p = static_cast<float>(options_.dropout);
  const DropoutCall call{into, x, count, dropout_stream(pass.sequence, matrix.index), p, 1.0f / (1.0f - p), accumulate};
  if (device_dropout_) {
    device_dropout_(call);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    const float value = dropped(x[i], call.stream, i, call.p, call.keep_scale);
    into[i] = accumulate ? into[i] + value : value;
  }
}

float* LoraAdapter::scaled_low_rank(Ops& ops, const AdaptedMatrix& matrix, const AdapterPass& pass, const float* inp,
                                    const float* a, float* scratch, const float*& x) const noexcept {
  const std::int64_t N = matrix.shape.rows, in = matrix.shape.in_features, r = options_.rank;
  x = inp;
  if (drops(pass)) {
    apply_dropout(scratch, inp, N * in, matrix, pass, false);
    x = scratch;
    scratch += N * in;
  }
  ops.matmul_forward(scratch, x, f32_weight(a), nullptr, {N, in, r, WeightLayout::in_out}, {});
  ops.scale(scratch, scale(), N * r);
  return scratch;
}

void LoraAdapter::forward(Ops& ops, const AdaptedMatrix& matrix, const AdapterPass& pass, float* out, const float* inp,
                          AdapterTensors tensors, Scratch scratch) const noexcept {
  const std::int64_t N = matrix.shape.rows, out_features = matrix.shape.out_features;
  const std::int64_t r = options_.rank;
  const float* x = nullptr;
  float* h = scaled_low_rank(ops, matrix, pass, inp, tensors.values[0], scratch.data, x);
  float* product = h + N * r;
  ops.matmul_forward(product, h, f32_weight(tensors.values[1]), nullptr, {N, r, out_features, WeightLayout::in_out},
                     {});
  ops.residual_forward(out, out, product, N * out_features);
}

// With hs = s (x A): dB += hsᵀ dout, d(hs) = dout Bᵀ, dh = s d(hs), dA += xᵀ dh, dx += dh Aᵀ.
void LoraAdapter::backward(Ops& ops, const AdaptedMatrix& matrix, const AdapterPass& pass, float* dinp,
                           const float* dout, const float* inp, AdapterTensors tensors,
                           Scratch scratch) const noexcept {
  const std::int64_t N = matrix.shape.rows, in = matrix.shape.in_features, out_features = matrix.shape.out_features;
  const std::int64_t r = options_.rank;
  const bool dropping = drops(pass);
  const float* x = nullptr;
  float* h = scaled_low_rank(ops, matrix, pass, inp, tensors.values[0], scratch.data, x);
  float* dh = h + N * r;
  ops.matmul_backward(dh, tensors.grads[1], nullptr, dout, h, f32_weight(tensors.values[1]),
                      {N, r, out_features, WeightLayout::in_out}, {}, GradientWrite::overwrite);
  ops.scale(dh, scale(), N * r);
  if (!dropping) {
    ops.matmul_backward(dinp, tensors.grads[0], nullptr, dh, x, f32_weight(tensors.values[0]),
                        {N, in, r, WeightLayout::in_out}, {}, GradientWrite::accumulate);
    return;
  }
  float* dx_dropped = dh + N * r;
  ops.matmul_backward(dx_dropped, tensors.grads[0], nullptr, dh, x, f32_weight(tensors.values[0]),
                      {N, in, r, WeightLayout::in_out}, {}, GradientWrite::overwrite);
  apply_dropout(dinp, dx_dropped, N * in, matrix, pass, true);
}

void LoraAdapter::merge(std::span<float> weight, const MatmulShape& shape,
                        std::span<const std::span<const float>> values) const {
  const std::int64_t in = shape.in_features, out = shape.out_features, r = options_.rank;
  const std::span<const float> a = values[0], b = values[1];
  const double s = options_.alpha / options_.rank;
  for (std::int64_t i = 0; i < in; ++i)
    for (std::int64_t o = 0; o < out; ++o) {
      double sum = 0.0;
      for (std::int64_t k = 0; k < r; ++k)
        sum += static_cast<double>(a[static_cast<std::size_t>(i * r + k)]) * b[static_cast<std::size_t>(k * out + o)];
      const std::size_t at = static_cast<std::size_t>(shape.layout == WeightLayout::in_out ? i * out + o : o * in + i);
      weight[at] += static_cast<float>(s * sum);
    }
}

}  // namespace strata::lora
