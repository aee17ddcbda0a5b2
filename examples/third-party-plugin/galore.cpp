// A third-party optimizer: GaLore (Zhao et al., 2024, "Memory-Efficient LLM Training by Gradient
// Low-Rank Projection"). Each 2-D gradient G (rows x cols) is projected onto a rank-r subspace of
// its smaller side, AdamW runs on the projection, and the update is projected back:
//
//   rows <= cols (left):  R = P^T G   (r x cols),  W -= lr scale P N(R)
//   rows >  cols (right): R = G P     (rows x r),  W -= lr scale N(R) P^T
//
// where N is Adam's normalized step (bias-corrected m / (sqrt(v) + eps)) on R's moments, and P
// (side x r, orthonormal columns) is recomputed from the gradient every `refresh_every` steps:
// by QR of a randomized range finder with one power iteration (projection = "range_finder":
// P = qr(G G^T W) for a Gaussian W), or by the symmetric eigen op on G G^T (projection = "eigh":
// the exact top-r left singular vectors). The moments live in the subspace, so a matrix keeps
// r (side + 2 other) floats instead of AdamW's 2 rows cols. Norms, biases and matrices too thin to
// project get plain AdamW.
//
//   rank = 128                 the subspace's dimension
//   refresh_every = 200        steps between projections (the first step computes one)
//   projection = "range_finder" or "eigh"
//   scale = 1.0                the paper's alpha (it uses 0.25 with a larger learning rate)
//   project_embeddings = true  the token and position tables too (a third of GPT-2 small)
//   seed = 0                   the range finder's Gaussian draws
//   and AdamW's keys (betas, eps, weight_decay, grad_clip, schedule, min_lr_ratio)
//
// It reads each parameter's shape and kind from the host (ParamInfo), computes through the op
// table only (gemm, qr or eigh, and the elementwise ops), so it runs on any backend that answers
// them, and takes its scratch from PluginMemory, growing it with resize(). It includes only SDK
// headers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <string_view>

#include "strata/counter_random.hpp"
#include "strata/plugin.hpp"
#include "strata/plugin_support/adamw_config.hpp"
#include "strata/plugin_support/adamw_through_ops.hpp"

namespace {

using namespace strata;

// How a parameter is projected: `side` is the dimension P spans (the smaller one), `other` the
// dimension the moments keep.
struct Projection {
  bool left = true;  // rows <= cols: P is (rows x r); otherwise (cols x r)
  std::int64_t rows = 0, cols = 0, side = 0, other = 0;
};

class GaLore final : public Optimizer {
 public:
  GaLore(ConfigView& config, HostServices& host) : host_(host), adamw_(config) {
    rank_ = config.get_int("rank", 128, 1, 1 << 16);
    refresh_every_ = config.get_int("refresh_every", 200, 1, std::int64_t{1} << 40);
    eigh_ = config.get_string("projection", "range_finder", {"range_finder", "eigh"}) == "eigh";
    scale_ = static_cast<float>(config.get_double("scale", 1.0, 0.0, 1e3));
    project_embeddings_ = config.get_bool("project_embeddings", true);
    seed_ = static_cast<std::uint64_t>(config.get_int("seed", 0, 0, std::int64_t{1} << 62));
  }

  StateLayout state_layout(const ParamInfo& param) const noexcept override {
    const Projection p = projection(param);
    if (p.side == 0) return f32_state(2, param.count);   // AdamW's moments
    StateLayout layout = f32_state(3, p.other * rank_);  // P, then Adam's two moments of R
    layout[0].count = p.side * rank_;
    return layout;
  }

  Status check_state(std::string_view parameter, std::span<const SavedStateBuffer> buffers) const noexcept override {
    // The second moment is state[2] for a projected parameter, state[1] otherwise.
    const std::size_t second = buffers.size() > 2 && !buffers[2].bytes.empty() ? 2 : 1;
    if (buffers.size() <= second) return {};
    return plugin_support::require_non_negative(parameter, "second moment", buffers[second].f32());
  }

  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) override {
    Ops& ops = host_.ops();
    if (Status s = require_ops(ops); !s) return s;
    const float grad_scale = adamw_.begin_step(ops, info, slots, report);
    for (ParamSlot& slot : slots) {
      const Projection p = projection(slot);
      if (p.side == 0)
        update_unprojected(ops, info, report, slot, grad_scale);
      else
        update_projected(ops, info, report, slot, p, grad_scale);
    }
    return {};
  }

