// The RSSM predictor: a phase controller ([predictor] plugin = "rssm_predictor") that skips
// backward passes. After a warmup of full steps it alternates predict phases (forward only) with
// full steps:
//
//   warmup N -> predict K -> correct C -> full F -> predict K -> ...     (phase_schedule.hpp)
//
// A predict step moves each group of weights (a block; the rest) along the optimizer's own
// direction m / (sqrt(v) + eps), frozen at the phase start, by the update norm the forecaster
// predicts for that group and step (an RSSM ensemble, or the last observed norm for the ablation;
// forecaster.hpp). Its guardrail: when a predict step's forward loss is above the forecast band
// (center + band_sigmas * sigma), or not finite, the phase ends, the weights go back to the phase
// start (a host copy, weight_mover.hpp) and correct steps follow. A loss below the band is not a
// failure of the update, so it never rolls back. Predict step k judges the weights after k moves:
// the phase's last move is judged by the correct steps that follow, not by the guardrail.
//
//   warmup_steps     = 100     N > `history` (the first step yields no feature row)
//   predict_steps    = 4       K >= 1
//   correct_steps    = 2       C >= 1
//   full_steps       = 2       F >= 0
//   magnitude        = "rssm"  or "last" (the ablation: no RSSM)
//   history          = 16      the RSSM's window of full-step features
//   hidden           = 32      its GRU state
//   ensemble         = 4       members (>= 2: the band needs a spread)
//   band_sigmas      = 3.0
//   fit_iterations   = 200     Adam steps fitting the RSSM at the end of warmup
//   train_iterations = 2       after each later full step
//   rssm_lr          = 3e-3
//   seed             = 0       the RSSM's initialisation and noise
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "forecaster.hpp"
#include "phase_schedule.hpp"
#include "strata/plugin.hpp"
#include "weight_mover.hpp"

namespace {

using namespace strata;
using namespace strata::rssm;

constexpr std::uint32_t kStateVersion = 1;

class RssmPredictor final : public PhaseController {
 public:
  RssmPredictor(ConfigView& config, HostServices& host) : host_(host), schedule_(PhaseLengths{}) {
    PhaseLengths lengths;
    lengths.warmup = config.get_int("warmup_steps", 100, 1, 1 << 20);
    lengths.predict = config.get_int("predict_steps", 4, 0, 1 << 16);
    lengths.correct = config.get_int("correct_steps", 2, 0, 1 << 20);
    lengths.full = config.get_int("full_steps", 2, 0, 1 << 20);
    options_.source = config.get_string("magnitude", "rssm", {"rssm", "last"}) == "last" ? MagnitudeSource::last
                                                                                         : MagnitudeSource::rssm;
    options_.history = static_cast<int>(config.get_int("history", 16, 2, 4096));
    options_.hidden = static_cast<int>(config.get_int("hidden", 32, 1, 4096));
    options_.ensemble = static_cast<int>(config.get_int("ensemble", 4, 1, 64));
    options_.band_sigmas = config.get_double("band_sigmas", 3.0, 0.0);
    options_.fit_iterations = static_cast<int>(config.get_int("fit_iterations", 200, 1, 1 << 20));
    options_.train_iterations = static_cast<int>(config.get_int("train_iterations", 2, 0, 1 << 20));
    options_.lr = config.get_double("rssm_lr", 3e-3, 0.0);
    options_.seed = static_cast<std::uint64_t>(config.get_int("seed", 0, 0));
    if (lengths.predict == 0)
      config.report_error("predict_steps",
                          "a predict phase of 0 steps never predicts: set predict_steps >= 1, or drop [predictor]");
    if (lengths.correct == 0)
      config.report_error("correct_steps",
                          "at least one correct step must follow a predict phase: it refreshes the optimizer's "
                          "direction the next phase continues");
    // The first step only takes the weights' host copy: warmup gives warmup_steps - 1 feature rows.
    if (lengths.warmup <= options_.history)
      config.report_error("warmup_steps", "warmup_steps = " + std::to_string(lengths.warmup) +
                                              " is shorter than the RSSM's history window plus one (history = " +
                                              std::to_string(options_.history) +
                                              "): the model needs a full window of features before it predicts, "
                                              "and the first step yields none");
    if (options_.source == MagnitudeSource::rssm && options_.ensemble < 2)
      config.report_error("ensemble", "the band needs the spread of at least 2 members");
    if (options_.band_sigmas <= 0.0) config.report_error("band_sigmas", "band_sigmas must be positive");
    if (options_.lr <= 0.0) config.report_error("rssm_lr", "rssm_lr must be positive");
    options_.capacity = static_cast<int>(lengths.warmup);
    options_.horizon = static_cast<int>(std::max<std::int64_t>(lengths.predict, 1));
    schedule_ = PhaseSchedule(lengths);
  }

  Status attach(std::span<const ControlledParameter> parameters, PhaseControllerMemory& memory) override {
    if (Status status = mover_.attach(parameters, memory); !status) return status;
    forecaster_.emplace(options_, mover_.groups());
    forecaster_->attach(memory);
    norms_.assign(static_cast<std::size_t>(mover_.groups()), 0.0);
    host_.log(LogLevel::info, "rssm_predictor: " + std::to_string(mover_.parameter_count()) + " parameters in " +
                                  std::to_string(mover_.groups()) + " groups, magnitudes from " +
                                  (options_.source == MagnitudeSource::rssm ? "an RSSM ensemble" : "the last step"));
    return {};
  }

