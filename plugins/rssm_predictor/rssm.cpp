#include "rssm.hpp"

#include <algorithm>
#include <cmath>

#include "strata/counter_random.hpp"

namespace strata::rssm {

namespace {

constexpr double kKlWeight = 0.1;  // beta: how strongly the posterior is pulled towards the prior
constexpr double kClipNorm = 1.0;
constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kAdamEps = 1e-8;

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// y (out) += W (out x in, row-major) x
void matvec_add(const float* W, const double* x, int out, int in, double* y) {
  for (int o = 0; o < out; ++o) {
    double sum = 0.0;
    const float* row = W + static_cast<std::int64_t>(o) * in;
    for (int i = 0; i < in; ++i) sum += static_cast<double>(row[i]) * x[i];
    y[o] += sum;
  }
}

// dx (in) += W^T dy
void matvec_transposed_add(const float* W, const double* dy, int out, int in, double* dx) {
  for (int o = 0; o < out; ++o) {
    const float* row = W + static_cast<std::int64_t>(o) * in;
    for (int i = 0; i < in; ++i) dx[i] += static_cast<double>(row[i]) * dy[o];
  }
}

// dW (out x in) += dy x^T
void outer_add(float* dW, const double* dy, const double* x, int out, int in) {
  for (int o = 0; o < out; ++o) {
    float* row = dW + static_cast<std::int64_t>(o) * in;
    for (int i = 0; i < in; ++i) row[i] += static_cast<float>(dy[o] * x[i]);
  }
}

void add_bias(const float* b, int count, double* y) {
  for (int i = 0; i < count; ++i) y[i] += b[i];
}

void bias_grad(float* db, const double* dy, int count) {
  for (int i = 0; i < count; ++i) db[i] += static_cast<float>(dy[i]);
}

// log-softmax of each run of `classes` logits, in place.
void log_softmax(double* logits, int categoricals, int classes) {
  for (int c = 0; c < categoricals; ++c) {
    double* x = logits + c * classes;
    const double top = *std::max_element(x, x + classes);
    double sum = 0.0;
    for (int k = 0; k < classes; ++k) sum += std::exp(x[k] - top);
    const double lse = top + std::log(sum);
    for (int k = 0; k < classes; ++k) x[k] -= lse;
  }
}

// A Gumbel-softmax sample (temperature 1) of each categorical of log-probabilities `log_p`.
void gumbel_softmax(const double* log_p, int categoricals, int classes, std::uint64_t key, std::uint64_t counter,
                    double* sample) {
  const int S = categoricals * classes;
  for (int i = 0; i < S; ++i) sample[i] = log_p[i] - std::log(-std::log(uniform_open(key, counter + i)));
  log_softmax(sample, categoricals, classes);
  for (int i = 0; i < S; ++i) sample[i] = std::exp(sample[i]);
}

// The gradient of softmax outputs y (per categorical) with respect to their logits, added to dlogits.
void softmax_backward_add(const double* y, const double* dy, int categoricals, int classes, double* dlogits) {
  for (int c = 0; c < categoricals; ++c) {
    const double* yc = y + c * classes;
    const double* dyc = dy + c * classes;
    double dot = 0.0;
    for (int k = 0; k < classes; ++k) dot += dyc[k] * yc[k];
    for (int k = 0; k < classes; ++k) dlogits[c * classes + k] += yc[k] * (dyc[k] - dot);
  }
}

// One GRU step: r, u (gates), n (candidate) and un_h = Un h_in are kept for backward;
// h_out = (1 - u) n + u h_in.
struct GruStep {
  double *r, *u, *n, *un_h, *h_out;
};
void gru_forward(const float* p, const Layout& L, int H, int I, const double* h_in, const double* a, GruStep out) {
  std::fill(out.r, out.r + H, 0.0);
  std::fill(out.u, out.u + H, 0.0);
  std::fill(out.n, out.n + H, 0.0);
  std::fill(out.un_h, out.un_h + H, 0.0);
  matvec_add(p + L.Wr, a, H, I, out.r);
  matvec_add(p + L.Ur, h_in, H, H, out.r);
  add_bias(p + L.br, H, out.r);
  matvec_add(p + L.Wu, a, H, I, out.u);
  matvec_add(p + L.Uu, h_in, H, H, out.u);
  add_bias(p + L.bu, H, out.u);
  matvec_add(p + L.Un, h_in, H, H, out.un_h);
  matvec_add(p + L.Wn, a, H, I, out.n);
  add_bias(p + L.bn, H, out.n);
  for (int i = 0; i < H; ++i) {
    out.r[i] = sigmoid(out.r[i]);
    out.u[i] = sigmoid(out.u[i]);
    out.n[i] = std::tanh(out.n[i] + out.r[i] * out.un_h[i]);
    out.h_out[i] = (1.0 - out.u[i]) * out.n[i] + out.u[i] * h_in[i];
  }
}

}  // namespace

std::uint64_t mix_key(std::uint64_t key, std::uint64_t counter) noexcept {
  return splitmix64(key ^ splitmix64(counter));
}

double uniform_open(std::uint64_t key, std::uint64_t counter) noexcept {
  return uniform_from_bits(mix_key(key, counter));
}

Layout::Layout(const Shape& shape) {
  const std::int64_t D = shape.features, H = shape.hidden, S = shape.latent(), I = D + S;
  std::int64_t at = 0;
  auto take = [&at](std::int64_t count) {
    const std::int64_t offset = at;
    at += count;
    return offset;
  };
  Wr = take(H * I), Ur = take(H * H), br = take(H);
  Wu = take(H * I), Uu = take(H * H), bu = take(H);
  Wn = take(H * I), Un = take(H * H), bn = take(H);
  Wp = take(S * H), bp = take(S);
  Wq = take(S * (H + D)), bq = take(S);
  Wo = take(D * (H + S)), bo = take(D);
  count = at;
}

// What one step of the sequence keeps for backward.
struct Member::StepCache {
  std::vector<double> a, h_in, r, u, n, un_h, h;  // GRU
  std::vector<double> log_prior, log_post, z, z_prior, x_post, x_prior;
};

Member::Member(const Shape& shape, MemberStorage storage)
    : shape_(shape), layout_(shape), storage_(storage), input_(shape.features + shape.latent()) {}

void Member::initialize(std::uint64_t seed) {
  const int D = shape_.features, H = shape_.hidden, S = shape_.latent();
  std::fill(storage_.params.begin(), storage_.params.end(), 0.0f);
  std::fill(storage_.grads.begin(), storage_.grads.end(), 0.0f);
  std::fill(storage_.adam_m.begin(), storage_.adam_m.end(), 0.0f);
  std::fill(storage_.adam_v.begin(), storage_.adam_v.end(), 0.0f);
  std::uint64_t counter = 0;
  auto fill = [&](std::int64_t offset, std::int64_t count, int fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    for (std::int64_t i = 0; i < count; ++i)
      storage_.params[static_cast<std::size_t>(offset + i)] =
          static_cast<float>((2.0 * uniform_open(seed, counter++) - 1.0) * bound);
  };
  for (std::int64_t W : {layout_.Wr, layout_.Wu, layout_.Wn}) fill(W, static_cast<std::int64_t>(H) * input_, input_);
  for (std::int64_t U : {layout_.Ur, layout_.Uu, layout_.Un}) fill(U, static_cast<std::int64_t>(H) * H, H);
  fill(layout_.Wp, static_cast<std::int64_t>(S) * H, H);
  fill(layout_.Wq, static_cast<std::int64_t>(S) * (H + D), H + D);
  fill(layout_.Wo, static_cast<std::int64_t>(D) * (H + S), H + S);
}

double Member::loss(std::span<const float> window, int rows, std::uint64_t noise_key, bool accumulate_grads) {
  const int D = shape_.features, H = shape_.hidden, C = shape_.categoricals, K = shape_.classes, S = shape_.latent();
  const int I = input_;
  const float* p = storage_.params.data();
  const Layout& L = layout_;
  std::vector<StepCache> caches(static_cast<std::size_t>(rows));
  std::vector<double> h_prev(static_cast<std::size_t>(H), 0.0), z_prev(static_cast<std::size_t>(S), 0.0);
  std::vector<double> hz(static_cast<std::size_t>(H + S)), hx(static_cast<std::size_t>(H + D));
  double total = 0.0;
  for (int t = 0; t < rows; ++t) {
    StepCache& c = caches[static_cast<std::size_t>(t)];
    const float* x = window.data() + static_cast<std::ptrdiff_t>(t) * D;
    c.a.assign(static_cast<std::size_t>(I), 0.0);
    if (t > 0)
      for (int i = 0; i < D; ++i) c.a[static_cast<std::size_t>(i)] = x[i - D];
    for (int i = 0; i < S; ++i) c.a[static_cast<std::size_t>(D + i)] = z_prev[static_cast<std::size_t>(i)];
    // GRU
    c.h_in = h_prev;
    for (auto* v : {&c.r, &c.u, &c.n, &c.un_h, &c.h}) v->assign(static_cast<std::size_t>(H), 0.0);
    gru_forward(p, L, H, I, c.h_in.data(), c.a.data(), {c.r.data(), c.u.data(), c.n.data(), c.un_h.data(), c.h.data()});
    // Prior and posterior.
    c.log_prior.assign(static_cast<std::size_t>(S), 0.0);
    matvec_add(p + L.Wp, c.h.data(), S, H, c.log_prior.data());
    add_bias(p + L.bp, S, c.log_prior.data());
    log_softmax(c.log_prior.data(), C, K);
    std::copy(c.h.begin(), c.h.end(), hx.begin());
    for (int i = 0; i < D; ++i) hx[static_cast<std::size_t>(H + i)] = x[i];
    c.log_post.assign(static_cast<std::size_t>(S), 0.0);
    matvec_add(p + L.Wq, hx.data(), S, H + D, c.log_post.data());
    add_bias(p + L.bq, S, c.log_post.data());
    log_softmax(c.log_post.data(), C, K);
    // Samples and decodings.
    const std::uint64_t counter = static_cast<std::uint64_t>(t) * 2 * static_cast<std::uint64_t>(S);
    c.z.assign(static_cast<std::size_t>(S), 0.0);
    c.z_prior.assign(static_cast<std::size_t>(S), 0.0);
    gumbel_softmax(c.log_post.data(), C, K, noise_key, counter, c.z.data());
    gumbel_softmax(c.log_prior.data(), C, K, noise_key, counter + static_cast<std::uint64_t>(S), c.z_prior.data());
    c.x_post.assign(static_cast<std::size_t>(D), 0.0);
    c.x_prior.assign(static_cast<std::size_t>(D), 0.0);
    std::copy(c.h.begin(), c.h.end(), hz.begin());
    std::copy(c.z.begin(), c.z.end(), hz.begin() + H);
    matvec_add(p + L.Wo, hz.data(), D, H + S, c.x_post.data());
    add_bias(p + L.bo, D, c.x_post.data());
    std::copy(c.z_prior.begin(), c.z_prior.end(), hz.begin() + H);
    matvec_add(p + L.Wo, hz.data(), D, H + S, c.x_prior.data());
    add_bias(p + L.bo, D, c.x_prior.data());
    double reconstruction = 0.0, prediction = 0.0, kl = 0.0;
    for (int i = 0; i < D; ++i) {
      reconstruction += (c.x_post[static_cast<std::size_t>(i)] - x[i]) * (c.x_post[static_cast<std::size_t>(i)] - x[i]);
      prediction += (c.x_prior[static_cast<std::size_t>(i)] - x[i]) * (c.x_prior[static_cast<std::size_t>(i)] - x[i]);
    }
    for (int i = 0; i < S; ++i) {
      const auto k = static_cast<std::size_t>(i);
      kl += std::exp(c.log_post[k]) * (c.log_post[k] - c.log_prior[k]);
    }
    total += (reconstruction + prediction) / D + kKlWeight * kl;
    h_prev = c.h;
    z_prev = c.z;
  }
  if (!accumulate_grads) return total / rows;

  float* g = storage_.grads.data();
  const double step_weight = 1.0 / rows;
  std::vector<double> dh_next(static_cast<std::size_t>(H), 0.0), dz_next(static_cast<std::size_t>(S), 0.0);
  std::vector<double> dx_post(static_cast<std::size_t>(D)), dx_prior(static_cast<std::size_t>(D));
  std::vector<double> d_hz(static_cast<std::size_t>(H + S)), d_hzp(static_cast<std::size_t>(H + S));
  std::vector<double> dh(static_cast<std::size_t>(H)), dz(static_cast<std::size_t>(S)),
      dzp(static_cast<std::size_t>(S));
  std::vector<double> dq(static_cast<std::size_t>(S)), dp(static_cast<std::size_t>(S)),
      d_hx(static_cast<std::size_t>(H + D));
  std::vector<double> dpre_n(static_cast<std::size_t>(H)), dpre_r(static_cast<std::size_t>(H)),
      dpre_u(static_cast<std::size_t>(H)), dun_h(static_cast<std::size_t>(H)), dh_in(static_cast<std::size_t>(H)),
      da(static_cast<std::size_t>(I));
  for (int t = rows - 1; t >= 0; --t) {
    const StepCache& c = caches[static_cast<std::size_t>(t)];
    const float* x = window.data() + static_cast<std::ptrdiff_t>(t) * D;
    for (int i = 0; i < D; ++i) {
      const auto k = static_cast<std::size_t>(i);
      dx_post[k] = 2.0 / D * (c.x_post[k] - x[i]) * step_weight;
      dx_prior[k] = 2.0 / D * (c.x_prior[k] - x[i]) * step_weight;
    }
    // Decoder, both paths.
    std::copy(c.h.begin(), c.h.end(), hz.begin());
    std::copy(c.z.begin(), c.z.end(), hz.begin() + H);
    outer_add(g + L.Wo, dx_post.data(), hz.data(), D, H + S);
    std::copy(c.z_prior.begin(), c.z_prior.end(), hz.begin() + H);
    outer_add(g + L.Wo, dx_prior.data(), hz.data(), D, H + S);
    bias_grad(g + L.bo, dx_post.data(), D);
    bias_grad(g + L.bo, dx_prior.data(), D);
    std::fill(d_hz.begin(), d_hz.end(), 0.0);
    std::fill(d_hzp.begin(), d_hzp.end(), 0.0);
    matvec_transposed_add(p + L.Wo, dx_post.data(), D, H + S, d_hz.data());
    matvec_transposed_add(p + L.Wo, dx_prior.data(), D, H + S, d_hzp.data());
    for (int j = 0; j < H; ++j) {
      const auto i = static_cast<std::size_t>(j);
      dh[i] = dh_next[i] + d_hz[i] + d_hzp[i];
    }
    for (int j = 0; j < S; ++j) {
      const auto i = static_cast<std::size_t>(j);
      dz[i] = dz_next[i] + d_hz[static_cast<std::size_t>(H) + i];
      dzp[i] = d_hzp[static_cast<std::size_t>(H) + i];
    }
    // Samples to logits (the Gumbel noise is a constant shift), and the KL term.
    std::fill(dq.begin(), dq.end(), 0.0);
    std::fill(dp.begin(), dp.end(), 0.0);
    softmax_backward_add(c.z.data(), dz.data(), C, K, dq.data());
    softmax_backward_add(c.z_prior.data(), dzp.data(), C, K, dp.data());
    for (int cat = 0; cat < C; ++cat) {
      double kl = 0.0;
      for (int k = 0; k < K; ++k) {
        const auto i = static_cast<std::size_t>(cat * K + k);
        kl += std::exp(c.log_post[i]) * (c.log_post[i] - c.log_prior[i]);
      }
      for (int k = 0; k < K; ++k) {
        const auto i = static_cast<std::size_t>(cat * K + k);
        const double q = std::exp(c.log_post[i]), prior = std::exp(c.log_prior[i]);
        dq[i] += kKlWeight * step_weight * q * (c.log_post[i] - c.log_prior[i] - kl);
        dp[i] += kKlWeight * step_weight * (prior - q);
      }
    }
    outer_add(g + L.Wp, dp.data(), c.h.data(), S, H);
    bias_grad(g + L.bp, dp.data(), S);
    matvec_transposed_add(p + L.Wp, dp.data(), S, H, dh.data());
    std::copy(c.h.begin(), c.h.end(), hx.begin());
    for (int i = 0; i < D; ++i) hx[static_cast<std::size_t>(H + i)] = x[i];
    outer_add(g + L.Wq, dq.data(), hx.data(), S, H + D);
    bias_grad(g + L.bq, dq.data(), S);
    std::fill(d_hx.begin(), d_hx.end(), 0.0);
    matvec_transposed_add(p + L.Wq, dq.data(), S, H + D, d_hx.data());
    for (int j = 0; j < H; ++j) dh[static_cast<std::size_t>(j)] += d_hx[static_cast<std::size_t>(j)];
    // GRU.
    std::fill(da.begin(), da.end(), 0.0);
    for (int j = 0; j < H; ++j) {
      const auto i = static_cast<std::size_t>(j);
      const double dn = dh[i] * (1.0 - c.u[i]);
      const double du = dh[i] * (c.h_in[i] - c.n[i]);
      dh_in[i] = dh[i] * c.u[i];
      dpre_n[i] = dn * (1.0 - c.n[i] * c.n[i]);
      dun_h[i] = dpre_n[i] * c.r[i];
      dpre_r[i] = dpre_n[i] * c.un_h[i] * c.r[i] * (1.0 - c.r[i]);
      dpre_u[i] = du * c.u[i] * (1.0 - c.u[i]);
    }
    outer_add(g + L.Wn, dpre_n.data(), c.a.data(), H, I);
    bias_grad(g + L.bn, dpre_n.data(), H);
    matvec_transposed_add(p + L.Wn, dpre_n.data(), H, I, da.data());
    outer_add(g + L.Un, dun_h.data(), c.h_in.data(), H, H);
    matvec_transposed_add(p + L.Un, dun_h.data(), H, H, dh_in.data());
    outer_add(g + L.Wr, dpre_r.data(), c.a.data(), H, I);
    outer_add(g + L.Ur, dpre_r.data(), c.h_in.data(), H, H);
    bias_grad(g + L.br, dpre_r.data(), H);
    matvec_transposed_add(p + L.Wr, dpre_r.data(), H, I, da.data());
    matvec_transposed_add(p + L.Ur, dpre_r.data(), H, H, dh_in.data());
    outer_add(g + L.Wu, dpre_u.data(), c.a.data(), H, I);
    outer_add(g + L.Uu, dpre_u.data(), c.h_in.data(), H, H);
    bias_grad(g + L.bu, dpre_u.data(), H);
    matvec_transposed_add(p + L.Wu, dpre_u.data(), H, I, da.data());
    matvec_transposed_add(p + L.Uu, dpre_u.data(), H, H, dh_in.data());
    // The input a_t = [x_{t-1}; z_{t-1}]: x is data, z_{t-1} was the previous step's sample.
    for (int j = 0; j < S; ++j) dz_next[static_cast<std::size_t>(j)] = da[static_cast<std::size_t>(D + j)];
    dh_next = dh_in;
  }
  return total / rows;
}

void Member::adam_step(double lr, std::int64_t step) {
  double norm = 0.0;
  for (float g : storage_.grads) norm += static_cast<double>(g) * g;
  norm = std::sqrt(norm);
  const double clip = norm > kClipNorm ? kClipNorm / norm : 1.0;
  const double c1 = 1.0 - std::pow(kBeta1, static_cast<double>(step));
  const double c2 = 1.0 - std::pow(kBeta2, static_cast<double>(step));
  for (std::size_t i = 0; i < storage_.params.size(); ++i) {
    const double g = storage_.grads[i] * clip;
    const double m = kBeta1 * storage_.adam_m[i] + (1.0 - kBeta1) * g;
    const double v = kBeta2 * storage_.adam_v[i] + (1.0 - kBeta2) * g * g;
    storage_.adam_m[i] = static_cast<float>(m);
    storage_.adam_v[i] = static_cast<float>(v);
    storage_.params[i] -= static_cast<float>(lr * (m / c1) / (std::sqrt(v / c2) + kAdamEps));
    storage_.grads[i] = 0.0f;
  }
}

void Member::imagine(std::span<const float> window, int rows, int horizon, std::uint64_t noise_key,
                     std::span<float> out) const {
  const int D = shape_.features, H = shape_.hidden, C = shape_.categoricals, K = shape_.classes, S = shape_.latent();
  const int I = input_;
  const float* p = storage_.params.data();
  const Layout& L = layout_;
  std::vector<double> h(static_cast<std::size_t>(H), 0.0), h_next(static_cast<std::size_t>(H));
  std::vector<double> a(static_cast<std::size_t>(I), 0.0), z(static_cast<std::size_t>(S), 0.0);
  std::vector<double> r(static_cast<std::size_t>(H)), u(static_cast<std::size_t>(H)), n(static_cast<std::size_t>(H)),
      un_h(static_cast<std::size_t>(H));
  std::vector<double> logits(static_cast<std::size_t>(S)), hx(static_cast<std::size_t>(H + D)),
      hz(static_cast<std::size_t>(H + S)), x_hat(static_cast<std::size_t>(D));
  auto gru = [&] {
    gru_forward(p, L, H, I, h.data(), a.data(), {r.data(), u.data(), n.data(), un_h.data(), h_next.data()});
    h.swap(h_next);
  };
  std::uint64_t counter = 0;
  // Filter the observed rows with the posterior.
  for (int t = 0; t < rows; ++t) {
    const float* x = window.data() + static_cast<std::ptrdiff_t>(t) * D;
    for (int i = 0; i < D; ++i) a[static_cast<std::size_t>(i)] = t > 0 ? x[i - D] : 0.0;
    for (int i = 0; i < S; ++i) a[static_cast<std::size_t>(D + i)] = z[static_cast<std::size_t>(i)];
    gru();
    std::copy(h.begin(), h.end(), hx.begin());
    for (int i = 0; i < D; ++i) hx[static_cast<std::size_t>(H + i)] = x[i];
    std::fill(logits.begin(), logits.end(), 0.0);
    matvec_add(p + L.Wq, hx.data(), S, H + D, logits.data());
    add_bias(p + L.bq, S, logits.data());
    log_softmax(logits.data(), C, K);
    gumbel_softmax(logits.data(), C, K, noise_key, counter, z.data());
    counter += static_cast<std::uint64_t>(S);
  }
  // Roll forward on the prior, each prediction the next input.
  const float* last = window.data() + static_cast<std::ptrdiff_t>(rows - 1) * D;
  for (int i = 0; i < D; ++i) x_hat[static_cast<std::size_t>(i)] = last[i];
  for (int k = 0; k < horizon; ++k) {
    for (int i = 0; i < D; ++i) a[static_cast<std::size_t>(i)] = x_hat[static_cast<std::size_t>(i)];
    for (int i = 0; i < S; ++i) a[static_cast<std::size_t>(D + i)] = z[static_cast<std::size_t>(i)];
    gru();
    std::fill(logits.begin(), logits.end(), 0.0);
    matvec_add(p + L.Wp, h.data(), S, H, logits.data());
    add_bias(p + L.bp, S, logits.data());
    log_softmax(logits.data(), C, K);
    gumbel_softmax(logits.data(), C, K, noise_key, counter, z.data());
    counter += static_cast<std::uint64_t>(S);
    std::copy(h.begin(), h.end(), hz.begin());
    std::copy(z.begin(), z.end(), hz.begin() + H);
    std::fill(x_hat.begin(), x_hat.end(), 0.0);
    matvec_add(p + L.Wo, hz.data(), D, H + S, x_hat.data());
    add_bias(p + L.bo, D, x_hat.data());
    for (int i = 0; i < D; ++i)
      out[static_cast<std::size_t>(k) * static_cast<std::size_t>(D) + static_cast<std::size_t>(i)] =
          static_cast<float>(x_hat[static_cast<std::size_t>(i)]);
  }
}

}  // namespace strata::rssm
