#include "ddph/train/train_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "ddph/common/error.h"
#include "ddph/common/timeouts.h"
#include "ddph/data/image_dataset.h"
#include "ddph/report/html_report.h"

namespace ddph::train {

using common::checkTimeoutOption;
using common::ConfigError;

namespace {

template <typename Enum, std::size_t N>
Enum parseName(const std::string& option, const std::string& name,
               const std::pair<const char*, Enum> (&table)[N]) {
  std::string accepted;
  for (const auto& [text, value] : table) {
    if (name == text) return value;
    accepted += accepted.empty() ? text : fmt::format("|{}", text);
  }
  throw ConfigError(fmt::format("{} '{}' is not one of {}", option, name, accepted));
}

template <typename Enum, std::size_t N>
std::string nameOf(Enum value, const std::pair<const char*, Enum> (&table)[N]) {
  for (const auto& [text, v] : table) {
    if (v == value) return text;
  }
  return "?";
}

constexpr std::pair<const char*, OptimizerKind> kOptimizers[] = {{"sgd", OptimizerKind::kSgd},
                                                                 {"adam", OptimizerKind::kAdam}};
constexpr std::pair<const char*, Backend> kBackends[] = {
    {"auto", Backend::kAuto}, {"gloo", Backend::kGloo}, {"nccl", Backend::kNccl}};
constexpr std::pair<const char*, ProgressMode> kProgress[] = {{"auto", ProgressMode::kAuto},
                                                              {"bar", ProgressMode::kBar},
                                                              {"lines", ProgressMode::kLines},
                                                              {"none", ProgressMode::kNone}};
constexpr std::pair<const char*, DType> kDTypes[] = {{"float32", DType::kFloat32},
                                                     {"float64", DType::kFloat64}};

/// The folder `path` is written into exists: found before training, not after it.
void checkOutputFolder(const char* option, const std::string& path) {
  if (path.empty()) return;
  const auto folder = std::filesystem::absolute(path).parent_path();
  std::error_code ec;
  DDPH_CHECK(std::filesystem::is_directory(folder, ec), "{} {}: folder {} does not exist", option,
             path, folder.string());
}

}  // namespace

OptimizerKind parseOptimizer(const std::string& name) {
  return parseName("--optimizer", name, kOptimizers);
}
Backend parseBackend(const std::string& name) { return parseName("--backend", name, kBackends); }
ProgressMode parseProgressMode(const std::string& name) {
  return parseName("--progress", name, kProgress);
}
DType parseDType(const std::string& name) { return parseName("--dtype", name, kDTypes); }
std::string optimizerName(OptimizerKind kind) { return nameOf(kind, kOptimizers); }
std::string backendName(Backend backend) { return nameOf(backend, kBackends); }
std::string dtypeName(DType dtype) { return nameOf(dtype, kDTypes); }

void validate(const TrainConfig& config) {
  DDPH_CHECK(!config.datasets.empty() && config.datasets.size() <= 2,
             "--dataset takes one or two datasets, got {}", config.datasets.size());
  const auto names = data::datasetNames();
  for (const auto& name : config.datasets) {
    DDPH_CHECK(std::find(names.begin(), names.end(), name) != names.end(),
               "--dataset '{}' is not one of {}", name, fmt::join(names, "|"));
  }
  if (config.datasets.size() == 2) {
    DDPH_CHECK(config.datasets[0] != config.datasets[1],
               "--dataset names '{}' twice; two datasets must differ", config.datasets[0]);
  }
  DDPH_CHECK(config.datasetSize > 0, "--dataset-size must be positive, got {}", config.datasetSize);
  DDPH_CHECK(config.epochs > 0, "--epochs must be positive, got {}", config.epochs);
  DDPH_CHECK(config.steps >= 0, "--steps must be >= 0, got {}", config.steps);
  DDPH_CHECK(config.batchSize > 0, "--batch-size must be positive, got {}", config.batchSize);
  DDPH_CHECK(config.lr > 0, "--lr must be positive, got {}", config.lr);
  DDPH_CHECK(config.momentum >= 0 && config.momentum < 1, "--momentum must be in [0, 1), got {}",
             config.momentum);
  DDPH_CHECK(config.hidden > 0, "--hidden must be positive, got {}", config.hidden);
  DDPH_CHECK(config.checkpointEvery >= 0, "--checkpoint-every must be >= 0, got {}",
             config.checkpointEvery);
  DDPH_CHECK(config.checkpointEvery == 0 || !config.checkpointPath.empty(),
             "--checkpoint-every needs --checkpoint PATH");
  DDPH_CHECK(config.threads >= 0, "--threads must be >= 0, got {}", config.threads);
  checkOutputFolder("--report-json", config.reportJsonPath);
  // The same check and one-line error as ddp-sim's --html options.
  if (!config.reportHtmlPath.empty()) report::checkReportPath(config.reportHtmlPath);
  checkOutputFolder("--checkpoint", config.checkpointPath);
  checkOutputFolder("--trace-samples", config.traceSamplesPath);
  {
    std::error_code ec;
    DDPH_CHECK(config.traceSamplesPath.empty() || !std::filesystem::exists(config.traceSamplesPath, ec) ||
                   std::filesystem::is_directory(config.traceSamplesPath, ec),
               "--trace-samples {}: not a folder", config.traceSamplesPath);
  }
  checkTimeoutOption("--timeout", config.timeoutSeconds);
}

}  // namespace ddph::train
