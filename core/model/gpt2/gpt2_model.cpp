#include "core/model/gpt2/gpt2_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/util/random.hpp"

namespace strata {

namespace {

constexpr std::size_t idx(auto value) {
  return static_cast<std::size_t>(value);
}

bool is_matrix(LayerParam param) {
  return param == LayerParam::qkv_weight || param == LayerParam::attn_proj_weight || param == LayerParam::fc_weight ||
         param == LayerParam::fc_proj_weight;
}

bool is_layernorm(LayerParam param) {
  return param == LayerParam::ln1_weight || param == LayerParam::ln1_bias || param == LayerParam::ln2_weight ||
         param == LayerParam::ln2_bias;
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

GPT2Model::GPT2Model(const GPT2Config& config, int batch, Backend& backend, Kernel& attention,
                     const OptimizerStateLayout& optimizer_state, Allocation allocation, StorageTypes storage,
                     Purpose purpose, TrainablePlan trainable)
    : Model(backend, batch), config_(config), storage_types_(storage), attention_(attention) {
  trainable_ = std::move(trainable);
  if (const std::string problem = config.validate(); !problem.empty()) throw std::invalid_argument(problem);
  const std::int64_t B = batch, T = config.seq_len, C = config.d_model, L = config.n_layer;
  const std::int64_t Vp = config.padded_vocab();
  attention_shape_ =
      AttentionShape{batch, config.seq_len, config.n_head, config.n_head, config.d_model / config.n_head};

  // Parameters, then their gradients and optimizer state: the table's order is the print order.
  // The blocks' matrices follow the weight storage dtype, the embedding tables the embedding
  // storage; vectors stay f32. Widened (bf16) or dequantized (int8) matrices share one f32 scratch.
  if (storage.quantizer != nullptr) store_.use_weight_quantizer(*storage.quantizer);
  std::int64_t largest_matrix_scratch = 0;
  // A frozen parameter (the strategies' plan) is added without gradient, state or master.
  bool frozen_norms = false;
  auto add_parameter = [&](const std::string& name, int layer, std::vector<std::int64_t> shape, bool decay,
                           bool trains) {
    frozen_norms = frozen_norms || (!trains && shape.size() == 1);
    const bool matrix = shape.size() == 2;
    const DType dtype = !matrix ? DType::f32 : layer >= 0 ? storage.weights : storage.embedding_storage();
    const StateLayout state = optimizer_state ? optimizer_state(shape_elements(shape)) : StateLayout{};
    // The blocks' projections are HF Conv1D, (in, out); the tied wte is the head's (vocab, C).
    const ParameterRows& added =
        store_.add_parameter(name, layer, std::move(shape), decay, dtype, state, purpose == Purpose::training && trains,
                             layer >= 0 ? WeightLayout::in_out : WeightLayout::out_in);
    largest_matrix_scratch = std::max(largest_matrix_scratch, store_.matmul_scratch_floats(added, B * T));
    const int index = static_cast<int>(store_.parameters().size()) - 1;
    if (!trains) store_.set_role(index, ParameterRole::frozen);
    return index;
  };
  const std::vector<std::vector<std::int64_t>> global_shapes = {{Vp, C}, {T, C}, {C}, {C}};
  // wte is the tied head too: it trains while the embeddings or the head do.
  const std::array<bool, kGlobalParamCount> global_trains = {trainable_.embeddings || trainable_.head,
                                                             trainable_.embeddings, trainable_.head, trainable_.head};
  for (std::size_t p = 0; p < kGlobalParamCount; ++p)
    global_parameters_[p] = add_parameter(std::string(global_param_name(static_cast<GlobalParam>(p))), -1,
                                          global_shapes[p], p <= idx(GlobalParam::wpe), global_trains[p]);
  const std::vector<std::vector<std::int64_t>> layer_shapes = {{C}, {C}, {C, 3 * C}, {3 * C}, {C, C},     {C},
                                                               {C}, {C}, {C, 4 * C}, {4 * C}, {4 * C, C}, {C}};
  layer_parameters_.resize(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l)
    for (std::size_t p = 0; p < kLayerParamCount; ++p) {
      const auto param = static_cast<LayerParam>(p);
      layer_parameters_[static_cast<std::size_t>(l)][p] =
          add_parameter("h." + std::to_string(l) + "." + std::string(layer_param_name(param)), l, layer_shapes[p],
                        is_matrix(param), trainable_.block_trains(l));
    }
  if (purpose == Purpose::training && frozen_norms) declare_frozen_gradient_sink(C);
  declare_adapters(
      gpt2_adapter_targets(config), [](int l) { return "h." + std::to_string(l) + "."; }, optimizer_state, purpose);

  // Activations of one micro batch.
  add_token_rows();
  encoded_row_ = add_global_activation("act.encoded", {B, T, C});
  lnf_row_ = add_global_activation("act.lnf", {B, T, C});
  lnf_mean_row_ = add_global_activation("act.lnf_mean", {B, T});
  lnf_rstd_row_ = add_global_activation("act.lnf_rstd", {B, T});
  LmHeadRows head_rows;
  head_rows.logits = add_global_activation("act.logits", {B, T, Vp});
  head_rows.losses = add_global_activation("act.losses", {B, T});
  head_rows.logsumexp = add_global_activation("act.logsumexp", {B, T});
  head_rows.target_logits = add_global_activation("act.target_logits", {B, T});

  const auto attention_saved = attention.saved_floats(attention_shape_);
  const std::vector<std::vector<std::int64_t>> activation_shapes = {
      {B, T, C}, {B, T}, {B, T}, {B, T, 3 * C}, {attention_saved}, {B, T, C}, {B, T, C},
      {B, T, C}, {B, T}, {B, T}, {B, T, 4 * C}, {B, T, 4 * C},     {B, T, C}};
  std::vector<std::vector<int>> activation_rows(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l)
    for (std::size_t a = 0; a < kLayerActivationCount; ++a)
      activation_rows[static_cast<std::size_t>(l)].push_back(store_.add_row(
          "h." + std::to_string(l) + ".act." + std::string(layer_activation_name(static_cast<LayerActivation>(a))), l,
          activation_shapes[a], MemoryCategory::activations, TensorGroup::activations,
          stays_f32(static_cast<LayerActivation>(a)) ? ElementType::f32 : element_of(storage.activations)));
  set_layer_activation_rows(std::move(activation_rows), static_cast<int>(LayerActivation::output));

  // Backward scratch.
  const auto attention_scratch = attention.backward_scratch_floats(attention_shape_);
  const std::vector<std::pair<std::string_view, std::vector<std::int64_t>>> workspace_rows = {
      {"d_residual", {B, T, C}},
      {"d_ln", {B, T, C}},
      {"d_atty", {B, T, C}},
      {"d_qkv", {B, T, 3 * C}},
      {"d_fch", {B, T, 4 * C}},
      {"d_fch_gelu", {B, T, 4 * C}},
      {"d_attention", {std::max<std::int64_t>(attention_scratch, 1)}}};
  workspace_rows_.fill(-1);
  for (std::size_t w = 0; w < kWorkspaceCount && purpose == Purpose::training; ++w)
    workspace_rows_[w] = store_.add_row("ws." + std::string(workspace_rows[w].first), -1, workspace_rows[w].second,
                                        MemoryCategory::workspace, TensorGroup::activations);
  if (storage.activations == DType::bf16) {
    // Five f32 staging rows serve a block's eight bf16 activations and its input, each pair
    // sharing a row by lifetime: in the forward pass a value is dead before its row is reused,
    // and the backward pass widens each value just before the kernels that read it. atty is read
    // twice, by the projection's backward and then as attention's `out`: nothing may write
    // narrow_c between the two.
    //   wide_a: qkv, then fch       narrow_a: input, then ln2      narrow_c: atty, then output
    //   wide_b: fch_gelu            narrow_b: ln1, then residual2
    auto slot = [&](const char* name, std::int64_t width) {
      return store_.add_row(std::string("ws.f32.") + name, -1, {B, T, width}, MemoryCategory::workspace,
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
    for (const auto& [which, row] : slots) staging_.assign(static_cast<int>(which), row);
    input_staging_row_ = narrow_a;
  }
  declare_weight_scratch_and_head(largest_matrix_scratch, LmHeadShape{B * T, C, config.vocab, Vp}, head_rows);
  // Activations are allocated per micro batch.
  if (allocation == Allocation::now) store_.allocate_persistent();
}

nlohmann::json GPT2Model::config_json() const {
  return {{"n_layer", config_.n_layer},
          {"n_head", config_.n_head},
          {"d_model", config_.d_model},
          {"vocab", config_.vocab},
          {"seq_len", config_.seq_len}};
}

// Checkpoints store exactly `vocab` rows of wte; the padded rows exist only in memory.
std::vector<std::int64_t> GPT2Model::stored_shape(const ParameterRows& rows) const {
  std::vector<std::int64_t> shape = table().row(rows.param).shape;
  if (rows.name == "wte.weight") shape[0] = config_.vocab;
  return shape;
}

// HF files may prefix every name with "transformer.".
std::vector<std::string> GPT2Model::file_names(const ParameterRows& rows) const {
  return {rows.name, "transformer." + rows.name};
}

// The tied lm_head and the causal-mask buffers older exports carry.
bool GPT2Model::ignorable_file_tensor(std::string_view name) const {
  return name == "lm_head.weight" || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

TensorView GPT2Model::param(GlobalParam which) const noexcept {
  return store_.values(parameters()[static_cast<std::size_t>(global_parameters_[idx(which)])]);
}

TensorView GPT2Model::param(int layer, LayerParam which) const noexcept {
  return store_.values(
      parameters()[static_cast<std::size_t>(layer_parameters_[static_cast<std::size_t>(layer)][idx(which)])]);
}

const float* GPT2Model::vec(int layer, LayerParam which) const noexcept {
  return param(layer, which).f32();
}

float* GPT2Model::grad(int layer, LayerParam which) const noexcept {
  const auto& rows =
      parameters()[static_cast<std::size_t>(layer_parameters_[static_cast<std::size_t>(layer)][idx(which)])];
  return is_layernorm(which) ? norm_grad_of(rows) : grad_of(rows);
}

float* GPT2Model::grad(GlobalParam which) const noexcept {
  const auto& rows = parameters()[static_cast<std::size_t>(global_parameters_[idx(which)])];
  return which == GlobalParam::lnf_weight || which == GlobalParam::lnf_bias ? norm_grad_of(rows) : grad_of(rows);
}

float* GPT2Model::act(int layer, LayerActivation which) noexcept {
  return staging_.buffer(static_cast<int>(which), activation_row(layer, which));
}

void GPT2Model::save_activation(int layer, LayerActivation which) {
  staging_.store(static_cast<int>(which), activation_row(layer, which));
}

void GPT2Model::load_activation(int layer, LayerActivation which) {
  staging_.load(static_cast<int>(which), activation_row(layer, which));
}

void GPT2Model::load_input(int layer) {
  if (layer == 0 || input_staging_row_ < 0) return;
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  const int row = activation_row(layer - 1, LayerActivation::output);
  ops().widen(store_.f32(input_staging_row_), store_.bf16(row), table().row(row).elements());
}

const float* GPT2Model::layer_input(int layer) noexcept {
  if (layer == 0) return store_.f32(encoded_row_);
  if (input_staging_row_ >= 0) return store_.f32(input_staging_row_);  // load_input() fills it
  return store_.f32(activation_row(layer - 1, LayerActivation::output));
}

void GPT2Model::project_forward(int layer, LayerParam weight, LayerParam bias, float* out, const float* inp,
                                std::int64_t in_features, std::int64_t out_features) {
  const auto& rows =
      parameters()[static_cast<std::size_t>(layer_parameters_[static_cast<std::size_t>(layer)][idx(weight)])];
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  adapted_matmul_forward(rows, out, inp, vec(layer, bias),
                         MatmulShape{N, in_features, out_features, WeightLayout::in_out});
}

// Scratch gradients that one kernel writes are overwritten, not zeroed and accumulated into.
void GPT2Model::project_backward(int layer, LayerParam weight, LayerParam bias, float* dinp, const float* dout,
                                 const float* inp, std::int64_t in_features, std::int64_t out_features) {
  const auto& rows =
      parameters()[static_cast<std::size_t>(layer_parameters_[static_cast<std::size_t>(layer)][idx(weight)])];
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  adapted_matmul_backward(rows, dinp, grad(layer, bias), dout, inp,
                          MatmulShape{N, in_features, out_features, WeightLayout::in_out}, GradientWrite::overwrite);
}

void GPT2Model::init_base_weights(std::uint64_t seed) {
  // GPT-2: N(0, 0.02) for matrices and embeddings, residual projections scaled by 1/sqrt(2 L),
  // zero biases, unit LayerNorm gains. Padded vocab rows stay zero. Values are drawn on the host
  // and copied into each parameter's f32 value row.
  Random random(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * config_.n_layer);
  std::vector<float> values;
  for (const ParameterRows& rows : parameters()) {
    if (rows.role == ParameterRole::adapter) continue;  // the adapter initialises its own
    const TensorView view = store_.values(rows);
    values.assign(static_cast<std::size_t>(view.count), 0.0f);
    const std::string& name = rows.name;
    const bool is_gain = name.ends_with("ln_1.weight") || name.ends_with("ln_2.weight") || name == "ln_f.weight";
    const bool is_bias = name.ends_with(".bias");
    if (is_gain) {
      std::fill(values.begin(), values.end(), 1.0f);
    } else if (!is_bias) {
      const double std_dev = name.ends_with("c_proj.weight") ? residual_std : 0.02;
      std::size_t count = values.size();
      if (name == "wte.weight")
        count = static_cast<std::size_t>(config_.vocab) * static_cast<std::size_t>(config_.d_model);
      for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>(random.normal() * std_dev);
    }
    write_values(rows, values);
  }
}

std::vector<int> GPT2Model::cheap_activation_kinds() const {
  return {static_cast<int>(LayerActivation::ln1), static_cast<int>(LayerActivation::ln2),
          static_cast<int>(LayerActivation::fch_gelu)};
}

int GPT2Model::attention_saved_kind() const {
  return static_cast<int>(LayerActivation::attention_saved);
}

void GPT2Model::recompute_cheap_activations(int layer) {
  // Each input is widened just before its kernel: staging rows are shared (see the constructor).
  // LayerNorm rewrites its kept mean and rstd with the same values: the same code on the same input.
  load_input(layer);
  layernorm1_forward(layer);
  load_activation(layer, LayerActivation::residual2);
  layernorm2_forward(layer);
  load_activation(layer, LayerActivation::fch);
  gelu_forward(layer);
}

// Writes atty again with the same values (the same kernel on the same q, k, v); under bf16 storage
// into its staging row, which the backward pass refills from the stored value before reading it.
void GPT2Model::recompute_attention(int layer) {
  load_activation(layer, LayerActivation::qkv);
  attention_forward(layer);
}

void GPT2Model::attention_forward(int l) {
  auto timer = profiler_.scope(ProfileKind::attention_forward);
  const Status status = attention_.attention_forward(attention_shape_, act(l, LayerActivation::atty),
                                                     store_.f32(activation_row(l, LayerActivation::attention_saved)),
                                                     attention_inputs(l));
  if (!status) throw std::runtime_error("attention kernel at layer " + std::to_string(l) + ": " + status.message());
}

// The cheap pieces of a block's forward, callable alone for cheap recomputation. Each stores
// what it computed (a no-op unless activations are bf16).
void GPT2Model::layernorm1_forward(int l) {
  using LA = LayerActivation;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  {
    auto timer = profiler_.scope(ProfileKind::layernorm_forward);
    ops().layernorm_forward(act(l, LA::ln1), act(l, LA::ln1_mean), act(l, LA::ln1_rstd), layer_input(l),
                            vec(l, LayerParam::ln1_weight), vec(l, LayerParam::ln1_bias), N, C, kLayerNormEps);
  }
  save_activation(l, LA::ln1);
}

void GPT2Model::layernorm2_forward(int l) {
  using LA = LayerActivation;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  {
    auto timer = profiler_.scope(ProfileKind::layernorm_forward);
    ops().layernorm_forward(act(l, LA::ln2), act(l, LA::ln2_mean), act(l, LA::ln2_rstd), act(l, LA::residual2),
                            vec(l, LayerParam::ln2_weight), vec(l, LayerParam::ln2_bias), N, C, kLayerNormEps);
  }
  save_activation(l, LA::ln2);
}

void GPT2Model::gelu_forward(int l) {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  {
    auto timer = profiler_.scope(ProfileKind::gelu_forward);
    ops().gelu_forward(act(l, LayerActivation::fch_gelu), act(l, LayerActivation::fch), N * 4 * C);
  }
  save_activation(l, LayerActivation::fch_gelu);
}

// GPT-2's packed qkv (N, 3C): q, k and v are three column blocks of one buffer.
AttentionInputs GPT2Model::attention_inputs(int l) {
  const std::int64_t C = config_.d_model;
  const float* qkv = act(l, LayerActivation::qkv);
  return AttentionInputs{qkv, qkv + C, qkv + 2 * C, 3 * C, 3 * C};
}

void GPT2Model::layer_forward(int l) {
  using LA = LayerActivation;
  using LP = LayerParam;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  load_input(l);
  const float* x = layer_input(l);
  if (trainable_.skips(l)) {  // the identity: its output is its input
    ops().copy(act(l, LA::output), x, static_cast<std::uint64_t>(N * C) * sizeof(float));
    save_activation(l, LA::output);
    return;
  }
  layernorm1_forward(l);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_forward);
    project_forward(l, LP::qkv_weight, LP::qkv_bias, act(l, LA::qkv), act(l, LA::ln1), C, 3 * C);
  }
  save_activation(l, LA::qkv);
  attention_forward(l);
  save_activation(l, LA::atty);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_forward);
    project_forward(l, LP::attn_proj_weight, LP::attn_proj_bias, act(l, LA::residual2), act(l, LA::atty), C, C);
  }
  {
    auto timer = profiler_.scope(ProfileKind::residual_forward);
    ops().residual_forward(act(l, LA::residual2), act(l, LA::residual2), x, N * C);
  }
  save_activation(l, LA::residual2);
  layernorm2_forward(l);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_forward);
    project_forward(l, LP::fc_weight, LP::fc_bias, act(l, LA::fch), act(l, LA::ln2), C, 4 * C);
  }
  save_activation(l, LA::fch);
  gelu_forward(l);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_forward);
    project_forward(l, LP::fc_proj_weight, LP::fc_proj_bias, act(l, LA::output), act(l, LA::fch_gelu), 4 * C, C);
  }
  {
    auto timer = profiler_.scope(ProfileKind::residual_forward);
    ops().residual_forward(act(l, LA::output), act(l, LA::output), act(l, LA::residual2), N * C);
  }
  save_activation(l, LA::output);
}

