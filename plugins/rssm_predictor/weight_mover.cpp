#include "weight_mover.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

namespace strata::rssm {

namespace {

constexpr double kAdamEps = 1e-8;  // AdamW's default; it matters only where v is tiny

}  // namespace

Status WeightMover::attach(std::span<const ControlledParameter> parameters, PhaseControllerMemory& memory) {
  std::map<int, int> group_of_layer;
  for (const ControlledParameter& p : parameters) group_of_layer.emplace(p.layer, 0);
  int next = 0;
  for (auto& [layer, group] : group_of_layer) group = next++;
  groups_ = next;
  std::uint64_t total = 0;
  std::int64_t largest = 0;
  entries_.clear();
  for (const ControlledParameter& p : parameters) {
    const TensorView& m = p.optimizer_state[0];
    const TensorView& v = p.optimizer_state[1];
    if (p.values.dtype != DType::f32 || m.dtype != DType::f32 || v.dtype != DType::f32 || m.count != p.values.count ||
        v.count != p.values.count || m.empty() || v.empty())
      return Status::error("parameter '" + std::string(p.name) +
                           "': the optimizer's state is not two f32 buffers (m, v) of its length; the predictor "
                           "continues Adam's direction m / sqrt(v), so it needs adamw");
    entries_.push_back({total, p.values.count, group_of_layer.at(p.layer)});
    total += static_cast<std::uint64_t>(p.values.count);
    largest = std::max(largest, p.values.count);
  }
  mirror_ = memory.host_floats(total);
  staging_m_ = memory.host_floats(static_cast<std::uint64_t>(largest));
  staging_v_ = memory.host_floats(static_cast<std::uint64_t>(largest));
  direction_ = memory.device_floats("predictor.direction", total);
  direction_norm_.assign(static_cast<std::size_t>(groups_), 0.0);
  return {};
}

void WeightMover::check_views(std::span<const ControlledParameter> parameters) const {
  if (parameters.size() != entries_.size())
    throw std::logic_error("the host passed " + std::to_string(parameters.size()) + " parameters, attach saw " +
                           std::to_string(entries_.size()));
}

bool WeightMover::measure_and_refresh(Ops& ops, std::span<const ControlledParameter> parameters,
                                      std::span<double> norms) {
  check_views(parameters);
  const bool measured = tracking_;
  if (measured) std::fill(norms.begin(), norms.end(), 0.0);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    float* copy = mirror_.data() + e.offset;
    if (measured) {
      ops.copy_to_host(staging_m_.data(), parameters[i].values.data, parameters[i].values.bytes());
      double sum = 0.0;
      for (std::int64_t j = 0; j < e.count; ++j) {
        const double change = static_cast<double>(staging_m_[static_cast<std::size_t>(j)]) - copy[j];
        sum += change * change;
      }
      norms[static_cast<std::size_t>(e.group)] += sum;
      std::copy_n(staging_m_.data(), e.count, copy);
    } else {
      ops.copy_to_host(copy, parameters[i].values.data, parameters[i].values.bytes());
    }
  }
  if (measured)
    for (double& n : norms) n = std::sqrt(n);
  tracking_ = true;
  direction_ready_ = false;  // the optimizer has moved on
  return measured;
}

void WeightMover::retake_copy(Ops& ops, std::span<const ControlledParameter> parameters) {
  check_views(parameters);
  for (std::size_t i = 0; i < entries_.size(); ++i)
    ops.copy_to_host(mirror_.data() + entries_[i].offset, parameters[i].values.data, parameters[i].values.bytes());
  tracking_ = true;
}

void WeightMover::compute_direction(Ops& ops, std::span<const ControlledParameter> parameters) {
  check_views(parameters);
  std::fill(direction_norm_.begin(), direction_norm_.end(), 0.0);
  auto* direction = static_cast<float*>(direction_.data);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const ControlledParameter& p = parameters[i];
    ops.copy_to_host(staging_m_.data(), p.optimizer_state[0].data, p.optimizer_state[0].bytes());
    ops.copy_to_host(staging_v_.data(), p.optimizer_state[1].data, p.optimizer_state[1].bytes());
    double sum = 0.0;
    for (std::int64_t j = 0; j < e.count; ++j) {
      const auto k = static_cast<std::size_t>(j);
      // Adam descends: the step is -m / (sqrt(v) + eps).
      const float d = static_cast<float>(-staging_m_[k] / (std::sqrt(static_cast<double>(staging_v_[k])) + kAdamEps));
      staging_m_[k] = d;
      sum += static_cast<double>(d) * d;
    }
    direction_norm_[static_cast<std::size_t>(e.group)] += sum;
    ops.copy_from_host(direction + e.offset, staging_m_.data(), static_cast<std::uint64_t>(e.count) * sizeof(float));
  }
  for (double& n : direction_norm_) n = std::sqrt(n);
  direction_ready_ = true;
}

void WeightMover::apply(Ops& ops, std::span<const ControlledParameter> parameters, std::span<const double> magnitudes) {
  check_views(parameters);
  const auto* direction = static_cast<const float*>(direction_.data);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const auto g = static_cast<std::size_t>(e.group);
    if (direction_norm_[g] <= 0.0 || !std::isfinite(magnitudes[g])) continue;
    const auto alpha = static_cast<float>(magnitudes[g] / direction_norm_[g]);
    ops.add_scaled(parameters[i].values.f32(), alpha, direction + e.offset, e.count);
  }
}

void WeightMover::roll_back(Ops& ops, std::span<const ControlledParameter> parameters) {
  check_views(parameters);
  for (std::size_t i = 0; i < entries_.size(); ++i)
    ops.copy_from_host(parameters[i].values.data, mirror_.data() + entries_[i].offset, parameters[i].values.bytes());
}

void WeightMover::save(StateWriter& out) const {
  out.value(static_cast<std::uint8_t>(tracking_));
  out.array(std::span<const float>(mirror_));
}

void WeightMover::restore(StateReader& in) {
  tracking_ = in.value<std::uint8_t>() != 0;
  in.array(mirror_, "copy of the weights");
  direction_ready_ = false;
}

}  // namespace strata::rssm
