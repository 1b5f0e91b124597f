#include "epoch_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ddph/scenario/rank_program.h"
#include "ddph/sampler/builtin_samplers.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/sampler/partition_checks.h"
#include "ddph/sampler/property.h"
#include "ddph/sampler/resume_checks.h"

namespace ddph::scenario {

using sampler::checkCoverage;
using sampler::checkDisjointness;
using sampler::checkEqualLength;
using sampler::checkReshuffle;
using sampler::checkResumeBalance;
using sampler::checkResumeExactlyOnce;
using sampler::checkValidRange;
using sampler::distributedNumSamples;
using sampler::Expectations;
using sampler::Index;
using sampler::makeBuiltinSampler;
using sampler::Partition;
using sampler::ResumedEpoch;
using sampler::Violation;
namespace property = sampler::property;

EpochChecks::EpochChecks(const Scenario& s, const std::vector<Checked>& checked, std::int64_t world,
                         audit::PlannedRun& out)
    : s_(s), checked_(checked), world_(world), out_(out), previous_(checked.size()) {}

void EpochChecks::check(std::int64_t epoch,
                        const std::vector<std::vector<std::vector<Index>>>& gathered) {
  for (std::size_t c = 0; c < checked_.size(); ++c) {
    const Checked& info = checked_[c];
    Partition p = Partition::of({info.size, world_, epoch, s_.seed});
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
    e.dropLast = info.spec->samplerDropLast && distributedNumSamples(info.size, world_, true) > 0;
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
    if (s_.phase == "eval" && disjoint) {
      // An evaluation counts every sample once: a copy on a second rank is a duplicate counted
      // twice (the audit's no-duplicates), whatever made it (padding, overlapping shards).
      disjoint->property = std::string(property::kNoDuplicates);
    }
    if (s_.phase == "eval") {
      const std::string metric = evalMetric(p, c);
      out_.notes.push_back(fmt::format("epoch {}: {}", epoch, metric));
      if (disjoint) disjoint->notes.push_back(metric);
    }
    report(std::move(disjoint), info);
    report(checkEqualLength(p, e), info);
    if (previous_[c]) report(checkReshuffle(*previous_[c], p, e), info);
    noteUnvisited(p, info);
    previous_[c] = std::move(p);
  }
}

void EpochChecks::checkResumed(std::int64_t epoch, const std::vector<std::vector<Index>>& gathered,
                               std::int64_t consumed) {
  const Checked& info = checked_.front();
  const ResumeSpec& r = *s_.resume;
  ResumedEpoch e;
  e.last = {info.size, r.worldSize, epoch, s_.seed, {{world_, consumed}}};
  e.runs.resize(2);
  e.runs[0] = Partition::of({info.size, world_, epoch, s_.seed});
  e.runs[1] = Partition::of(e.last);
  for (std::size_t rank = 0; rank < gathered.size(); ++rank) {
    const auto& taken = gathered[rank];
    const auto split = taken.begin() + std::min<std::int64_t>(consumed, taken.size());
    e.runs[0].ranks.emplace_back(taken.begin(), split);
    if (static_cast<int>(rank) < r.worldSize) e.runs[1].ranks.emplace_back(split, taken.end());
  }
  // What a restart of the epoch on the new world would give, to name that bug when it is one.
  const auto sampler = makeBuiltinSampler(info.spec->sampler, info.spec->shuffle,
                                          info.spec->samplerDropLast);
  e.fresh = sampler->partition({info.size, r.worldSize, epoch, s_.seed});
  Expectations x;
  x.dropLast = info.spec->samplerDropLast;
  report(checkResumeExactlyOnce(e, x), info);
  report(checkResumeBalance(e), info);
  out_.notes.push_back(
      fmt::format("epoch {}: stopped after {} samples a rank on {} ranks, resumed on {}", epoch,
                  consumed, world_, r.worldSize));
}

void EpochChecks::report(std::optional<Violation> v, const Checked& c) {
  if (!v) return;
  bool explained = false;
  for (const auto& hint : hints_) {
    if (hint.dataset == c.name && hint.property == v->property) {
      v->likelyCause = hint.cause;
      v->help = hint.help;
      explained = true;
    }
  }
  if (checked_.size() > 1) v->detail = fmt::format("dataset {}: {}", c.name, v->detail);
  out_.findings.push_back({std::move(*v), c.name, explained});
}

void EpochChecks::noteUnvisited(const Partition& p, const Checked& info) {
  std::vector<bool> seen(static_cast<std::size_t>(p.datasetSize), false);
  for (const auto& shard : p.ranks) {
    for (Index i : shard) {
      if (i >= 0 && i < p.datasetSize) seen[static_cast<std::size_t>(i)] = true;
    }
  }
  const auto unvisited = std::count(seen.begin(), seen.end(), false);
  if (unvisited > 0) {
    out_.notes.push_back(fmt::format("epoch {}: dataset {}: {} of {} samples not visited", p.epoch,
                                     info.name, unvisited, p.datasetSize));
  }
}

std::string EpochChecks::evalMetric(const Partition& p, std::size_t dataset) const {
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

}  // namespace ddph::scenario
