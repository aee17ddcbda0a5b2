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
  CopyTicket enqueue(void* /*destination*/, const void* /*source*/, std::uint64_t /*bytes*/) override {
    return ++issued_;
  }
  double wait(CopyTicket ticket) override {
    landed_ = std::max(landed_, ticket);
    return 0.0;
  }
  CopyTicket completed() const override { return landed_; }
  double busy_seconds() const override { return 0.0; }

 private:
  CopyTicket issued_ = 0;
  CopyTicket landed_ = 0;
};

// The op table: each op logs its name and computes nothing. Sizes (what attention saves) are the
// CPU table's, which the run being planned would use.
class DryOps final : public Ops {
 public:
  explicit DryOps(DryBackend& backend) : backend_(backend), sizes_(cpu::make_cpu_ops()) {}

  std::string_view backend() const noexcept override { return "cpu"; }
  bool has(Op op) const noexcept override { return sizes_->has(op); }

  void matmul_forward(float*, const float*, Weight, const float*, const MatmulShape&, Scratch) noexcept override {
    log("matmul_forward");
  }
  void matmul_backward(float*, float*, float*, const float*, const float*, Weight, const MatmulShape&, Scratch,
                       GradientWrite) noexcept override {
    log("matmul_backward");
  }
  void layernorm_forward(float*, float*, float*, const float*, const float*, const float*, std::int64_t, std::int64_t,
                         float) noexcept override {
    log("layernorm_forward");
  }
  void layernorm_backward(float*, float*, float*, const float*, const float*, const float*, const float*, const float*,
                          std::int64_t, std::int64_t) noexcept override {
    log("layernorm_backward");
  }
  void rmsnorm_forward(float*, float*, const float*, const float*, std::int64_t, std::int64_t,
                       float) noexcept override {
    log("rmsnorm_forward");
  }
  void rmsnorm_backward(float*, float*, const float*, const float*, const float*, const float*, std::int64_t,
                        std::int64_t) noexcept override {
    log("rmsnorm_backward");
  }
  std::int64_t attention_saved_floats(const AttentionShape& shape) const noexcept override {
    return sizes_->attention_saved_floats(shape);
  }
  std::int64_t attention_scratch_floats(const AttentionShape& shape) const noexcept override {
    return sizes_->attention_scratch_floats(shape);
  }
  void attention_forward(const AttentionShape&, float*, float*, const AttentionInputs&) noexcept override {
    log("attention_forward");
  }
  void attention_backward(const AttentionShape&, const AttentionGrads&, const float*, const AttentionInputs&,
                          const float*, float*) noexcept override {
    log("attention_backward");
  }
  void gelu_forward(float*, const float*, std::int64_t) noexcept override { log("gelu_forward"); }
  void gelu_backward(float*, const float*, const float*, std::int64_t, GradientWrite) noexcept override {
    log("gelu_backward");
  }
  void swiglu_forward(float*, const float*, const float*, std::int64_t) noexcept override { log("swiglu_forward"); }
  void swiglu_backward(float*, float*, const float*, const float*, const float*, std::int64_t,
                       GradientWrite) noexcept override {
    log("swiglu_backward");
  }
  void rope(float*, std::int64_t, std::int64_t, int, int, int, float, bool inverse) noexcept override {
    log(inverse ? "rope_backward" : "rope_forward");
  }
  void residual_forward(float*, const float*, const float*, std::int64_t) noexcept override { log("residual_forward"); }
  void embedding_forward(float*, const std::int32_t*, Weight, Weight, std::int64_t, std::int64_t,
                         std::int64_t) noexcept override {
    log("embedding_forward");
  }
  void embedding_backward(float*, float*, const float*, const std::int32_t*, std::int64_t, std::int64_t,
                          std::int64_t) noexcept override {
    log("embedding_backward");
  }
  void cross_entropy_forward_chunk(float*, float*, float*, const float*, const std::int32_t*, std::int64_t,
                                   std::int64_t, std::int64_t, std::int64_t) noexcept override {
    log("cross_entropy_forward");
  }
  void cross_entropy_finish(float*, float*, const float*, const float*, const float*, std::int64_t) noexcept override {
    log("cross_entropy_finish");
  }
  void cross_entropy_backward_chunk(float*, const float*, const float*, const std::int32_t*, float, std::int64_t,
                                    std::int64_t, std::int64_t, std::int64_t) noexcept override {
    log("cross_entropy_backward");
  }
  void adamw_update(float*, const float*, float*, float*, std::int64_t, const AdamWHyper&) noexcept override {
    log("adamw_update");
  }
  void sgd_update(float*, const float*, float*, std::int64_t, const SgdHyper&) noexcept override { log("sgd_update"); }
  void widen(float*, const std::uint16_t*, std::int64_t) noexcept override { log("widen"); }
  void narrow(std::uint16_t*, const float*, std::int64_t) noexcept override { log("narrow"); }
  void narrow_and_round(std::uint16_t*, float*, std::int64_t) noexcept override { log("narrow"); }
  // Large, so that norm clipping takes the path that scales the gradients (some of which may be
  // offloaded and travel to be scaled): a plan covers the branch a real step may take.
  double sum_of_squares(const float*, std::int64_t) noexcept override {
    log("sum_of_squares");
    return 1e30;
  }
  bool all_finite(const float*, std::int64_t) noexcept override {
    log("all_finite");
    return true;
  }
  double sum(const float*, std::int64_t) noexcept override {
    log("sum");
    return 0.0;
  }
  void scale(float*, float, std::int64_t) noexcept override { log("scale"); }
  void add_scaled(float*, float, const float*, std::int64_t) noexcept override { log("add_scaled"); }
  void sign(float*, const float*, std::int64_t) noexcept override { log("sign"); }
  void mul(float*, const float*, const float*, std::int64_t) noexcept override { log("mul"); }
  void div(float*, const float*, const float*, float, std::int64_t) noexcept override { log("div"); }
  void sqrt(float*, const float*, std::int64_t) noexcept override { log("sqrt"); }
  void fill(void*, std::uint8_t, std::uint64_t) noexcept override { log("fill"); }
  void copy(void*, const void*, std::uint64_t) noexcept override { log("copy"); }
  // What the host reads back is zeros: deterministic, whatever the planned step would compute.
  void copy_to_host(void* host_destination, const void*, std::uint64_t bytes) noexcept override {
    log("copy_to_host");
    std::memset(host_destination, 0, bytes);
  }
  void copy_from_host(void*, const void*, std::uint64_t) noexcept override { log("copy_from_host"); }
  void rope_at(float*, std::int64_t, std::int64_t, std::int64_t, int, int, float) noexcept override {
    log("rope_forward");
  }
  void attention_decode(const DecodeShape&, float*, const AttentionInputs&, float*, float*) noexcept override {
    log("attention_decode");
  }
  void rope_frequencies(float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int, int, const float*,
                        bool inverse) noexcept override {
    log(inverse ? "rope_backward" : "rope_forward");
  }

 private:
  void log(const char* op) noexcept { backend_.record(op); }

  DryBackend& backend_;
  std::unique_ptr<Ops> sizes_;
};

}  // namespace

DryBackend::DryBackend(std::uint64_t device_memory_limit)
    : ops_(std::make_unique<DryOps>(*this)),
      device_(std::make_unique<Allocator>("planned device memory", std::make_unique<ReservedResource>(),
                                          device_memory_limit)),
      host_(std::make_unique<Allocator>("planned host memory", std::make_unique<ReservedResource>())),
      copy_stream_(std::make_unique<DryCopyStream>()) {
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

Ops& DryBackend::ops() noexcept {
  return *ops_;
}

void DryBackend::record(const char* op) noexcept {
  try {
    ops_log_.push_back(op);
  } catch (...) {  // out of memory for the log: the plan loses an op's name, never its bytes
  }
}

void DryBackend::begin_phase(std::string name) {
  phases_.push_back(std::move(name));
  phase_starts_.push_back(ops_log_.size());
}

}  // namespace strata
