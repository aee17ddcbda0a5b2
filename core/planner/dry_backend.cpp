#include "core/planner/dry_backend.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "kernels/cpu/cpu_ops.hpp"

namespace strata {

namespace {

// Address space without pages: untouched memory costs nothing, however large the plan.
class ReservedResource final : public MemoryResource {
 public:
  void* allocate(std::uint64_t bytes) override {
    void* pointer = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (pointer == MAP_FAILED) throw std::bad_alloc();
    return pointer;
  }
  void deallocate(void* pointer, std::uint64_t bytes) noexcept override { ::munmap(pointer, bytes); }
};

// Copies move nothing, and land only when waited for: a copy's source is freed once the copy has
// landed, and a run whose copies are slow to land holds those sources longest. The plan predicts
// that run, the upper bound; a run whose copies land early peaks lower.
class DryCopyStream final : public CopyStream {
 public:
  explicit DryCopyStream(DryBackend& backend) : backend_(backend) {}
  CopyTicket enqueue(void* /*destination*/, const void* /*source*/, std::uint64_t bytes) override {
    backend_.record("copy_stream", static_cast<double>(bytes));
    return ++issued_;
  }
  double wait(CopyTicket ticket) override {
    landed_ = std::max(landed_, ticket);
    return 0.0;
  }
  CopyTicket completed() const override { return landed_; }
  double busy_seconds() const override { return 0.0; }

 private:
  DryBackend& backend_;
  CopyTicket issued_ = 0;
  CopyTicket landed_ = 0;
};

double elements(std::int64_t rows, std::int64_t channels) {
  return static_cast<double>(rows) * static_cast<double>(channels);
}

}  // namespace

double matmul_flops(const MatmulShape& shape) {
  return 2.0 * static_cast<double>(shape.rows) * static_cast<double>(shape.in_features) *
         static_cast<double>(shape.out_features);
}

// Causal: half of the T x T products, Q K^T and P V.
double attention_flops(const AttentionShape& shape) {
  return 2.0 * shape.batch * static_cast<double>(shape.n_head) * shape.seq_len * static_cast<double>(shape.seq_len) *
         shape.head_dim;
}

namespace {

// The op table: each op logs its name and its work (flops for products, elements or bytes for the
// rest) and computes nothing. Sizes (what attention saves) are the CPU table's, which the run being
// planned would use; the ops it offers are the CPU's, and for a GPU's run also the bf16-input
// matmuls, whose use adds rows (the LM head's narrowed hidden state).
class DryOps final : public Ops {
 public:
  DryOps(DryBackend& backend, bool bf16_input_matmuls)
      : backend_(backend), sizes_(cpu::make_cpu_ops()), bf16_input_matmuls_(bf16_input_matmuls) {}

  std::string_view backend() const noexcept override { return "cpu"; }
  bool has(Op op) const noexcept override {
    return op == Op::matmul_bf16_input ? bf16_input_matmuls_ : sizes_->has(op);
  }

