#include "ddph/sampler/resume_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "ddph/sampler/elastic_sampler.h"

namespace ddph::sampler {
namespace {

// Where an index was first taken: run k (0-based), rank r.
struct Taken {
  std::int64_t run = -1;
  std::int64_t rank = -1;
};

std::string describeRun(const ResumedEpoch& e, std::int64_t run) {
  return fmt::format("run {} ({} ranks)", run + 1, e.runs[static_cast<std::size_t>(run)].numReplicas());
}

// What the resume rule allows: extra copies (padding of a run that reached the end) and missing
// samples (drop_last's cut of the last run), from the runs' lengths alone.
struct Allowance {
  std::int64_t extra = 0;
  std::int64_t missing = 0;
};

Allowance allowance(const SamplerCase& last, bool dropLast) {
  Allowance a;
  // Positions the earlier runs took beyond the end of the order were their padding.
  const std::int64_t start = elasticRunStart(last.datasetSize, last.resume, dropLast);
  for (const auto& point : last.resume) a.extra += point.consumed * point.numReplicas;
  a.extra -= start;
  const std::int64_t length = last.datasetSize - start;
  const std::int64_t total = distributedTotalSize(length, last.numReplicas, dropLast);
  (dropLast ? a.missing : a.extra) += dropLast ? length - total : total - length;
  return a;
}

// Names what a sampler that failed exactly-once does, when it is one of the two naive resumes.
std::string naiveResume(const ResumedEpoch& e) {
  const Partition& last = e.runs.back();
  if (last.ranks == e.fresh.ranks) {
    return "; the resumed run is the whole epoch again: the sampler ignores the resume and "
           "restarts the epoch (as torch's DistributedSampler does)";
  }
  const std::int64_t consumed = e.last.resume.back().consumed;
  bool perRank = last.ranks.size() == e.fresh.ranks.size();
  for (std::size_t r = 0; perRank && r < last.ranks.size(); ++r) {
    const auto& whole = e.fresh.ranks[r];
    const auto from = std::min<std::size_t>(whole.size(), static_cast<std::size_t>(consumed));
    perRank = last.ranks[r] == std::vector<Index>(whole.begin() + static_cast<long>(from), whole.end());
  }
  if (perRank) {
    return fmt::format("; every rank continues its own shard of the epoch on {} ranks from "
                       "position {}: per-rank positions kept across the change of world size",
                       last.numReplicas(), consumed);
  }
  return "";
}

// How often the runs took each index (an earlier run up to what it consumed, the last one whole),
// and where each was first taken.
struct Takes {
  std::vector<std::int64_t> count;
  std::vector<Taken> first;
};

// Counts into `takes`; a shard shorter than what its run consumed, or an index outside [0, n),
// is returned as `v` with its rank and detail.
std::optional<Violation> countTakes(const ResumedEpoch& e, Violation v, Takes& takes) {
  const SamplerCase& c = e.last;
  const std::int64_t n = c.datasetSize;
  takes.count.assign(static_cast<std::size_t>(n), 0);
  takes.first.assign(static_cast<std::size_t>(n), Taken{});
  for (std::size_t k = 0; k < e.runs.size(); ++k) {
    const bool isLast = k + 1 == e.runs.size();
    const auto& ranks = e.runs[k].ranks;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      std::size_t take = ranks[r].size();
      if (!isLast) {
        const auto consumed = static_cast<std::size_t>(c.resume[k].consumed);
        if (take < consumed) {
          v.ranks = {static_cast<std::int64_t>(r)};
          v.detail = fmt::format("{} rank {} yields {} samples, but {} were consumed before the "
                                 "resume", describeRun(e, static_cast<std::int64_t>(k)), r, take,
                                 consumed);
          return v;
        }
        take = consumed;
      }
      for (std::size_t j = 0; j < take; ++j) {
        const Index i = ranks[r][j];
        if (i < 0 || i >= n) {
          v.ranks = {static_cast<std::int64_t>(r)};
          v.detail = fmt::format("{} rank {} yields index {}, outside [0, {})",
                                 describeRun(e, static_cast<std::int64_t>(k)), r, i, n);
          return v;
        }
        if (takes.count[static_cast<std::size_t>(i)]++ == 0) {
          takes.first[static_cast<std::size_t>(i)] = {static_cast<std::int64_t>(k), static_cast<std::int64_t>(r)};
        }
      }
    }
  }
  return std::nullopt;
}

// The samples never taken and the extra copies, with the first index of each.
struct Tally {
  std::int64_t missing = 0, extra = 0;
  Index firstMissing = -1, firstExtra = -1;
};

Tally tally(const std::vector<std::int64_t>& count) {
  Tally t;
  for (Index i = 0; i < static_cast<Index>(count.size()); ++i) {
    const auto k = count[static_cast<std::size_t>(i)];
    if (k == 0) {
      if (t.missing == 0) t.firstMissing = i;
      ++t.missing;
    } else if (k > 1) {
      if (t.extra == 0) t.firstExtra = i;
      t.extra += k - 1;
    }
  }
  return t;
}

}  // namespace

