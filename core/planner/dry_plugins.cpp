#include "core/planner/dry_plugins.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace strata {

namespace {

constexpr std::int64_t kTimedRows = 256;    // a plugin's product on more rows is timed at 256 and 512
constexpr double kOnTheSpotSeconds = 0.02;  // a plan times each kernel briefly: three runs, or this long

// Timing a kernel on the spot is not the step's host time: its wall time is taken off the phase's.
class Discounted {
 public:
  explicit Discounted(DryBackend& backend) : backend_(backend), start_(std::chrono::steady_clock::now()) {}
  ~Discounted() { backend_.discount(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()); }
  Discounted(const Discounted&) = delete;
  Discounted& operator=(const Discounted&) = delete;

 private:
  DryBackend& backend_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

double DryKernel::sequence_seconds(const AttentionShape& shape, bool backward) {
  const std::string key = identity_ + (backward ? "|backward|" : "|forward|") + std::to_string(shape.seq_len) + "," +
                          std::to_string(shape.n_head) + "," + std::to_string(shape.n_kv_head) + "," +
                          std::to_string(shape.head_dim);
  if (const auto found = timings_->find(key); found != timings_->end()) return found->second;
  const Discounted timing(backend_);
  AttentionShape one = shape;
  one.batch = 1;
  const std::int64_t q_width = static_cast<std::int64_t>(shape.n_head) * shape.head_dim;
  const std::int64_t kv_width = static_cast<std::int64_t>(shape.n_kv_head) * shape.head_dim;
  const auto rows = static_cast<std::size_t>(shape.seq_len);
  double seconds = -1.0;
  try {
    std::vector<float> q(rows * q_width, 0.01f), k(rows * kv_width, 0.02f), v(rows * kv_width, 0.03f);
    std::vector<float> out(q.size()), dout(q.size(), 0.01f), dq(q.size()), dk(k.size()), dv(v.size());
    std::vector<float> saved(static_cast<std::size_t>(std::max<std::int64_t>(kernel_.saved_floats(one), 1)));
    std::vector<float> scratch(
        static_cast<std::size_t>(std::max<std::int64_t>(kernel_.backward_scratch_floats(one), 1)));
    const AttentionInputs in{q.data(), k.data(), v.data(), q_width, kv_width};
    const AttentionGrads grads{dq.data(), dk.data(), dv.data(), q_width, kv_width};
    const KernelCall call{0, 0, 0, KernelPass::training, 0};
    (void)kernel_.attention_forward(call, one, out.data(), saved.data(), in);  // what backward reads
    seconds = backward
                  ? measure_seconds(
                        [&] {
                          (void)kernel_.attention_backward(call, one, grads, dout.data(), out.data(), in, saved.data(),
                                                           scratch.data());
                        },
                        kOnTheSpotSeconds)
                  : measure_seconds([&] { (void)kernel_.attention_forward(call, one, out.data(), saved.data(), in); },
                                    kOnTheSpotSeconds);
  } catch (...) {  // a kernel that cannot be timed is priced as the backend's own attention
    seconds = -1.0;
  }
  return (*timings_)[key] = seconds;
}

Status DryKernel::attention_forward(const KernelCall&, const AttentionShape& shape, float*, float*,
                                    const AttentionInputs&) {
  const double seconds = timings_ != nullptr ? sequence_seconds(shape, false) : -1.0;
  backend_.record("attention_forward", attention_flops(shape), seconds < 0.0 ? -1.0 : seconds * shape.batch);
  return {};
}

Status DryKernel::attention_backward(const KernelCall&, const AttentionShape& shape, const AttentionGrads&,
                                     const float*, const float*, const AttentionInputs&, const float*, float*) {
  const double seconds = timings_ != nullptr ? sequence_seconds(shape, true) : -1.0;
  backend_.record("attention_backward", attention_flops(shape), seconds < 0.0 ? -1.0 : seconds * shape.batch);
  return {};
}

double DryQuantizer::measure(const MatmulShape& shape, int kind) {
  const std::string key = identity_ + "|" + std::to_string(kind) + "|" + std::to_string(shape.rows) + "," +
                          std::to_string(shape.in_features) + "," + std::to_string(shape.out_features) + "," +
                          std::to_string(static_cast<int>(shape.layout));
  if (const auto found = timings_->find(key); found != timings_->end()) return found->second;
  const Discounted timing(backend_);
  double seconds = -1.0;
  QuantizedLayout layout;
  if (quantizer_.layout(shape, layout)) {
    const auto weights = static_cast<std::size_t>(shape.in_features * shape.out_features);
    const auto in_rows = static_cast<std::size_t>(shape.rows * shape.in_features);
    const auto out_rows = static_cast<std::size_t>(shape.rows * shape.out_features);
    std::vector<float> master(weights, 0.01f);
    // The side data as f32-aligned room (int8's scales are floats).
    std::vector<float> side((layout.side_bytes + sizeof(float) - 1) / sizeof(float) + 1);
    std::vector<std::byte> values(storage_bytes(quantizer_.dtype(), static_cast<std::int64_t>(weights)));
    void* side_data = layout.side_bytes > 0 ? side.data() : nullptr;
    quantizer_.quantize({values.data(), side_data, layout.group_size}, master.data(), shape);
    const Weight weight{values.data(), quantizer_.dtype(), side_data, layout.group_size};
    // The model's weight scratch: a whole matrix, raised to what the quantizer asks, up to 2^20 floats.
    std::vector<float> scratch(static_cast<std::size_t>(std::min<std::int64_t>(
        std::max<std::int64_t>(static_cast<std::int64_t>(weights), quantizer_.scratch_floats(shape)), 1 << 20)));
    const Scratch room{scratch.data(), static_cast<std::int64_t>(scratch.size())};
    std::vector<float> inp(in_rows, 0.01f), out(out_rows, 0.0f), dinp(in_rows), dweight(weights);
    if (kind == 0)
      seconds = measure_seconds(
          [&] {
            quantizer_.matmul_forward({out.data(), inp.data(), weight, nullptr, shape, room});
          },
          kOnTheSpotSeconds);
    else
      seconds = measure_seconds(
          [&] {
            quantizer_.matmul_backward({(kind & 1) != 0 ? dinp.data() : nullptr,
                                        (kind & 2) != 0 ? dweight.data() : nullptr, nullptr, out.data(), inp.data(),
                                        weight, shape, room, GradientWrite::overwrite});
          },
          kOnTheSpotSeconds);
  }
  return (*timings_)[key] = seconds;
}

double DryQuantizer::product_seconds(const MatmulShape& shape, int kind) noexcept {
  try {
    if (shape.rows <= 2 * kTimedRows) return measure(shape, kind);
    MatmulShape low = shape, high = shape;
    low.rows = kTimedRows;
    high.rows = 2 * kTimedRows;
    const double at_low = measure(low, kind);
    const double at_high = measure(high, kind);
    if (at_low < 0.0 || at_high < 0.0) return -1.0;
    const double per_row = std::max(at_high - at_low, 0.0) / static_cast<double>(kTimedRows);
    return at_high + per_row * static_cast<double>(shape.rows - high.rows);
  } catch (...) {  // out of memory for the operands: priced by the calibration instead
    return -1.0;
  }
}

void DryQuantizer::quantize(QuantizedMatrix, const float*, const MatmulShape& shape) noexcept {
  backend_.record("narrow", static_cast<double>(shape.in_features) * static_cast<double>(shape.out_features));
}

void DryQuantizer::matmul_forward(const op::MatmulForward& call) noexcept {
  backend_.record("matmul_forward_bf16", matmul_flops(call.shape),
                  timings_ != nullptr ? product_seconds(call.shape, 0) : -1.0);
}

void DryQuantizer::matmul_backward(const op::MatmulBackward& call) noexcept {
  const MatmulShape& shape = call.shape;
  const float* dinp = call.dinp;
  const float* dweight = call.dweight;
  const int kind = (dinp != nullptr ? 1 : 0) | (dweight != nullptr ? 2 : 0);
  backend_.record("matmul_backward_bf16",
                  matmul_flops(shape) * ((dinp != nullptr ? 1.0 : 0.0) + (dweight != nullptr ? 1.0 : 0.0)),
                  timings_ != nullptr && kind != 0 ? product_seconds(shape, kind) : -1.0);
}

}  // namespace strata
