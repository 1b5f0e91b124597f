// Reads one rank's trace file (docs/trace-format.md) into ddph::trace::RankTrace, and launch.json.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <type_traits>
#include <istream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string_view>

#include "ddph/trace/trace.h"
#include "ddph/common/error.h"
#include "json_fields.h"
#include "event_records.h"
#include "passes_and_epochs.h"
#include "trace_schema.h"

namespace ddph::trace {

using common::ConfigError;

namespace fs = std::filesystem;
namespace ts = trace_schema;
using nlohmann::json;
using json_fields::field;
using json_fields::optionalField;
using json_fields::valueAs;

namespace {

// The public version (trace.h) is the schema's.
static_assert(kTraceVersion == ts::kFormatVersion, "trace.h's kTraceVersion is not trace_schema.json's");

// True when `routes` names each event of the schema but the header once, and nothing else.
template <class Route, std::size_t N>
constexpr bool routesEverySchemaEvent(const Route (&routes)[N]) {
  for (const char* name : ts::kEvents) {
    int routed = std::string_view(name) == ts::header::kEvent;
    for (const Route& route : routes) routed += std::string_view(route.event) == name;
    if (routed != 1) return false;
  }
  return N + 1 == std::size(ts::kEvents);
}

// The object field `name` of `e` that maps DDP module ids (strings) to hashes (`params` of an
// epoch line, `grads` of a step), as {id: hash}; empty when absent.
std::map<std::int64_t, std::string> hashesById(const json& e, const char* name) {
  std::map<std::int64_t, std::string> out;
  const auto it = e.find(name);
  if (it == e.end() || !it->is_object()) return out;
  for (const auto& [key, value] : it->items()) {
    DDPH_CHECK(value.is_string(), "a {} hash is not a string", name);
    try {
      out[std::stoll(key)] = value.get<std::string>();
    } catch (const std::exception&) {
      throw ConfigError(fmt::format("{} key \"{}\" is not a DDP module id", name, key));
    }
  }
  return out;
}

// Builds one RankTrace, line by line; keeps the context the events need (the current batch).
class RankTraceBuilder {
 public:
  explicit RankTraceBuilder(RankTrace& t) : t_(t) {}

  void add(const json& e, std::int64_t line) {
    static_assert(routesEverySchemaEvent(kRoutes),
                  "every event of trace_schema.json but the header needs a route in kRoutes");
    const auto ev = field<std::string>(e, ts::kEv);
    time_ = optionalField<double>(e, ts::kT);
    DDPH_CHECK(!time_ || std::isfinite(*time_), "\"t\" is not a time: {}", e[ts::kT].dump());
    if (time_) t_.lastT = std::max(t_.lastT.value_or(*time_), *time_);
    // The first event, not line 1: blank lines before it once let a trace without a header
    // through (world size 0, and readTrace indexed an empty vector).
    if (!sawHeader_) {
      DDPH_CHECK(ev == ts::header::kEvent, "the first line is not a header");
      header(e, line);
      sawHeader_ = true;
      return;
    }
    for (const Route& route : kRoutes) {
      if (ev == route.event) return (this->*route.handler)(e, line);
    }
    // Unknown kinds (and a second header) are ignored: the format lets writers add events.
  }

  bool sawHeader() const { return sawHeader_; }

  /// What the whole file decides about its passes (passes_and_epochs.h).
  void finish(std::int64_t lastLine) { settlePasses(t_, forwardLines_, lastLine); }

 private:
  void header(const json& e, std::int64_t) { readHeader(e, t_); }

  void sampler(const json& e, std::int64_t line) {
    SamplerRecord s = samplerRecord(e);
    s.line = line;
    auto [it, fresh] = t_.samplers.emplace(s.id, s);
    if (!fresh) {  // seen again: keep set_epoch calls and its first line, refresh the rest
      s.setEpochCalls = it->second.setEpochCalls;
      s.line = it->second.line;
      it->second = s;
    }
  }

  void loader(const json& e, std::int64_t) {
    LoaderRecord l = loaderRecord(e);
    t_.loaders[l.id] = std::move(l);
  }