bool isResumeProperty(std::string_view name) {
  return name == property::kResumeExactlyOnce || name == property::kResumeOrder ||
         name == property::kResumeBalance;
}

ResumedEpoch askResumedEpoch(Sampler& sampler, const SamplerCase& c) {
  ResumedEpoch e;
  e.last = c;
  for (std::size_t k = 0; k < c.resume.size(); ++k) {
    SamplerCase run{c.datasetSize, c.resume[k].numReplicas, c.epoch, c.seed,
                    std::vector<ResumePoint>(c.resume.begin(), c.resume.begin() + static_cast<long>(k))};
    e.runs.push_back(sampler.partition(run));
  }
  e.runs.push_back(sampler.partition(c));
  e.fresh = sampler.partition({c.datasetSize, c.numReplicas, c.epoch, c.seed});
  return e;
}

std::optional<Violation> checkResumeExactlyOnce(const ResumedEpoch& e, const Expectations& x) {
  const SamplerCase& c = e.last;
  if (c.resume.empty()) return std::nullopt;
  Violation v;
  v.property = std::string(property::kResumeExactlyOnce);
  v.epoch = c.epoch;
  const std::int64_t n = c.datasetSize;
  Takes takes;
  if (auto impossible = countTakes(e, v, takes)) return impossible;
  const Allowance allowed = allowance(c, x.dropLast);
  const Tally t = tally(takes.count);
  const std::string where = fmt::format("after {} run{} resumed on {} ranks ({} of {} samples)",
                                        c.resume.size(), c.resume.size() == 1 ? "" : "s",
                                        c.numReplicas, n - t.missing, n);
  if (t.extra > allowed.extra) {
    const Taken first = takes.first[static_cast<std::size_t>(t.firstExtra)];
    v.ranks = {first.rank};
    v.detail = fmt::format("{}: {} extra copies where padding allows {}, e.g. index {} first taken "
                           "by {} rank {} and again later{}",
                           where, t.extra, allowed.extra, t.firstExtra, describeRun(e, first.run),
                           first.rank, naiveResume(e));
    return v;
  }
  if (t.missing > allowed.missing) {
    v.detail = fmt::format("{}: {} samples never taken (e.g. index {}) where {} allows {}{}", where,
                           t.missing, t.firstMissing, x.dropLast ? "drop_last" : "padding",
                           allowed.missing, naiveResume(e));
    return v;
  }
  return std::nullopt;
}

std::optional<Violation> checkResumeBalance(const ResumedEpoch& e) {
  const auto& ranks = e.runs.back().ranks;
  if (e.last.resume.empty() || ranks.empty()) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) {
    return a.size() < b.size();
  });
  if (lo->size() == hi->size()) return std::nullopt;
  Violation v;
  v.property = std::string(property::kResumeBalance);
  v.epoch = e.last.epoch;
  const auto shortRank = static_cast<std::int64_t>(lo - ranks.begin());
  const auto longRank = static_cast<std::int64_t>(hi - ranks.begin());
  v.ranks = {shortRank, longRank};
  v.detail = fmt::format("resumed on {} ranks, rank {} yields {} samples and rank {} yields {}: "
                         "the ranks run different numbers of steps",
                         ranks.size(), shortRank, lo->size(), longRank, hi->size());
  return v;
}

std::optional<Violation> checkResumeOrder(const Partition& whole, const Partition& resumed,
                                          std::int64_t consumed) {
  Violation v;
  v.property = std::string(property::kResumeOrder);
  v.epoch = whole.epoch;
  if (whole.numReplicas() != resumed.numReplicas()) {
    v.detail = fmt::format("resumed on {} ranks the sampler answers for {}", whole.numReplicas(),
                           resumed.numReplicas());
    return v;
  }
  for (std::size_t r = 0; r < whole.ranks.size(); ++r) {
    const auto& a = whole.ranks[r];
    const auto& b = resumed.ranks[r];
    const auto from = std::min<std::size_t>(a.size(), static_cast<std::size_t>(consumed));
    const std::size_t expected = a.size() - from;
    for (std::size_t j = 0; j < std::max(expected, b.size()); ++j) {
      const bool same = j < expected && j < b.size() && a[from + j] == b[j];
      if (same) continue;
      v.ranks = {static_cast<std::int64_t>(r)};
      v.detail = fmt::format(
          "resumed on the same {} ranks after {} samples each, rank {} at position {} yields {} "
          "where the uninterrupted run yields {}",
          whole.numReplicas(), consumed, r, from + j,
          j < b.size() ? std::to_string(b[j]) : std::string("nothing"),
          j < expected ? std::to_string(a[from + j]) : std::string("nothing"));
      return v;
    }
  }
  return std::nullopt;
}

}  // namespace ddph::sampler
