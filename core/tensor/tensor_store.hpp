#pragma once
// The tensors of a model and its training: rows declared into the table (a parameter with its
// gradient, optimizer state and master copy), their memory as ops see it, and what writing a
// parameter involves (rounding masters into bf16 weights, quantizing, zeroing gradients). Where
// each row's bytes live and how they move is residency's (core/residency/residency.hpp), which
// this store owns and lends out by row: `residency()`. Model families declare rows here and
// compute on them through the backend's ops; strategies move them through the executor's hook
// context. Nothing in this file knows a model family.
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "core/residency/residency.hpp"
#include "core/residency/tensor_table.hpp"
#include "core/util/profiler.hpp"
#include "strata/optimizer.hpp"
#include "strata/precision_policy.hpp"
#include "strata/weight_quantizer.hpp"

namespace strata {

// What a parameter is to the strategies' plan (core/model/trainable_plan.hpp): trained, frozen
// (kept as initialised or loaded: a checkpoint leaves it out and records its fingerprint), or an
// adapter's tensor (strata/matmul_adapter.hpp), which trains and which a base model file lacks.
enum class ParameterRole : std::uint8_t { trained, frozen, adapter };

// One trainable tensor and the rows that go with it.
struct ParameterRows {
  std::string name;  // the table name, which is the checkpoint name of the model's family
  int layer = -1;
  ParamKind kind = ParamKind::other;
  bool decay = false;
  int param = -1;
  int grad = -1;
  std::array<int, kMaxOptimizerStateBuffers> state{-1, -1, -1, -1};
  int master = -1;  // the f32 master copy the optimizer updates, when `param` is stored as bf16 or quantized
  // Quantized storage: the f32 scales row (moved with the weights) and the group size its scales
  // cover; the layout the matmuls read the matrix in.
  int scales = -1;
  std::int64_t group_size = 0;
  WeightLayout layout = WeightLayout::in_out;
  ParameterRole role = ParameterRole::trained;  // also in a model built for evaluation
};

// A parameter's stored weights: its values and, for a quantized matrix, its scales.
inline std::vector<int> stored_weight_rows(const ParameterRows& rows) {
  return rows.scales >= 0 ? std::vector<int>{rows.param, rows.scales} : std::vector<int>{rows.param};
}

// When persistent rows (weights, grads, optimizer state, workspace) get memory: at once, on the
// device; or later, by allocate_persistent(), in the homes that strategies chose meanwhile (so
// offloaded state never touches the device, not even at start-up).
enum class Allocation : std::uint8_t { now, deferred };

class TensorStore {
 public:
  TensorStore(Backend& backend, Profiler& profiler)
      : backend_(backend), profiler_(profiler), residency_(backend, profiler, table_) {}
  TensorStore(const TensorStore&) = delete;
  TensorStore& operator=(const TensorStore&) = delete;

  // Declaring rows (before any is allocated).
  int add_row(std::string name, int layer, std::vector<std::int64_t> shape, MemoryCategory category, TensorGroup group,
              ElementType element = ElementType::f32);
  // A parameter with its gradient and optimizer state (as the optimizer lays it out); stored as
  // `storage`: bf16 or a quantized dtype adds an f32 master copy, counted as optimizer state, which
  // the optimizer updates; a quantized matrix also has a scales row beside its values, sized by the
  // weight quantizer for `layout`. An untrained parameter (for evaluation) has no gradient, state or
  // master.
  // Weight decay applies to matrices and embeddings.
  const ParameterRows& add_parameter(const std::string& name, int layer, std::vector<std::int64_t> shape,
                                     ParamKind kind, DType storage, const StateLayout& state, bool trained = true,
                                     WeightLayout layout = WeightLayout::in_out);
  void set_role(int parameter, ParameterRole role) { parameters_.at(static_cast<std::size_t>(parameter)).role = role; }
  // Matrices stored as quantizer.dtype() are quantized by it, and the matmuls that read them run
  // its kernels (ops() routes them). Set before the first such parameter is added.
  void use_weight_quantizer(WeightQuantizer& quantizer, std::string label = "the weight quantizer");
  // bf16 parameters are rounded by `rounding` instead of to nearest even.
  void use_bf16_rounding(Bf16Rounding& rounding) noexcept { rounding_ = &rounding; }
  // The f32 scratch the matmuls on a parameter's stored form want for `input_rows` rows: none for
  // f32, the whole matrix for bf16 (widened) and quantized ones, or what the quantizer asks if more.
  std::int64_t matmul_scratch_floats(const ParameterRows& rows, std::int64_t input_rows) const;

  Backend& backend() noexcept { return backend_; }
  // The backend's op table, with the weight quantizer's matmuls in front of it when there is one.
  Ops& ops() noexcept { return quantized_ops_ ? *quantized_ops_ : backend_.ops(); }
  Profiler& profiler() noexcept { return profiler_; }
  const TensorTable& table() const noexcept { return table_; }
  TensorTable& table() noexcept { return table_; }
  const std::vector<ParameterRows>& parameters() const noexcept { return parameters_; }