 private:
  // A matrix (or a table, when asked) whose smaller side exceeds the rank is projected; anything
  // else gets side 0.
  Projection projection(const ParamInfo& param) const noexcept {
    const bool kind = param.kind == ParamKind::matrix || (project_embeddings_ && param.kind == ParamKind::embedding);
    if (!kind || param.shape.size() != 2) return {};
    Projection p;
    p.rows = param.shape[0], p.cols = param.shape[1];
    p.left = p.rows <= p.cols;
    p.side = std::min(p.rows, p.cols), p.other = std::max(p.rows, p.cols);
    if (p.side <= rank_) return {};
    return p;
  }

  Status require_ops(Ops& ops) const {
    for (const Op op : {Op::gemm, eigh_ ? Op::eigh : Op::qr, Op::scale, Op::add_scaled, Op::mul, Op::div, Op::sqrt,
                        Op::copy, Op::copy_from_host})
      if (!ops.supports(op))
        return Status::error("galore: backend '" + std::string(ops.backend()) + "' runs no '" +
                             std::string(op_name(op)) + "' op");
    return {};
  }

  // Two scratch buffers of at least `count` floats each (R and the denominator), grown as needed.
  void reserve_scratch(std::int64_t count) {
    const auto need = static_cast<std::uint64_t>(count);
    for (TensorView* buffer : {&projected_, &denominator_}) {
      if (buffer->empty())
        *buffer = host_.memory().device_floats(buffer == &projected_ ? "galore.projected" : "galore.denominator", need,
                                               MemoryCategory::optimizer);
      else if (static_cast<std::uint64_t>(buffer->count) < need)
        *buffer = host_.memory().resize(*buffer, need);
    }
  }

  // Decoupled weight decay on the whole weight (`h.weight_decay` is 0 for a slot without decay).
  static void decay(Ops& ops, const AdamWHyper& h, ParamSlot& slot) {
    if (h.weight_decay > 0.0f) ops.scale(slot.param.f32(), 1.0f - h.lr * h.weight_decay, slot.param.count);
  }

  void update_unprojected(Ops& ops, const OptimizerStepInfo& info, const OptimizerReport& report, ParamSlot& slot,
                          float grad_scale) {
    reserve_scratch(std::min(slot.param.count, kChunk));
    const AdamWHyper h = adamw_.hyper(report, info, slot, grad_scale);
    decay(ops, h, slot);
    float* g = projected_.f32();
    for (std::int64_t first = 0; first < slot.param.count; first += kChunk) {
      const std::int64_t n = std::min(kChunk, slot.param.count - first);
      ops.copy(g, slot.grad.f32() + first, static_cast<std::uint64_t>(n) * sizeof(float));
      ops.scale(g, h.grad_scale, n);
      plugin_support::adamw_direction_through_ops(ops, h, g, slot.state[0].f32() + first, slot.state[1].f32() + first,
                                                  denominator_.f32(), n);
      ops.add_scaled(slot.param.f32() + first, -plugin_support::adamw_step_size(h), g, n);
    }
  }

  void update_projected(Ops& ops, const OptimizerStepInfo& info, const OptimizerReport& report, ParamSlot& slot,
                        const Projection& p, float grad_scale) {
    const std::int64_t r = rank_, n = p.other * r;
    reserve_scratch(n);
    float* basis = slot.state[0].f32();
    const float* grad = slot.grad.f32();
    if (info.step == 1 || (info.step - 1) % refresh_every_ == 0) refresh(ops, info, slot, p);
    const AdamWHyper h = adamw_.hyper(report, info, slot, grad_scale);
    float* projected = projected_.f32();
    if (p.left)  // R (r x cols) = P^T G, clipped
      ops.gemm(Transpose::yes, Transpose::no, r, p.cols, p.rows, h.grad_scale, basis, r, grad, p.cols, 0.0f, projected,
               p.cols);
    else  // R (rows x r) = G P, clipped
      ops.gemm(Transpose::no, Transpose::no, p.rows, r, p.cols, h.grad_scale, grad, p.cols, basis, r, 0.0f, projected,
               r);
    plugin_support::adamw_direction_through_ops(ops, h, projected, slot.state[1].f32(), slot.state[2].f32(),
                                                denominator_.f32(), n);
    decay(ops, h, slot);
    const float alpha = -scale_ * plugin_support::adamw_step_size(h);
    if (p.left)  // W += alpha P N
      ops.gemm(Transpose::no, Transpose::no, p.rows, p.cols, r, alpha, basis, r, projected, p.cols, 1.0f,
               slot.param.f32(), p.cols);
    else  // W += alpha N P^T
      ops.gemm(Transpose::no, Transpose::yes, p.rows, p.cols, r, alpha, projected, r, basis, r, 1.0f, slot.param.f32(),
               p.cols);
  }

