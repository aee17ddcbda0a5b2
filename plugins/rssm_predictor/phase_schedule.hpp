#pragma once
// The predictor's phase schedule: warmup, then cycles of predict -> correct -> full.
//
//   warmup  N full steps: features are collected, then the dynamics model is fitted
//   predict K forward-only steps: the controller moves the weights
//   correct C full steps after a predict phase (or a rollback): the optimizer pulls training back
//   full    F more full steps whose features refresh the model (F may be 0)
#include <cstdint>

#include "strata/phase.hpp"

namespace strata::rssm {

struct PhaseLengths {
  std::int64_t warmup = 100;
  std::int64_t predict = 4;
  std::int64_t correct = 2;
  std::int64_t full = 2;
};

class PhaseSchedule {
 public:
  explicit PhaseSchedule(PhaseLengths lengths) : lengths_(lengths) {}

  Phase phase() const noexcept { return phase_; }
  std::int64_t done() const noexcept { return done_; }  // steps of the current phase already run

  // One step of the current phase has run: move on when the phase is complete.
  void advance() noexcept {
    if (++done_ < length(phase_)) return;
    done_ = 0;
    switch (phase_) {
      case Phase::warmup: phase_ = Phase::predict; break;
      case Phase::predict: phase_ = Phase::correct; break;
      case Phase::correct: phase_ = lengths_.full > 0 ? Phase::full : Phase::predict; break;
      case Phase::full: phase_ = Phase::predict; break;
    }
  }
  // The guardrail ended a predict phase early: correct steps follow.
  void end_predict_early() noexcept {
    phase_ = Phase::correct;
    done_ = 0;
  }
  // Not enough features to predict yet: a full phase instead of this predict phase.
  void postpone_predict() noexcept {
    phase_ = Phase::full;
    done_ = 0;
  }
  bool valid(Phase phase, std::int64_t done) const noexcept { return done >= 0 && done < length(phase); }
  void restore(Phase phase, std::int64_t done) noexcept {
    phase_ = phase;
    done_ = done;
  }

 private:
  std::int64_t length(Phase phase) const noexcept {
    switch (phase) {
      case Phase::warmup: return lengths_.warmup;
      case Phase::predict: return lengths_.predict;
      case Phase::correct: return lengths_.correct;
      case Phase::full: return lengths_.full > 0 ? lengths_.full : 1;  // a postponed predict phase
    }
    return 1;
  }
  PhaseLengths lengths_;
  Phase phase_ = Phase::warmup;
  std::int64_t done_ = 0;
};

}  // namespace strata::rssm
