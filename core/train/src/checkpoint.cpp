#include "checkpoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <system_error>

#include "ddph/common/atomic_file.h"
#include "ddph/common/error.h"

namespace ddph::train {

using common::commitTempFile;
using common::ConfigError;
using common::Error;
using common::tempPathFor;

namespace {

constexpr const char* kFormat = "ddp-train checkpoint v1";

std::string encode(const Fingerprint& fingerprint) {
  std::string text;
  for (const auto& [key, value] : fingerprint) text += key + "=" + value + "\n";
  return text;
}

Fingerprint decode(const std::string& text) {
  Fingerprint out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    const std::size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// The elastic part of a position:
// {"world_size":W,"consumed":[c…],"history":[[[W,c]…]…],"loss_terms":T}.
std::string encodeElastic(const TrainingPosition& p) {
  nlohmann::json history = nlohmann::json::array();
  for (const auto& runs : p.history) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& run : runs) list.push_back({run.numReplicas, run.consumed});
    history.push_back(list);
  }
  return nlohmann::json{{"world_size", p.worldSize}, {"consumed", p.consumed}, {"history", history},
                        {"loss_terms", p.epochLossTerms}}
      .dump();
}

void decodeElastic(const std::string& text, TrainingPosition& p) {
  const auto json = nlohmann::json::parse(text);
  p.worldSize = json.at("world_size").get<std::int64_t>();
  p.consumed = json.at("consumed").get<std::vector<std::int64_t>>();
  p.epochLossTerms = json.value("loss_terms", std::int64_t{0});
  p.history.clear();
  for (const auto& runs : json.at("history")) {
    p.history.emplace_back();
    for (const auto& run : runs) {
      p.history.back().push_back({run.at(0).get<std::int64_t>(), run.at(1).get<std::int64_t>()});
    }
  }
}

std::int64_t readInt(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value.toInt();
}

}  // namespace

void saveCheckpoint(const std::string& path, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer, const TrainingPosition& position,
                    const Fingerprint& fingerprint) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive modelArchive, optimizerArchive;
  model.save(modelArchive);
  optimizer.save(optimizerArchive);
  archive.write("format", c10::IValue(std::string(kFormat)));
  archive.write("fingerprint", c10::IValue(encode(fingerprint)));
  archive.write("epoch", c10::IValue(position.epoch));
  archive.write("step_in_epoch", c10::IValue(position.stepInEpoch));
  archive.write("global_step", c10::IValue(position.globalStep));
  archive.write("epoch_loss_sum", c10::IValue(position.epochLossSum));
  archive.write("elastic", c10::IValue(encodeElastic(position)));
  archive.write("model", modelArchive);
  archive.write("optimizer", optimizerArchive);

  const auto temp = tempPathFor(path);
  try {
    archive.save_to(temp.string());
  } catch (const std::exception& e) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw Error(fmt::format("{}: cannot write the checkpoint: {}", path, e.what()));
  }
  commitTempFile(temp, path);
}

TrainingPosition loadCheckpoint(const std::string& path, torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer, const Fingerprint& expected) {
  DDPH_CHECK(std::filesystem::is_regular_file(path), "{}: no such checkpoint file", path);
  torch::serialize::InputArchive archive;
  TrainingPosition position;
  Fingerprint stored;
  try {
    archive.load_from(path);
    c10::IValue format, fingerprint, lossSum;
    archive.read("format", format);
    if (!format.isString() || format.toStringRef() != kFormat) {
      throw ConfigError(fmt::format("{}: not a ddp-train checkpoint", path));
    }
    archive.read("fingerprint", fingerprint);
    stored = decode(fingerprint.toStringRef());
    position.epoch = readInt(archive, "epoch");
    position.stepInEpoch = readInt(archive, "step_in_epoch");
    position.globalStep = readInt(archive, "global_step");
    archive.read("epoch_loss_sum", lossSum);
    position.epochLossSum = lossSum.toDouble();
    c10::IValue elastic;
    if (archive.try_read("elastic", elastic)) {
      decodeElastic(elastic.toStringRef(), position);
    } else if (stored.count("world_size")) {  // written before elastic resume existed
      position.worldSize = std::stoll(stored["world_size"]);
    }
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    throw ConfigError(fmt::format("{}: not a readable ddp-train checkpoint ({})", path, what));
  }
  for (const auto& [key, value] : expected) {
    const auto it = stored.find(key);
    const std::string was = it == stored.end() ? "(none)" : it->second;
    DDPH_CHECK(was == value,
               "{}: checkpoint is from another run: {} was {}, this run has {} (resume with the "
               "same settings)",
               path, key, was, value);
  }
  try {
    torch::serialize::InputArchive modelArchive, optimizerArchive;
    archive.read("model", modelArchive);
    archive.read("optimizer", optimizerArchive);
    model.load(modelArchive);
    optimizer.load(optimizerArchive);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    throw ConfigError(fmt::format("{}: cannot restore the model or optimizer ({})", path, what));
  }
  return position;
}

}  // namespace ddph::train