  // P from the current gradient: its top-r singular subspace on the smaller side. The moments stay
  // as they are across a refresh, as in the paper.
  void refresh(Ops& ops, const OptimizerStepInfo& info, ParamSlot& slot, const Projection& p) {
    const std::int64_t r = rank_;
    float* basis = slot.state[0].f32();
    const float* grad = slot.grad.f32();
    if (eigh_) {
      // A = G G^T (left) or G^T G (right), side x side; its eigenvectors of the r largest
      // eigenvalues are the last r columns (ascending order).
      const std::int64_t side = p.side;
      if (gram_.empty())
        gram_ = host_.memory().device_floats("galore.gram", static_cast<std::uint64_t>(side * side + side),
                                             MemoryCategory::optimizer);
      else if (gram_.count < side * side + side)
        gram_ = host_.memory().resize(gram_, static_cast<std::uint64_t>(side * side + side));
      float* gram = gram_.f32();
      if (p.left)
        ops.gemm(Transpose::no, Transpose::yes, side, side, p.cols, 1.0f, grad, p.cols, grad, p.cols, 0.0f, gram, side);
      else
        ops.gemm(Transpose::yes, Transpose::no, side, side, p.rows, 1.0f, grad, p.cols, grad, p.cols, 0.0f, gram, side);
      ops.eigh(gram, gram + side * side, side);
      for (std::int64_t i = 0; i < side; ++i)
        ops.copy(basis + i * r, gram + i * side + (side - r), static_cast<std::uint64_t>(r) * sizeof(float));
      return;
    }
    // Range finder: W (side x r) Gaussian, Z = G^T W or G W (other x r), P = G Z or G^T Z, then QR.
    const std::uint64_t draws = static_cast<std::uint64_t>(p.side * r);
    if (gaussian_.size() < draws)
      gaussian_ = gaussian_.empty() ? host_.memory().host_floats(draws) : host_.memory().resize(gaussian_, draws);
    std::uint64_t state = splitmix64(seed_ ^ name_hash(slot.name) ^ (static_cast<std::uint64_t>(info.step) << 32));
    for (std::uint64_t i = 0; i < draws; i += 2) {  // Box-Muller: two normals from two uniforms
      state = splitmix64(state);
      const double u1 = uniform_from_bits(state);
      state = splitmix64(state);
      const double u2 = uniform_from_bits(state);
      const double radius = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * std::numbers::pi * u2;
      gaussian_[i] = static_cast<float>(radius * std::cos(angle));
      if (i + 1 < draws) gaussian_[i + 1] = static_cast<float>(radius * std::sin(angle));
    }
    ops.copy_from_host(basis, gaussian_.data(), draws * sizeof(float));
    float* sketch = projected_.f32();
    if (p.left) {
      ops.gemm(Transpose::yes, Transpose::no, p.cols, r, p.rows, 1.0f, grad, p.cols, basis, r, 0.0f, sketch, r);
      ops.gemm(Transpose::no, Transpose::no, p.rows, r, p.cols, 1.0f, grad, p.cols, sketch, r, 0.0f, basis, r);
    } else {
      ops.gemm(Transpose::no, Transpose::no, p.rows, r, p.cols, 1.0f, grad, p.cols, basis, r, 0.0f, sketch, r);
      ops.gemm(Transpose::yes, Transpose::no, p.cols, r, p.rows, 1.0f, grad, p.cols, sketch, r, 0.0f, basis, r);
    }
    ops.qr(basis, nullptr, p.side, r);
  }

  HostServices& host_;
  plugin_support::AdamWConfig adamw_;
  std::int64_t rank_ = 128;
  std::int64_t refresh_every_ = 200;
  bool eigh_ = false;
  float scale_ = 1.0f;
  bool project_embeddings_ = true;
  std::uint64_t seed_ = 0;
  TensorView projected_;    // R, and the range finder's sketch
  TensorView denominator_;  // Adam's denominator
  TensorView gram_;         // G G^T and its eigenvalues (projection = "eigh")
  std::span<float> gaussian_;

  static constexpr std::int64_t kChunk = 256 * 1024;
};

constexpr const char* kKeys[] = {"rank",     "refresh_every", "projection", "scale",        "project_embeddings",
                                 "seed",     "betas",         "eps",        "weight_decay", "grad_clip",
                                 "schedule", "min_lr_ratio"};
const FactoryDescriptor kFactories[] = {make_factory<Optimizer, GaLore>(
    "galore", "AdamW on a low-rank projection of each matrix's gradient (GaLore)", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(galore, "1.0.0", kFactories)
