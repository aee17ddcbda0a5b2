#pragma once
// A recurrent state-space model of training dynamics (after Dreamer's RSSM), small enough to train
// on the host between steps. One member, per step t of a feature sequence x_0..x_{T-1}:
//
//   a_t   = [x_{t-1}; z_{t-1}]                         (zeros at t = 0)
//   h_t   = GRU(h_{t-1}, a_t)                          deterministic state, H floats
//   prior p(z_t | h_t)        = softmax per categorical of Wp h_t + bp
//   post  q(z_t | h_t, x_t)   = softmax per categorical of Wq [h_t; x_t] + bq
//   z_t   = Gumbel-softmax sample of the posterior    stochastic state: C categoricals of K classes
//   x^post_t  = Wo [h_t; z_t]  + bo                    reconstruction
//   x^prior_t = Wo [h_t; z'_t] + bo, z'_t from the prior: the one-step prediction of x_t
//
//   loss = mean over t of |x^post_t - x_t|^2 / D + |x^prior_t - x_t|^2 / D + beta KL(q_t || p_t)
//
// trained by backpropagation through time over a window (truncated: h starts at zero) with Adam.
// The Gumbel-softmax relaxation keeps the sample differentiable, so the gradient is exact for the
// drawn noise (tests check it against finite differences). Imagination filters a window with the
// posterior, then rolls forward on the prior, feeding each prediction back as the next input.
// Noise comes from a counter hash, so a run and its resumption draw the same numbers.
#include <cstdint>
#include <span>
#include <vector>

namespace strata::rssm {

struct Shape {
  int features = 0;      // D
  int hidden = 32;       // H
  int categoricals = 4;  // C
  int classes = 4;       // K

  int latent() const noexcept { return categoricals * classes; }  // S = C * K
};

// Where each weight lives in a member's flat parameter vector.
struct Layout {
  explicit Layout(const Shape& shape);
  std::int64_t Wr, Ur, br, Wu, Uu, bu, Wn, Un, bn;  // GRU gates: reset, update, candidate
  std::int64_t Wp, bp;                              // prior logits
  std::int64_t Wq, bq;                              // posterior logits
  std::int64_t Wo, bo;                              // decoder
  std::int64_t count;
};

// Counter-based randomness: the same (key, counter) gives the same bits on any machine.
std::uint64_t mix_key(std::uint64_t key, std::uint64_t counter) noexcept;
// A uniform in (0, 1), never 0 or 1.
double uniform_open(std::uint64_t key, std::uint64_t counter) noexcept;

// One member's parameters and its Adam moments, in memory the caller owns (the host's accounted
// arena): params, grads, m, v, each Layout::count floats.
struct MemberStorage {
  std::span<float> params, grads, adam_m, adam_v;
};

class Member {
 public:
  Member(const Shape& shape, MemberStorage storage);

  // Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights from `seed`, zero biases and moments.
  void initialize(std::uint64_t seed);
  // The loss over `window` (T rows of D floats, row-major) with noise keyed by `noise_key`; with
  // `accumulate_grads`, adds its gradient into storage.grads.
  double loss(std::span<const float> window, int rows, std::uint64_t noise_key, bool accumulate_grads);
  // One Adam step on the gradient in storage.grads (clipped to norm 1), which it then zeroes.
  void adam_step(double lr, std::int64_t step);
  // Filters `window` (rows x D) and predicts the next `horizon` rows into `out` (horizon x D).
  void imagine(std::span<const float> window, int rows, int horizon, std::uint64_t noise_key,
               std::span<float> out) const;

  const Shape& shape() const noexcept { return shape_; }
  const Layout& layout() const noexcept { return layout_; }
  MemberStorage& storage() noexcept { return storage_; }
  const MemberStorage& storage() const noexcept { return storage_; }

 private:
  struct StepCache;
  Shape shape_;
  Layout layout_;
  MemberStorage storage_;
  int input_ = 0;  // D + S
};

}  // namespace strata::rssm