  void pass(const json& e, std::int64_t line) {
    namespace f = ts::epoch;
    PassRecord p;
    p.loader = field<std::int64_t>(e, f::kLoader);
    p.iter = field<std::int64_t>(e, f::kIter);
    DDPH_CHECK(t_.loaders.count(p.loader), "a pass over loader {} that was never declared",
               p.loader);
    DDPH_CHECK(!t_.findPass(p.loader, p.iter), "pass {} of loader {} starts twice", p.iter,
               p.loader);
    p.samplerEpoch = optionalField<std::int64_t>(e, f::kSamplerEpoch);
    p.epochAtIter = p.samplerEpoch;
    p.datasetEpoch = optionalField<std::int64_t>(e, f::kDatasetEpoch);
    p.seed = optionalField<std::int64_t>(e, f::kSeed);
    p.numReplicas = optionalField<std::int64_t>(e, f::kNumReplicas);
    p.rank = optionalField<std::int64_t>(e, f::kRank);
    p.shuffle = optionalField<bool>(e, f::kShuffle);
    p.dropLast = optionalField<bool>(e, f::kDropLast);
    p.datasetLen = optionalField<std::int64_t>(e, f::kDatasetLen).value_or(t_.loaders[p.loader].datasetLen);
    p.declaredBatches = optionalField<std::int64_t>(e, f::kBatches);
    for (const auto& [id, hash] : hashesById(e, f::kParams)) {
      const auto d = t_.ddp.find(id);
      p.params[id] = ParamsSnapshot{hash, d == t_.ddp.end() ? 0 : d->second.backwards};
    }
    p.startLine = line;
    t_.passIndex[{p.loader, p.iter}] = t_.passes.size();
    t_.passes.push_back(std::move(p));
  }

  void batch(const json& e, std::int64_t line) {
    namespace f = ts::batch;
    PassRecord& p = passRef(field<std::int64_t>(e, f::kLoader), field<std::int64_t>(e, f::kIter));
    BatchRecord b = batchRecord(e);
    b.line = line;
    b.t = time_;
    p.batches.push_back(std::move(b));
    current_ = {p.loader, p.iter, p.batches.back().seq};
  }

  void collective(const json& e, std::int64_t line) {
    CollectiveRecord c = collectiveRecord(e);
    c.line = line;
    c.t = time_;
    c.loader = current_.loader;
    c.iter = current_.iter;
    c.batchSeq = current_.batchSeq;
    auto& list = t_.collectives[c.group];
    DDPH_CHECK(c.seq == static_cast<std::int64_t>(list.size()),
               "collective #{} of group {} follows #{}", c.seq, c.group,
               static_cast<std::int64_t>(list.size()) - 1);
    if (c.src == "ddp" && c.ddp >= 0 && !c.shadow) {  // a shadow is no backward of its own
      DdpRecord& d = ddpRef(c.ddp);
      d.backwards = std::max(d.backwards, c.backward + 1);
    }
    list.push_back(std::move(c));
  }

  // One handler per event (docs/trace-format.md): each reads its line into t_.
  using Handler = void (RankTraceBuilder::*)(const json& e, std::int64_t line);
  struct Route {
    const char* event;
    Handler handler;
  };

  void setEpoch(const json& e, std::int64_t line) {
    namespace f = ts::set_epoch;
    samplerRef(field<std::int64_t>(e, f::kSampler))
        .setEpochCalls.push_back({field<std::int64_t>(e, f::kEpoch), line});
  }

  void draw(const json& e, std::int64_t) {
    namespace f = ts::draw;
    PassRecord& p = passRef(field<std::int64_t>(e, f::kLoader), field<std::int64_t>(e, f::kIter));
    p.samplerEpoch = field<std::int64_t>(e, f::kSamplerEpoch);
  }

  void passEnd(const json& e, std::int64_t line) {
    namespace f = ts::epoch_end;
    PassRecord& p = passRef(field<std::int64_t>(e, f::kLoader), field<std::int64_t>(e, f::kIter));
    p.ended = true;
    p.endLine = line;
  }

