#pragma once
// The weights' side of the predictor, through ops only:
// - a host copy of the trained weights. Refreshed after every full step, it measures each group's
//   update norm |w_t - w_{t-1}|; kept through a predict phase, it is the phase-start point the
//   guardrail rolls back to.
// - the update direction on the device: the optimizer's own m / (sqrt(v) + eps), read from its state
//   at the start of a predict phase (Adam's bias corrections are one factor per step, which the
//   normalisation per group removes), and its norm per group.
// A group is the parameters of one block, or those outside the blocks (embeddings, final norm, head).
#include <cstdint>
#include <span>
#include <vector>

#include "state_bytes.hpp"
#include "strata/ops.hpp"
#include "strata/phase_controller.hpp"

namespace strata::rssm {

class WeightMover {
 public:
  // Refuses an optimizer whose state is not two f32 buffers (m, v) per parameter.
  Status attach(std::span<const ControlledParameter> parameters, PhaseControllerMemory& memory);
  int groups() const noexcept { return groups_; }
  std::uint64_t parameter_count() const noexcept { return mirror_.size(); }

  // After a full step: each group's update norm into `norms`, then the copy takes the new weights.
  // False (norms untouched) when the copy did not hold the step's starting weights: the run's
  // first step (the weights are initialised after attach) and a resumed run's first without saved state.
  bool measure_and_refresh(Ops& ops, std::span<const ControlledParameter> parameters, std::span<double> norms);
  // A predict phase begins: the copy stays as it is, the rollback point.
  void hold_copy() noexcept { tracking_ = false; }
  // A predict phase has ended (or rolled back): the copy takes the weights as they are now, so the
  // next full step's update norm is measured from them.
  void retake_copy(Ops& ops, std::span<const ControlledParameter> parameters);
  // Reads the optimizer state into the direction buffer.
  void compute_direction(Ops& ops, std::span<const ControlledParameter> parameters);
  bool direction_ready() const noexcept { return direction_ready_; }
  // w_g += magnitude_g * d_g / |d_g| for each group g (a group whose direction is zero stays).
  void apply(Ops& ops, std::span<const ControlledParameter> parameters, std::span<const double> magnitudes);
  // The weights the copy holds, bitwise.
  void roll_back(Ops& ops, std::span<const ControlledParameter> parameters);

  void save(StateWriter& out) const;
  // The direction is not saved: the optimizer state it came from is, unchanged through a predict phase.
  void restore(StateReader& in);

 private:
  struct Entry {
    std::uint64_t offset = 0;
    std::int64_t count = 0;
    int group = 0;
  };
  void check_views(std::span<const ControlledParameter> parameters) const;
  std::vector<Entry> entries_;
  int groups_ = 0;
  std::span<float> mirror_, staging_m_, staging_v_;
  TensorView direction_;
  std::vector<double> direction_norm_;
  bool tracking_ = false;
  bool direction_ready_ = false;
};

}  // namespace strata::rssm
