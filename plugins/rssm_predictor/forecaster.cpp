#include "forecaster.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace strata::rssm {

namespace {

constexpr double kTiny = 1e-12;     // keeps the log of a zero norm finite
constexpr double kStdFloor = 1e-3;  // a feature that never moved is not divided by zero

// A noise key per purpose (stream), index and ensemble member.
std::uint64_t key_of(std::uint64_t seed, std::uint64_t stream, std::uint64_t index, std::uint64_t member) {
  return mix_key(mix_key(seed, stream), index * 1024 + member);
}

enum : std::uint64_t { kInitStream = 1, kTrainStream = 2, kWindowStream = 3, kForecastStream = 4, kErrorStream = 5 };

}  // namespace

Forecaster::Forecaster(ForecasterOptions options, int groups) : options_(options), groups_(groups) {
  upper_.assign(static_cast<std::size_t>(options_.horizon), 0.0);
  magnitudes_.assign(static_cast<std::size_t>(options_.horizon) * static_cast<std::size_t>(groups_), 0.0);
}

void Forecaster::attach(PhaseControllerMemory& memory) {
  const auto D = static_cast<std::uint64_t>(features());
  history_ = memory.host_floats(static_cast<std::uint64_t>(options_.capacity) * D);
  normal_ = memory.host_floats(2 * D);
  if (options_.source != MagnitudeSource::rssm) return;
  window_ = memory.host_floats(static_cast<std::uint64_t>(options_.history) * D);
  scratch_ = memory.host_floats(static_cast<std::uint64_t>(options_.horizon) * D);
  Shape shape;
  shape.features = features();
  shape.hidden = options_.hidden;
  const auto count = static_cast<std::uint64_t>(Layout(shape).count);
  for (int m = 0; m < options_.ensemble; ++m) {
    std::span<float> block = memory.host_floats(4 * count);
    members_.emplace_back(shape, MemberStorage{block.subspan(0, count), block.subspan(count, count),
                                               block.subspan(2 * count, count), block.subspan(3 * count, count)});
  }
}

void Forecaster::record_error(double error) {
  const double weight = 2.0 / (options_.history + 1.0);  // an EMA spanning about one window
  error_variance_ = has_error_ ? (1.0 - weight) * error_variance_ + weight * error * error : error * error;
  has_error_ = true;
}

void Forecaster::observe(double loss, double grad_norm, std::span<const double> update_norms) {
  const int D = features();
  if (options_.source == MagnitudeSource::last && observed_ > 0) record_error(loss - last_loss_);
  if (options_.source == MagnitudeSource::rssm && ready()) {
    std::vector<double> mean, var;
    imagine(stored_, 1, key_of(options_.seed, kErrorStream, static_cast<std::uint64_t>(observed_), 0), mean, var);
    record_error(loss - (mean[0] * normal_[static_cast<std::size_t>(D)] + normal_[0]));
  }
  if (stored_ == options_.capacity) {  // the oldest row goes
    std::copy(history_.begin() + D, history_.end(), history_.begin());
    --stored_;
  }
  float* row = history_.data() + stored_ * D;
  row[0] = static_cast<float>(loss);
  row[1] = static_cast<float>(std::log(grad_norm + kTiny));
  for (int g = 0; g < groups_; ++g)
    row[2 + g] = static_cast<float>(std::log(update_norms[static_cast<std::size_t>(g)] + kTiny));
  ++stored_;
  ++observed_;
  last_loss_ = loss;
  if (fitted_ && options_.source == MagnitudeSource::rssm) train(options_.train_iterations);
}

void Forecaster::fit() {
  const int D = features();
  if (stored_ < options_.history) return;  // too few full steps (skipped ones): fitted later
  // Normalise by the second half of warmup: the first is the fast initial descent.
  const std::int64_t first = stored_ / 2;
  const auto n = static_cast<double>(stored_ - first);
  for (int f = 0; f < D; ++f) {
    double sum = 0.0, squares = 0.0;
    for (std::int64_t r = first; r < stored_; ++r) sum += history_[static_cast<std::size_t>(r * D + f)];
    const double mean = sum / n;
    for (std::int64_t r = first; r < stored_; ++r) {
      const double d = history_[static_cast<std::size_t>(r * D + f)] - mean;
      squares += d * d;
    }
    normal_[static_cast<std::size_t>(f)] = static_cast<float>(mean);
    normal_[static_cast<std::size_t>(D + f)] = static_cast<float>(std::max(std::sqrt(squares / n), kStdFloor));
  }
  fitted_ = true;
  if (options_.source != MagnitudeSource::rssm) return;
  for (std::size_t m = 0; m < members_.size(); ++m) members_[m].initialize(key_of(options_.seed, kInitStream, 0, m));
  train(options_.fit_iterations);
  // The one-step error starts from the fitted model's errors on the latest rows it can forecast.
  has_error_ = false;
  const std::int64_t checks = std::min<std::int64_t>(options_.history, stored_ - options_.history);
  for (std::int64_t end = stored_ - checks; end < stored_; ++end) {
    std::vector<double> mean, var;
    imagine(end, 1, key_of(options_.seed, kErrorStream, static_cast<std::uint64_t>(end), 1), mean, var);
    const double forecast = mean[0] * normal_[static_cast<std::size_t>(D)] + normal_[0];
    record_error(history_[static_cast<std::size_t>(end * D)] - forecast);
  }
}

void Forecaster::load_window(std::int64_t end) {
  const int D = features();
  for (std::int64_t r = 0; r < options_.history; ++r)
    for (int f = 0; f < D; ++f) {
      const auto at = static_cast<std::size_t>((end - options_.history + r) * D + f);
      window_[static_cast<std::size_t>(r * D + f)] =
          (history_[at] - normal_[static_cast<std::size_t>(f)]) / normal_[static_cast<std::size_t>(D + f)];
    }
}

