#pragma once
// Rank 0's progress display: a bar redrawn in place on a terminal (step, loss, samples/s, ETA),
// plain lines (about ten per epoch, and every 30 s at most apart) when the output is a file or a
// pipe, so CI logs stay readable. Torch-free.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ddph/train/train_config.h"

namespace ddph::train {

class ProgressReporter {
 public:
  /// kAuto picks kBar when `out` is a terminal, kLines otherwise.
  ProgressReporter(ProgressMode mode, std::FILE* out);

  void startEpoch(std::int64_t epoch, std::int64_t epochs, std::int64_t firstStep,
                  std::int64_t totalSteps);
  /// After step `step` (0-based within the epoch) with its loss and the global samples so far
  /// this epoch. Cheap when nothing is to be drawn: callers may call it every step, and ask
  /// wantsLoss() first to avoid synchronising on the loss for nothing.
  bool wantsLoss(std::int64_t step) const;
  void update(std::int64_t step, double loss, std::int64_t samplesThisEpoch);
  /// Ends the bar's line (the epoch summary is printed by the caller).
  void finishEpoch();

  ProgressMode mode() const { return mode_; }

  /// "1:02:03" / "2:03"; for tests.
  static std::string formatDuration(double seconds);

 private:
  ProgressMode mode_;
  std::FILE* out_;
  std::int64_t epoch_ = 0, epochs_ = 1, firstStep_ = 0, totalSteps_ = 0, lineEvery_ = 1;
  std::chrono::steady_clock::time_point start_, lastDraw_;
  bool drawn_ = false;
};

}  // namespace ddph::train