  void ddp(const json& e, std::int64_t) {
    namespace f = ts::ddp;
    DdpRecord d;
    d.id = field<std::int64_t>(e, f::kId);
    d.module = optionalField<std::string>(e, f::kModule).value_or("");
    d.parameters = optionalField<std::int64_t>(e, f::kParameters).value_or(0);
    d.broadcastBuffers = optionalField<std::int64_t>(e, f::kBuffers);
    d.averagedBy = optionalField<std::string>(e, f::kAveragedBy).value_or("");
    d.outsideDdp = optionalField<bool>(e, f::kOutsideDdp).value_or(false);
    t_.ddp[d.id] = d;
  }

  void forward(const json& e, std::int64_t line) {
    namespace f = ts::forward;
    DdpRecord& d = ddpRef(field<std::int64_t>(e, f::kDdp));
    ++d.forwards;
    if (optionalField<bool>(e, f::kGrad).value_or(true)) {
      t_.gradForwardLines.push_back(line);
      const bool synced = optionalField<bool>(e, f::kSync).value_or(true);
      t_.gradForwardSynced.push_back(synced);
      ++(synced ? d.syncedGradForwards : d.unsyncedGradForwards);
    } else {
      ++d.gradFreeForwards;
    }
    forwardLines_.push_back(line);
  }

  void collectiveDone(const json& e, std::int64_t) {
    namespace f = ts::coll_done;
    const auto group = field<std::string>(e, f::kGroup);
    const auto seq = field<std::int64_t>(e, f::kSeq);
    auto& list = t_.collectives[group];
    DDPH_CHECK(seq >= 0 && seq < static_cast<std::int64_t>(list.size()),
               "coll_done for collective #{} of group {} that was never entered", seq, group);
    list[seq].done = true;
    list[seq].doneT = time_;
    list[seq].values =
        optionalField<std::vector<double>>(e, f::kValues).value_or(std::vector<double>{});
  }

  void group(const json& e, std::int64_t) {
    namespace f = ts::group;
    t_.groups[field<std::string>(e, f::kId)] = field<std::vector<std::int64_t>>(e, f::kRanks);
  }

  void groupCall(const json& e, std::int64_t line) {
    namespace f = ts::group_call;
    t_.groupCalls.push_back({field<std::vector<std::int64_t>>(e, f::kRanks),
                             optionalField<std::string>(e, f::kAt).value_or(""), line});
  }

  void params(const json& e, std::int64_t) {
    namespace f = ts::params;
    DdpRecord& d = ddpRef(field<std::int64_t>(e, f::kDdp));
    d.atEnd = ParamsSnapshot{field<std::string>(e, f::kHash), d.backwards};
    for (const auto& part : optionalField<std::vector<std::string>>(e, f::kParts).value_or(
             std::vector<std::string>{})) {
      const auto colon = part.rfind(':');
      if (colon != std::string::npos) d.atEnd->parts.emplace_back(part.substr(0, colon), part.substr(colon + 1));
    }
    d.atEnd->frozen = optionalField<std::vector<std::string>>(e, f::kFrozen).value_or(std::vector<std::string>{});
    d.atEnd->renorm = optionalField<std::vector<std::string>>(e, f::kRenorm).value_or(std::vector<std::string>{});
  }

  void error(const json& e, std::int64_t) {
    namespace f = ts::error;
    t_.errorType = optionalField<std::string>(e, f::kType).value_or("error");
    t_.errorMessage = optionalField<std::string>(e, f::kMessage).value_or("");
    t_.errorT = time_;
    t_.errorWhere = optionalField<std::string>(e, f::kWhere);
    t_.errorLastLine = optionalField<std::string>(e, f::kLastLine);
  }

  void destroy(const json& e, std::int64_t) {
    namespace f = ts::destroy;
    if (optionalField<std::string>(e, f::kGroup).value_or("0") == "0")
      t_.ddpAliveAtDestroy = field<std::vector<std::int64_t>>(e, f::kDdpAlive);
  }

  void end(const json& e, std::int64_t) {
    t_.ended = true;
    t_.endCode = optionalField<std::int64_t>(e, ts::end::kCode).value_or(0);
  }

  void emulation(const json& e, std::int64_t) {
    namespace f = ts::emulation;
    EmulationRecord m;
    m.askedBackend = optionalField<std::string>(e, f::kAskedBackend).value_or("");
    m.gpus = optionalField<std::int64_t>(e, f::kGpus).value_or(0);
    m.autocast = optionalField<std::string>(e, f::kAutocast).value_or("off");
    t_.emulation = m;
  }

