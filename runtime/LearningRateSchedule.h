#pragma once
// Learning-rate schedules over a run's optimizer updates, as kiln-run --lr-schedule spells
// them. The rate is a function of the update's number alone (and of the run's length), never of
// what ran before, so that a run resumed from a checkpoint at update t continues with exactly
// the rates of an uninterrupted run: a training step takes its learning rate as an input on
// every run (runtime/TrainingStep.h), so changing it costs nothing.
//
//   constant          lr on every update
//   step:K:G          lr * G^floor(t / K): multiplied by G every K updates (torch's StepLR,
//                     counted in updates rather than epochs)
//   cosine[:W]        W updates of linear warm-up, lr * (t + 1) / W, then cosine decay from lr
//                     towards 0 over the remaining updates: lr * (1 + cos(pi * (t - W) / (T - W))) / 2
//                     (torch's CosineAnnealingLR with eta_min 0 after the warm-up); W = 0 by default
//
// t counts updates from 0, T is the run's total number of updates.
#include <cstdint>
#include <string>

namespace kiln::runtime {

struct LearningRateSchedule {
  enum class Kind { Constant, Step, Cosine };
  Kind kind = Kind::Constant;
  int64_t stepSize = 1; // step: K
  double gamma = 1.0;   // step: G
  int64_t warmup = 0;   // cosine: W

  /// Parses the spellings above. kiln::Error naming `text` for anything else: an unknown kind,
  /// K < 1, G not a finite number >= 0, W < 0.
  static LearningRateSchedule parse(const std::string &text);
  /// The spelling parse() reads back.
  std::string toString() const;

  /// The learning rate of update `t` (from 0) of a run of `total` updates that starts from
  /// `lr`. kiln::Error for cosine with a warm-up as long as the run or longer.
  double at(double lr, int64_t t, int64_t total) const;
};

} // namespace kiln::runtime