  Status choose_phase(std::int64_t, Phase& phase) override {
    phase = schedule_.phase();
    return {};
  }

  Status predict(const StepObservation& observed, std::span<const ControlledParameter> parameters,
                 PredictOutcome& outcome) override {
    Ops& ops = host_.ops();
    const int k = static_cast<int>(schedule_.done());
    if (!std::isfinite(observed.loss) || observed.loss > forecaster_->upper(k)) {
      mover_.roll_back(ops, parameters);
      schedule_.end_predict_early();
      rolled_back_ = true;
      outcome.rolled_back = true;
      host_.log(LogLevel::debug, "rssm_predictor: step " + std::to_string(observed.step) + ": loss " +
                                     std::to_string(observed.loss) + " above the band's " +
                                     std::to_string(forecaster_->upper(k)) + ": rolled back");
      return {};
    }
    if (!mover_.direction_ready()) mover_.compute_direction(ops, parameters);  // a resumed run
    mover_.apply(ops, parameters, forecaster_->magnitudes(k));
    return {};
  }

  Status observe(const StepObservation& observed, std::span<const ControlledParameter> parameters) override {
    if (observed.phase == Phase::predict) {
      if (!rolled_back_) schedule_.advance();
      rolled_back_ = false;
      // The phase is over: the rollback point is no longer needed, and the next full step's update
      // is measured from the weights the phase left.
      if (schedule_.phase() != Phase::predict) mover_.retake_copy(host_.ops(), parameters);
    } else {
      // A skipped step left the weights as they were: nothing to measure.
      if (!observed.skipped && mover_.measure_and_refresh(host_.ops(), parameters, norms_))
        forecaster_->observe(observed.loss, observed.grad_norm, norms_);
      schedule_.advance();
    }
    if (schedule_.phase() == Phase::predict && schedule_.done() == 0) begin_predict(parameters);
    return {};
  }

  Status state(std::string& out) override {
    StateWriter writer;
    writer.value(kStateVersion);
    writer.value(static_cast<std::uint8_t>(schedule_.phase()));
    writer.value(schedule_.done());
    mover_.save(writer);
    forecaster_->save(writer);
    out = writer.take();
    return {};
  }

  Status restore_state(std::string_view saved) override {
    if (saved.empty()) {  // a checkpoint saved without this predictor: start with warmup
      host_.log(LogLevel::warn, "rssm_predictor: the checkpoint holds no predictor state; warming up from here");
      return {};
    }
    StateReader reader(saved);
    if (const auto version = reader.value<std::uint32_t>(); version != kStateVersion)
      return Status::error("predictor state version " + std::to_string(version) + ", expected " +
                           std::to_string(kStateVersion));
    const auto phase = reader.value<std::uint8_t>();
    if (phase > static_cast<std::uint8_t>(Phase::correct))
      return Status::error("predictor state names phase " + std::to_string(phase) + ", which does not exist");
    const auto done = reader.value<std::int64_t>();
    if (!schedule_.valid(static_cast<Phase>(phase), done))
      return Status::error("predictor state is " + std::to_string(done) + " steps into a " +
                           std::string(phase_name(static_cast<Phase>(phase))) +
                           " phase, past its length (saved with other phase lengths?)");
    schedule_.restore(static_cast<Phase>(phase), done);
    mover_.restore(reader);
    forecaster_->restore(reader);
    if (!reader.finished()) return Status::error("predictor state has trailing bytes (saved by another version?)");
    return {};
  }

 private:
  // The phase's direction and forecast; too few features yet (skipped steps) makes it a full phase.
  // The first one fits the forecaster on the warmup's features.
  void begin_predict(std::span<const ControlledParameter> parameters) {
    if (!forecaster_->fitted()) forecaster_->fit();
    if (!forecaster_->ready()) {
      schedule_.postpone_predict();
      return;
    }
    mover_.compute_direction(host_.ops(), parameters);
    forecaster_->forecast();
    mover_.hold_copy();
  }

  HostServices& host_;
  ForecasterOptions options_;
  PhaseSchedule schedule_;
  WeightMover mover_;
  std::optional<Forecaster> forecaster_;
  std::vector<double> norms_;
  bool rolled_back_ = false;  // within one step: predict rolled back, observe must not advance
};

constexpr const char* kKeys[] = {"warmup_steps",     "predict_steps", "correct_steps", "full_steps",  "magnitude",
                                 "history",          "hidden",        "ensemble",      "band_sigmas", "fit_iterations",
                                 "train_iterations", "rssm_lr",       "seed"};
// Its direction is Adam's m / sqrt(v): 8-bit codes or SGD's velocity are not that.
constexpr const char* kConflicts[] = {"adamw8bit", "sgd"};
const FactoryDescriptor kFactories[] = {make_factory<PhaseController, RssmPredictor>(
    "rssm_predictor",
    "skips backward passes: predict steps move the weights along Adam's direction by update norms an RSSM "
    "ensemble forecasts, with a rollback guardrail",
    name_list(kKeys), {}, name_list(kConflicts))};

}  // namespace

STRATA_DEFINE_PLUGIN(rssm_predictor, "1.0.0", kFactories)