  void processGroup(const json& e, std::int64_t line) {
    if (t_.processGroupLine == 0) t_.processGroupLine = line;
    t_.processGroupBackend =
        optionalField<std::string>(e, ts::process_group::kBackend).value_or("");
  }

  void spawn(const json& e, std::int64_t) {
    namespace f = ts::spawn;
    const auto n = field<std::int64_t>(e, f::kNprocs);
    DDPH_CHECK(n >= 0 && n <= kMaxTraceWorldSize, "spawn of {} processes is not a world", n);
    t_.spawnedRanks += n;
    t_.spawnMethod = optionalField<std::string>(e, f::kStartMethod).value_or("spawn");
  }

  void framework(const json& e, std::int64_t) {
    namespace f = ts::framework;
    const auto version = optionalField<std::string>(e, f::kVersion).value_or("");
    t_.framework = field<std::string>(e, f::kName) + (version.empty() ? "" : " " + version);
  }

  void step(const json& e, std::int64_t line) {
    t_.stepLines.push_back(line);
    t_.stepLr.push_back(optionalField<double>(e, ts::step::kLr));
    t_.stepGrads.push_back(hashesById(e, ts::step::kGrads));
    t_.stepState.push_back(optionalField<std::int64_t>(e, ts::step::kState));
  }

  void logged(const json& e, std::int64_t line) {
    namespace f = ts::logged;
    t_.loggedWithSync.push_back(
        {field<std::string>(e, f::kName), optionalField<std::string>(e, f::kAt).value_or(""), line});
  }

  void seed(const json& e, std::int64_t line) {
    namespace f = ts::seed;
    t_.seeds.push_back({field<std::string>(e, f::kGenerator),
                        optionalField<std::int64_t>(e, f::kValue),
                        optionalField<std::string>(e, f::kAt).value_or(""), line});
  }

  void globalDraw(const json& e, std::int64_t) {
    namespace f = ts::global_draw;
    PassRecord& p = passRef(field<std::int64_t>(e, f::kLoader), field<std::int64_t>(e, f::kIter));
    p.globalDraws = field<std::vector<std::string>>(e, f::kGenerators);
    p.workerRng = optionalField<std::vector<std::string>>(e, f::kWorkerRng).value_or(
        std::vector<std::string>{});
  }

  void averaged(const json& e, std::int64_t) {
    namespace f = ts::averaged;
    AveragedModelRecord& m = t_.averagedModels[field<std::int64_t>(e, f::kModel)];
    m.updates = std::max(m.updates, field<std::int64_t>(e, f::kN));
    if (m.updateAt.empty()) m.updateAt = optionalField<std::string>(e, f::kAt).value_or("");
  }

  void averagedUse(const json& e, std::int64_t) {
    namespace f = ts::averaged_use;
    t_.averagedModels[field<std::int64_t>(e, f::kModel)].uses.push_back(
        {field<std::int64_t>(e, f::kN), field<std::string>(e, f::kHash),
         optionalField<std::string>(e, f::kAt).value_or("")});
  }

  SamplerRecord& samplerRef(std::int64_t id) {
    auto it = t_.samplers.find(id);
    DDPH_CHECK(it != t_.samplers.end(), "sampler {} was never declared", id);
    return it->second;
  }

  DdpRecord& ddpRef(std::int64_t id) {
    auto it = t_.ddp.find(id);
    DDPH_CHECK(it != t_.ddp.end(), "DDP module {} was never declared", id);
    return it->second;
  }

  PassRecord& passRef(std::int64_t loader, std::int64_t iter) {
    const auto it = t_.passIndex.find({loader, iter});
    DDPH_CHECK(it != t_.passIndex.end(), "pass {} of loader {} was never started", iter, loader);
    return t_.passes[it->second];
  }

