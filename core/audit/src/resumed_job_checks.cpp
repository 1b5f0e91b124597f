// A job resumed from a checkpoint of the one before it, judged with it: the epoch the earlier job
// ended inside is trained exactly once across the two (NOTE [A run of several jobs]).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "audit_checks.h"

namespace ddph::audit {

using sampler::Index;
using sampler::Violation;
namespace property = sampler::property;

namespace {

// NOTE [A run of several jobs] (docs/audit.md): job B resumed from a checkpoint of job A. For each
// loader whose last pass on every rank of A ended inside the epoch (the job stopped there), B's
// first pass over the same loader finishes that epoch. The checkpoint holds the first s training
// steps of the epoch on every rank (s unknown when it was written before A stopped): the epoch is
// healthy when A's first s trained batches and the batches B trained make up the epoch's order
// exactly, as A's sampler drew it on every rank. B's parameters when its pass began tell s: A's at
// its end (the checkpoint was A's last state: s = every step A trained), A's at the epoch's start
// (s = 0), or some state between (s searched). A batch trained nothing when no forward with
// gradients followed it before the next batch: what B skipped to reach the checkpoint's step.

using Counts = std::map<Index, std::int64_t>;

struct RankEpoch {
  const RankTrace* trace = nullptr;
  const PassRecord* pass = nullptr;
  std::vector<std::vector<Index>> trainedBatches;  ///< in order
  std::int64_t skippedAtStart = 0;  ///< batches before the first trained one
};

// The last pass of `loader` on `t`, or nullptr.
const PassRecord* lastPassOf(const RankTrace& t, std::int64_t loader) {
  const PassRecord* last = nullptr;
  for (const auto& p : t.passes) {
    if (p.loader == loader) last = &p;
  }
  return last;
}

// The lines of every batch the rank was handed, ascending.
std::vector<std::int64_t> batchLines(const RankTrace& t) {
  std::vector<std::int64_t> lines;
  for (const auto& q : t.passes) {
    for (const auto& b : q.batches) lines.push_back(b.line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

// Whether batch `b` fed a training step: a forward with gradients ran after it and before the next
// batch the rank was handed (of any loader; `lines`: batchLines). Without DDP forwards in the
// trace (gradients averaged by hand, no DDP), every batch handed out with gradients enabled.
bool trainedOn(const RankTrace& t, const BatchRecord& b, const std::vector<std::int64_t>& lines) {
  if (t.gradForwardLines.empty()) return b.grad;
  const auto next = std::upper_bound(lines.begin(), lines.end(), b.line);
  const auto f = std::upper_bound(t.gradForwardLines.begin(), t.gradForwardLines.end(), b.line);
  return f != t.gradForwardLines.end() && (next == lines.end() || *f < *next);
}

// The batches of pass `p` the rank trained on, each its indices, or nothing when they are unknown.
std::optional<RankEpoch> rankEpoch(const RankTrace& t, const PassRecord& p, OrderCache& cache) {
  const auto consumed = consumedIndices(t, p, samplerOrder(t, p, cache));
  if (!consumed) return std::nullopt;
  const std::vector<std::int64_t> lines = batchLines(t);
  RankEpoch out;
  out.trace = &t;
  out.pass = &p;
  std::size_t at = 0;
  bool trainedYet = false;
  for (std::size_t k = 0; k < p.batches.size() && at < consumed->size(); ++k) {
    const auto size = std::min<std::size_t>(static_cast<std::size_t>(p.batches[k].size),
                                            consumed->size() - at);
    std::vector<Index> batch(consumed->begin() + static_cast<long>(at),
                             consumed->begin() + static_cast<long>(at + size));
    at += size;
    if (trainedOn(t, p.batches[k], lines)) {
      out.trainedBatches.push_back(std::move(batch));
      trainedYet = true;
    } else if (!trainedYet) {
      ++out.skippedAtStart;
    }
  }
  return out;
}

// The state of DDP module `id` when pass `p` began, or empty.
std::string stateAt(const PassRecord& p, std::int64_t id) {
  const auto it = p.params.find(id);
  return it == p.params.end() ? std::string() : it->second.hash;
}

struct Mismatch {
  std::vector<Index> twice, never;
  std::size_t tolerated = 0;  ///< copies allowed beyond the expected (padding of an unknown order)
  std::size_t size() const {
    return (twice.size() > tolerated ? twice.size() - tolerated : 0) + never.size();
  }
};

// Samples trained more (twice) or fewer (never) times across the two jobs than the epoch's order
// holds them, when the checkpoint held the first `s` trained batches of each rank of A.
Mismatch mismatchAt(const Counts& expected, const std::vector<RankEpoch>& a, const Counts& b,
                    std::size_t s, std::size_t tolerated) {
  Counts trained = b;
  for (const auto& re : a) {
    for (std::size_t k = 0; k < std::min(s, re.trainedBatches.size()); ++k) {
      for (Index i : re.trainedBatches[k]) ++trained[i];
    }
  }
  Mismatch m;
  m.tolerated = tolerated;
  for (const auto& [i, n] : trained) {
    const auto e = expected.find(i);
    if (n > (e == expected.end() ? 0 : e->second)) m.twice.push_back(i);
  }
  for (const auto& [i, n] : expected) {
    const auto t = trained.find(i);
    if ((t == trained.end() ? 0 : t->second) < n) m.never.push_back(i);
  }
  return m;
}

// A's unfinished epoch: what each rank trained of it, and the epoch's order as counts.
struct UnfinishedEpoch {
  std::vector<RankEpoch> ranks;  ///< the ranks whose trained batches are known
  Counts expected;               ///< each index as often as the epoch's order holds it
  bool orderKnown = true;        ///< every rank's order is known
};

// Where B began in A's unfinished epoch: the checkpoint held between `lo` and `hi` of its steps.
struct Began {
  std::size_t lo = 0, hi = 0;
  bool fromEnd = false, fromStart = false;
  bool earlier = false;  ///< from an earlier epoch's start: the jobs are judged each alone
};

// The number of steps the checkpoint held that explains the two jobs best, and what it leaves
// trained twice or never.
struct Held {
  std::size_t steps = 0;
  Mismatch mismatch;
};

// The checkpoint's steps in [began.lo, began.hi] with the fewest samples trained twice or never.
Held closestHeld(const Counts& expected, const std::vector<RankEpoch>& a, const Counts& b,
                 const Began& began, std::size_t padding) {
  Held best{began.lo, mismatchAt(expected, a, b, began.lo, padding)};
  for (std::size_t s = began.lo; s <= began.hi && best.mismatch.size() > 0; ++s) {
    Mismatch m = mismatchAt(expected, a, b, s, padding);
    if (m.size() < best.mismatch.size()) best = Held{s, std::move(m)};
  }
  return best;
}

class ResumedJobChecker {
 public:
  ResumedJobChecker(const Trace& a, const Trace& b, int jobA) : a_(a), b_(b), jobA_(jobA) {}

  ResumedJobJudgement run() {
    if (!everyRank(a_) || !everyRank(b_)) return std::move(out_);
    for (const auto& [loader, l] : a_.ranks[0]->loaders) {
      const auto other = b_.ranks[0]->loaders.find(loader);
      if (other == b_.ranks[0]->loaders.end()) continue;
      if (datasetIdentity(other->second) != datasetIdentity(l) ||
          other->second.datasetLen != l.datasetLen)
        continue;
      checkLoader(loader);
    }
    return std::move(out_);
  }

 private:
  static bool everyRank(const Trace& t) {
    return !t.ranks.empty() &&
           std::all_of(t.ranks.begin(), t.ranks.end(), [](const auto& r) { return r.has_value(); });
  }

  std::string jobName(int k, const Trace& t) const {
    return fmt::format("job {} ({})", k, t.dir.string());
  }

  void note(std::int64_t loader, const std::string& text) {
    out_.loaders.insert(loader);
    out_.notes.push_back(fmt::format("{}: {}", describeLoader(*a_.ranks[0], loader), text));
  }

  void checkLoader(std::int64_t loader) {
    std::optional<UnfinishedEpoch> a = unfinishedEpoch(loader);
    if (!a) return;
    const PassRecord& aPass = *lastPassOf(*a_.ranks[0], loader);
    const std::int64_t epoch = aPass.samplerEpoch.value_or(aPass.iter);
    const std::string where = fmt::format("epoch {} ended inside {} and was finished by {}", epoch,
                                          jobName(jobA_, a_), jobName(jobA_ + 1, b_));
    const SamplerRecord* sampler = samplerOf(*a_.ranks[0], loader);
    if (a->ranks.size() != a_.ranks.size() || (sampler && sampler->replacement.value_or(false))) {
      note(loader, fmt::format("{}; what {} trained of it is not known from the trace, or its "
                               "sampler draws with replacement, so it is not judged across the jobs",
                               where, jobName(jobA_, a_)));
      return;
    }
    const std::size_t padding = a->orderKnown ? 0 : expectEverySampleOnce(loader, a->expected);
    const std::optional<std::vector<RankEpoch>> b = firstPassOfB(loader);
    if (!b) {
      note(loader, fmt::format("{}; what {} trained of it is not known from the trace, so it is "
                               "not judged across the jobs",
                               where, jobName(jobA_ + 1, b_)));
      return;
    }
    Counts trainedInB;
    for (const auto& re : *b) {
      for (const auto& batch : re.trainedBatches) {
        for (Index i : batch) ++trainedInB[i];
      }
    }
    std::size_t steps = 0;  // the most trained batches of the epoch on a rank of A
    for (const auto& re : a->ranks) steps = std::max(steps, re.trainedBatches.size());
    const Began began = whereBBegan(loader, aPass, *(*b)[0].pass, steps);
    if (began.earlier) return;
    const Held held = closestHeld(a->expected, a->ranks, trainedInB, began, padding);
    out_.loaders.insert(loader);
    if (held.mismatch.size() == 0) {
      out_.notes.push_back(fmt::format(
          "{}: {}: its checkpoint held {} of its steps and {} trained the rest, every one of its "
          "{} samples once across the two jobs",
          describeLoader(*a_.ranks[0], loader), where, held.steps, jobName(jobA_ + 1, b_),
          a->expected.size()));
      return;
    }
    Violation v = trainedTwiceOrNever(loader, epoch, where, steps, a->expected, held.mismatch);
    explain(v, cause(loader, *(*b)[0].pass, aPass, *b, held.steps, began.fromEnd, began.fromStart,
                     trainedInB, a->expected));
    out_.violations.push_back(std::move(v));
  }

  // The coverage finding of an epoch finished across two jobs: its samples trained twice or never
  // (after `steps` steps of it in A).
  Violation trainedTwiceOrNever(std::int64_t loader, std::int64_t epoch, const std::string& where,
                                std::size_t steps, const Counts& expected,
                                const Mismatch& m) const {
    Violation v;
    v.property = std::string(property::kCoverage);
    v.epoch = epoch;
    v.detail = fmt::format(
        "{}: {} (after {} steps of it); across the two jobs {} of its {} samples were trained "
        "twice{} and {} never{}",
        describeLoader(*a_.ranks[0], loader), where, steps, m.twice.size(), expected.size(),
        m.twice.empty() ? "" : fmt::format(" ({})", describeIndices(m.twice)), m.never.size(),
        m.never.empty() ? "" : fmt::format(" ({})", describeIndices(m.never)));
    return v;
  }

  // A's unfinished epoch of `loader`: every rank's last pass of it ended inside it (else
  // nothing). What each rank trained of it where that is known, and its order where that is.
  std::optional<UnfinishedEpoch> unfinishedEpoch(std::int64_t loader) {
    UnfinishedEpoch out;
    for (const auto& t : a_.ranks) {
      const PassRecord* p = lastPassOf(*t, loader);
      if (!p || completePass(*p) || !runEndsInside(*t, *p)) return std::nullopt;
      const auto order = samplerOrder(*t, *p, cache_);
      const auto re = rankEpoch(*t, *p, cache_);
      if (order) {
        for (Index i : *order) ++out.expected[i];
      } else {
        out.orderKnown = false;
      }
      if (re) out.ranks.push_back(*re);
    }
    return out;
  }

  // A sampler of its own whose interrupted pass did not run to its end: its order is not known,
  // only its promise, every sample once (DistributedSampler's padding aside). Returns the padding.
  std::size_t expectEverySampleOnce(std::int64_t loader, Counts& expected) const {
    expected.clear();
    const std::int64_t n = a_.ranks[0]->loaders.at(loader).datasetLen;
    const auto world = static_cast<std::int64_t>(a_.ranks.size());
    for (Index i = 0; i < n; ++i) expected[i] = 1;
    return static_cast<std::size_t>((n + world - 1) / world * world - n);
  }

  // B's first pass over the loader, on every rank, or nothing when what some rank trained of it
  // is not known.
  std::optional<std::vector<RankEpoch>> firstPassOfB(std::int64_t loader) {
    std::vector<RankEpoch> b;
    for (const auto& t : b_.ranks) {
      const PassRecord* p = t->findPass(loader, 0);
      const auto re = p ? rankEpoch(*t, *p, cache_) : std::nullopt;
      if (!re) return std::nullopt;
      b.push_back(*re);
    }
    return b;
  }

  // Where B began, from its parameters: A's end (the checkpoint held every step A trained of the
  // epoch), the epoch's start (none), or between (searched). A's parameters at the start of an
  // earlier epoch: a note, and `earlier`.
  Began whereBBegan(std::int64_t loader, const PassRecord& aPass, const PassRecord& bPass,
                    std::size_t steps) {
    const std::int64_t ddpId = a_.ranks[0]->ddp.empty() ? -1 : a_.ranks[0]->ddp.begin()->first;
    const std::string began = stateAt(bPass, ddpId);
    const auto endIt = a_.ranks[0]->ddp.find(ddpId);
    const std::string endOfA =
        endIt != a_.ranks[0]->ddp.end() && endIt->second.atEnd ? endIt->second.atEnd->hash : "";
    const std::string startOfEpoch = stateAt(aPass, ddpId);
    Began out;
    out.hi = steps;
    if (!began.empty() && began == endOfA) {
      out.lo = steps;
      out.fromEnd = true;
    } else if (!began.empty() && began == startOfEpoch) {
      out.hi = 0;
      out.fromStart = true;
    } else if (!began.empty() && beganEarlier(loader, aPass, ddpId, began)) {
      out_.notes.push_back(fmt::format(
          "{}: {} began from {}'s parameters at the start of an earlier epoch, so what {} trained "
          "after it is not in its model: the jobs are judged each alone",
          describeLoader(*a_.ranks[0], loader), jobName(jobA_ + 1, b_), jobName(jobA_, a_),
          jobName(jobA_, a_)));
      out.earlier = true;
    }
    return out;
  }

  // B began from A's parameters at the start of an earlier pass of the loader than the unfinished
  // one: it resumed from an older checkpoint, and A's later training is not in its model.
  bool beganEarlier(std::int64_t loader, const PassRecord& unfinished, std::int64_t ddpId,
                    const std::string& began) const {
    for (const auto& p : a_.ranks[0]->passes) {
      if (p.loader == loader && p.startLine < unfinished.startLine && stateAt(p, ddpId) == began)
        return true;
    }
    return false;
  }

  // The cause the evidence points at: B's sampler epoch, where B began, what B skipped.
  Explanation cause(std::int64_t loader, const PassRecord& bPass, const PassRecord& aPass,
                    const std::vector<RankEpoch>& b, std::size_t held, bool fromEnd, bool fromStart,
                    const Counts& trainedInB, const Counts& expected) const {
    const std::string jobB = jobName(jobA_ + 1, b_);
    const auto ea = aPass.samplerEpoch, eb = bPass.samplerEpoch;
    if (ea && eb && *ea != *eb) {
      const SamplerRecord* s = samplerOf(*b_.ranks[0], loader);
      const bool called = s && !s->setEpochCalls.empty() &&
                          s->setEpochCalls.front().line < bPass.startLine;
      return {fmt::format(
                  "{} drew the rest of epoch {} from epoch {}'s order: its sampler's set_epoch {} "
                  "before that pass, so the batches it skipped and the ones it trained are not the "
                  "rest of the epoch the checkpoint stopped in",
                  jobB, *ea, *eb,
                  called ? fmt::format("was called with {}", *eb) : std::string("was not called")),
              "call sampler.set_epoch(epoch) with the checkpoint's epoch before skipping the "
              "batches it holds"};
    }
    std::int64_t trainedB = 0, total = 0;
    for (const auto& [i, c] : trainedInB) trainedB += c;
    for (const auto& [i, c] : expected) total += c;
    if (trainedB >= total && !fromStart) {
      return {fmt::format(
                  "{} trained epoch {} again from its start, but its parameters when it began "
                  "were {} state after {} steps of that epoch, not the epoch's start: the "
                  "checkpoint's steps were trained twice",
                  jobB, ea.value_or(aPass.iter),
                  fromEnd ? "job " + std::to_string(jobA_) + "'s last" : "a", held),
              "skip the batches the checkpoint holds (save the step with it)"};
    }
    const std::int64_t skipped = b[0].skippedAtStart;
    if (fromEnd && static_cast<std::size_t>(skipped) != held) {
      return {fmt::format("{} skipped {} batches of the epoch, but its checkpoint holds {} steps "
                          "of it (its parameters when it began were job {}'s last)",
                          jobB, skipped, held, jobA_),
              "skip exactly the steps saved with the checkpoint, on every rank"};
    }
    return {"the resumed job's batches are not the rest of the epoch its checkpoint stopped in",
            "restore the sampler's epoch (set_epoch) and skip exactly the batches the checkpoint "
            "holds"};
  }

  const Trace& a_;
  const Trace& b_;
  int jobA_;
  OrderCache cache_;
  ResumedJobJudgement out_;
};

}  // namespace

ResumedJobJudgement checkResumedJob(const Trace& before, const Trace& after, int jobBefore) {
  return ResumedJobChecker(before, after, jobBefore).run();
}

}  // namespace ddph::audit