void GPT2Model::layer_backward(int l) {
  using LA = LayerActivation;
  using LP = LayerParam;
  using W = Workspace;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  if (trainable_.skips(l)) return;  // the identity passes d(output) through as d(input)
  // bf16 activations are widened just before the kernel that reads them: staging rows are shared.
  float* d_residual = ws(W::d_residual);  // in: d(output); out: d(input)
  // MLP: output = fch_gelu @ W + b + residual2
  load_activation(l, LA::fch_gelu);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_backward);
    project_backward(l, LP::fc_proj_weight, LP::fc_proj_bias, ws(W::d_fch_gelu), d_residual, act(l, LA::fch_gelu),
                     4 * C, C);
  }
  load_activation(l, LA::fch);
  {
    auto timer = profiler_.scope(ProfileKind::gelu_backward);
    ops().gelu_backward(ws(W::d_fch), act(l, LA::fch), ws(W::d_fch_gelu), N * 4 * C, GradientWrite::overwrite);
  }
  load_activation(l, LA::ln2);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_backward);
    project_backward(l, LP::fc_weight, LP::fc_bias, ws(W::d_ln), ws(W::d_fch), act(l, LA::ln2), C, 4 * C);
  }
  load_activation(l, LA::residual2);
  {
    // The residual passes d(output) straight through, so LN2's input gradient adds onto it.
    auto timer = profiler_.scope(ProfileKind::layernorm_backward);
    ops().layernorm_backward(d_residual, grad(l, LP::ln2_weight), grad(l, LP::ln2_bias), ws(W::d_ln),
                             act(l, LA::residual2), vec(l, LP::ln2_weight), act(l, LA::ln2_mean), act(l, LA::ln2_rstd),
                             N, C);
  }
  // Attention: residual2 = atty @ W + b + input
  load_activation(l, LA::atty);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_backward);
    project_backward(l, LP::attn_proj_weight, LP::attn_proj_bias, ws(W::d_atty), d_residual, act(l, LA::atty), C, C);
  }
  store_.zero(ws(W::d_qkv), N * 3 * C);  // the attention kernel accumulates (the SDK's contract)
  load_activation(l, LA::qkv);
  {
    auto timer = profiler_.scope(ProfileKind::attention_backward);
    float* d_qkv = ws(W::d_qkv);
    const AttentionGrads grads{d_qkv, d_qkv + C, d_qkv + 2 * C, 3 * C, 3 * C};
    const Status status =
        attention_.attention_backward(attention_shape_, grads, ws(W::d_atty), act(l, LA::atty), attention_inputs(l),
                                      store_.f32(activation_row(l, LA::attention_saved)), ws(W::attention_scratch));
    if (!status) throw std::runtime_error("attention kernel at layer " + std::to_string(l) + ": " + status.message());
  }
  load_activation(l, LA::ln1);
  {
    auto timer = profiler_.scope(ProfileKind::matmul_backward);
    project_backward(l, LP::qkv_weight, LP::qkv_bias, ws(W::d_ln), ws(W::d_qkv), act(l, LA::ln1), C, 3 * C);
  }
  load_input(l);
  auto timer = profiler_.scope(ProfileKind::layernorm_backward);
  ops().layernorm_backward(d_residual, grad(l, LP::ln1_weight), grad(l, LP::ln1_bias), ws(W::d_ln), layer_input(l),
                           vec(l, LP::ln1_weight), act(l, LA::ln1_mean), act(l, LA::ln1_rstd), N, C);
}

}  // namespace strata