  // Every event but the header (read first, apart), to its handler; add() checks at compile time
  // that the schema has no other event. The events of every step come first.
  static constexpr Route kRoutes[] = {
      {ts::batch::kEvent, &RankTraceBuilder::batch},
      {ts::forward::kEvent, &RankTraceBuilder::forward},
      {ts::coll::kEvent, &RankTraceBuilder::collective},
      {ts::coll_done::kEvent, &RankTraceBuilder::collectiveDone},
      {ts::sampler::kEvent, &RankTraceBuilder::sampler},
      {ts::set_epoch::kEvent, &RankTraceBuilder::setEpoch},
      {ts::loader::kEvent, &RankTraceBuilder::loader},
      {ts::epoch::kEvent, &RankTraceBuilder::pass},
      {ts::draw::kEvent, &RankTraceBuilder::draw},
      {ts::epoch_end::kEvent, &RankTraceBuilder::passEnd},
      {ts::ddp::kEvent, &RankTraceBuilder::ddp},
      {ts::group::kEvent, &RankTraceBuilder::group},
      {ts::group_call::kEvent, &RankTraceBuilder::groupCall},
      {ts::params::kEvent, &RankTraceBuilder::params},
      {ts::error::kEvent, &RankTraceBuilder::error},
      {ts::destroy::kEvent, &RankTraceBuilder::destroy},
      {ts::end::kEvent, &RankTraceBuilder::end},
      {ts::emulation::kEvent, &RankTraceBuilder::emulation},
      {ts::process_group::kEvent, &RankTraceBuilder::processGroup},
      {ts::spawn::kEvent, &RankTraceBuilder::spawn},
      {ts::framework::kEvent, &RankTraceBuilder::framework},
      {ts::step::kEvent, &RankTraceBuilder::step},
      {ts::logged::kEvent, &RankTraceBuilder::logged},
      {ts::seed::kEvent, &RankTraceBuilder::seed},
      {ts::global_draw::kEvent, &RankTraceBuilder::globalDraw},
      {ts::averaged::kEvent, &RankTraceBuilder::averaged},
      {ts::averaged_use::kEvent, &RankTraceBuilder::averagedUse},
  };

  struct Position {
    std::int64_t loader = -1, iter = -1, batchSeq = -1;
  };
  RankTrace& t_;
  bool sawHeader_ = false;
  Position current_;
  std::optional<double> time_;  ///< the current line's "t"
  std::vector<std::int64_t> forwardLines_;  ///< the lines of DDP forwards, ascending
};

}  // namespace

const PassRecord* RankTrace::findPass(std::int64_t loader, std::int64_t iter) const {
  const auto it = passIndex.find({loader, iter});
  return it == passIndex.end() ? nullptr : &passes[it->second];
}

const CollectiveRecord* RankTrace::lastCollective() const {
  const CollectiveRecord* last = nullptr;
  for (const auto& [group, list] : collectives) {
    if (!list.empty() && (!last || list.back().line > last->line)) last = &list.back();
  }
  return last;
}

RankTrace readRankTrace(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  DDPH_CHECK(in, "cannot read '{}'", file.string());
  return readRankTrace(in, file);
}

RankTrace readRankTrace(std::istream& in, const fs::path& file) {
  RankTrace t;
  t.file = file;
  RankTraceBuilder builder(t);
  std::string text;
  std::int64_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    bool complete = !in.eof();  // getline stopped at '\n'
    // A writer that never closed its file (killed) leaves its unwritten, reserved tail as NUL
    // bytes: the trace ends at the first one.
    const auto nul = text.find('\0');
    const bool lastLine = nul != std::string::npos;
    if (lastLine) {
      text.resize(nul);
      complete = false;
      if (text.empty()) {
        --line;
        break;
      }
    }
    if (text.empty() && complete) {
      continue;
    }
    json e;
    try {
      e = json::parse(text);
    } catch (const json::exception&) {
      if (!complete) {  // a last line cut short by a kill while writing
        t.truncatedTail = true;
        --line;
        break;
      }
      throw ConfigError(fmt::format("{} line {}: not JSON", file.string(), line));
    }
    DDPH_CHECK(e.is_object(), "{} line {}: not a JSON object", file.string(), line);
    try {
      builder.add(e, line);
    } catch (const ConfigError& err) {
      throw ConfigError(fmt::format("{} line {}: {}", file.string(), line, err.what()));
    }
    if (lastLine) break;
  }
  DDPH_CHECK(builder.sawHeader(), "{} is empty (no header line)", file.string());
  t.lines = line;
  builder.finish(line);
  return t;
}

}  // namespace ddph::trace
