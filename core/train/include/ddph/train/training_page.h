#pragma once
// A ddp-train run as the HTML report's plain data (ddph/report/html_report.h): loss and
// throughput per step, each dataset's seen / never seen per epoch, and the verdict as the trainer
// knows it (`ddp-train --report-html PATH`, docs/html-report.md). Torch-free.

#include <string>

#include "ddph/report/html_report.h"
#include "ddph/train/training_report.h"

namespace ddph::train {

/// The page: `coverage` is the one property judged: a dataset with samples never seen in an epoch
/// that ran to its end (what `--mix zip` does to the longer dataset) is a violation; epochs cut
/// short (--steps, a signal) and samples seen twice or more (padding, `--mix cycle`) are notes.
/// The loss and throughput charts need report.epochs[*].stepLog.
report::Page trainingPage(const TrainingReport& report);

/// Writes trainingPage(report) to `path` atomically; throws ConfigError or Error naming `path`.
void writeTrainingPage(const TrainingReport& report, const std::string& path);

}  // namespace ddph::train
