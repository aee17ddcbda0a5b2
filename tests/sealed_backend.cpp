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
  bool supports(Op op) const noexcept override {
    if (op == Op::matmul_forward_bf16_input || op == Op::matmul_backward_bf16_input)
      return products_ == SealedProducts::bf16_inputs;
    return ops_->supports(op);
  }

  void run(Op id, void* record) noexcept override {
    const Unsealed open(mappings_);
    switch (id) {
      case Op::matmul_forward: {
        op::MatmulForward call = record_of<op::MatmulForward>(record);
        if (!rounds(call.weight)) break;
        const std::vector<float> rounded = rounded_input(call.inp, call.shape);
        call.inp = rounded.data();
        return ops_->run(call);
      }
      case Op::matmul_backward: {
        op::MatmulBackward call = record_of<op::MatmulBackward>(record);
        if (!rounds(call.weight)) break;
        const std::vector<float> rounded = rounded_input(call.inp, call.shape);
        call.inp = rounded.data();
        return ops_->run(call);
      }
      // The CPU kernel on the widened input, with room for the whole widened weight: it then widens
      // the weight in one chunk, as the model's weight scratch does for matrices of up to 2^20 values
      // (the tests' models), so the sums run in the same order.
      case Op::matmul_forward_bf16_input: {
        const auto& r = record_of<op::MatmulForwardBf16Input>(record);
        if (calls_ != nullptr) ++calls_->forward[static_cast<int>(r.shape.layout)];
        std::vector<float> widened = widen_input(r.inp, r.shape), scratch = weight_scratch(r.shape);
        return ops_->matmul_forward(r.out, widened.data(), r.weight, r.bias, r.shape,
                                    Scratch{scratch.data(), std::ssize(scratch)});
      }
      case Op::matmul_backward_bf16_input: {
        const auto& r = record_of<op::MatmulBackwardBf16Input>(record);
        if (calls_ != nullptr) ++calls_->backward[static_cast<int>(r.shape.layout)];
        std::vector<float> widened = widen_input(r.inp, r.shape), scratch = weight_scratch(r.shape);
        return ops_->matmul_backward(r.dinp, r.dweight, r.dbias, r.dout, widened.data(), r.weight, r.shape,
                                     Scratch{scratch.data(), std::ssize(scratch)}, r.dinp_write);
      }
      default: break;
    }
    ops_->run(id, record);
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
