#include "ddph/scenario/rank_program.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "ddph/common/error.h"
#include "ddph/verify/partition_checks.h"
#include "ddph/verify/batching.h"
#include "ddph/verify/builtin_samplers.h"
#include "ddph/verify/distributed_sampler.h"
#include "epoch_schedule.h"
#include "pipeline_hints.h"
#include "scenario_trace.h"
#include "straggler_check.h"

namespace ddph {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// One dataset as this rank sees it (the concatenation counts as one).
struct Source {
  DatasetSpec spec;
  std::unique_ptr<Sampler> sampler;  // null for "strided"
  std::vector<Index> listing;        // per-rank file order (faults.per_rank_order); empty: identity
};

// A dataset the epoch-end checks are about: a slice [offset, offset + size) of a source's ids.
struct Checked {
  std::string name;
  std::int64_t size = 0;
  std::size_t source = 0;
  std::int64_t offset = 0;
  const DatasetSpec* spec = nullptr;
  /// NOTE [Checking a concatenation]: coverage is judged per dataset (which one lost samples),
  /// lengths, disjointness (padding) and reshuffle over the whole concatenation the sampler saw.
  enum class Scope { kWhole, kPartOfConcat, kConcatenation } scope = Scope::kWhole;
};

std::vector<Index> shardOf(Source& src, std::int64_t world, std::int64_t rank, std::int64_t epoch,
                           std::int64_t seed) {
  const std::int64_t n = src.spec.size;
  if (src.sampler) return src.sampler->indices({n, world, rank, epoch, seed});
  // "strided": order[rank::W] with no padding, as hand-rolled sharding does.
  DistributedSamplerOptions options;
  options.shuffle = src.spec.shuffle;
  const auto order = distributedEpochOrder(n, seed, epoch, options);
  std::vector<Index> out;
  for (std::int64_t k = rank; k < n; k += world) out.push_back(order[k]);
  return out;
}

// "3 steps: ranks 0, 1; 2 steps: ranks 2, 3"
std::string groupRanksByValue(const std::vector<std::vector<std::int64_t>>& perRank,
                              const char* unit) {
  std::map<std::int64_t, std::vector<std::int64_t>, std::greater<>> groups;
  for (std::size_t r = 0; r < perRank.size(); ++r) {
    groups[perRank[r].empty() ? -1 : perRank[r][0]].push_back(static_cast<std::int64_t>(r));
  }
  std::vector<std::string> parts;
  for (const auto& [value, ranks] : groups) {
    std::string list = ranks.size() <= 8
                           ? fmt::format("{}", fmt::join(ranks, ", "))
                           : fmt::format("{}, … ({} ranks)",
                                         fmt::join(ranks.begin(), ranks.begin() + 8, ", "),
                                         ranks.size());
    parts.push_back(fmt::format("{} {}: rank{} {}", value, unit, ranks.size() == 1 ? "" : "s",
                                list));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string rankList(const std::vector<std::int64_t>& ranks) {
  if (ranks.size() <= 8) return fmt::format("{}", fmt::join(ranks, ", "));
  return fmt::format("{}, … ({} ranks)", fmt::join(ranks.begin(), ranks.begin() + 8, ", "),
                     ranks.size());
}

class RankRun {
 public:
  RankRun(const Scenario& s, Communicator& comm, RankObserver& observer, ScenarioTrace& trace)
      : s_(s), comm_(comm), observer_(observer), trace_(trace), rank_(comm.rank()),
        world_(comm.size()) {
    buildSources();
    std::vector<DatasetSpec> specs;
    std::vector<std::vector<Index>> listings;
    for (const auto& src : sources_) {
      specs.push_back(src.spec);
      listings.push_back(src.listing);
    }
    trace_.declare(specs, listings, s_);
  }

  RankRunStats run() {
    const auto start = Clock::now();
    for (std::int64_t epoch = 0; epoch < s_.epochs; ++epoch) {
      if (!runEpoch(epoch)) {
        stats_.stoppedOnMismatch = true;
        break;
      }
      checkEpoch(epoch);
    }
    stats_.epochSeconds = secondsSince(start);
    if (!stats_.stoppedOnMismatch) checkStragglers();
    return stats_;
  }

 private:
  void buildSources() {
    std::vector<DatasetSpec> specs;
    if (s_.combine == Combine::kConcat) {
      DatasetSpec all = s_.datasets.front();
      all.size = 0;
      std::vector<std::string> names;
      for (const auto& d : s_.datasets) {
        checked_.push_back({d.name, d.size, 0, all.size, &d, Checked::Scope::kPartOfConcat});
        all.size += d.size;
        names.push_back(d.name);
      }
      all.name = fmt::format("concat({})", fmt::join(names, " + "));
      checked_.push_back({all.name, all.size, 0, 0, &s_.datasets.front(),
                          Checked::Scope::kConcatenation});
      specs.push_back(all);
    } else {
      for (std::size_t i = 0; i < s_.datasets.size(); ++i) {
        checked_.push_back({s_.datasets[i].name, s_.datasets[i].size, i, 0, &s_.datasets[i]});
        specs.push_back(s_.datasets[i]);
      }
    }
    for (auto& spec : specs) {
      Source src;
      src.spec = spec;
      if (spec.sampler != "strided") {
        src.sampler = makeBuiltinSampler(spec.sampler, spec.shuffle, spec.samplerDropLast);
      }
      if (s_.faults.perRankOrder) {
        // NOTE [Unsorted file listing]: os.listdir / glob order differs between machines; each
        // rank's index i then names a different file. Every rank gets its own fixed order.
        src.listing.resize(static_cast<std::size_t>(spec.size));
        std::iota(src.listing.begin(), src.listing.end(), 0);
        std::mt19937_64 gen(0x5eedULL + static_cast<std::uint64_t>(rank_));
        std::shuffle(src.listing.begin(), src.listing.end(), gen);
      }
      sources_.push_back(std::move(src));
    }
  }

  // Returns false when the ranks disagreed on the number of steps (collective-mismatch).
  bool runEpoch(std::int64_t epoch) {
    const std::int64_t seed = s_.seed + (s_.faults.perRankSeed ? rank_ : 0);
    const std::int64_t samplerEpoch = s_.faults.skipSetEpoch ? 0 : epoch;
    const BatchOptions batching{s_.batchSize, s_.dropLast};
    std::vector<std::vector<std::vector<Index>>> batches(sources_.size());
    for (std::size_t d = 0; d < sources_.size(); ++d) {
      auto shard = shardOf(sources_[d], world_, rank_, samplerEpoch, seed);
      if (!sources_[d].listing.empty()) {
        for (auto& i : shard) i = sources_[d].listing[static_cast<std::size_t>(i)];
      }
      batches[d] = makeBatches(shard, batching);
    }
    std::vector<std::size_t> counts;
    for (const auto& b : batches) counts.push_back(b.size());
    if (epoch == 0 && rank_ == 0) {
      std::vector<DatasetSpec> specs;
      for (const auto& src : sources_) specs.push_back(src.spec);
      for (const auto& hint : pipelineHints(s_, specs, counts, world_)) observer_.onNote(hint);
    }
    const auto schedule = epochSchedule(s_, counts, epoch);
    std::vector<std::int64_t> batchCounts, drawn(sources_.size(), 0);
    for (const auto& b : batches) batchCounts.push_back(static_cast<std::int64_t>(b.size()));
    trace_.startEpoch(epoch, s_.faults.skipSetEpoch ? std::nullopt : std::optional<std::int64_t>(epoch),
                      seed, batchCounts);
    consumed_.assign(sources_.size(), {});

    // NOTE [Step agreement] + consumed counts: [W has-batch flags][W x D consumed counts][gradient].
    // Rank r writes only its own slots, so the sum is an all-gather of flags and counts for free;
    // the epoch-end all-gather then needs no extra collective for the lengths.
    const std::size_t w = static_cast<std::size_t>(world_);
    const std::size_t nd = sources_.size();
    const std::size_t g = static_cast<std::size_t>(s_.gradientSize);
    const std::size_t gradAt = w + w * nd;
    std::vector<float> buffer(gradAt + g);
    for (std::int64_t step = 0;; ++step) {
      const bool hasBatch = step < static_cast<std::int64_t>(schedule.size());
      const auto computeStart = Clock::now();
      std::fill(buffer.begin(), buffer.end(), 0.0f);
      if (hasBatch) {
        observer_.onStep(epoch, step);
        injectFaults(epoch, step);
        buffer[static_cast<std::size_t>(rank_)] = 1.0f;
        for (const auto& [d, b] : schedule[static_cast<std::size_t>(step)]) {
          trace_.batch(epoch, d, batches[d][b]);
          ++drawn[d];
          for (Index id : batches[d][b]) {
            consumed_[d].push_back(id);
            const auto h = splitmix64(static_cast<std::uint64_t>(id) * 31 + d);
            buffer[gradAt + h % g] += static_cast<float>((h >> 32) & 0xff) / 255.0f;
          }
        }
        ++stats_.steps;
      }
      for (std::size_t d = 0; d < nd; ++d) {
        DDPH_ASSERT(consumed_[d].size() < (1u << 24));  // exact in a float
        buffer[w + static_cast<std::size_t>(rank_) * nd + d] = static_cast<float>(consumed_[d].size());
      }
      const auto waitStart = Clock::now();
      stats_.computeSeconds += std::chrono::duration<double>(waitStart - computeStart).count();
      observer_.onWaiting(true);
      comm_.allreduce(buffer, ReduceOp::kSum, fmt::format("epoch {} step {}", epoch, step));
      observer_.onWaiting(false);
      stats_.waitSeconds += secondsSince(waitStart);
      const auto participants = static_cast<std::int64_t>(
          std::lround(std::accumulate(buffer.begin(), buffer.begin() + world_, 0.0)));
      if (participants == 0) {  // every rank is done: the epoch ends here
        trace_.endEpoch(epoch, drawn, batchCounts);
        consumedLengths_.assign(nd, std::vector<std::int64_t>(w));
        for (std::size_t r = 0; r < w; ++r) {
          for (std::size_t d = 0; d < nd; ++d) {
            consumedLengths_[d][r] = std::lround(buffer[w + r * nd + d]);
          }
        }
        return true;
      }
      if (participants != world_) {
        reportMismatch(buffer, epoch, step, static_cast<std::int64_t>(schedule.size()));
        return false;
      }
    }
  }

  void injectFaults(std::int64_t epoch, std::int64_t step) {
    const auto& f = s_.faults;
    if (f.kill && f.kill->rank == rank_ && f.kill->epoch == epoch && f.kill->step == step) {
      ::raise(SIGKILL);  // a real crash: no message, no cleanup, as an OOM kill
    }
    if (f.delay && f.delay->rank == rank_ && f.delay->ms > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f.delay->ms));
    }
  }

  void reportMismatch(const std::vector<float>& header, std::int64_t epoch, std::int64_t step,
                      std::int64_t planned) {
    // Everyone knows now (same collective); one more allgather names each rank's step count.
    const auto steps = comm_.allgather({planned}, std::vector<std::int64_t>(static_cast<std::size_t>(world_), 1),
                                       fmt::format("epoch {} step {} mismatch", epoch, step));
    if (rank_ != 0) return;
    std::vector<std::int64_t> done, waiting;
    for (int r = 0; r < world_; ++r) {
      (header[static_cast<std::size_t>(r)] > 0.5f ? waiting : done).push_back(r);
    }
    Violation v;
    v.property = std::string(property::kCollectiveMismatch);
    v.ranks = done;
    v.epoch = epoch;
    v.step = step;
    v.detail = fmt::format(
        "rank{} {} ran out of batches after {} steps while rank{} {} still run step {}: a real "
        "job hangs in that step's gradient allreduce (steps per rank: {})",
        done.size() == 1 ? "" : "s", rankList(done), step, waiting.size() == 1 ? "" : "s",
        rankList(waiting), step, groupRanksByValue(steps, "steps"));
    observer_.onViolation(v);
  }

  void report(std::optional<Violation> v, const Checked& c) {
    if (!v) return;
    if (checked_.size() > 1) v->detail = fmt::format("dataset {}: {}", c.name, v->detail);
    observer_.onViolation(*v);
  }

  void checkEpoch(std::int64_t epoch) {
    // One all-gather per source of what every rank consumed (lengths agreed in the last step).
    std::vector<std::vector<std::vector<Index>>> gathered;
    for (std::size_t d = 0; d < sources_.size(); ++d) {
      gathered.push_back(comm_.allgather(
          consumed_[d], consumedLengths_[d],
          fmt::format("epoch {} end, gather dataset {}", epoch, sources_[d].spec.name)));
    }
    if (rank_ != 0) return;
    for (std::size_t c = 0; c < checked_.size(); ++c) {
      const Checked& info = checked_[c];
      Partition p;
      p.datasetSize = info.size;
      p.epoch = epoch;
      p.seed = s_.seed;
      // Every rank's consumed ids of this dataset (local ids: a concatenation is split).
      for (const auto& shard : gathered[info.source]) {
        p.ranks.emplace_back();
        for (Index id : shard) {
          if (id >= info.offset && id < info.offset + info.size) {
            p.ranks.back().push_back(id - info.offset);
          }
        }
      }
      Expectations e;
      // NOTE [drop_last that drops everything]: drop_last's contract is to drop the N % W tail;
      // when that is the whole dataset (N < W) the epoch trains on nothing, so it is judged by
      // full coverage.
      e.dropLast = info.spec->samplerDropLast &&
                   distributedNumSamples(info.size, world_, true) > 0;
      e.shuffle = info.spec->shuffle && info.spec->sampler != "libtorch-sequential";
      e.pytorchLengths = false;  // the run checks what was consumed, not the sampler's formula
      e.allowPadding = s_.phase == "train";
      report(checkValidRange(p), info);
      if (info.scope != Checked::Scope::kConcatenation) report(checkCoverage(p, e), info);
      if (info.scope == Checked::Scope::kPartOfConcat) {
        noteUnvisited(p, info);
        continue;
      }
      auto disjoint = checkDisjointness(p, e);
      if (s_.phase == "eval") {
        const std::string metric = evalMetric(p, c);
        observer_.onNote(fmt::format("epoch {}: {}", epoch, metric));
        if (disjoint) disjoint->detail += "; " + metric;
      }
      report(std::move(disjoint), info);
      report(checkEqualLength(p, e), info);
      if (previous_.size() > c && previous_[c]) report(checkReshuffle(*previous_[c], p, e), info);
      noteUnvisited(p, info);
      if (previous_.size() <= c) previous_.resize(c + 1);
      previous_[c] = std::move(p);
    }
  }

  void noteUnvisited(const Partition& p, const Checked& info) {
    std::vector<bool> seen(static_cast<std::size_t>(p.datasetSize), false);
    for (const auto& shard : p.ranks) {
      for (Index i : shard) {
        if (i >= 0 && i < p.datasetSize) seen[static_cast<std::size_t>(i)] = true;
      }
    }
    const auto unvisited = std::count(seen.begin(), seen.end(), false);
    if (unvisited > 0) {
      observer_.onNote(fmt::format("epoch {}: dataset {}: {} of {} samples not visited", p.epoch,
                                   info.name, unvisited, p.datasetSize));
    }
  }

  std::string evalMetric(const Partition& p, std::size_t dataset) const {
    std::int64_t evaluated = 0, correct = 0;
    std::set<Index> distinct;
    for (const auto& shard : p.ranks) {
      for (Index i : shard) {
        ++evaluated;
        correct += sampleCorrect(static_cast<std::int64_t>(dataset), i) ? 1 : 0;
        distinct.insert(i);
      }
    }
    std::int64_t trueCorrect = 0;
    for (Index i = 0; i < p.datasetSize; ++i) {
      trueCorrect += sampleCorrect(static_cast<std::int64_t>(dataset), i) ? 1 : 0;
    }
    const double reported = evaluated ? static_cast<double>(correct) / evaluated : 0.0;
    const double truth = static_cast<double>(trueCorrect) / static_cast<double>(p.datasetSize);
    return fmt::format(
        "accuracy over the gathered shards {:.5f} ({} evaluated, {} duplicates) vs {:.5f} over "
        "the {} samples: skew {:+.5f}",
        reported, evaluated, evaluated - static_cast<std::int64_t>(distinct.size()), truth,
        p.datasetSize, reported - truth);
  }

  void checkStragglers() {
    const auto perStepUs = [&](double seconds) {
      return stats_.steps ? static_cast<std::int64_t>(seconds * 1e6 / stats_.steps) : 0;
    };
    const auto all = comm_.allgather({perStepUs(stats_.computeSeconds), perStepUs(stats_.waitSeconds)},
                                     std::vector<std::int64_t>(static_cast<std::size_t>(world_), 2),
                                     "end of run, gather step times");
    if (rank_ != 0) return;
    if (const auto v = findStragglers(all)) observer_.onViolation(*v);
  }

  const Scenario& s_;
  Communicator& comm_;
  RankObserver& observer_;
  ScenarioTrace& trace_;
  int rank_;
  int world_;
  std::vector<Source> sources_;
  std::vector<Checked> checked_;
  std::vector<std::vector<Index>> consumed_;
  std::vector<std::vector<std::int64_t>> consumedLengths_;  // [source][rank], agreed each epoch
  std::vector<std::optional<Partition>> previous_;
  RankRunStats stats_;
};

}  // namespace

bool sampleCorrect(std::int64_t dataset, std::int64_t id) {
  return splitmix64(static_cast<std::uint64_t>(id) ^ (static_cast<std::uint64_t>(dataset) << 48)) %
             100 <
         70;
}

RankRunStats runRankProgram(const Scenario& scenario, Communicator& comm, RankObserver& observer) {
  DDPH_CHECK(comm.size() == scenario.worldSize, "scenario {} needs {} ranks, the world has {}",
             scenario.name, scenario.worldSize, comm.size());
  ScenarioTrace trace(comm.rank(), comm.size());  // DDPH_AUDIT_DIR: ddp-sim launch --audit
  RankRun run(scenario, trace.record(comm), observer, trace);
  const RankRunStats stats = run.run();
  trace.end();
  return stats;
}

}  // namespace ddph
