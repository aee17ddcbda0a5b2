#pragma once
// A phase controller (docs/architecture.md, "Phases"), set by the manifest's
// `[predictor] plugin = "..."`: it chooses each step's phase, sees each step's metrics, and in
// predict steps moves the weights itself while the host skips the backward pass and the optimizer
// (no gradient is computed, no optimizer state changes). The rssm_predictor plugin is one.
//
// A step with a controller:
//   phase = controller.choose_phase(step)
//   forward (loss); if phase_needs_gradients(phase): backward, precision check, optimizer
//   else: controller.predict(observation, parameters)          <- writes the weights through ops
//   controller.observe(observation, parameters)                <- every step, after the update
//
// The controller reaches tensors through views of the backend's memory and the ops HostServices
// lends it, as an optimizer does; the memory it keeps it asks of the host (PhaseControllerMemory),
// so the run's accounting shows it. Its state goes into checkpoints (state / restore_state), so a
// run resumed in the middle of a predict phase is bitwise the uninterrupted one.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "strata/optimizer.hpp"
#include "strata/phase.hpp"
#include "strata/plugin_memory.hpp"
#include "strata/status.hpp"
#include "strata/tensor_view.hpp"

namespace strata {

// One trained parameter: its f32 values (the master copy when the weights are stored in a lower
// precision; the host rounds the stored copy after predict() writes here) and the optimizer's
// state buffers, laid out as its state_layout() says. Views change between steps when strategies
// move tensors: use the ones each call passes.
struct ControlledParameter {
  std::string_view name;
  int layer = -1;  // -1: outside the blocks (embeddings, final norm, head)
  TensorView values;
  std::array<TensorView, kMaxOptimizerStateBuffers> optimizer_state{};
};

struct StepObservation {
  std::int64_t step = 1;  // 1-based
  std::int64_t total_steps = 1;
  Phase phase = Phase::full;
  double loss = 0.0;       // the step's forward loss, before its update
  double grad_norm = 0.0;  // before clipping; 0 in predict steps
  double lr = 0.0;         // what the optimizer used; 0 in predict steps
  bool skipped = false;    // the precision policy skipped the update (non-finite gradients)
};

// What predict() did, for telemetry.
struct PredictOutcome {
  bool rolled_back = false;  // the guardrail restored the phase-start weights instead of updating
};

// Memory a controller keeps (strata/plugin_memory.hpp), allocated by the host from its accounted
// arenas under the plugin's name and freed when the run ends. Call it from attach() only.
using PhaseControllerMemory = PluginMemory;

class PhaseController {
 public:
  virtual ~PhaseController() = default;
  // Once, before the first step and before a resume's restore_state: the run's trained
  // parameters, in the order every later call passes them. Refuse what it cannot run here (an
  // optimizer whose state it cannot read) with an error Status.
  virtual Status attach(std::span<const ControlledParameter> parameters, PhaseControllerMemory& memory) = 0;
  // The phase of `step` (1-based), chosen before its forward pass.
  virtual Status choose_phase(std::int64_t step, Phase& phase) = 0;
  // Predict steps only, after the forward pass: update `parameters`' values through ops, or put
  // them back (outcome.rolled_back).
  virtual Status predict(const StepObservation& observed, std::span<const ControlledParameter> parameters,
                         PredictOutcome& outcome) = 0;
  // Every step, after its update (the optimizer's, predict's, or none when skipped).
  virtual Status observe(const StepObservation& observed, std::span<const ControlledParameter> parameters) = 0;
  // Everything a resumed run needs to continue bitwise, as bytes the host saves with a checkpoint.
  virtual Status state(std::string& out) = 0;
  virtual Status restore_state(std::string_view saved) = 0;
};

}  // namespace strata
