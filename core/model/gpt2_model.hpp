#pragma once
// GPT-2, written out: named parameter, gradient, optimizer-state, activation and workspace rows
// in a TensorTable, and one explicit forward and backward per piece (embedding, block, head).
// The executor (core/executor) drives these pieces and runs the hooks between them.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/device/device.hpp"
#include "core/model/gpt2_config.hpp"
#include "core/tensor/tensor_table.hpp"
#include "core/util/profiler.hpp"
#include "kernels/cpu/matmul.hpp"
#include "strata/kernel.hpp"
#include "strata/optimizer.hpp"
#include "strata/precision_policy.hpp"

namespace strata {

enum class LayerParam : std::uint8_t {
  ln1_weight,
  ln1_bias,
  qkv_weight,
  qkv_bias,
  attn_proj_weight,
  attn_proj_bias,
  ln2_weight,
  ln2_bias,
  fc_weight,
  fc_bias,
  fc_proj_weight,
  fc_proj_bias,
  count
};
enum class GlobalParam : std::uint8_t { wte, wpe, lnf_weight, lnf_bias, count };
// A block's saved activations; `output` is also the next block's input, so dropping a block's
// activations keeps it.
enum class LayerActivation : std::uint8_t {
  ln1,
  ln1_mean,
  ln1_rstd,
  qkv,
  attention_saved,
  atty,
  residual2,
  ln2,
  ln2_mean,
  ln2_rstd,
  fch,
  fch_gelu,
  output,
  count
};
enum class GlobalActivation : std::uint8_t {
  tokens,
  targets,
  encoded,
  lnf,
  lnf_mean,
  lnf_rstd,
  logits,
  losses,
  logsumexp,
  target_logits,
  count
};
// Backward scratch, shared by all blocks since they run one at a time.
enum class Workspace : std::uint8_t { d_residual, d_ln, d_atty, d_qkv, d_fch, d_fch_gelu, attention_scratch, count };

inline constexpr std::size_t kLayerParamCount = static_cast<std::size_t>(LayerParam::count);
inline constexpr std::size_t kGlobalParamCount = static_cast<std::size_t>(GlobalParam::count);
inline constexpr std::size_t kLayerActivationCount = static_cast<std::size_t>(LayerActivation::count);
inline constexpr std::size_t kGlobalActivationCount = static_cast<std::size_t>(GlobalActivation::count);
inline constexpr std::size_t kWorkspaceCount = static_cast<std::size_t>(Workspace::count);

// HF GPT-2 names: "ln_1.weight" for a block param (prefixed "h.{i}."), "wte.weight" for globals.
std::string_view layer_param_name(LayerParam param) noexcept;
std::string_view global_param_name(GlobalParam param) noexcept;
std::string_view layer_activation_name(LayerActivation activation) noexcept;

// One trainable tensor and the rows that go with it.
struct ParameterRows {
  std::string name;  // HF name
  int layer = -1;
  bool decay = false;
  int param = -1;
  int grad = -1;
  std::array<int, kMaxOptimizerStateBuffers> state{-1, -1};
  int master = -1;  // the f32 master copy the optimizer updates, when `param` is stored as bf16
};

// Storage dtypes, as the precision policy chooses them. bf16 weights: the matrices (wte, wpe and
// the four projections of each block) are stored as bf16 beside an f32 master copy counted as
// optimizer state; LayerNorm parameters and biases stay f32 (0.1% of the parameters). bf16
// activations: the block activations kept for backward are stored as bf16 and widened into f32
// staging rows (workspace, five rows shared by lifetime) where kernels read them; LayerNorm
// statistics and the attention kernel's saved rows stay f32, as do the global activations.
struct StorageTypes {
  DType weights = DType::f32;
  DType activations = DType::f32;
};

inline StorageTypes storage_types(const PrecisionPolicy& precision) {
  return {precision.weight_storage(), precision.activation_storage()};
}

// Residency moves since the model was built. Copy time is the copy stream's own clock; exposed time
// is how long compute stood waiting for copies (all of a synchronous move's time).
struct TransferTotals {
  std::uint64_t bytes_to_host = 0;
  std::uint64_t bytes_to_device = 0;
  double exposed_seconds = 0.0;
};

// The LM head runs over vocabulary chunks of head_chunk_columns() columns (so a bf16 wte is widened a
// chunk at a time, and the logits need not exist all at once). `keep` stores every chunk's logits
// from the forward pass for the backward (chunk-major: chunk c is a (B*T, width) block); `recompute`
// keeps one chunk's room and recomputes each chunk in the backward pass, one extra head matmul for
// B*T*padded_vocab fewer floats. The arithmetic is the same either way, so the results are bitwise
// equal.
enum class LogitsMode : std::uint8_t { keep, recompute };

// When a model's persistent rows (weights, grads, optimizer state, workspace) get memory: at once,
// on the device; or later, by allocate_persistent(), in the homes that strategies chose meanwhile
// (so offloaded state never touches the device, not even at start-up).
enum class Allocation : std::uint8_t { now, deferred };

class GPT2Model {
 public:
  // `batch` is the micro-batch size: activations are sized for it.
  GPT2Model(const GPT2Config& config, int batch, Device& device, Kernel& attention, int optimizer_state_buffers,
            Allocation allocation = Allocation::now, StorageTypes storage = {});
  void allocate_persistent();  // allocates each unallocated persistent row, zeroed, in its home
  ~GPT2Model();                // waits for copies in flight: they write into buffers this model owns
  GPT2Model(const GPT2Model&) = delete;
  GPT2Model& operator=(const GPT2Model&) = delete;

