#pragma once
// The planner's compute-free backend (docs/architecture.md, "The planner"): its arenas allocate
// and account exactly as the CPU backend's do, its ops compute nothing, and its copies move
// nothing. A training step run on it takes the allocation path of a real step — every plugin's
// hooks, every strategy's placement, policies that react to the measured bytes — so its arenas'
// peaks are the run's, found without the arithmetic. It also logs each op in call order, so the
// planner can say where in the step each peak fell.
//
// Memory is reserved, not committed (MAP_NORESERVE): a 7B model's rows cost address space, and
// physical pages only where host code writes (a plugin's own CPU kernel, a host-side forecaster).
// Reductions return a large sum of squares (norm clipping scales), a sum of 0 and all_finite true:
// every step is finite, unskipped and clipped.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device/backend.hpp"

namespace strata {

// One op of the log: its name and its work, flops for the products (matmul, attention), bytes for
// fill and copy, elements for the rest. The planner prices it with the machine's calibration.
struct LoggedOp {
  const char* name = "";
  double work = 0.0;
  double seconds = -1.0;  // measured on the spot (a plugin's own kernel); < 0: price it by `work`
};

// The flops the log counts for a causal attention call, and for a product (2 rows in out).
double attention_flops(const AttentionShape& shape);
double matmul_flops(const MatmulShape& shape);

// Where an arena reached its peak: before op `op_index` of the whole log ran, in `phase`, and
// what it held then.
struct PeakInstant {
  CategoryBytes live{};
  std::size_t op_index = 0;
  std::size_t phase_index = 0;
};

class DryBackend final : public Backend {
 public:
  // bf16_input_matmuls: plan a GPU's run, whose backend offers Ops' bf16-input matmuls (SDK 9.9).
  explicit DryBackend(std::uint64_t device_memory_limit, bool bf16_input_matmuls = false);
  ~DryBackend() override;

  std::string name() const override { return "cpu"; }  // kernels bind as they would on the CPU
  KernelTarget kernel_target() const noexcept override { return {"cpu", -1, nullptr}; }
  Ops& ops() noexcept override;
  Allocator& device_memory() noexcept override { return *device_; }
  Allocator& host_memory() noexcept override { return *host_; }
  CopyStream& copy_stream() noexcept override { return *copy_stream_; }
  void synchronize() override {}
  void zero_host_memory(void* /*data*/, std::uint64_t /*bytes*/) noexcept override {}

  // The log. Ops call record(); the planner names the phases ("step 1", "evaluation").
  void record(const char* op, double work, double seconds = -1.0) noexcept;
  void begin_phase(std::string name);
  const std::vector<LoggedOp>& op_log() const noexcept { return ops_log_; }
  const std::vector<std::string>& phases() const noexcept { return phases_; }
  std::size_t phase_start(std::size_t phase) const { return phase_starts_[phase]; }
  // The wall time from the phase's start to the next's: the host's own work in it (bookkeeping, and
  // any plugin kernel that computed for real), the ops being free, and less the time spent timing
  // a plugin's kernel on the spot (discount), which is priced apart.
  double phase_seconds(std::size_t phase) const;
  void discount(double seconds) noexcept;
  const PeakInstant& device_peak() const noexcept { return device_peak_; }
  const PeakInstant& host_peak() const noexcept { return host_peak_; }

 private:
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<Allocator> device_;
  std::unique_ptr<Allocator> host_;
  std::unique_ptr<CopyStream> copy_stream_;
  std::vector<LoggedOp> ops_log_;
  std::vector<std::string> phases_{"placement"};
  std::vector<std::size_t> phase_starts_{0};
  std::vector<std::chrono::steady_clock::time_point> phase_clock_{std::chrono::steady_clock::now()};
  std::vector<double> phase_discount_{0.0};
  PeakInstant device_peak_;
  PeakInstant host_peak_;
};

}  // namespace strata
