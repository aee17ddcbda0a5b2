#include "sealed_backend.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "kernels/cpu/cpu_ops.hpp"
#include "strata/dtype.hpp"

namespace strata::test {

namespace {

// The device arena's mappings and whether they are open: closed (PROT_NONE) unless at least one
// op or copy is running. Opening and closing are counted, so nested or concurrent users compose.
class SealedMappings {
 public:
  void* map(std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    const std::uint64_t size = page_round(bytes);
    void* pointer = ::mmap(nullptr, size, open_count_ > 0 ? kOpen : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pointer == MAP_FAILED) throw std::bad_alloc();
    mappings_.emplace(pointer, size);
    return pointer;
  }

  void unmap(void* pointer) noexcept {
    std::lock_guard lock(mutex_);
    const auto found = mappings_.find(pointer);
    if (found == mappings_.end()) return;
    ::munmap(found->first, found->second);
    mappings_.erase(found);
  }

  void open() noexcept {
    std::lock_guard lock(mutex_);
    if (open_count_++ == 0) protect_all(kOpen);
  }

  void close() noexcept {
    std::lock_guard lock(mutex_);
    if (--open_count_ == 0) protect_all(PROT_NONE);
  }

 private:
  static constexpr int kOpen = PROT_READ | PROT_WRITE;

  static std::uint64_t page_round(std::uint64_t bytes) {
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    return (std::max<std::uint64_t>(bytes, 1) + page - 1) / page * page;
  }

  void protect_all(int protection) noexcept {
    for (const auto& [pointer, size] : mappings_) ::mprotect(pointer, size, protection);
  }

  std::mutex mutex_;
  std::map<void*, std::uint64_t> mappings_;
  int open_count_ = 0;
};

// Opens the device mappings for one op or copy.
class Unsealed {
 public:
  explicit Unsealed(SealedMappings& mappings) : mappings_(mappings) { mappings_.open(); }
  ~Unsealed() { mappings_.close(); }
  Unsealed(const Unsealed&) = delete;
  Unsealed& operator=(const Unsealed&) = delete;

 private:
  SealedMappings& mappings_;
};

class SealedResource final : public MemoryResource {
 public:
  explicit SealedResource(SealedMappings& mappings) : mappings_(mappings) {}
  void* allocate(std::uint64_t bytes) override { return mappings_.map(bytes); }
  void deallocate(void* pointer, std::uint64_t /*bytes*/) noexcept override { mappings_.unmap(pointer); }

 private:
  SealedMappings& mappings_;
};

// Copies run at once, inside enqueue, with the mappings open: a legal schedule of an
// asynchronous stream, and no copy is ever in flight while the host runs.
class SealedCopyStream final : public CopyStream {
 public:
  explicit SealedCopyStream(SealedMappings& mappings) : mappings_(mappings) {}
  CopyTicket enqueue(void* destination, const void* source, std::uint64_t bytes) override {
    const auto start = std::chrono::steady_clock::now();
    {
      const Unsealed open(mappings_);
      std::memcpy(destination, source, bytes);
    }
    busy_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return ++completed_;
  }
  double wait(CopyTicket /*ticket*/) override { return 0.0; }  // copies ran inside enqueue
  CopyTicket completed() const override { return completed_; }
  double busy_seconds() const override { return busy_seconds_; }

 private:
  SealedMappings& mappings_;
  CopyTicket completed_ = 0;
  double busy_seconds_ = 0.0;
};

// The CPU op table with the device mappings open for the duration of each call.
class SealedOps final : public Ops {
 public:
  SealedOps(std::unique_ptr<Ops> ops, SealedMappings& mappings, SealedProducts products, Bf16InputCalls* calls)
      : ops_(std::move(ops)), mappings_(mappings), products_(products), calls_(calls) {}

  std::string_view backend() const noexcept override { return ops_->backend(); }
  bool has(Op op) const noexcept override {
    return op == Op::matmul_bf16_input ? products_ == SealedProducts::bf16_inputs : ops_->has(op);
  }