  const GPT2Config& config() const noexcept { return config_; }
  // Between micro batches only: the logits row is resized.
  void set_logits_mode(LogitsMode mode);
  int batch() const noexcept { return batch_; }
  const TensorTable& table() const noexcept { return table_; }
  Device& device() noexcept { return device_; }
  Profiler& profiler() noexcept { return profiler_; }
  const std::vector<ParameterRows>& parameters() const noexcept { return parameters_; }

  // The storage of an f32 row; empty when not allocated or not f32.
  std::span<float> data(int row) noexcept;
  bool allocated(int row) const noexcept;
  // A parameter's value in f32: its master copy when it is stored as bf16. Whoever writes it (the
  // optimizer, a checkpoint load) calls publish_weights() afterwards.
  std::span<float> values(const ParameterRows& rows) noexcept {
    return data(rows.master >= 0 ? rows.master : rows.param);
  }
  std::span<float> param(GlobalParam which) noexcept;
  std::span<float> param(int layer, LayerParam which) noexcept;
  // Rounds every master copy into its bf16 weights; nothing to do with f32 weights.
  void publish_weights();
  int activation_row(int layer, LayerActivation which) const;
  int global_activation_row(GlobalActivation which) const {
    return global_activation_rows_[static_cast<std::size_t>(which)];
  }

  void init_weights(std::uint64_t seed);
  void zero_grads();

  // Residency of a block's weights, grads or optimizer state (layer -1: the global parameters);
  // activations are per step. A group being moved reads as residing at its destination.
  Residence residence(int layer, TensorGroup group) const;
  // Moves a group and waits for the copy.
  void move_group(int layer, TensorGroup group, Home to);
  // Starts moving a group on the copy stream. Until complete_moves, the group's data() is still
  // the source: readable, but a write would be lost, so everything that writes completes first.
  void begin_move_group(int layer, TensorGroup group, Home to);
  void complete_moves(int layer, TensorGroup group);
  void complete_all_moves();
  // Completes the moves whose copies have already landed, freeing their sources; never waits.
  void collect_finished_moves();
  // Weights fetched from the host keep their host copy (ZeRO-Infinity's parameter offload): until
  // the weights change, evicting them only frees the device copy. The optimizer calls this before
  // it writes weights that are on the device, whose host copies would go stale.
  void drop_stale_weight_copies();
  const TransferTotals& transfers() const noexcept { return transfers_; }

  // The step, piece by piece.
  void begin_micro_batch(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets);
  void embed_forward();
  void allocate_layer_activations(int layer);
  void free_layer_activations(int layer, bool keep_output);
  // Selective checkpointing: frees the LayerNorm and GELU outputs only; recompute_cheap_activations
  // rebuilds them from the kept matmul outputs and LayerNorm statistics, bit for bit.
  void free_cheap_activations(int layer);
  bool only_cheap_activations_missing(int layer) const;
  void recompute_cheap_activations(int layer);
  bool layer_activations_present(int layer) const;
  void layer_forward(int layer);
  double head_forward();            // mean cross-entropy of the micro batch
  void head_backward(float dloss);  // dloss: gradient of the objective w.r.t. each position's loss
  void layer_backward(int layer);
  void embed_backward();
  void end_micro_batch();

