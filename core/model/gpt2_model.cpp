#include "core/model/gpt2_model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/util/random.hpp"
#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/residual.hpp"

namespace strata {

namespace {

constexpr std::size_t idx(auto value) {
  return static_cast<std::size_t>(value);
}

bool is_matrix(LayerParam param) {
  return param == LayerParam::qkv_weight || param == LayerParam::attn_proj_weight || param == LayerParam::fc_weight ||
         param == LayerParam::fc_proj_weight;
}

// Kept as f32 under bf16 activation storage: the LayerNorm statistics are small and feed every
// backward element, and the attention kernel's saved rows are its own format.
bool stays_f32(LayerActivation activation) {
  using LA = LayerActivation;
  return activation == LA::ln1_mean || activation == LA::ln1_rstd || activation == LA::ln2_mean ||
         activation == LA::ln2_rstd || activation == LA::attention_saved;
}

ElementType element_of(DType dtype) {
  return dtype == DType::bf16 ? ElementType::bf16 : ElementType::f32;
}

// The widest chunk of a bf16 weight widened at once: 4 MiB of f32, enough for sgemm to run at speed.
constexpr std::int64_t kWeightScratchElements = std::int64_t{1} << 20;

}  // namespace

std::string_view layer_param_name(LayerParam param) noexcept {
  switch (param) {
    case LayerParam::ln1_weight: return "ln_1.weight";
    case LayerParam::ln1_bias: return "ln_1.bias";
    case LayerParam::qkv_weight: return "attn.c_attn.weight";
    case LayerParam::qkv_bias: return "attn.c_attn.bias";
    case LayerParam::attn_proj_weight: return "attn.c_proj.weight";
    case LayerParam::attn_proj_bias: return "attn.c_proj.bias";
    case LayerParam::ln2_weight: return "ln_2.weight";
    case LayerParam::ln2_bias: return "ln_2.bias";
    case LayerParam::fc_weight: return "mlp.c_fc.weight";
    case LayerParam::fc_bias: return "mlp.c_fc.bias";
    case LayerParam::fc_proj_weight: return "mlp.c_proj.weight";
    case LayerParam::fc_proj_bias: return "mlp.c_proj.bias";
    case LayerParam::count: break;
  }
  return "?";
}

std::string_view global_param_name(GlobalParam param) noexcept {
  switch (param) {
    case GlobalParam::wte: return "wte.weight";
    case GlobalParam::wpe: return "wpe.weight";
    case GlobalParam::lnf_weight: return "ln_f.weight";
    case GlobalParam::lnf_bias: return "ln_f.bias";
    case GlobalParam::count: break;
  }
  return "?";
}

std::string_view layer_activation_name(LayerActivation activation) noexcept {
  switch (activation) {
    case LayerActivation::ln1: return "ln1";
    case LayerActivation::ln1_mean: return "ln1_mean";
    case LayerActivation::ln1_rstd: return "ln1_rstd";
    case LayerActivation::qkv: return "qkv";
    case LayerActivation::attention_saved: return "attention_saved";
    case LayerActivation::atty: return "atty";
    case LayerActivation::residual2: return "residual2";
    case LayerActivation::ln2: return "ln2";
    case LayerActivation::ln2_mean: return "ln2_mean";
    case LayerActivation::ln2_rstd: return "ln2_rstd";
    case LayerActivation::fch: return "fch";
    case LayerActivation::fch_gelu: return "fch_gelu";
    case LayerActivation::output: return "output";
    case LayerActivation::count: break;
  }
  return "?";
}

GPT2Model::GPT2Model(const GPT2Config& config, int batch, Device& device, Kernel& attention,
                     int optimizer_state_buffers, Allocation allocation, StorageTypes storage)
    : config_(config), storage_types_(storage), batch_(batch), device_(device), attention_(attention) {
  if (const std::string problem = config.validate(); !problem.empty()) throw std::invalid_argument(problem);
  if (optimizer_state_buffers < 0 || optimizer_state_buffers > kMaxOptimizerStateBuffers)
    throw std::invalid_argument("optimizer asks for " + std::to_string(optimizer_state_buffers) +
                                " state buffers per parameter; the host supports at most " +
                                std::to_string(kMaxOptimizerStateBuffers));
  const std::int64_t B = batch, T = config.seq_len, C = config.d_model, L = config.n_layer;
  const std::int64_t Vp = config.padded_vocab();
  attention_shape_ = AttentionShape{batch, config.seq_len, config.d_model, config.n_head};
  // About 1M elements of wte per head chunk (a multiple of 64 columns): what the weight scratch holds.
  head_chunk_columns_ = std::clamp<std::int64_t>(kWeightScratchElements / C / 64 * 64, 64, Vp);

  // Parameters, then their gradients and optimizer state: the table's order is the print order.
  // Matrices follow the weight storage dtype; vectors stay f32.
  std::int64_t largest_matrix = 0;
  auto add_parameter = [&](std::string name, int layer, std::vector<std::int64_t> shape, bool decay) {
    ParameterRows rows;
    rows.name = name;
    rows.layer = layer;
    rows.decay = decay;
    const bool bf16 = storage.weights == DType::bf16 && shape.size() == 2;
    rows.param = add_row(name, layer, shape, MemoryCategory::weights, TensorGroup::weights,
                         bf16 ? ElementType::bf16 : ElementType::f32);
    rows.grad = add_row(name + ".grad", layer, shape, MemoryCategory::grads, TensorGroup::grads);
    for (int s = 0; s < optimizer_state_buffers; ++s)
      rows.state[static_cast<std::size_t>(s)] = add_row(name + ".state" + std::to_string(s), layer, shape,
                                                        MemoryCategory::optimizer, TensorGroup::optimizer_state);
    if (bf16) {
      rows.master = add_row(name + ".master", layer, shape, MemoryCategory::optimizer, TensorGroup::optimizer_state);
      largest_matrix = std::max(largest_matrix, shape[0] * shape[1]);
    }
    parameters_.push_back(rows);
    return rows;
  };
  const std::vector<std::vector<std::int64_t>> global_shapes = {{Vp, C}, {T, C}, {C}, {C}};
  for (std::size_t p = 0; p < kGlobalParamCount; ++p) {
    const auto rows = add_parameter(std::string(global_param_name(static_cast<GlobalParam>(p))), -1, global_shapes[p],
                                    p <= idx(GlobalParam::wpe));
    global_param_rows_[p] = rows.param;
    global_grad_rows_[p] = rows.grad;
  }
  const std::vector<std::vector<std::int64_t>> layer_shapes = {{C}, {C}, {C, 3 * C}, {3 * C}, {C, C},     {C},
                                                               {C}, {C}, {C, 4 * C}, {4 * C}, {4 * C, C}, {C}};
  layer_param_rows_.resize(static_cast<std::size_t>(L));
  layer_grad_rows_.resize(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l)
    for (std::size_t p = 0; p < kLayerParamCount; ++p) {
      const auto param = static_cast<LayerParam>(p);
      const auto rows = add_parameter("h." + std::to_string(l) + "." + std::string(layer_param_name(param)), l,
                                      layer_shapes[p], is_matrix(param));
      layer_param_rows_[static_cast<std::size_t>(l)][p] = rows.param;
      layer_grad_rows_[static_cast<std::size_t>(l)][p] = rows.grad;
    }

  // Activations of one micro batch.
  const auto attention_saved = static_cast<std::int64_t>(attention.saved_floats(attention_shape_));
  const std::vector<std::vector<std::int64_t>> activation_shapes = {
      {B, T, C}, {B, T}, {B, T}, {B, T, 3 * C}, {attention_saved}, {B, T, C}, {B, T, C},
      {B, T, C}, {B, T}, {B, T}, {B, T, 4 * C}, {B, T, 4 * C},     {B, T, C}};
  const std::vector<std::pair<std::vector<std::int64_t>, ElementType>> global_activation_shapes = {
      {{B, T}, ElementType::i32},     {{B, T}, ElementType::i32}, {{B, T, C}, ElementType::f32},
      {{B, T, C}, ElementType::f32},  {{B, T}, ElementType::f32}, {{B, T}, ElementType::f32},
      {{B, T, Vp}, ElementType::f32}, {{B, T}, ElementType::f32}, {{B, T}, ElementType::f32},
      {{B, T}, ElementType::f32}};
  const std::vector<std::string_view> global_activation_names = {
      "tokens", "targets", "encoded", "lnf", "lnf_mean", "lnf_rstd", "logits", "losses", "logsumexp", "target_logits"};
  for (std::size_t a = 0; a < kGlobalActivationCount; ++a)
    global_activation_rows_[a] =
        add_row("act." + std::string(global_activation_names[a]), -1, global_activation_shapes[a].first,
                MemoryCategory::activations, TensorGroup::activations, global_activation_shapes[a].second);
  layer_activation_rows_.resize(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l)
    for (std::size_t a = 0; a < kLayerActivationCount; ++a)
      layer_activation_rows_[static_cast<std::size_t>(l)][a] = add_row(
          "h." + std::to_string(l) + ".act." + std::string(layer_activation_name(static_cast<LayerActivation>(a))), l,
          activation_shapes[a], MemoryCategory::activations, TensorGroup::activations,
          stays_f32(static_cast<LayerActivation>(a)) ? ElementType::f32 : element_of(storage.activations));

  // Backward scratch.
  const auto attention_scratch = static_cast<std::int64_t>(attention.backward_scratch_floats(attention_shape_));
  const std::vector<std::pair<std::string_view, std::vector<std::int64_t>>> workspace_rows = {
      {"d_residual", {B, T, C}},
      {"d_ln", {B, T, C}},
      {"d_atty", {B, T, C}},
      {"d_qkv", {B, T, 3 * C}},
      {"d_fch", {B, T, 4 * C}},
      {"d_fch_gelu", {B, T, 4 * C}},
      {"d_attention", {std::max<std::int64_t>(attention_scratch, 1)}}};
  for (std::size_t w = 0; w < kWorkspaceCount; ++w)
    workspace_rows_[w] = add_row("ws." + std::string(workspace_rows[w].first), -1, workspace_rows[w].second,
                                 MemoryCategory::workspace, TensorGroup::activations);
  activation_staging_rows_.fill(-1);
  if (storage.activations == DType::bf16) {
    // Five f32 staging rows serve a block's eight bf16 activations and its input, each pair
    // sharing a row by lifetime: in the forward pass a value is dead before its row is reused,
    // and the backward pass widens each value just before the one kernel that reads it.
    //   wide_a: qkv, then fch       narrow_a: input, then ln2      narrow_c: atty, then output
    //   wide_b: fch_gelu            narrow_b: ln1, then residual2
    auto slot = [&](const char* name, std::int64_t width) {
      return add_row(std::string("ws.f32.") + name, -1, {B, T, width}, MemoryCategory::workspace,
                     TensorGroup::activations);
    };
    const int wide_a = slot("wide_a", 4 * C), wide_b = slot("wide_b", 4 * C);
    const int narrow_a = slot("narrow_a", C), narrow_b = slot("narrow_b", C), narrow_c = slot("narrow_c", C);
    using LA = LayerActivation;
    const std::array<std::pair<LA, int>, 8> slots = {{{LA::qkv, wide_a},
                                                      {LA::fch, wide_a},
                                                      {LA::fch_gelu, wide_b},
                                                      {LA::ln2, narrow_a},
                                                      {LA::ln1, narrow_b},
                                                      {LA::residual2, narrow_b},
                                                      {LA::atty, narrow_c},
                                                      {LA::output, narrow_c}}};
    for (const auto& [which, row] : slots) activation_staging_rows_[idx(which)] = row;
    input_staging_row_ = narrow_a;
  }
  if (largest_matrix > 0) {
    weight_scratch_elements_ = std::min(largest_matrix, kWeightScratchElements);
    weight_scratch_row_ = add_row("ws.f32.weight_chunk", -1, {weight_scratch_elements_}, MemoryCategory::workspace,
                                  TensorGroup::activations);
  }

  storage_.resize(table_.rows().size());
  pending_.resize(table_.rows().size());
  host_copy_.resize(table_.rows().size());
  // Activations are allocated per micro batch.
  if (allocation == Allocation::now) allocate_persistent();
}

void GPT2Model::allocate_persistent() {
  for (int row = 0; row < static_cast<int>(table_.rows().size()); ++row)
    if (table_.row(row).category != MemoryCategory::activations && !allocated(row)) allocate_row(row, true);
}

GPT2Model::~GPT2Model() {
  for (PendingMove& move : pending_)
    if (move.ticket != 0) device_.copy_stream().wait(move.ticket);
}

int GPT2Model::add_row(std::string name, int layer, std::vector<std::int64_t> shape, MemoryCategory category,
                       TensorGroup group, ElementType element) {
  TensorRow row;
  row.name = std::move(name);
  row.layer = layer;
  row.shape = std::move(shape);
  row.element = element;
  row.category = category;
  row.group = group;
  row.home = Home::device;
  return table_.add(std::move(row));
}

void GPT2Model::allocate_row(int row, bool zero) {
  const TensorRow& r = table_.row(row);
  Allocator& arena = r.home == Home::device ? device_.device_memory() : device_.host_memory();
  storage_[static_cast<std::size_t>(row)] = arena.allocate(r.bytes(), r.category, "core", zero);
}

void GPT2Model::free_row(int row) noexcept {
  storage_[static_cast<std::size_t>(row)].reset();
}

std::span<float> GPT2Model::data(int row) noexcept {
  Buffer& buffer = storage_[static_cast<std::size_t>(row)];
  if (!buffer || table_.row(row).element != ElementType::f32) return {};
  return {static_cast<float*>(buffer.data()), static_cast<std::size_t>(table_.row(row).elements())};
}

bool GPT2Model::allocated(int row) const noexcept {
  return static_cast<bool>(storage_[static_cast<std::size_t>(row)]);
}

// parameters_ holds the globals first, then each block's parameters in LayerParam order.
std::span<float> GPT2Model::param(GlobalParam which) noexcept {
  return values(parameters_[idx(which)]);
}

std::span<float> GPT2Model::param(int layer, LayerParam which) noexcept {
  return values(parameters_[kGlobalParamCount + static_cast<std::size_t>(layer) * kLayerParamCount + idx(which)]);
}

void GPT2Model::publish_weights() {
  if (storage_types_.weights != DType::bf16) return;
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  for (const ParameterRows& rows : parameters_)
    if (rows.master >= 0) {
      complete_rows({rows.param, rows.master});
      const std::span<const float> master = data(rows.master);
      cpu::narrow(bf(rows.param), master.data(), static_cast<std::int64_t>(master.size()));
    }
}

float* GPT2Model::act(int layer, LayerActivation which) noexcept {
  const int staging = activation_staging_rows_[idx(which)];
  return f(staging >= 0 ? staging : activation_row(layer, which));
}

void GPT2Model::store(int layer, LayerActivation which) {
  const int staging = activation_staging_rows_[idx(which)];
  if (staging < 0) return;
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  const int row = activation_row(layer, which);
  cpu::narrow_and_round(bf(row), f(staging), table_.row(row).elements());
}

void GPT2Model::widen_into_staging(int staging, int row) {
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  cpu::widen(f(staging), bf(row), table_.row(row).elements());
}

void GPT2Model::load(int layer, LayerActivation which) {
  const int staging = activation_staging_rows_[idx(which)];
  if (staging >= 0) widen_into_staging(staging, activation_row(layer, which));
}

void GPT2Model::load_input(int layer) {
  if (layer > 0 && input_staging_row_ >= 0)
    widen_into_staging(input_staging_row_, activation_row(layer - 1, LayerActivation::output));
}

void GPT2Model::project_forward(int weight_row, float* out, const float* inp, const float* bias,
                                std::int64_t in_features, std::int64_t out_features) {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  if (table_.row(weight_row).element == ElementType::bf16)
    cpu::matmul_forward_bf16(out, inp, bf(weight_row), bias, N, in_features, out_features, f(weight_scratch_row_),
                             weight_scratch_elements_);
  else
    cpu::matmul_forward(out, inp, f(weight_row), bias, N, in_features, out_features, cpu::WeightLayout::in_out);
}

void GPT2Model::project_backward(int weight_row, float* dinp, float* dweight, float* dbias, const float* dout,
                                 const float* inp, std::int64_t in_features, std::int64_t out_features,
                                 cpu::GradientWrite dinp_write) {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  if (table_.row(weight_row).element == ElementType::bf16)
    cpu::matmul_backward_bf16(dinp, dweight, dbias, dout, inp, bf(weight_row), N, in_features, out_features,
                              f(weight_scratch_row_), weight_scratch_elements_, dinp_write);
  else
    cpu::matmul_backward(dinp, dweight, dbias, dout, inp, f(weight_row), N, in_features, out_features,
                         cpu::WeightLayout::in_out, dinp_write);
}

int GPT2Model::activation_row(int layer, LayerActivation which) const {
  return layer_activation_rows_.at(static_cast<std::size_t>(layer))[idx(which)];
}

float* GPT2Model::grad(int layer, LayerParam which) noexcept {
  return f(layer_grad_rows_[static_cast<std::size_t>(layer)][idx(which)]);
}

float* GPT2Model::grad(GlobalParam which) noexcept {
  return f(global_grad_rows_[idx(which)]);
}

void GPT2Model::init_weights(std::uint64_t seed) {
  // GPT-2: N(0, 0.02) for matrices and embeddings, residual projections scaled by 1/sqrt(2 L),
  // zero biases, unit LayerNorm gains. Padded vocab rows stay zero.
  Random random(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * config_.n_layer);
  for (const ParameterRows& rows : parameters_) {
    std::span<float> values = this->values(rows);
    const std::string& name = rows.name;
    const bool is_gain = name.ends_with("ln_1.weight") || name.ends_with("ln_2.weight") || name == "ln_f.weight";
    const bool is_bias = name.ends_with(".bias");
    if (is_gain) {
      std::fill(values.begin(), values.end(), 1.0f);
    } else if (is_bias) {
      std::fill(values.begin(), values.end(), 0.0f);
    } else {
      const double std_dev = name.ends_with("c_proj.weight") ? residual_std : 0.02;
      std::size_t count = values.size();
      if (name == "wte.weight") {
        count = static_cast<std::size_t>(config_.vocab) * static_cast<std::size_t>(config_.d_model);
        std::fill(values.begin() + static_cast<std::ptrdiff_t>(count), values.end(), 0.0f);
      }
      for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>(random.normal() * std_dev);
    }
  }
  publish_weights();
}

void GPT2Model::zero(float* data, std::int64_t count) {
  auto timer = profiler_.scope(ProfileKind::zero_fill);
  std::memset(data, 0, static_cast<std::size_t>(count) * sizeof(float));
}

void GPT2Model::zero_grads() {
  std::vector<int> grad_rows;
  for (const ParameterRows& rows : parameters_) grad_rows.push_back(rows.grad);
  complete_rows(grad_rows);
  for (const ParameterRows& rows : parameters_) {
    std::span<float> values = data(rows.grad);
    zero(values.data(), static_cast<std::int64_t>(values.size()));
  }
}

std::vector<int> GPT2Model::group_rows(int layer, TensorGroup group) const {
  std::vector<int> rows;
  for (const ParameterRows& parameter : parameters_) {
    if (parameter.layer != layer) continue;
    if (group == TensorGroup::weights) rows.push_back(parameter.param);
    if (group == TensorGroup::grads) rows.push_back(parameter.grad);
    if (group == TensorGroup::optimizer_state) {
      for (int state : parameter.state)
        if (state >= 0) rows.push_back(state);
      if (parameter.master >= 0) rows.push_back(parameter.master);
    }
  }
  if (group == TensorGroup::activations && layer >= 0)
    for (int row : layer_activation_rows_.at(static_cast<std::size_t>(layer))) rows.push_back(row);
  return rows;
}

Residence GPT2Model::residence(int layer, TensorGroup group) const {
  const std::vector<int> rows = group_rows(layer, group);
  if (rows.empty()) return Residence::absent;
  if (group == TensorGroup::activations)
    return layer_activations_present(layer) ? Residence::device : Residence::absent;
  return table_.row(rows.front()).home == Home::device ? Residence::device : Residence::host;
}

void GPT2Model::move_group(int layer, TensorGroup group, Home to) {
  begin_move_group(layer, group, to);
  complete_moves(layer, group);
}

void GPT2Model::begin_move_group(int layer, TensorGroup group, Home to) {
  if (group == TensorGroup::activations)
    throw std::invalid_argument("activations are dropped and recomputed, not moved");
  const std::vector<int> rows = group_rows(layer, group);
  for (int row : rows) {
    TensorRow& r = table_.row(row);
    if (r.home == to) continue;
    if (!allocated(row)) {  // not allocated yet: only the home changes
      r.home = to;
      continue;
    }
    // Moving back before the last move landed: let it land first, so copies never chain buffers.
    if (pending_[static_cast<std::size_t>(row)].ticket != 0) complete_rows({row});
    Buffer& host_copy = host_copy_[static_cast<std::size_t>(row)];
    if (to == Home::host && host_copy) {
      storage_[static_cast<std::size_t>(row)] = std::move(host_copy);  // frees the device copy; nothing to copy
      r.home = to;
      continue;
    }
    Allocator& arena = to == Home::device ? device_.device_memory() : device_.host_memory();
    PendingMove& move = pending_[static_cast<std::size_t>(row)];
    move.destination = arena.allocate(r.bytes(), r.category, "core");
    move.ticket = device_.copy_stream().enqueue(move.destination.data(), storage_[static_cast<std::size_t>(row)].data(),
                                                r.bytes());
    r.home = to;
    ++moves_in_flight_;
    (to == Home::device ? transfers_.bytes_to_device : transfers_.bytes_to_host) += r.bytes();
  }
}

void GPT2Model::complete_rows(const std::vector<int>& rows) {
  CopyTicket last = 0;
  for (int row : rows) last = std::max(last, pending_[static_cast<std::size_t>(row)].ticket);
  if (last == 0) return;
  {
    // Copies complete in issue order, so waiting for the newest covers them all.
    auto timer = profiler_.scope(ProfileKind::residency_transfer);
    const auto start = std::chrono::steady_clock::now();
    device_.copy_stream().wait(last);
    transfers_.exposed_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  for (int row : rows) {
    PendingMove& move = pending_[static_cast<std::size_t>(row)];
    if (move.ticket == 0) continue;
    Buffer& source = storage_[static_cast<std::size_t>(row)];
    const TensorRow& r = table_.row(row);
    if (r.group == TensorGroup::weights && r.home == Home::device)
      host_copy_[static_cast<std::size_t>(row)] = std::move(source);  // kept: evicting these weights is free
    source = std::move(move.destination);                             // frees the source unless kept above
    move.ticket = 0;
    --moves_in_flight_;
  }
}

void GPT2Model::complete_moves(int layer, TensorGroup group) {
  if (moves_in_flight_ == 0) return;  // the common case, on every block of every step
  complete_rows(group_rows(layer, group));
}

void GPT2Model::drop_stale_weight_copies() {
  for (const ParameterRows& rows : parameters_)
    if (table_.row(rows.param).home == Home::device) host_copy_[static_cast<std::size_t>(rows.param)].reset();
}

void GPT2Model::collect_finished_moves() {
  if (moves_in_flight_ == 0) return;
  const CopyTicket landed = device_.copy_stream().completed();
  std::vector<int> rows;
  for (std::size_t row = 0; row < pending_.size(); ++row)
    if (pending_[row].ticket != 0 && pending_[row].ticket <= landed) rows.push_back(static_cast<int>(row));
  complete_rows(rows);
}

void GPT2Model::complete_all_moves() {
  if (moves_in_flight_ == 0) return;
  std::vector<int> rows;
  for (std::size_t row = 0; row < pending_.size(); ++row)
    if (pending_[row].ticket != 0) rows.push_back(static_cast<int>(row));
  complete_rows(rows);
}

void GPT2Model::begin_micro_batch(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets) {
  for (int row : global_activation_rows_) allocate_row(row, false);
  std::memcpy(global_act(GlobalActivation::tokens), tokens.data(), tokens.size_bytes());
  std::memcpy(global_act(GlobalActivation::targets), targets.data(), targets.size_bytes());
}

void GPT2Model::end_micro_batch() {
  for (int l = 0; l < config_.n_layer; ++l) free_layer_activations(l, false);
  for (int row : global_activation_rows_) free_row(row);
}

void GPT2Model::allocate_layer_activations(int layer) {
  for (int row : layer_activation_rows_.at(static_cast<std::size_t>(layer)))
    if (!allocated(row)) allocate_row(row, false);
}

void GPT2Model::free_layer_activations(int layer, bool keep_output) {
  for (std::size_t a = 0; a < kLayerActivationCount; ++a) {
    if (keep_output && a == idx(LayerActivation::output)) continue;
    free_row(layer_activation_rows_[static_cast<std::size_t>(layer)][a]);
  }
}

namespace {
constexpr std::array kCheapActivations = {LayerActivation::ln1, LayerActivation::ln2, LayerActivation::fch_gelu};
}  // namespace

void GPT2Model::free_cheap_activations(int layer) {
  for (LayerActivation which : kCheapActivations) free_row(activation_row(layer, which));
}

bool GPT2Model::only_cheap_activations_missing(int layer) const {
  for (std::size_t a = 0; a < kLayerActivationCount; ++a) {
    const auto which = static_cast<LayerActivation>(a);
    const bool cheap = std::find(kCheapActivations.begin(), kCheapActivations.end(), which) != kCheapActivations.end();
    if (!cheap && !allocated(activation_row(layer, which))) return false;
  }
  return true;
}

void GPT2Model::recompute_cheap_activations(int layer) {
  for (LayerActivation which : kCheapActivations)
    if (!allocated(activation_row(layer, which))) allocate_row(activation_row(layer, which), false);
  // Each input is widened just before its kernel: staging rows are shared (see the constructor).
  // LayerNorm rewrites its kept mean and rstd with the same values: the same code on the same input.
  load_input(layer);
  layernorm1_forward(layer);
  load(layer, LayerActivation::residual2);
  layernorm2_forward(layer);
  load(layer, LayerActivation::fch);
  gelu_forward(layer);
}

bool GPT2Model::layer_activations_present(int layer) const {
  for (int row : layer_activation_rows_.at(static_cast<std::size_t>(layer)))
    if (!allocated(row)) return false;
  return true;
}

float* GPT2Model::layer_input(int layer) noexcept {
  if (layer == 0) return global_act(GlobalActivation::encoded);
  if (input_staging_row_ >= 0) return f(input_staging_row_);  // load_input() fills it
  return f(activation_row(layer - 1, LayerActivation::output));
}

void GPT2Model::embed_forward() {
  auto timer = profiler_.scope(ProfileKind::embedding_forward);
  const int wte = global_param_rows_[idx(GlobalParam::wte)], wpe = global_param_rows_[idx(GlobalParam::wpe)];
  const auto* tokens = reinterpret_cast<const std::int32_t*>(global_act(GlobalActivation::tokens));
  if (table_.row(wte).element == ElementType::bf16)
    cpu::embedding_forward_bf16(global_act(GlobalActivation::encoded), tokens, bf(wte), bf(wpe), batch_,
                                config_.seq_len, config_.d_model);
  else
    cpu::embedding_forward(global_act(GlobalActivation::encoded), tokens, f(wte), f(wpe), batch_, config_.seq_len,
                           config_.d_model);
}

// The cheap pieces of a block's forward, callable alone for selective recomputation. Each stores
// what it computed (a no-op unless activations are bf16).
void GPT2Model::layernorm1_forward(int l) {
  using LA = LayerActivation;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  {
    auto timer = profiler_.scope(ProfileKind::layernorm_forward);
    cpu::layernorm_forward(act(l, LA::ln1), act(l, LA::ln1_mean), act(l, LA::ln1_rstd), layer_input(l),
                           param(l, LayerParam::ln1_weight).data(), param(l, LayerParam::ln1_bias).data(), N, C);
  }
  store(l, LA::ln1);
}

void GPT2Model::layernorm2_forward(int l) {
  using LA = LayerActivation;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  {
    auto timer = profiler_.scope(ProfileKind::layernorm_forward);
    cpu::layernorm_forward(act(l, LA::ln2), act(l, LA::ln2_mean), act(l, LA::ln2_rstd), act(l, LA::residual2),
                           param(l, LayerParam::ln2_weight).data(), param(l, LayerParam::ln2_bias).data(), N, C);
  }
  store(l, LA::ln2);
}

void GPT2Model::gelu_forward(int l) {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  {
    auto timer = profiler_.scope(ProfileKind::gelu_forward);
    cpu::gelu_forward(act(l, LayerActivation::fch_gelu), act(l, LayerActivation::fch), N * 4 * C);
  }
  store(l, LayerActivation::fch_gelu);
}

void GPT2Model::layer_forward(int l) {
  using LA = LayerActivation;
  using LP = LayerParam;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  const auto& weight_rows = layer_param_rows_[static_cast<std::size_t>(l)];
  auto w_row = [&](LP p) { return weight_rows[idx(p)]; };
  auto b = [&](LP p) { return param(l, p).data(); };
  load_input(l);
  const float* x = layer_input(l);
  layernorm1_forward(l);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_forward);
    project_forward(w_row(LP::qkv_weight), act(l, LA::qkv), act(l, LA::ln1), b(LP::qkv_bias), C, 3 * C);
  }
  store(l, LA::qkv);
  {
    auto timer = profiler_.scope(ProfileKind::attention_forward);
    const int saved_row = activation_row(l, LA::attention_saved);
    const Status status =
        attention_.attention_forward(attention_shape_, {act(l, LA::atty), static_cast<std::size_t>(N * C)},
                                     data(saved_row), {act(l, LA::qkv), static_cast<std::size_t>(N * 3 * C)});
    if (!status) throw std::runtime_error("attention kernel: " + status.message());
  }
  store(l, LA::atty);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_forward);
    project_forward(w_row(LP::attn_proj_weight), act(l, LA::residual2), act(l, LA::atty), b(LP::attn_proj_bias), C, C);
  }
  {
    auto timer = profiler_.scope(ProfileKind::residual_forward);
    cpu::residual_forward(act(l, LA::residual2), act(l, LA::residual2), x, N * C);
  }
  store(l, LA::residual2);
  layernorm2_forward(l);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_forward);
    project_forward(w_row(LP::fc_weight), act(l, LA::fch), act(l, LA::ln2), b(LP::fc_bias), C, 4 * C);
  }
  store(l, LA::fch);
  gelu_forward(l);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_forward);
    project_forward(w_row(LP::fc_proj_weight), act(l, LA::output), act(l, LA::fch_gelu), b(LP::fc_proj_bias), 4 * C, C);
  }
  {
    auto timer = profiler_.scope(ProfileKind::residual_forward);
    cpu::residual_forward(act(l, LA::output), act(l, LA::output), act(l, LA::residual2), N * C);
  }
  store(l, LA::output);
}