void Forecaster::imagine(std::int64_t end, int horizon, std::uint64_t key, std::vector<double>& mean,
                         std::vector<double>& var) {
  const int D = features();
  const auto values = static_cast<std::size_t>(horizon) * static_cast<std::size_t>(D);
  mean.assign(values, 0.0);
  var.assign(values, 0.0);
  load_window(end);
  const std::span<float> out = scratch_.subspan(0, values);
  std::vector<double> squares(values, 0.0);
  for (std::size_t m = 0; m < members_.size(); ++m) {
    members_[m].imagine(window_, options_.history, horizon, key + m, out);
    for (std::size_t i = 0; i < values; ++i) {
      mean[i] += out[i];
      squares[i] += static_cast<double>(out[i]) * out[i];
    }
  }
  const auto E = static_cast<double>(members_.size());
  for (std::size_t i = 0; i < values; ++i) {
    mean[i] /= E;
    var[i] = std::max(0.0, squares[i] / E - mean[i] * mean[i]);
  }
}

void Forecaster::train(int iterations) {
  if (stored_ < options_.history) return;
  const std::int64_t windows = stored_ - options_.history + 1;
  for (int i = 0; i < iterations; ++i, ++iterations_) {
    // Every other window is the latest, the rest drawn from the history.
    const auto it = static_cast<std::uint64_t>(iterations_);
    const std::int64_t end =
        iterations_ % 2 == 0
            ? stored_
            : options_.history + static_cast<std::int64_t>(uniform_open(options_.seed ^ kWindowStream, it) *
                                                           static_cast<double>(windows));
    load_window(std::min(end, stored_));
    for (std::size_t m = 0; m < members_.size(); ++m) {
      members_[m].loss(window_, options_.history, key_of(options_.seed, kTrainStream, it, m), true);
      members_[m].adam_step(options_.lr, iterations_ + 1);
    }
  }
}

void Forecaster::forecast() {
  const int D = features(), K = options_.horizon;
  const double band = options_.band_sigmas;
  if (options_.source == MagnitudeSource::last) {
    const float* last = history_.data() + (stored_ - 1) * D;
    for (int k = 0; k < K; ++k) {
      upper_[static_cast<std::size_t>(k)] = last_loss_ + band * std::sqrt(error_variance_);
      for (int g = 0; g < groups_; ++g)
        magnitudes_[static_cast<std::size_t>(k * groups_ + g)] = std::exp(static_cast<double>(last[2 + g]));
    }
    return;
  }
  std::vector<double> mean, var;
  imagine(stored_, K, key_of(options_.seed, kForecastStream, static_cast<std::uint64_t>(observed_), 0), mean, var);
  for (int k = 0; k < K; ++k) {
    const auto row = static_cast<std::size_t>(k * D);
    const double loss_std = normal_[static_cast<std::size_t>(D)];
    const double center = mean[row] * loss_std + normal_[0];
    const double spread = var[row] * loss_std * loss_std + error_variance_;
    upper_[static_cast<std::size_t>(k)] = center + band * std::sqrt(spread);
    for (int g = 0; g < groups_; ++g) {
      const auto f = static_cast<std::size_t>(2 + g);
      const double log_norm = mean[row + f] * normal_[static_cast<std::size_t>(D) + f] + normal_[f];
      magnitudes_[static_cast<std::size_t>(k * groups_ + g)] = std::exp(log_norm);
    }
  }
}

void Forecaster::save(StateWriter& out) const {
  out.value(stored_);
  out.value(observed_);
  out.value(iterations_);
  out.value(error_variance_);
  out.value(static_cast<std::uint8_t>(has_error_));
  out.value(last_loss_);
  out.value(static_cast<std::uint8_t>(fitted_));
  out.array(std::span<const float>(history_));
  out.array(std::span<const float>(normal_));
  out.array(std::span<const double>(upper_));
  out.array(std::span<const double>(magnitudes_));
  out.value(static_cast<std::uint64_t>(members_.size()));
  for (const Member& m : members_) {
    out.array(std::span<const float>(m.storage().params));
    out.array(std::span<const float>(m.storage().adam_m));
    out.array(std::span<const float>(m.storage().adam_v));
  }
}

void Forecaster::restore(StateReader& in) {
  stored_ = in.value<std::int64_t>();
  if (stored_ < 0 || stored_ > options_.capacity)
    throw std::runtime_error("the saved feature history holds " + std::to_string(stored_) + " rows, more than " +
                             std::to_string(options_.capacity));
  observed_ = in.value<std::int64_t>();
  iterations_ = in.value<std::int64_t>();
  error_variance_ = in.value<double>();
  has_error_ = in.value<std::uint8_t>() != 0;
  last_loss_ = in.value<double>();
  fitted_ = in.value<std::uint8_t>() != 0;
  in.array(history_, "feature history");
  in.array(normal_, "feature normalisation");
  in.array(std::span<double>(upper_), "loss band");
  in.array(std::span<double>(magnitudes_), "update magnitudes");
  if (in.value<std::uint64_t>() != members_.size())
    throw std::runtime_error("the saved ensemble has another size (saved with other predictor settings?)");
  for (Member& m : members_) {
    in.array(m.storage().params, "RSSM parameters");
    in.array(m.storage().adam_m, "RSSM Adam moments");
    in.array(m.storage().adam_v, "RSSM Adam moments");
  }
}

}  // namespace strata::rssm