  void matmul_forward(float*, const float*, Weight weight, const float*, const MatmulShape& shape,
                      Scratch) noexcept override {
    log(weight.dtype == DType::bf16 ? "matmul_forward_bf16" : "matmul_forward_f32", matmul_flops(shape));
  }
  void matmul_backward(float* dinp, float* dweight, float*, const float*, const float*, Weight weight,
                       const MatmulShape& shape, Scratch, GradientWrite) noexcept override {
    log(weight.dtype == DType::bf16 ? "matmul_backward_bf16" : "matmul_backward_f32",
        matmul_flops(shape) * ((dinp != nullptr ? 1.0 : 0.0) + (dweight != nullptr ? 1.0 : 0.0)));
  }
  void layernorm_forward(float*, float*, float*, const float*, const float*, const float*, std::int64_t rows,
                         std::int64_t channels, float) noexcept override {
    log("layernorm_forward", elements(rows, channels));
  }
  void layernorm_backward(float*, float*, float*, const float*, const float*, const float*, const float*, const float*,
                          std::int64_t rows, std::int64_t channels) noexcept override {
    log("layernorm_backward", elements(rows, channels));
  }
  void rmsnorm_forward(float*, float*, const float*, const float*, std::int64_t rows, std::int64_t channels,
                       float) noexcept override {
    log("rmsnorm_forward", elements(rows, channels));
  }
  void rmsnorm_backward(float*, float*, const float*, const float*, const float*, const float*, std::int64_t rows,
                        std::int64_t channels) noexcept override {
    log("rmsnorm_backward", elements(rows, channels));
  }
  std::int64_t attention_saved_floats(const AttentionShape& shape) const noexcept override {
    return sizes_->attention_saved_floats(shape);
  }
  std::int64_t attention_scratch_floats(const AttentionShape& shape) const noexcept override {
    return sizes_->attention_scratch_floats(shape);
  }
  void attention_forward(const AttentionShape& shape, float*, float*, const AttentionInputs&) noexcept override {
    log("attention_forward", attention_flops(shape));
  }
  void attention_backward(const AttentionShape& shape, const AttentionGrads&, const float*, const AttentionInputs&,
                          const float*, float*) noexcept override {
    log("attention_backward", attention_flops(shape));
  }
  void gelu_forward(float*, const float*, std::int64_t count) noexcept override { log("gelu_forward", count); }
  void gelu_backward(float*, const float*, const float*, std::int64_t count, GradientWrite) noexcept override {
    log("gelu_backward", count);
  }
  void swiglu_forward(float*, const float*, const float*, std::int64_t count) noexcept override {
    log("swiglu_forward", count);
  }
  void swiglu_backward(float*, float*, const float*, const float*, const float*, std::int64_t count,
                       GradientWrite) noexcept override {
    log("swiglu_backward", count);
  }
  void rope(float*, std::int64_t rows, std::int64_t, int, int n_heads, int head_dim, float,
            bool inverse) noexcept override {
    log(inverse ? "rope_backward" : "rope_forward", elements(rows, static_cast<std::int64_t>(n_heads) * head_dim));
  }
  void residual_forward(float*, const float*, const float*, std::int64_t count) noexcept override {
    log("residual_forward", count);
  }
  void embedding_forward(float*, const std::int32_t*, Weight, Weight, std::int64_t batch, std::int64_t seq_len,
                         std::int64_t channels) noexcept override {
    log("embedding_forward", elements(batch * seq_len, channels));
  }
  void embedding_backward(float*, float*, const float*, const std::int32_t*, std::int64_t batch, std::int64_t seq_len,
                          std::int64_t channels) noexcept override {
    log("embedding_backward", elements(batch * seq_len, channels));
  }
  void cross_entropy_forward_chunk(float*, float*, float*, const float*, const std::int32_t*, std::int64_t rows,
                                   std::int64_t, std::int64_t width, std::int64_t) noexcept override {
    log("cross_entropy_forward", elements(rows, width));
  }
  void cross_entropy_finish(float*, float*, const float*, const float*, const float*,
                            std::int64_t rows) noexcept override {
    log("cross_entropy_finish", rows);
  }
  void cross_entropy_backward_chunk(float*, const float*, const float*, const std::int32_t*, float, std::int64_t rows,
                                    std::int64_t, std::int64_t width, std::int64_t) noexcept override {
    log("cross_entropy_backward", elements(rows, width));
  }
  void adamw_update(float*, const float*, float*, float*, std::int64_t count, const AdamWHyper&) noexcept override {
    log("adamw_update", count);
  }
  void sgd_update(float*, const float*, float*, std::int64_t count, const SgdHyper&) noexcept override {
    log("sgd_update", count);
  }
  void widen(float*, const std::uint16_t*, std::int64_t count) noexcept override { log("widen", count); }
  void narrow(std::uint16_t*, const float*, std::int64_t count) noexcept override { log("narrow", count); }
  void narrow_and_round(std::uint16_t*, float*, std::int64_t count) noexcept override { log("narrow", count); }
  // Large, so that norm clipping takes the path that scales the gradients (some of which may be
  // offloaded and travel to be scaled): a plan covers the branch a real step may take.
  double sum_of_squares(const float*, std::int64_t count) noexcept override {
    log("sum_of_squares", count);
    return 1e30;
  }
  bool all_finite(const float*, std::int64_t count) noexcept override {
    log("all_finite", count);
    return true;
  }
  double sum(const float*, std::int64_t count) noexcept override {
    log("sum", count);
    return 0.0;
  }
  void scale(float*, float, std::int64_t count) noexcept override { log("scale", count); }
  void add_scaled(float*, float, const float*, std::int64_t count) noexcept override { log("add_scaled", count); }
  // The elementwise ops cost what scale does, a pass over memory.
  void sign(float*, const float*, std::int64_t count) noexcept override { log("scale", count); }
  void mul(float*, const float*, const float*, std::int64_t count) noexcept override { log("scale", count); }
  void div(float*, const float*, const float*, float, std::int64_t count) noexcept override { log("scale", count); }
  void sqrt(float*, const float*, std::int64_t count) noexcept override { log("scale", count); }
  void fill(void*, std::uint8_t, std::uint64_t bytes) noexcept override { log("fill", static_cast<double>(bytes)); }
  void copy(void*, const void*, std::uint64_t bytes) noexcept override { log("copy", static_cast<double>(bytes)); }
  // What the host reads back is zeros: deterministic, whatever the planned step would compute.
  void copy_to_host(void* host_destination, const void*, std::uint64_t bytes) noexcept override {
    log("copy", static_cast<double>(bytes));
    std::memset(host_destination, 0, bytes);
  }
  void copy_from_host(void*, const void*, std::uint64_t bytes) noexcept override {
    log("copy", static_cast<double>(bytes));
  }
  void rope_at(float*, std::int64_t rows, std::int64_t, std::int64_t, int n_heads, int head_dim,
               float) noexcept override {
    log("rope_forward", elements(rows, static_cast<std::int64_t>(n_heads) * head_dim));
  }
  void attention_decode(const DecodeShape&, float*, const AttentionInputs&, float*, float*) noexcept override {
    log("attention_decode", 0.0);
  }
  void rope_frequencies(float*, std::int64_t rows, std::int64_t, std::int64_t, std::int64_t, int n_heads, int head_dim,
                        const float*, bool inverse) noexcept override {
    log(inverse ? "rope_backward" : "rope_forward", elements(rows, static_cast<std::int64_t>(n_heads) * head_dim));
  }
  // Priced as the bf16 matmuls: the widening they spare the caller is simply not logged.
  void matmul_forward_bf16_input(float*, const std::uint16_t*, Weight, const float*,
                                 const MatmulShape& shape) noexcept override {
    log("matmul_forward_bf16", matmul_flops(shape));
  }
  void matmul_backward_bf16_input(float* dinp, float* dweight, float*, const float*, const std::uint16_t*, Weight,
                                  const MatmulShape& shape, GradientWrite) noexcept override {
    log("matmul_backward_bf16",
        matmul_flops(shape) * ((dinp != nullptr ? 1.0 : 0.0) + (dweight != nullptr ? 1.0 : 0.0)));
  }

