#include "ddph/train/training_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>


#include "ddph/common/atomic_file.h"

namespace ddph::train {

using common::writeFileAtomically;

namespace {

nlohmann::json configJson(const TrainConfig& c) {
  return {{"datasets", c.datasets},
          {"mix", data::mixName(c.mix)},
          {"dataset_size", c.datasetSize},
          {"epochs", c.epochs},
          {"steps", c.steps},
          {"batch_size", c.batchSize},
          {"lr", c.lr},
          {"momentum", c.momentum},
          {"optimizer", optimizerName(c.optimizer)},
          {"seed", c.seed},
          {"hidden", c.hidden},
          {"shuffle", c.shuffle},
          {"dtype", dtypeName(c.dtype)},
          {"resumed", !c.resumePath.empty()}};
}

}  // namespace

std::string toJson(const TrainingReport& report) {
  nlohmann::json doc;
  doc["tool"] = "ddp-train";
  doc["world_size"] = report.worldSize;
  doc["backend"] = report.backend;
  doc["config"] = configJson(report.config);
  doc["epochs"] = nlohmann::json::array();
  for (const auto& e : report.epochs) {
    nlohmann::json epoch{{"epoch", e.epoch},           {"first_step", e.firstStep},
                         {"steps", e.steps},           {"loss", e.loss},
                         {"samples", e.samples},       {"seconds", e.seconds},
                         {"samples_per_s", e.samplesPerSecond}};
    epoch["eval_accuracy"] = e.evalAccuracy ? nlohmann::json(*e.evalAccuracy) : nlohmann::json();
    epoch["eval"] = nlohmann::json::array();
    for (const auto& ev : e.eval) {
      epoch["eval"].push_back({{"dataset", ev.dataset},
                               {"correct", ev.correct},
                               {"total", ev.total},
                               {"accuracy", ev.total > 0 ? static_cast<double>(ev.correct) /
                                                               static_cast<double>(ev.total)
                                                         : 0.0},
                               {"padding_avoided", ev.paddingAvoided}});
    }
    epoch["datasets"] = nlohmann::json::array();
    for (const auto& d : e.datasets) {
      epoch["datasets"].push_back({{"name", d.dataset},
                                   {"size", d.visits.datasetSize},
                                   {"visits", d.visits.visits},
                                   {"seen", d.visits.seen},
                                   {"never_seen", d.visits.neverSeen},
                                   {"seen_more_than_once", d.visits.seenMoreThanOnce}});
    }
    doc["epochs"].push_back(std::move(epoch));
  }
  doc["global_steps"] = report.globalSteps;
  doc["train_seconds"] = report.trainSeconds;
  doc["train_samples"] = report.trainSamples;
  doc["samples_per_s"] = report.samplesPerSecond();
  doc["stopped_by_signal"] = report.stoppedBySignal;
  doc["parameters"] = nlohmann::json::array();
  for (const auto& p : report.parameters) {
    doc["parameters"].push_back({{"name", p.name}, {"sum", p.sum}, {"norm", p.norm}});
  }
  return doc.dump(2) + "\n";
}

void writeReport(const TrainingReport& report, const std::string& path) {
  writeFileAtomically(path, toJson(report));
}

std::string epochSummaryLine(const EpochRecord& r, std::int64_t epochs) {
  std::string line = fmt::format("epoch {}/{}: loss {:.4f}", r.epoch + 1, epochs, r.loss);
  if (r.evalAccuracy) {
    line += fmt::format(", eval accuracy {:.2f}%", 100.0 * *r.evalAccuracy);
    std::string parts;
    for (const auto& ev : r.eval) {
      parts += fmt::format("{}{} {}/{}", parts.empty() ? "" : ", ", ev.dataset, ev.correct, ev.total);
    }
    line += fmt::format(" ({})", parts);
  }
  line += fmt::format(", {:.0f} samples/s", r.samplesPerSecond);
  for (const auto& d : r.datasets) {
    line += fmt::format("; {}: {} seen, {} never seen, {} seen twice+", d.dataset, d.visits.seen,
                        d.visits.neverSeen, d.visits.seenMoreThanOnce);
  }
  return line;
}

}  // namespace ddph::train
