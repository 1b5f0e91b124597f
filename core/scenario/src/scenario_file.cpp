#include "ddph/scenario/scenario_file.h"

#include <fmt/format.h>

#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "ddph/common/error.h"
#include "ddph/common/timeouts.h"
#include "ddph/sampler/property.h"

namespace ddph::scenario {

using common::ConfigError;
using common::isSaneTimeout;
using common::kMaxTimeoutSeconds;
using sampler::findProperty;

namespace {

// Reads one TOML table, remembering which keys were used so unknown ones are errors.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string source, std::string prefix)
      : table_(table), source_(std::move(source)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const toml::node* node, std::string_view key, const std::string& what) const {
    const auto line = node ? node->source().begin.line : table_.source().begin.line;
    throw ConfigError(fmt::format("{}:{}: key '{}{}': {}", source_, line, prefix_, key, what));
  }

  /// fail() at `key`'s line (the table's when the key is absent).
  [[noreturn]] void failAt(std::string_view key, const std::string& what) {
    fail(find(key), key, what);
  }

  const toml::node* find(std::string_view key) {
    used_.insert(std::string(key));
    return table_.get(key);
  }

  template <typename T>
  T get(std::string_view key, T fallback) {
    const toml::node* node = find(key);
    if (node == nullptr) return fallback;
    if constexpr (std::is_same_v<T, bool>) {
      if (!node->is_boolean()) fail(node, key, "expected true or false");
      return node->as_boolean()->get();
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!node->is_string()) fail(node, key, "expected a string");
      return node->as_string()->get();
    } else if constexpr (std::is_floating_point_v<T>) {
      if (node->is_integer()) return static_cast<T>(node->as_integer()->get());
      if (!node->is_floating_point()) fail(node, key, "expected a number");
      return static_cast<T>(node->as_floating_point()->get());
    } else {
      if (!node->is_integer()) fail(node, key, "expected an integer");
      // TOML integers are 64-bit: one that does not fit T is refused, not cut (world_size =
      // 4294967300 was read as 4).
      const std::int64_t value = node->as_integer()->get();
      if (value < std::numeric_limits<T>::min() || value > std::numeric_limits<T>::max()) {
        fail(node, key, fmt::format("{} is out of range", value));
      }
      return static_cast<T>(value);
    }
  }

  template <typename T>
  T required(std::string_view key) {
    if (table_.get(key) == nullptr) fail(nullptr, key, "is required");
    return get<T>(key, T{});
  }

  void checkUnknown() const {
    for (const auto& [key, node] : table_) {
      if (used_.count(std::string(key.str())) == 0) {
        fail(&node, key.str(), "unknown key");
      }
    }
  }

  const std::string& source() const { return source_; }

 private:
  const toml::table& table_;
  std::string source_;
  std::string prefix_;
  std::set<std::string> used_;
};

Combine parseCombine(TableReader& r) {
  const auto text = r.get<std::string>("combine", "zip");
  if (text == "zip") return Combine::kZip;
  if (text == "cycle") return Combine::kCycle;
  if (text == "concat") return Combine::kConcat;
  if (text == "weighted") return Combine::kWeighted;
  r.fail(r.find("combine"), "combine",
         fmt::format("'{}' is not one of zip, cycle, concat, weighted", text));
}

toml::table parseToml(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}: {}", source, e.source().begin.line, e.description()));
  }
}

// The top-level keys of one value each (name, world_size, epochs, …), checked.
void readRunKeys(TableReader& r, Scenario& s) {
  s.name = r.get<std::string>("name", "unnamed");
  s.description = r.get<std::string>("description", "");
  s.expect = r.get<std::string>("expect", "");
  s.worldSize = r.get<int>("world_size", 4);
  s.epochs = r.get<int>("epochs", 2);
  s.seed = r.get<std::int64_t>("seed", 0);
  s.batchSize = r.get<std::int64_t>("batch_size", 1);
  s.dropLast = r.get<bool>("drop_last", false);
  s.phase = r.get<std::string>("phase", "train");
  s.combine = parseCombine(r);
  s.timeoutS = r.get<double>("timeout_s", 60.0);
  s.gradientSize = r.get<std::int64_t>("gradient_size", 16);

  if (s.worldSize < 1) r.failAt("world_size", "must be at least 1");
  if (s.epochs < 1) r.failAt("epochs", "must be at least 1");
  if (s.batchSize < 1) r.failAt("batch_size", "must be at least 1");
  if (s.phase != "train" && s.phase != "eval") r.failAt("phase", "must be \"train\" or \"eval\"");
  if (!isSaneTimeout(s.timeoutS)) {
    r.failAt("timeout_s", fmt::format("must be positive and at most {} (a week), got {}",
                                      kMaxTimeoutSeconds, s.timeoutS));
  }
  if (s.gradientSize < 1) r.failAt("gradient_size", "must be at least 1");
  if (!s.expect.empty() && findProperty(s.expect) == nullptr) {
    r.failAt("expect", fmt::format("'{}' is not a property name", s.expect));
  }
}