 private:
  void log(const char* op, double work) noexcept { backend_.record(op, work); }
  void log(const char* op, std::int64_t work) noexcept { backend_.record(op, static_cast<double>(work)); }

  DryBackend& backend_;
  std::unique_ptr<Ops> sizes_;
  bool bf16_input_matmuls_ = false;
};

}  // namespace

DryBackend::DryBackend(std::uint64_t device_memory_limit, bool bf16_input_matmuls)
    : ops_(std::make_unique<DryOps>(*this, bf16_input_matmuls)),
      device_(std::make_unique<Allocator>("planned device memory", std::make_unique<ReservedResource>(),
                                          device_memory_limit)),
      host_(std::make_unique<Allocator>("planned host memory", std::make_unique<ReservedResource>())),
      copy_stream_(std::make_unique<DryCopyStream>(*this)) {
  const auto observe = [this](PeakInstant& peak) {
    return [this, &peak](const CategoryBytes& live) { peak = {live, ops_log_.size(), phases_.size() - 1}; };
  };
  device_->set_peak_observer(observe(device_peak_));
  host_->set_peak_observer(observe(host_peak_));
}

DryBackend::~DryBackend() {
  device_->set_peak_observer({});
  host_->set_peak_observer({});
}

double DryBackend::phase_seconds(std::size_t phase) const {
  const auto end = phase + 1 < phase_clock_.size() ? phase_clock_[phase + 1] : std::chrono::steady_clock::now();
  return std::max(std::chrono::duration<double>(end - phase_clock_[phase]).count() - phase_discount_[phase], 0.0);
}

void DryBackend::discount(double seconds) noexcept {
  phase_discount_.back() += seconds;
}

Ops& DryBackend::ops() noexcept {
  return *ops_;
}

void DryBackend::record(const char* op, double work, double seconds) noexcept {
  try {
    ops_log_.push_back({op, work, seconds});
  } catch (...) {  // out of memory for the log: the plan loses an op's name, never its bytes
  }
}

void DryBackend::begin_phase(std::string name) {
  phases_.push_back(std::move(name));
  phase_starts_.push_back(ops_log_.size());
  phase_clock_.push_back(std::chrono::steady_clock::now());
  phase_discount_.push_back(0.0);
}

}  // namespace strata