  void matmul_forward(float* out, const float* inp, Weight weight, const float* bias, const MatmulShape& shape,
                      Scratch scratch) noexcept override {
    const Unsealed open(mappings_);
    if (rounds(weight)) {
      const std::vector<float> rounded = rounded_input(inp, shape);
      ops_->matmul_forward(out, rounded.data(), weight, bias, shape, scratch);
    } else {
      ops_->matmul_forward(out, inp, weight, bias, shape, scratch);
    }
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, Weight weight,
                       const MatmulShape& shape, Scratch scratch, GradientWrite dinp_write) noexcept override {
    const Unsealed open(mappings_);
    if (rounds(weight)) {
      const std::vector<float> rounded = rounded_input(inp, shape);
      ops_->matmul_backward(dinp, dweight, dbias, dout, rounded.data(), weight, shape, scratch, dinp_write);
    } else {
      ops_->matmul_backward(dinp, dweight, dbias, dout, inp, weight, shape, scratch, dinp_write);
    }
  }
  // The CPU kernel on the widened input, with room for the whole widened weight: it then widens the
  // weight in one chunk, as the model's weight scratch does for matrices of up to 2^20 values (the
  // tests' models), so the sums run in the same order.
  void matmul_forward_bf16_input(float* out, const std::uint16_t* inp, Weight weight, const float* bias,
                                 const MatmulShape& shape) noexcept override {
    const Unsealed open(mappings_);
    if (calls_ != nullptr) ++calls_->forward[static_cast<int>(shape.layout)];
    std::vector<float> widened = widen_input(inp, shape), scratch = weight_scratch(shape);
    ops_->matmul_forward(out, widened.data(), weight, bias, shape, Scratch{scratch.data(), std::ssize(scratch)});
  }
  void matmul_backward_bf16_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const std::uint16_t* inp, Weight weight, const MatmulShape& shape,
                                  GradientWrite dinp_write) noexcept override {
    const Unsealed open(mappings_);
    if (calls_ != nullptr) ++calls_->backward[static_cast<int>(shape.layout)];
    std::vector<float> widened = widen_input(inp, shape), scratch = weight_scratch(shape);
    ops_->matmul_backward(dinp, dweight, dbias, dout, widened.data(), weight, shape,
                          Scratch{scratch.data(), std::ssize(scratch)}, dinp_write);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                         std::int64_t rows, std::int64_t channels, float eps) noexcept override {
    const Unsealed open(mappings_);
    ops_->layernorm_forward(out, mean, rstd, inp, weight, bias, rows, channels, eps);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, std::int64_t rows,
                          std::int64_t channels) noexcept override {
    const Unsealed open(mappings_);
    ops_->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, channels);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t rows,
                       std::int64_t channels, float eps) noexcept override {
    const Unsealed open(mappings_);
    ops_->rmsnorm_forward(out, rstd, inp, weight, rows, channels, eps);
  }
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                        const float* rstd, std::int64_t rows, std::int64_t channels) noexcept override {
    const Unsealed open(mappings_);
    ops_->rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, rows, channels);
  }
  std::int64_t attention_saved_floats(const AttentionShape& shape) const noexcept override {
    return ops_->attention_saved_floats(shape);
  }
  std::int64_t attention_scratch_floats(const AttentionShape& shape) const noexcept override {
    return ops_->attention_scratch_floats(shape);
  }
  void attention_forward(const AttentionShape& shape, float* out, float* saved,
                         const AttentionInputs& in) noexcept override {
    const Unsealed open(mappings_);
    ops_->attention_forward(shape, out, saved, in);
  }
  void attention_backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                          const AttentionInputs& in, const float* saved, float* scratch) noexcept override {
    const Unsealed open(mappings_);
    ops_->attention_backward(shape, grads, dout, in, saved, scratch);
  }
  void gelu_forward(float* out, const float* inp, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->gelu_forward(out, inp, count);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t count,
                     GradientWrite write) noexcept override {
    const Unsealed open(mappings_);
    ops_->gelu_backward(dinp, inp, dout, count, write);
  }
  void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->swiglu_forward(out, gate, up, count);
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                       std::int64_t count, GradientWrite write) noexcept override {
    const Unsealed open(mappings_);
    ops_->swiglu_backward(dgate, dup, dout, gate, up, count, write);
  }
  void rope(float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim, float theta,
            bool inverse) noexcept override {
    const Unsealed open(mappings_);
    ops_->rope(x, rows, stride, seq_len, n_heads, head_dim, theta, inverse);
  }
  void residual_forward(float* out, const float* a, const float* b, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->residual_forward(out, a, b, count);
  }
  void embedding_forward(float* out, const std::int32_t* tokens, Weight wte, Weight wpe, std::int64_t batch,
                         std::int64_t seq_len, std::int64_t channels) noexcept override {
    const Unsealed open(mappings_);
    ops_->embedding_forward(out, tokens, wte, wpe, batch, seq_len, channels);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t batch,
                          std::int64_t seq_len, std::int64_t channels) noexcept override {
    const Unsealed open(mappings_);
    ops_->embedding_backward(dwte, dwpe, dout, tokens, batch, seq_len, channels);
  }
  void cross_entropy_forward_chunk(float* running_max, float* running_sum, float* target_logits, const float* logits,
                                   const std::int32_t* targets, std::int64_t rows, std::int64_t first,
                                   std::int64_t width, std::int64_t vocab) noexcept override {
    const Unsealed open(mappings_);
    ops_->cross_entropy_forward_chunk(running_max, running_sum, target_logits, logits, targets, rows, first, width,
                                      vocab);
  }
  void cross_entropy_finish(float* losses, float* logsumexp, const float* running_max, const float* running_sum,
                            const float* target_logits, std::int64_t rows) noexcept override {
    const Unsealed open(mappings_);
    ops_->cross_entropy_finish(losses, logsumexp, running_max, running_sum, target_logits, rows);
  }
  void cross_entropy_backward_chunk(float* dlogits, const float* logits, const float* logsumexp,
                                    const std::int32_t* targets, float dloss, std::int64_t rows, std::int64_t first,
                                    std::int64_t width, std::int64_t vocab) noexcept override {
    const Unsealed open(mappings_);
    ops_->cross_entropy_backward_chunk(dlogits, logits, logsumexp, targets, dloss, rows, first, width, vocab);
  }
  void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t count,
                    const AdamWHyper& hyper) noexcept override {
    const Unsealed open(mappings_);
    ops_->adamw_update(param, grad, m, v, count, hyper);
  }
  void sgd_update(float* param, const float* grad, float* velocity, std::int64_t count,
                  const SgdHyper& hyper) noexcept override {
    const Unsealed open(mappings_);
    ops_->sgd_update(param, grad, velocity, count, hyper);
  }
  void widen(float* out, const std::uint16_t* in, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->widen(out, in, count);
  }
  void narrow(std::uint16_t* out, const float* in, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->narrow(out, in, count);
  }
  void narrow_and_round(std::uint16_t* out, float* in, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->narrow_and_round(out, in, count);
  }
  double sum_of_squares(const float* values, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    return ops_->sum_of_squares(values, count);
  }
  bool all_finite(const float* values, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    return ops_->all_finite(values, count);
  }
  void scale(float* values, float factor, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->scale(values, factor, count);
  }
  void add_scaled(float* y, float alpha, const float* x, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->add_scaled(y, alpha, x, count);
  }
  void sign(float* out, const float* x, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->sign(out, x, count);
  }
  void mul(float* out, const float* a, const float* b, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->mul(out, a, b, count);
  }
  void div(float* out, const float* a, const float* b, float eps, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->div(out, a, b, eps, count);
  }
  void sqrt(float* out, const float* x, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    ops_->sqrt(out, x, count);
  }
  double sum(const float* values, std::int64_t count) noexcept override {
    const Unsealed open(mappings_);
    return ops_->sum(values, count);
  }
  void fill(void* data, std::uint8_t byte, std::uint64_t bytes) noexcept override {
    const Unsealed open(mappings_);
    ops_->fill(data, byte, bytes);
  }
  void copy(void* destination, const void* source, std::uint64_t bytes) noexcept override {
    const Unsealed open(mappings_);
    ops_->copy(destination, source, bytes);
  }
  void copy_to_host(void* host_destination, const void* source, std::uint64_t bytes) noexcept override {
    const Unsealed open(mappings_);
    ops_->copy_to_host(host_destination, source, bytes);
  }
  void copy_from_host(void* destination, const void* host_source, std::uint64_t bytes) noexcept override {
    const Unsealed open(mappings_);
    ops_->copy_from_host(destination, host_source, bytes);
  }

 private:
  bool rounds(Weight weight) const { return products_ != SealedProducts::cpu && weight.dtype == DType::bf16; }
  static std::vector<float> rounded_input(const float* inp, const MatmulShape& shape) {
    std::vector<float> rounded(static_cast<std::size_t>(shape.rows * shape.in_features));
    for (std::size_t i = 0; i < rounded.size(); ++i) rounded[i] = bf16_to_f32(f32_to_bf16(inp[i]));
    return rounded;
  }
  static std::vector<float> widen_input(const std::uint16_t* inp, const MatmulShape& shape) {
    std::vector<float> widened(static_cast<std::size_t>(shape.rows * shape.in_features));
    for (std::size_t i = 0; i < widened.size(); ++i) widened[i] = bf16_to_f32(inp[i]);
    return widened;
  }
  static std::vector<float> weight_scratch(const MatmulShape& shape) {
    return std::vector<float>(static_cast<std::size_t>(shape.in_features * shape.out_features));
  }

  std::unique_ptr<Ops> ops_;
  SealedMappings& mappings_;
  SealedProducts products_;
  Bf16InputCalls* calls_;
};

