#pragma once
// The predictor's forecast: from the features of full steps (loss, gradient norm, and each group's
// update norm, logs of the norms), the loss band and the per-group update magnitudes of the next K
// steps. Two sources:
//   rssm  an ensemble of RSSMs (rssm.hpp) fitted at the end of warmup and trained online on the
//         feature history; the band is the ensemble mean +- k sigma, sigma combining the ensemble's
//         spread with the running one-step error of its loss forecast (batch noise included).
//   last  the ablation "momentum extrapolation without the RSSM": magnitudes are the last observed,
//         the loss forecast is the last observed loss, sigma the running size of its one-step change.
#include <cstdint>
#include <span>
#include <vector>

#include "rssm.hpp"
#include "state_bytes.hpp"
#include "strata/phase_controller.hpp"

namespace strata::rssm {

enum class MagnitudeSource : std::uint8_t { rssm, last };

struct ForecasterOptions {
  MagnitudeSource source = MagnitudeSource::rssm;
  int history = 16;  // W: the window the RSSM is trained on and filters before it imagines
  int hidden = 32;
  int ensemble = 4;
  double band_sigmas = 3.0;
  int fit_iterations = 200;  // at the end of warmup
  int train_iterations = 2;  // after each full step
  double lr = 3e-3;
  std::uint64_t seed = 0;
  int capacity = 100;  // feature rows kept (the warmup's)
  int horizon = 4;     // K: the predict phase's length
};

class Forecaster {
 public:
  Forecaster(ForecasterOptions options, int groups);
  void attach(PhaseControllerMemory& memory);

  // A full step's features. Updates the running one-step error, then (once fitted) trains.
  void observe(double loss, double grad_norm, std::span<const double> update_norms);
  // The end of warmup: fixes the normalisation and fits the ensemble (nothing while fewer than
  // `history` rows are stored).
  void fit();
  bool fitted() const noexcept { return fitted_; }
  bool ready() const noexcept { return fitted_ && stored_ >= options_.history; }
  // Forecasts the next `horizon` steps from the latest window.
  void forecast();
  // For predict step k (0-based) of the phase: the loss above which the guardrail rolls back, and
  // each group's update norm.
  double upper(int k) const noexcept { return upper_[static_cast<std::size_t>(k)]; }
  std::span<const double> magnitudes(int k) const noexcept {
    return std::span<const double>(magnitudes_).subspan(static_cast<std::size_t>(k) * groups_, groups_);
  }

  void save(StateWriter& out) const;
  void restore(StateReader& in);

 private:
  int features() const noexcept { return 2 + groups_; }
  // Rows [end - history, end) of the history, normalised, into window_.
  void load_window(std::int64_t end);
  // The ensemble's forecast of the row after rows [end - history, end): mean and variance of each
  // feature over members (normalised units), `horizon` rows.
  void imagine(std::int64_t end, int horizon, std::uint64_t key, std::vector<double>& mean, std::vector<double>& var);
  void train(int iterations);
  void record_error(double error);

  ForecasterOptions options_;
  int groups_;
  std::vector<Member> members_;
  std::span<float> history_;  // stored_ rows of features(), oldest first
  std::span<float> window_;   // scratch: one normalised window
  std::span<float> scratch_;  // imagined rows of one member
  std::span<float> normal_;   // mean then std of each feature
  std::vector<double> upper_, magnitudes_;
  std::int64_t stored_ = 0;
  std::int64_t observed_ = 0;    // full-step rows ever observed (keys the forecast's noise)
  std::int64_t iterations_ = 0;  // training iterations so far (Adam's step, keys the noise)
  double error_variance_ = 0.0;  // running mean square of the one-step loss error
  bool has_error_ = false;
  double last_loss_ = 0.0;
  bool fitted_ = false;
};

}  // namespace strata::rssm