void GPT2Model::layer_backward(int l) {
  using LA = LayerActivation;
  using LP = LayerParam;
  using W = Workspace;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  const auto& weight_rows = layer_param_rows_[static_cast<std::size_t>(l)];
  auto w_row = [&](LP p) { return weight_rows[idx(p)]; };
  auto w = [&](LP p) { return param(l, p).data(); };  // the f32 vectors: LayerNorm parameters
  auto g = [&](LP p) { return grad(l, p); };
  // bf16 activations are widened just before the kernel that reads them: staging rows are shared.
  float* d_residual = ws(W::d_residual);  // in: d(output); out: d(input)
  // MLP: output = fch_gelu @ W + b + residual2
  // Scratch gradients that one kernel writes are overwritten, not zeroed and accumulated into.
  constexpr auto overwrite = cpu::GradientWrite::overwrite;
  load(l, LA::fch_gelu);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_backward);
    project_backward(w_row(LP::fc_proj_weight), ws(W::d_fch_gelu), g(LP::fc_proj_weight), g(LP::fc_proj_bias),
                     d_residual, act(l, LA::fch_gelu), 4 * C, C, overwrite);
  }
  load(l, LA::fch);
  {
    auto timer = profiler_.scope(ProfileKind::gelu_backward);
    cpu::gelu_backward(ws(W::d_fch), act(l, LA::fch), ws(W::d_fch_gelu), N * 4 * C, overwrite);
  }
  load(l, LA::ln2);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_backward);
    project_backward(w_row(LP::fc_weight), ws(W::d_ln), g(LP::fc_weight), g(LP::fc_bias), ws(W::d_fch), act(l, LA::ln2),
                     C, 4 * C, overwrite);
  }
  load(l, LA::residual2);
  {
    // The residual passes d(output) straight through, so LN2's input gradient adds onto it.
    auto timer = profiler_.scope(ProfileKind::layernorm_backward);
    cpu::layernorm_backward(d_residual, g(LP::ln2_weight), g(LP::ln2_bias), ws(W::d_ln), act(l, LA::residual2),
                            w(LP::ln2_weight), act(l, LA::ln2_mean), act(l, LA::ln2_rstd), N, C);
  }
  // Attention: residual2 = atty @ W + b + input
  load(l, LA::atty);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_backward);
    project_backward(w_row(LP::attn_proj_weight), ws(W::d_atty), g(LP::attn_proj_weight), g(LP::attn_proj_bias),
                     d_residual, act(l, LA::atty), C, C, overwrite);
  }
  zero(ws(W::d_qkv), N * 3 * C);  // the attention kernel accumulates (the SDK's contract)
  load(l, LA::qkv);
  {
    auto timer = profiler_.scope(ProfileKind::attention_backward);
    const Status status = attention_.attention_backward(
        attention_shape_, {ws(W::d_qkv), static_cast<std::size_t>(N * 3 * C)},
        {ws(W::d_atty), static_cast<std::size_t>(N * C)}, {act(l, LA::qkv), static_cast<std::size_t>(N * 3 * C)},
        data(activation_row(l, LA::attention_saved)), data(workspace_rows_[idx(W::attention_scratch)]));
    if (!status) throw std::runtime_error("attention kernel: " + status.message());
  }
  load(l, LA::ln1);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_backward);
    project_backward(w_row(LP::qkv_weight), ws(W::d_ln), g(LP::qkv_weight), g(LP::qkv_bias), ws(W::d_qkv),
                     act(l, LA::ln1), C, 3 * C, overwrite);
  }
  load_input(l);
  auto timer = profiler_.scope(ProfileKind::layernorm_backward);
  cpu::layernorm_backward(d_residual, g(LP::ln1_weight), g(LP::ln1_bias), ws(W::d_ln), layer_input(l),
                          w(LP::ln1_weight), act(l, LA::ln1_mean), act(l, LA::ln1_rstd), N, C);
}

void GPT2Model::embed_backward() {
  auto timer = profiler_.scope(ProfileKind::embedding_backward);
  cpu::embedding_backward(grad(GlobalParam::wte), grad(GlobalParam::wpe), ws(Workspace::d_residual),
                          reinterpret_cast<const std::int32_t*>(global_act(GlobalActivation::tokens)), batch_,
                          config_.seq_len, config_.d_model);
}

}  // namespace strata