// The host table: the CPU kernels with every device mapping left sealed, counting what it served.
class SealedHostOps {
 public:
  explicit SealedHostOps(HostOpCalls* calls) : counting_(*cpu_, calls) {}
  Ops& ops() noexcept { return counting_; }

 private:
  std::unique_ptr<Ops> cpu_ = cpu::make_cpu_ops();  // made before the table that refers to it
  CountingOps counting_;
};

class SealedCpuBackend final : public Backend {
 public:
  SealedCpuBackend(std::uint64_t limit, SealedProducts products, Bf16InputCalls* calls, HostOpCalls* host_calls)
      : ops_(cpu::make_cpu_ops(), mappings_, products, calls),
        host_ops_(host_calls),
        device_("sealed cpu device memory", std::make_unique<SealedResource>(mappings_), limit),
        host_("sealed cpu host memory", make_aligned_host_resource()),
        copy_stream_(mappings_) {}

  std::string name() const override { return "cpu-sealed"; }
  KernelTarget kernel_target() const noexcept override { return {"cpu-sealed", -1, nullptr}; }
  Ops& ops() noexcept override { return ops_; }
  Ops& host_ops() noexcept override { return host_ops_.ops(); }
  Allocator& device_memory() noexcept override { return device_; }
  Allocator& host_memory() noexcept override { return host_; }
  CopyStream& copy_stream() noexcept override { return copy_stream_; }
  void synchronize() override {}

 private:
  SealedMappings mappings_;  // first: the arenas' buffers go back to it as they are destroyed
  SealedOps ops_;
  SealedHostOps host_ops_;
  Allocator device_;
  Allocator host_;
  SealedCopyStream copy_stream_;
};

}  // namespace

std::unique_ptr<Backend> make_sealed_cpu_backend(std::uint64_t device_memory_limit, SealedProducts products,
                                                 Bf16InputCalls* calls, HostOpCalls* host_calls) {
  return std::make_unique<SealedCpuBackend>(device_memory_limit, products, calls, host_calls);
}

}  // namespace strata::test