// weights = [positive numbers], or none.
std::vector<double> readWeights(TableReader& r) {
  std::vector<double> weights;
  const toml::node* w = r.find("weights");
  if (w == nullptr) return weights;
  const toml::array* arr = w->as_array();
  if (arr == nullptr) r.failAt("weights", "expected an array of numbers");
  for (const auto& v : *arr) {
    if (!v.is_number()) r.failAt("weights", "expected an array of numbers");
    const double x = v.is_integer() ? static_cast<double>(v.as_integer()->get())
                                    : v.as_floating_point()->get();
    if (!(x > 0)) r.failAt("weights", "every weight must be positive");
    weights.push_back(x);
  }
  return weights;
}

// One [[datasets]] table, the i-th.
DatasetSpec readDataset(const toml::table& t, const std::string& source, std::size_t i) {
  TableReader d(t, source, fmt::format("datasets[{}].", i));
  DatasetSpec spec;
  spec.name = d.get<std::string>("name", fmt::format("dataset{}", i));
  spec.size = d.required<std::int64_t>("size");
  spec.sampler = d.get<std::string>("sampler", "pytorch");
  spec.shuffle = d.get<bool>("shuffle", true);
  spec.samplerDropLast = d.get<bool>("sampler_drop_last", false);
  if (spec.size < 1) d.failAt("size", "must be at least 1");
  if (spec.sampler != "pytorch" && spec.sampler != "elastic" &&
      spec.sampler != "libtorch-random" && spec.sampler != "libtorch-sequential" &&
      spec.sampler != "strided") {
    d.failAt("sampler", fmt::format("'{}' is not one of pytorch, elastic, libtorch-random, "
                                    "libtorch-sequential, strided",
                                    spec.sampler));
  }
  d.checkUnknown();
  return spec;
}

// The [[datasets]] tables: at least one.
std::vector<DatasetSpec> readDatasets(TableReader& r) {
  const toml::node* ds = r.find("datasets");
  if (ds == nullptr) r.failAt("datasets", "at least one [[datasets]] table is required");
  const toml::array* dsArray = ds->as_array();
  if (dsArray == nullptr || dsArray->empty() || !dsArray->is_array_of_tables()) {
    r.failAt("datasets", "expected one or more [[datasets]] tables");
  }
  std::vector<DatasetSpec> datasets;
  for (std::size_t i = 0; i < dsArray->size(); ++i) {
    datasets.push_back(readDataset(*dsArray->at(i).as_table(), r.source(), i));
  }
  return datasets;
}

// Weights go with combine = "weighted" only, one per dataset.
void checkWeightsFitDatasets(TableReader& r, const Scenario& s) {
  if (s.combine == Combine::kWeighted && s.weights.size() != s.datasets.size()) {
    r.failAt("weights", fmt::format("combine = \"weighted\" needs one weight per dataset ({})",
                                    s.datasets.size()));
  }
  if (s.combine != Combine::kWeighted && !s.weights.empty()) {
    r.failAt("weights", "only used with combine = \"weighted\"");
  }
}

// faults.kill and faults.stop: a rank and the step before which it happens.
std::optional<KillFault> readRankStep(TableReader& faults, const char* key) {
  const toml::node* k = faults.find(key);
  if (k == nullptr) return std::nullopt;
  if (!k->is_table()) faults.fail(k, key, "expected { rank = R, epoch = E, step = S }");
  TableReader kr(*k->as_table(), faults.source(), fmt::format("faults.{}.", key));
  KillFault at;
  at.rank = kr.required<int>("rank");
  at.epoch = kr.get<std::int64_t>("epoch", 0);
  at.step = kr.required<std::int64_t>("step");
  if (at.rank < 0) kr.failAt("rank", "must be non-negative");
  if (at.epoch < 0 || at.step < 0) kr.failAt("step", "must be non-negative");
  kr.checkUnknown();
  return at;
}

// faults.delay: a rank slowed by some milliseconds a step.
std::optional<DelayFault> readDelay(TableReader& faults) {
  const toml::node* k = faults.find("delay");
  if (k == nullptr) return std::nullopt;
  if (!k->is_table()) faults.fail(k, "delay", "expected { rank = R, ms = M }");
  TableReader kr(*k->as_table(), faults.source(), "faults.delay.");
  DelayFault delay;
  delay.rank = kr.required<int>("rank");
  delay.ms = kr.required<double>("ms");
  if (delay.rank < 0) kr.failAt("rank", "must be non-negative");
  if (!(delay.ms >= 0 && delay.ms <= kMaxTimeoutSeconds * 1000)) {
    kr.failAt("ms", fmt::format("must be between 0 and {} (a week), got {}",
                                kMaxTimeoutSeconds * 1000, delay.ms));
  }
  kr.checkUnknown();
  return delay;
}

