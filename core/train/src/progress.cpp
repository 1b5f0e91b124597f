#include "ddph/train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace ddph::train {
namespace {

constexpr int kBarWidth = 24;
constexpr auto kMaxLineGap = std::chrono::seconds(30);
constexpr auto kMinBarRedraw = std::chrono::milliseconds(100);

std::string formatRate(double samplesPerSecond) {
  if (samplesPerSecond >= 1e4) return fmt::format("{:.1f}k", samplesPerSecond / 1e3);
  return fmt::format("{:.0f}", samplesPerSecond);
}

}  // namespace

ProgressReporter::ProgressReporter(ProgressMode mode, std::FILE* out) : mode_(mode), out_(out) {
  if (mode_ == ProgressMode::kAuto) {
    mode_ = (out_ != nullptr && ::isatty(::fileno(out_)) != 0) ? ProgressMode::kBar
                                                                : ProgressMode::kLines;
  }
  if (out_ == nullptr) mode_ = ProgressMode::kNone;
}

std::string ProgressReporter::formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<long long>(std::llround(seconds));
  const long long h = total / 3600, m = (total / 60) % 60, s = total % 60;
  if (h > 0) return fmt::format("{}:{:02}:{:02}", h, m, s);
  return fmt::format("{}:{:02}", m, s);
}

void ProgressReporter::startEpoch(std::int64_t epoch, std::int64_t epochs, std::int64_t firstStep,
                                  std::int64_t totalSteps) {
  epoch_ = epoch;
  epochs_ = epochs;
  firstStep_ = firstStep;
  totalSteps_ = totalSteps;
  lineEvery_ = std::max<std::int64_t>(1, (totalSteps - firstStep) / 10);
  start_ = lastDraw_ = std::chrono::steady_clock::now();
  drawn_ = false;
}

bool ProgressReporter::wantsLoss(std::int64_t step) const {
  const auto now = std::chrono::steady_clock::now();
  const bool last = step + 1 == totalSteps_;
  switch (mode_) {
    case ProgressMode::kNone:
      return false;
    case ProgressMode::kBar:
      return last || now - lastDraw_ >= kMinBarRedraw;
    case ProgressMode::kLines:
    case ProgressMode::kAuto:
      return last || (step + 1 - firstStep_) % lineEvery_ == 0 || now - lastDraw_ >= kMaxLineGap;
  }
  return false;
}

void ProgressReporter::update(std::int64_t step, double loss, std::int64_t samplesThisEpoch) {
  if (mode_ == ProgressMode::kNone) return;
  const auto now = std::chrono::steady_clock::now();
  lastDraw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::int64_t done = step + 1;
  const double rate = elapsed > 0 ? static_cast<double>(samplesThisEpoch) / elapsed : 0.0;
  const double stepsPerSecond = elapsed > 0 ? static_cast<double>(done - firstStep_) / elapsed : 0;
  const double eta =
      stepsPerSecond > 0 ? static_cast<double>(totalSteps_ - done) / stepsPerSecond : -1.0;
  const std::string tail =
      fmt::format("{}/{} loss {:.4f} {} samples/s ETA {}", done, totalSteps_, loss,
                  formatRate(rate), formatDuration(eta));
  if (mode_ == ProgressMode::kBar) {
    const int filled = totalSteps_ > 0
                           ? static_cast<int>(kBarWidth * done / std::max<std::int64_t>(1, totalSteps_))
                           : 0;
    fmt::print(out_, "\repoch {}/{} [{}{}] {}\033[K", epoch_ + 1, epochs_, std::string(filled, '#'),
               std::string(kBarWidth - filled, '.'), tail);
    drawn_ = true;
  } else {
    fmt::print(out_, "epoch {}/{} step {}\n", epoch_ + 1, epochs_, tail);
  }
  std::fflush(out_);
}

void ProgressReporter::finishEpoch() {
  if (mode_ == ProgressMode::kBar && drawn_) {
    fmt::print(out_, "\n");
    std::fflush(out_);
  }
  drawn_ = false;
}

}  // namespace ddph::train