 private:
  int add_row(std::string name, int layer, std::vector<std::int64_t> shape, MemoryCategory category, TensorGroup group,
              ElementType element = ElementType::f32);
  void allocate_row(int row, bool zero);
  void free_row(int row) noexcept;
  float* f(int row) noexcept { return static_cast<float*>(storage_[static_cast<std::size_t>(row)].data()); }
  std::uint16_t* bf(int row) noexcept {
    return static_cast<std::uint16_t*>(storage_[static_cast<std::size_t>(row)].data());
  }
  // The f32 buffer kernels use for an activation: its row, or its staging row when it is stored as bf16.
  float* act(int layer, LayerActivation which) noexcept;
  // bf16 activations: store() rounds a freshly computed staging buffer into the layer's row (and
  // the staging to the same values); load() widens the row back into staging. No-ops for f32.
  void store(int layer, LayerActivation which);
  void load(int layer, LayerActivation which);
  void load_input(int layer);  // the previous block's output, into the input staging
  void widen_into_staging(int staging, int row);
  // A block's projections (in_out layout), whose weight row may be bf16.
  void project_forward(int weight_row, float* out, const float* inp, const float* bias, std::int64_t in_features,
                       std::int64_t out_features);
  void project_backward(int weight_row, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        std::int64_t in_features, std::int64_t out_features, cpu::GradientWrite dinp_write);
  float* global_act(GlobalActivation which) noexcept { return f(global_activation_row(which)); }
  float* ws(Workspace which) noexcept { return f(workspace_rows_[static_cast<std::size_t>(which)]); }
  float* grad(int layer, LayerParam which) noexcept;
  float* grad(GlobalParam which) noexcept;
  float* layer_input(int layer) noexcept;
  void zero(float* data, std::int64_t count);
  std::vector<int> group_rows(int layer, TensorGroup group) const;
  void complete_rows(const std::vector<int>& rows);
  void layernorm1_forward(int layer);
  void layernorm2_forward(int layer);
  void gelu_forward(int layer);
  // One vocabulary chunk of the head: its logits (the stored block, or the one-chunk room) and
  // the chunk of wte in f32 (the row itself, or widened into the weight scratch).
  float* chunk_logits(std::int64_t first);
  const float* wte_chunk(std::int64_t first, std::int64_t width);
  void chunk_logits_forward(float* logits, const float* wte, std::int64_t width);

  // A move in flight: the destination buffer and the copy's ticket, per row.
  struct PendingMove {
    Buffer destination;
    CopyTicket ticket = 0;
  };

  GPT2Config config_;
  StorageTypes storage_types_;
  LogitsMode logits_mode_ = LogitsMode::keep;
  std::int64_t head_chunk_columns_ = 0;
  int batch_;
  Device& device_;
  Kernel& attention_;
  AttentionShape attention_shape_;
  TensorTable table_;
  std::vector<Buffer> storage_;       // parallel to table rows
  std::vector<PendingMove> pending_;  // parallel to table rows
  std::size_t moves_in_flight_ = 0;   // rows with a pending move: lets hooks skip the scan when 0
  std::vector<Buffer> host_copy_;     // parallel to table rows: clean host copies of fetched weights
  TransferTotals transfers_;
  std::vector<ParameterRows> parameters_;
  std::vector<std::array<int, kLayerParamCount>> layer_param_rows_;
  std::vector<std::array<int, kLayerParamCount>> layer_grad_rows_;
  std::array<int, kGlobalParamCount> global_param_rows_{};
  std::array<int, kGlobalParamCount> global_grad_rows_{};
  std::vector<std::array<int, kLayerActivationCount>> layer_activation_rows_;
  std::array<int, kGlobalActivationCount> global_activation_rows_{};
  std::array<int, kWorkspaceCount> workspace_rows_{};
  // bf16 activations: one f32 staging row per stored kind (-1: stored as f32) and one for the input.
  std::array<int, kLayerActivationCount> activation_staging_rows_{};
  int input_staging_row_ = -1;
  // bf16 weights: where matmuls widen weight chunks.
  int weight_scratch_row_ = -1;
  std::int64_t weight_scratch_elements_ = 0;
  Profiler profiler_;
};

}  // namespace strata