  // Where each row lives, its allocation and its moves (core/residency/residency.hpp).
  Residency& residency() noexcept { return residency_; }
  const Residency& residency() const noexcept { return residency_; }
  // Set by the executor while it updates rows in host memory on the host (Executor::set_host_update):
  // the masters' rounding into bf16 weights runs there too.
  void set_update_on_host(bool on_host) noexcept { update_on_host_ = on_host; }

  // Pointers into a row's memory, for ops (null when unallocated). The caller never reads them on
  // the host unless the row's home is the host. A host gradient zero_grads left unwritten is
  // written with zeros here, before anyone can read it.
  void* data(int row) const noexcept { return residency_.data(row); }
  float* f32(int row) const noexcept { return static_cast<float*>(data(row)); }
  std::uint16_t* bf16(int row) const noexcept { return static_cast<std::uint16_t*>(data(row)); }
  std::int32_t* i32(int row) const noexcept { return static_cast<std::int32_t*>(data(row)); }
  Weight weight(int row) const noexcept;  // with its scales, when the row is a quantized matrix
  TensorView view(int row) const noexcept;
  // A parameter's value in f32: its master copy when it is stored as bf16 or quantized. Whoever
  // writes it (the optimizer, a checkpoint load) calls publish_weights() afterwards.
  int value_row(const ParameterRows& rows) const noexcept { return rows.master >= 0 ? rows.master : rows.param; }
  TensorView values(const ParameterRows& rows) const noexcept { return view(value_row(rows)); }
  // Rounds every master copy into its bf16 weights, or quantizes it into its quantized weights;
  // nothing to do with f32 weights. `step`: the update the masters hold (0: initial or loaded
  // values; a resume: the checkpoint's step), for a rounding of the precision policy's own.
  void publish_weights(std::int64_t step = 0);
  // The same for one layer's parameters (kGlobalParameters: those outside the blocks), whose
  // masters must be in memory: the step in parts publishes each block while its state is in.
  void publish_layer_weights(std::int64_t step, int layer);
  // Writes f32 values, from element `first` on, into a parameter that has no master (evaluation):
  // narrowed or quantized on the way, through an f32 staging buffer in the device arena for a
  // quantized matrix. Only f32 and plainly rounded bf16 storage take a slice
  // (writes_stored_slices); quantized weights, and a precision policy's own bf16 rounding, take
  // the whole tensor at once.
  void write_stored_values(const ParameterRows& rows, std::span<const float> values, std::size_t first = 0);
  bool writes_stored_slices(const ParameterRows& rows) const noexcept;
  // Every gradient to zero: on the device, filled there; in host memory (offloaded), only marked,
  // since the next thing to happen to it is a move to the device (zeros filled there, not copied
  // across the bus) or a read (zeros written first, by data()).
  void zero_grads();
  void zero(float* data, std::int64_t count);

  // The rows of a layer's group (kGlobalParameters: outside the blocks), for residency's calls.
  std::vector<int> group_rows(int layer, TensorGroup group) const;
  // Residency of a block's weights, grads, optimizer state or activations (Residency::residence).
  Residence residence(int layer, TensorGroup group) const;
  // Completes a group's moves (a no-op when none is in flight, the common case).
  void complete_moves(int layer, TensorGroup group);
  // The rows of a layer's groups that live on disk now.
  std::vector<int> rows_on_disk(int layer, std::initializer_list<TensorGroup> groups) const;
  // The optimizer calls this before it writes weights that are on the device: their host copies
  // (kept by a fetch from the host) and disk copies go stale.
  void drop_stale_weight_copies(std::optional<int> layer = std::nullopt);  // one layer's, or all

 private:
  void mark_weights_written(const ParameterRows& rows) noexcept;
  void publish(const ParameterRows& rows, std::int64_t step);
  // During an update on the host, the backend's host op table when every row lives in host memory
  // (Backend::host_ops), else its op table: the executor's host update rounds offloaded masters
  // on the host, having completed their moves and run their update there.
  Ops& ops_for_rows(std::initializer_list<int> rows) noexcept;

  void quantize(const ParameterRows& rows, const float* master);

  Backend& backend_;
  Profiler& profiler_;
  WeightQuantizer* quantizer_ = nullptr;
  Bf16Rounding* rounding_ = nullptr;
  std::unique_ptr<Ops> quantized_ops_;
  std::vector<int> parameter_of_row_;  // parallel to table rows: the parameter whose value row it is, or -1
  TensorTable table_;
  Residency residency_;  // after the table, whose homes it writes
  std::vector<ParameterRows> parameters_;
  bool update_on_host_ = false;
};

}  // namespace strata
