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
  bool supports(Op op) const noexcept override {
    return op == Op::matmul_forward_bf16_input || op == Op::matmul_backward_bf16_input ? bf16_input_matmuls_
                                                                                       : sizes_->supports(op);
  }

  void run(Op id, void* record) noexcept override {
    switch (id) {
      case Op::matmul_forward: {
        const auto& r = record_of<op::MatmulForward>(record);
        return log(r.weight.dtype == DType::bf16 ? "matmul_forward_bf16" : "matmul_forward_f32", matmul_flops(r.shape));
      }
      case Op::matmul_backward: {
        const auto& r = record_of<op::MatmulBackward>(record);
        return log(r.weight.dtype == DType::bf16 ? "matmul_backward_bf16" : "matmul_backward_f32",
                   backward_flops(r.shape, r.dinp, r.dweight));
      }
      // Priced as the bf16 matmuls: the widening they spare the caller is simply not logged.
      case Op::matmul_forward_bf16_input:
        return log("matmul_forward_bf16", matmul_flops(record_of<op::MatmulForwardBf16Input>(record).shape));
      case Op::matmul_backward_bf16_input: {
        const auto& r = record_of<op::MatmulBackwardBf16Input>(record);
        return log("matmul_backward_bf16", backward_flops(r.shape, r.dinp, r.dweight));
      }
      case Op::gemm: {
        const auto& r = record_of<op::Gemm>(record);
        return log("matmul_forward_f32",
                   2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k));
      }
      case Op::layernorm_forward: {
        const auto& r = record_of<op::LayernormForward>(record);
        return log("layernorm_forward", elements(r.rows, r.channels));
      }
      case Op::layernorm_backward: {
        const auto& r = record_of<op::LayernormBackward>(record);
        return log("layernorm_backward", elements(r.rows, r.channels));
      }
      case Op::rmsnorm_forward: {
        const auto& r = record_of<op::RmsnormForward>(record);
        return log("rmsnorm_forward", elements(r.rows, r.channels));
      }
      case Op::rmsnorm_backward: {
        const auto& r = record_of<op::RmsnormBackward>(record);
        return log("rmsnorm_backward", elements(r.rows, r.channels));
      }
      case Op::attention_sizes: return sizes_->run(id, record);
      case Op::attention_forward:
        return log("attention_forward", attention_flops(record_of<op::AttentionForward>(record).shape));
      case Op::attention_backward:
        return log("attention_backward", attention_flops(record_of<op::AttentionBackward>(record).shape));
      case Op::attention_decode: return log("attention_decode", 0.0);
      case Op::gelu_forward: return log("gelu_forward", record_of<op::GeluForward>(record).count);
      case Op::gelu_backward: return log("gelu_backward", record_of<op::GeluBackward>(record).count);
      case Op::swiglu_forward: return log("swiglu_forward", record_of<op::SwigluForward>(record).count);
      case Op::swiglu_backward: return log("swiglu_backward", record_of<op::SwigluBackward>(record).count);
      // GeGLU costs what SwiGLU does: a pass over gate and up with a transcendental each.
      case Op::geglu_forward: return log("swiglu_forward", record_of<op::GegluForward>(record).count);
      case Op::geglu_backward: return log("swiglu_backward", record_of<op::GegluBackward>(record).count);
      case Op::rope: {
        const auto& r = record_of<op::Rope>(record);
        return log(r.inverse ? "rope_backward" : "rope_forward",
                   elements(r.rows, static_cast<std::int64_t>(r.n_heads) * r.head_dim));
      }
      case Op::residual_forward: return log("residual_forward", record_of<op::ResidualForward>(record).count);
      case Op::embedding_forward: {
        const auto& r = record_of<op::EmbeddingForward>(record);
        return log("embedding_forward", elements(r.batch * r.seq_len, r.channels));
      }
      case Op::embedding_backward: {
        const auto& r = record_of<op::EmbeddingBackward>(record);
        return log("embedding_backward", elements(r.batch * r.seq_len, r.channels));
      }
      case Op::cross_entropy_forward_chunk: {
        const auto& r = record_of<op::CrossEntropyForwardChunk>(record);
        return log("cross_entropy_forward", elements(r.rows, r.width));
      }
      case Op::cross_entropy_finish: return log("cross_entropy_finish", record_of<op::CrossEntropyFinish>(record).rows);
      case Op::cross_entropy_backward_chunk: {
        const auto& r = record_of<op::CrossEntropyBackwardChunk>(record);
        return log("cross_entropy_backward", elements(r.rows, r.width));
      }
      // A plugin's host code computes nothing here; its work is priced by its name ("adamw_update").
      case Op::host_kernel: {
        const auto& r = record_of<op::HostKernel>(record);
        return log(r.name, r.work);
      }
      case Op::widen: return log("widen", record_of<op::Widen>(record).count);
      case Op::narrow: return log("narrow", record_of<op::Narrow>(record).count);
      case Op::narrow_and_round: return log("narrow", record_of<op::NarrowAndRound>(record).count);
      // Large, so that norm clipping takes the path that scales the gradients (some of which may be
      // offloaded and travel to be scaled): a plan covers the branch a real step may take.
      case Op::sum_of_squares: {
        auto& r = record_of<op::SumOfSquares>(record);
        log("sum_of_squares", r.count);
        r.result = 1e30;
        return;
      }
      case Op::all_finite: {
        auto& r = record_of<op::AllFinite>(record);
        log("all_finite", r.count);
        r.result = true;
        return;
      }
      case Op::sum: {
        auto& r = record_of<op::Sum>(record);
        log("sum", r.count);
        r.result = 0.0;
        return;
      }
      case Op::scale: return log("scale", record_of<op::Scale>(record).count);
      case Op::add_scaled: return log("add_scaled", record_of<op::AddScaled>(record).count);
      // The elementwise ops cost what scale does, a pass over memory.
      case Op::sign: return log("scale", record_of<op::Sign>(record).count);
      case Op::mul: return log("scale", record_of<op::Mul>(record).count);
      case Op::div: return log("scale", record_of<op::Div>(record).count);
      case Op::sqrt: return log("scale", record_of<op::Sqrt>(record).count);
      case Op::fill: return log("fill", static_cast<double>(record_of<op::Fill>(record).bytes));
      case Op::copy: return log("copy", static_cast<double>(record_of<op::Copy>(record).bytes));
      // What the host reads back is zeros: deterministic, whatever the planned step would compute.
      case Op::copy_to_host: {
        const auto& r = record_of<op::CopyToHost>(record);
        log("copy", static_cast<double>(r.bytes));
        std::memset(r.host_destination, 0, r.bytes);
        return;
      }
      case Op::copy_from_host: return log("copy", static_cast<double>(record_of<op::CopyFromHost>(record).bytes));
      // The factorizations: a plugin's own small matrices, priced as the products they cost (n^3).
      case Op::qr: {
        const auto& r = record_of<op::Qr>(record);
        return log("matmul_forward_f32",
                   2.0 * static_cast<double>(r.rows) * static_cast<double>(r.cols) * static_cast<double>(r.cols));
      }
      case Op::eigh: {
        const auto& r = record_of<op::Eigh>(record);
        return log("matmul_forward_f32",
                   9.0 * static_cast<double>(r.n) * static_cast<double>(r.n) * static_cast<double>(r.n));
      }
      case Op::count: break;
    }
    unsupported(id);
  }

 private:
  static double backward_flops(const MatmulShape& shape, const float* dinp, const float* dweight) {
    return matmul_flops(shape) * ((dinp != nullptr ? 1.0 : 0.0) + (dweight != nullptr ? 1.0 : 0.0));
  }
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