// The [faults] table.
FaultSpec readFaults(TableReader& r, const toml::node& node) {
  const toml::table* table = node.as_table();
  if (table == nullptr) r.failAt("faults", "expected a table");
  TableReader fr(*table, r.source(), "faults.");
  FaultSpec faults;
  faults.skipSetEpoch = fr.get<bool>("skip_set_epoch", false);
  faults.perRankSeed = fr.get<bool>("per_rank_seed", false);
  faults.perRankOrder = fr.get<bool>("per_rank_order", false);
  faults.kill = readRankStep(fr, "kill");
  faults.stop = readRankStep(fr, "stop");
  faults.delay = readDelay(fr);
  fr.checkUnknown();
  return faults;
}

// A stop and a resume need one dataset, one epoch, equal shards and no other fault.
void checkResumeFitsScenario(TableReader& r, const Scenario& s) {
  if (s.datasets.size() != 1) r.failAt("resume", "a stop and a resume need exactly one dataset");
  if (s.epochs != 1) r.failAt("resume", "a stop and a resume need epochs = 1");
  if (s.datasets.front().sampler != "pytorch" && s.datasets.front().sampler != "elastic") {
    r.failAt("resume", "needs sampler = \"pytorch\" or \"elastic\" (equal shards on every rank)");
  }
  if (s.faults.skipSetEpoch || s.faults.perRankSeed || s.faults.perRankOrder || s.faults.kill ||
      s.faults.stop) {
    r.failAt("resume", "is not combined with the sampler faults, a kill or a stop");
  }
}

// The [resume] table, read after the datasets and faults it must fit.
ResumeSpec readResume(TableReader& r, const toml::node& node, const Scenario& s) {
  if (!node.is_table()) r.failAt("resume", "expected a table");
  TableReader rr(*node.as_table(), r.source(), "resume.");
  ResumeSpec resume;
  resume.stopAfterSteps = rr.required<std::int64_t>("stop_after_steps");
  resume.worldSize = rr.required<int>("world_size");
  resume.keepRankPositions = rr.get<bool>("keep_rank_positions", false);
  if (resume.stopAfterSteps < 1) rr.failAt("stop_after_steps", "must be at least 1");
  if (resume.worldSize < 1 || resume.worldSize > s.worldSize) {
    rr.failAt("world_size",
              fmt::format("must be between 1 and the scenario's world_size ({})", s.worldSize));
  }
  rr.checkUnknown();
  checkResumeFitsScenario(r, s);
  return resume;
}

}  // namespace

const char* combineName(Combine c) {
  switch (c) {
    case Combine::kZip: return "zip";
    case Combine::kCycle: return "cycle";
    case Combine::kConcat: return "concat";
    case Combine::kWeighted: return "weighted";
  }
  return "?";
}

Scenario parseScenario(std::string_view text, const std::string& source) {
  const toml::table root = parseToml(text, source);
  TableReader r(root, source, "");
  Scenario s;
  s.source = source;
  readRunKeys(r, s);
  s.weights = readWeights(r);
  s.datasets = readDatasets(r);
  checkWeightsFitDatasets(r, s);
  if (const toml::node* f = r.find("faults")) s.faults = readFaults(r, *f);
  if (const toml::node* t = r.find("resume")) s.resume = readResume(r, *t, s);
  r.checkUnknown();
  validateScenario(s);
  return s;
}

void validateScenario(const Scenario& s) {
  DDPH_CHECK(s.worldSize >= 1, "{}: world size must be at least 1, got {}", s.source, s.worldSize);
  // Each rank is a process with a Gloo full mesh: W(W-1)/2 connections on one machine.
  DDPH_CHECK(s.worldSize <= kMaxWorldSize, "{}: world size {} is above the limit of {} rank processes",
             s.source, s.worldSize, kMaxWorldSize);
  if (s.faults.kill) {
    DDPH_CHECK(s.faults.kill->rank < s.worldSize,
               "{}: faults.kill.rank {} is outside a world of {} ranks", s.source,
               s.faults.kill->rank, s.worldSize);
  }
  if (s.faults.stop) {
    DDPH_CHECK(s.faults.stop->rank < s.worldSize,
               "{}: faults.stop.rank {} is outside a world of {} ranks", s.source,
               s.faults.stop->rank, s.worldSize);
  }
  if (s.faults.delay) {
    DDPH_CHECK(s.faults.delay->rank < s.worldSize,
               "{}: faults.delay.rank {} is outside a world of {} ranks", s.source,
               s.faults.delay->rank, s.worldSize);
  }
}

Scenario loadScenarioFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DDPH_CHECK(in.good(), "cannot read scenario file '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parseScenario(ss.str(), path);
}

}  // namespace ddph::scenario
