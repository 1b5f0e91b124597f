// Dataset mixing (ddph/data/dataset_mix.h): planEpoch's zip, cycle and concat and the visit
// accounting, as RapidCheck properties over real DistributedSampler shards of every rank. Each
// property is also run against deliberately broken planners and summaries (the negative controls
// at the end), which shows that every property can fail.
#include "ddph/data/dataset_mix.h"

#include <gtest/gtest.h>
#include <rapidcheck/detail/TestListener.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddph/common/error.h"
#include "ddph/sampler/distributed_sampler.h"

namespace ddph::data {

using common::ConfigError;
using common::Error;
using sampler::DistributedSampler;
using sampler::Index;
using sampler::Partition;

namespace {

using Shards = std::vector<std::vector<Index>>;  // [dataset] -> one rank's shard
using Planner = std::function<std::vector<MixedStep>(const Shards&, std::int64_t, Mix)>;
using Summarizer = std::function<VisitSummary(const std::vector<std::int64_t>&)>;

/// What the properties judge: a planner and a summary. The real one is ddph's; the negative
/// controls swap in broken ones.
struct MixImpl {
  std::string name;
  Planner plan;
  Summarizer summarize;
};

MixImpl realImpl() { return {"ddph", planEpoch, data::summarize}; }

constexpr Mix kMixes[] = {Mix::kZip, Mix::kCycle, Mix::kConcat};

// ---- Generated worlds ---------------------------------------------------------------------------

/// Several datasets, each with its own DistributedSampler, on W ranks: every rank's shards.
struct MixWorld {
  std::vector<std::int64_t> sizes;
  std::int64_t worldSize = 1;
  std::int64_t batchSize = 1;
  std::vector<Shards> ranks;  // [rank][dataset]
};

MixWorld genWorld(bool samplerDropLast, int minDatasets = 1, int maxDatasets = 4) {
  MixWorld w;
  const int numDatasets = *rc::gen::inRange(minDatasets, maxDatasets + 1).as("datasets");
  w.sizes = *rc::gen::container<std::vector<std::int64_t>>(static_cast<std::size_t>(numDatasets),
                                                           rc::gen::inRange<std::int64_t>(0, 150))
                 .as("dataset sizes");
  w.worldSize = *rc::gen::inRange<std::int64_t>(1, 6).as("world size");
  w.batchSize = *rc::gen::inRange<std::int64_t>(1, 17).as("batch size");
  const auto epoch = *rc::gen::inRange<std::int64_t>(0, 4).as("epoch");
  DistributedSampler sampler({/*shuffle=*/true, samplerDropLast});
  w.ranks.assign(static_cast<std::size_t>(w.worldSize), Shards(w.sizes.size()));
  for (std::size_t d = 0; d < w.sizes.size(); ++d) {
    // Each dataset has its own seed, as each loader has its own sampler.
    const Partition p =
        sampler.partition({w.sizes[d], w.worldSize, epoch, static_cast<std::int64_t>(d)});
    for (std::int64_t r = 0; r < w.worldSize; ++r) w.ranks[r][d] = p.ranks[r];
  }
  return w;
}

std::int64_t batchCount(const std::vector<Index>& shard, std::int64_t batchSize) {
  return (static_cast<std::int64_t>(shard.size()) + batchSize - 1) / batchSize;
}

std::int64_t minBatches(const Shards& shards, std::int64_t b) {
  std::int64_t m = shards.empty() ? 0 : batchCount(shards[0], b);
  for (const auto& s : shards) m = std::min(m, batchCount(s, b));
  return m;
}

std::int64_t maxBatches(const Shards& shards, std::int64_t b) {
  std::int64_t m = 0;
  for (const auto& s : shards) m = std::max(m, batchCount(s, b));
  return m;
}

// Batch k of a shard, from the definition: positions [k*b, min((k+1)*b, n)).
std::vector<Index> batchOf(const std::vector<Index>& shard, std::int64_t k, std::int64_t b) {
  const auto n = static_cast<std::int64_t>(shard.size());
  return {shard.begin() + std::min(n, k * b), shard.begin() + std::min(n, (k + 1) * b)};
}

// Dataset d's samples over the whole plan, in step order.
std::vector<Index> joined(const std::vector<MixedStep>& steps, std::size_t d) {
  std::vector<Index> all;
  for (const auto& step : steps)
    all.insert(all.end(), step.batches[d].begin(), step.batches[d].end());
  return all;
}

void assertStepsHaveEveryDataset(const std::vector<MixedStep>& steps, std::size_t numDatasets) {
  for (const auto& step : steps) RC_ASSERT(step.batches.size() == numDatasets);
}

// ---- Properties (each takes the implementation to judge)
// -----------------------------------------

// zip: min(#batches) steps; step s is batch s of every dataset, so each dataset contributes a
// prefix of its shard and never a sample outside it.
void zipStopsAtTheShortest(const MixImpl& impl) {
  const MixWorld w =
      genWorld(/*samplerDropLast=*/*rc::gen::arbitrary<bool>().as("sampler drop_last"));
  for (const Shards& shards : w.ranks) {
    const auto steps = impl.plan(shards, w.batchSize, Mix::kZip);
    assertStepsHaveEveryDataset(steps, shards.size());
    RC_ASSERT(static_cast<std::int64_t>(steps.size()) == minBatches(shards, w.batchSize));
    for (std::size_t s = 0; s < steps.size(); ++s) {
      for (std::size_t d = 0; d < shards.size(); ++d) {
        RC_ASSERT(steps[s].batches[d] ==
                  batchOf(shards[d], static_cast<std::int64_t>(s), w.batchSize));
      }
    }
  }
}

// zip, summed over ranks: the samples never seen are exactly the truncated tails (plus what the
// sampler itself dropped with drop_last). The shards come from a drop_last sampler so that they are
// disjoint: with padding, a tail may hold a copy of a sample another rank does see.
void zipNeverSeenIsTheTruncatedTails(const MixImpl& impl) {
  const MixWorld w = genWorld(/*samplerDropLast=*/true);
  std::vector<VisitCounter> counters;
  for (const auto size : w.sizes) counters.emplace_back(size);
  std::vector<std::int64_t> tails(w.sizes.size(), 0), kept(w.sizes.size(), 0);
  for (const Shards& shards : w.ranks) {
    const std::int64_t taken = minBatches(shards, w.batchSize) * w.batchSize;
    for (std::size_t d = 0; d < shards.size(); ++d) {
      const auto n = static_cast<std::int64_t>(shards[d].size());
      tails[d] += n - std::min(n, taken);
      kept[d] += n;
    }
    for (const auto& step : impl.plan(shards, w.batchSize, Mix::kZip)) {
      RC_ASSERT(step.batches.size() == shards.size());
      for (std::size_t d = 0; d < shards.size(); ++d) counters[d].visit(step.batches[d]);
    }
  }
  for (std::size_t d = 0; d < w.sizes.size(); ++d) {
    const VisitSummary s = impl.summarize(counters[d].counts());
    const std::int64_t droppedBySampler = w.sizes[d] - kept[d];
    RC_ASSERT(s.datasetSize == w.sizes[d]);
    RC_ASSERT(s.neverSeen == droppedBySampler + tails[d]);
    RC_ASSERT(s.visits == kept[d] - tails[d]);
    RC_ASSERT(s.seen + s.neverSeen == w.sizes[d]);
    RC_ASSERT(s.seenMoreThanOnce == 0);
  }
}

// cycle: max(#batches) steps; a shorter dataset starts over (step s takes its batch s mod
// #batches), so every index of every shard is visited at least once. A dataset with an empty shard
// takes no part.
void cycleCoversEveryShard(const MixImpl& impl) {
  const MixWorld w = genWorld(*rc::gen::arbitrary<bool>().as("sampler drop_last"));
  for (const Shards& shards : w.ranks) {
    const auto steps = impl.plan(shards, w.batchSize, Mix::kCycle);
    assertStepsHaveEveryDataset(steps, shards.size());
    RC_ASSERT(static_cast<std::int64_t>(steps.size()) == maxBatches(shards, w.batchSize));
    for (std::size_t d = 0; d < shards.size(); ++d) {
      const std::int64_t count = batchCount(shards[d], w.batchSize);
      for (std::size_t s = 0; s < steps.size(); ++s) {
        const auto want =
            count == 0 ? std::vector<Index>{}
                       : batchOf(shards[d], static_cast<std::int64_t>(s) % count, w.batchSize);
        RC_ASSERT(steps[s].batches[d] == want);
      }
      const auto all = joined(steps, d);
      const std::set<Index> visited(all.begin(), all.end());
      for (const Index i : shards[d]) RC_ASSERT(visited.count(i) == 1u);
    }
  }
}

// concat: sum(#batches) steps, each holding exactly one dataset, datasets in order; every shard
// index appears exactly once, in the shard's order.
void concatChainsTheDatasets(const MixImpl& impl) {
  const MixWorld w = genWorld(*rc::gen::arbitrary<bool>().as("sampler drop_last"));
  for (const Shards& shards : w.ranks) {
    const auto steps = impl.plan(shards, w.batchSize, Mix::kConcat);
    assertStepsHaveEveryDataset(steps, shards.size());
    std::int64_t total = 0;
    for (const auto& s : shards) total += batchCount(s, w.batchSize);
    RC_ASSERT(static_cast<std::int64_t>(steps.size()) == total);
    std::size_t previous = 0;
    for (const auto& step : steps) {
      const auto nonEmpty = std::count_if(step.batches.begin(), step.batches.end(),
                                          [](const auto& b) { return !b.empty(); });
      RC_ASSERT(nonEmpty == 1);
      const auto d =
          static_cast<std::size_t>(std::find_if(step.batches.begin(), step.batches.end(),
                                                [](const auto& b) { return !b.empty(); }) -
                                   step.batches.begin());
      RC_ASSERT(d >= previous);
      previous = d;
    }
    for (std::size_t d = 0; d < shards.size(); ++d) RC_ASSERT(joined(steps, d) == shards[d]);
  }
}

// Every mix: batches hold at most batchSize samples, and only the last batch of a pass over a
// dataset's shard is short (with cycle the short batch recurs at the end of every pass).
void batchesAreFullExceptTheLast(const MixImpl& impl) {
  const MixWorld w = genWorld(*rc::gen::arbitrary<bool>().as("sampler drop_last"));
  const Mix mix = parseMix(*rc::gen::element<std::string>("zip", "cycle", "concat").as("mix"));
  for (const Shards& shards : w.ranks) {
    const auto steps = impl.plan(shards, w.batchSize, mix);
    assertStepsHaveEveryDataset(steps, shards.size());
    for (std::size_t d = 0; d < shards.size(); ++d) {
      const std::int64_t count = batchCount(shards[d], w.batchSize);
      std::int64_t k = 0;  // position among dataset d's batches
      for (const auto& step : steps) {
        const auto size = static_cast<std::int64_t>(step.batches[d].size());
        if (size == 0) continue;
        RC_ASSERT(size <= w.batchSize);
        if (size < w.batchSize) RC_ASSERT(k % count == count - 1);  // a short batch ends a pass
        ++k;
      }
    }
  }
}

// One dataset: every mix is the same plain epoch, the shard cut into batches.
void oneDatasetIsAPlainEpoch(const MixImpl& impl) {
  const MixWorld w = genWorld(*rc::gen::arbitrary<bool>().as("sampler drop_last"), 1, 1);
  for (const Shards& shards : w.ranks) {
    std::vector<std::vector<Index>> plain;
    for (std::int64_t k = 0; k < batchCount(shards[0], w.batchSize); ++k) {
      plain.push_back(batchOf(shards[0], k, w.batchSize));
    }
    for (const Mix mix : kMixes) {
      std::vector<std::vector<Index>> got;
      for (const auto& step : impl.plan(shards, w.batchSize, mix)) {
        RC_ASSERT(step.batches.size() == 1u);
        got.push_back(step.batches[0]);
      }
      RC_ASSERT(got == plain);
    }
  }
}

// summarize: the fields from their definitions over arbitrary visit counts.
void summaryFollowsTheCounts(const MixImpl& impl) {
  const auto counts =
      *rc::gen::container<std::vector<std::int64_t>>(rc::gen::inRange<std::int64_t>(0, 4))
           .as("counts");
  std::int64_t visits = 0, seen = 0, repeated = 0;
  for (const auto c : counts) {
    visits += c;
    seen += c > 0;
    repeated += c > 1;
  }
  const VisitSummary s = impl.summarize(counts);
  RC_ASSERT(s.datasetSize == static_cast<std::int64_t>(counts.size()));
  RC_ASSERT(s.visits == visits);
  RC_ASSERT(s.seen == seen);
  RC_ASSERT(s.neverSeen == s.datasetSize - seen);
  RC_ASSERT(s.seenMoreThanOnce == repeated);
}

RC_GTEST_PROP(DatasetMix, zipStopsAtTheShortest, ()) { zipStopsAtTheShortest(realImpl()); }
RC_GTEST_PROP(DatasetMix, zipNeverSeenIsTheTruncatedTails, ()) {
  zipNeverSeenIsTheTruncatedTails(realImpl());
}
RC_GTEST_PROP(DatasetMix, cycleCoversEveryShard, ()) { cycleCoversEveryShard(realImpl()); }
RC_GTEST_PROP(DatasetMix, concatChainsTheDatasets, ()) { concatChainsTheDatasets(realImpl()); }
RC_GTEST_PROP(DatasetMix, batchesAreFullExceptTheLast, ()) {
  batchesAreFullExceptTheLast(realImpl());
}
RC_GTEST_PROP(DatasetMix, oneDatasetIsAPlainEpoch, ()) { oneDatasetIsAPlainEpoch(realImpl()); }
RC_GTEST_PROP(VisitSummary, followsTheCounts, ()) { summaryFollowsTheCounts(realImpl()); }

// VisitCounter: counts are the occurrences in the visited batches; an index out of range throws
// and leaves the counts as they were; reset zeroes them.
RC_GTEST_PROP(VisitCounter, countsOccurrences, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(0, 60).as("dataset size");
  VisitCounter counter(n);
  std::vector<std::int64_t> want(static_cast<std::size_t>(n), 0);
  if (n > 0) {
    const auto batches = *rc::gen::container<std::vector<std::vector<Index>>>(
                              rc::gen::container<std::vector<Index>>(rc::gen::inRange<Index>(0, n)))
                              .as("batches");
    for (const auto& batch : batches) {
      counter.visit(batch);
      for (const Index i : batch) ++want[static_cast<std::size_t>(i)];
    }
  }
  RC_ASSERT(counter.counts() == want);
  const Index outside = *rc::gen::element<Index>(-1, n).as("index outside");
  RC_ASSERT_THROWS_AS(counter.visit({0 < n ? Index{0} : outside, outside}), Error);
  RC_ASSERT(counter.counts() == want);
  counter.reset();
  RC_ASSERT(counter.counts() == std::vector<std::int64_t>(static_cast<std::size_t>(n), 0));
}

TEST(DatasetMix, parsesAndNamesTheMixes) {
  for (const Mix mix : kMixes) EXPECT_EQ(parseMix(mixName(mix)), mix);
  EXPECT_EQ(mixName(Mix::kCycle), "cycle");
  try {
    parseMix("interleave");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "unknown dataset mix 'interleave': expected one of zip, cycle, concat");
  }
  EXPECT_THROW(planEpoch({{1, 2}}, 0, Mix::kZip), ConfigError);
  EXPECT_THROW(VisitCounter(-1), ConfigError);
  EXPECT_TRUE(planEpoch({}, 4, Mix::kCycle).empty());
}

// The example in the header, spelled out: shards of 5 and 2 samples, batches of 2.
TEST(DatasetMix, workedExample) {
  const Shards shards{{0, 1, 2, 3, 4}, {10, 11}};
  auto flatten = [](const std::vector<MixedStep>& steps) {
    std::vector<std::vector<std::vector<Index>>> out;
    for (const auto& s : steps) out.push_back(s.batches);
    return out;
  };
  using V = std::vector<std::vector<std::vector<Index>>>;
  EXPECT_EQ(flatten(planEpoch(shards, 2, Mix::kZip)), (V{{{0, 1}, {10, 11}}}));
  EXPECT_EQ(flatten(planEpoch(shards, 2, Mix::kCycle)),
            (V{{{0, 1}, {10, 11}}, {{2, 3}, {10, 11}}, {{4}, {10, 11}}}));
  EXPECT_EQ(flatten(planEpoch(shards, 2, Mix::kConcat)),
            (V{{{0, 1}, {}}, {{2, 3}, {}}, {{4}, {}}, {{}, {10, 11}}}));
}

// ---- Negative controls
// ---------------------------------------------------------------------------

// The mixing done right over batches cut by the caller: lets a broken planner change only the cut.
std::vector<MixedStep> assemble(const std::vector<std::vector<std::vector<Index>>>& batches,
                                Mix mix, bool restart = true) {
  std::vector<MixedStep> steps;
  if (mix == Mix::kConcat) {
    for (std::size_t d = 0; d < batches.size(); ++d) {
      for (const auto& b : batches[d]) {
        steps.emplace_back().batches.resize(batches.size());
        steps.back().batches[d] = b;
      }
    }
    return steps;
  }
  std::size_t count = batches.empty() ? 0 : batches[0].size();
  for (const auto& b : batches)
    count = mix == Mix::kZip ? std::min(count, b.size()) : std::max(count, b.size());
  for (std::size_t s = 0; s < count; ++s) {
    MixedStep& step = steps.emplace_back();
    step.batches.resize(batches.size());
    for (std::size_t d = 0; d < batches.size(); ++d) {
      if (s < batches[d].size()) {
        step.batches[d] = batches[d][s];
      } else if (restart && !batches[d].empty()) {
        step.batches[d] = batches[d][s % batches[d].size()];
      }
    }
  }
  return steps;
}

using Cut = std::function<std::vector<std::vector<Index>>(const std::vector<Index>&, std::int64_t)>;

std::vector<std::vector<std::vector<Index>>> cutAll(const Shards& shards, std::int64_t b,
                                                    const Cut& cut) {
  std::vector<std::vector<std::vector<Index>>> out;
  for (const auto& s : shards) out.push_back(cut(s, b));
  return out;
}

std::vector<std::vector<Index>> cutPlain(const std::vector<Index>& shard, std::int64_t b) {
  std::vector<std::vector<Index>> out;
  for (std::int64_t k = 0; k < batchCount(shard, b); ++k) out.push_back(batchOf(shard, k, b));
  return out;
}

// A planner that uses ddph's for every mix but `only`, where it runs `broken`.
MixImpl brokenPlanner(std::string name, Mix only, Planner broken) {
  return {std::move(name),
          [only, broken](const Shards& shards, std::int64_t b, Mix mix) {
            return mix == only ? broken(shards, b, mix) : planEpoch(shards, b, mix);
          },
          data::summarize};
}

MixImpl brokenSummary(std::string name, Summarizer broken) {
  return {std::move(name), planEpoch, std::move(broken)};
}

std::map<std::string, MixImpl> brokenImpls() {
  std::vector<MixImpl> all{
      // DataLoader(drop_last=True) by mistake: the short last batch of each dataset is dropped.
      brokenPlanner("zip-drops-short-last-batch", Mix::kZip,
                    [](const Shards& shards, std::int64_t b, Mix mix) {
                      return assemble(
                          cutAll(shards, b,
                                 [](const std::vector<Index>& s, std::int64_t bs) {
                                   auto batches = cutPlain(s, bs);
                                   if (!batches.empty() &&
                                       static_cast<std::int64_t>(batches.back().size()) < bs) {
                                     batches.pop_back();
                                   }
                                   return batches;
                                 }),
                          mix);
                    }),
      // itertools.zip_longest instead of zip: runs to the longest, exhausted datasets sit out.
      brokenPlanner("zip-longest", Mix::kZip,
                    [](const Shards& shards, std::int64_t b, Mix) {
                      return assemble(cutAll(shards, b, cutPlain), Mix::kCycle, /*restart=*/false);
                    }),
      // A cycle that never restarts an exhausted dataset (its iterator simply ends).
      brokenPlanner("cycle-without-restart", Mix::kCycle,
                    [](const Shards& shards, std::int64_t b, Mix) {
                      return assemble(cutAll(shards, b, cutPlain), Mix::kCycle, /*restart=*/false);
                    }),
      // A cycle that ends with the shortest dataset (plain zip).
      brokenPlanner("cycle-stops-at-shortest", Mix::kCycle,
                    [](const Shards& shards, std::int64_t b, Mix) {
                      return planEpoch(shards, b, Mix::kZip);
                    }),
      // A concat whose loop yields each dataset's last batch twice.
      brokenPlanner("concat-repeats-last-batch", Mix::kConcat,
                    [](const Shards& shards, std::int64_t b, Mix) {
                      auto batches = cutAll(shards, b, cutPlain);
                      for (auto& d : batches) {
                        if (!d.empty()) d.push_back(d.back());
                      }
                      return assemble(batches, Mix::kConcat);
                    }),
      // A concat that interleaves the datasets (zip_longest): steps hold several datasets.
      brokenPlanner("concat-interleaves", Mix::kConcat,
                    [](const Shards& shards, std::int64_t b, Mix) {
                      return assemble(cutAll(shards, b, cutPlain), Mix::kCycle, /*restart=*/false);
                    }),
      // batch_size + 1 samples a batch (an off-by-one in the cut), for every mix.
      {"overfull-batches",
       [](const Shards& shards, std::int64_t b, Mix mix) { return planEpoch(shards, b + 1, mix); },
       data::summarize},
      // Batches cut from the end of the shard: the short batch comes first.
      {"short-batch-first",
       [](const Shards& shards, std::int64_t b, Mix mix) {
         return assemble(
             cutAll(shards, b,
                    [](const std::vector<Index>& s, std::int64_t bs) {
                      std::vector<std::vector<Index>> out;
                      const auto n = static_cast<std::int64_t>(s.size());
                      std::int64_t begin = 0;
                      for (std::int64_t end = n % bs == 0 ? bs : n % bs; begin < n; end += bs) {
                        out.emplace_back(s.begin() + begin, s.begin() + std::min(end, n));
                        begin = end;
                      }
                      return out;
                    }),
             mix);
       },
       data::summarize},
      // "Seen more than once" counted as repeat visits (sum of count - 1), not distinct samples.
      brokenSummary("summary-counts-repeat-visits",
                    [](const std::vector<std::int64_t>& counts) {
                      VisitSummary s = data::summarize(counts);
                      s.seenMoreThanOnce = 0;
                      for (const auto c : counts)
                        s.seenMoreThanOnce += std::max<std::int64_t>(0, c - 1);
                      return s;
                    }),
      // "Never seen" from the visits (N - visits), which padding and cycling make too small.
      brokenSummary("summary-never-seen-from-visits",
                    [](const std::vector<std::int64_t>& counts) {
                      VisitSummary s = data::summarize(counts);
                      s.neverSeen = std::max<std::int64_t>(0, s.datasetSize - s.visits);
                      return s;
                    }),
  };
  std::map<std::string, MixImpl> byName;
  for (auto& impl : all) byName.emplace(impl.name, std::move(impl));
  return byName;
}

struct Property {
  std::string name;
  std::function<void(const MixImpl&)> check;
};

std::vector<Property> properties() {
  return {{"zipStopsAtTheShortest", zipStopsAtTheShortest},
          {"zipNeverSeenIsTheTruncatedTails", zipNeverSeenIsTheTruncatedTails},
          {"cycleCoversEveryShard", cycleCoversEveryShard},
          {"concatChainsTheDatasets", concatChainsTheDatasets},
          {"batchesAreFullExceptTheLast", batchesAreFullExceptTheLast},
          {"oneDatasetIsAPlainEpoch", oneDatasetIsAPlainEpoch},
          {"summaryFollowsTheCounts", summaryFollowsTheCounts}};
}

const Property& propertyNamed(const std::string& name) {
  static const std::vector<Property> all = properties();
  for (const auto& p : all) {
    if (p.name == name) return p;
  }
  throw std::invalid_argument("no property " + name);
}

// Keeps RapidCheck quiet: a failure found here is expected and must not end up in RapidCheck's
// "to reproduce these, run with RC_PARAMS=…" message at exit.
class SilentListener final : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

// Runs `property` against `impl` with a fixed RapidCheck seed (the same cases and the same shrink
// on every run).
rc::detail::TestResult runProperty(const Property& property, const MixImpl& impl) {
  rc::detail::TestMetadata metadata;
  metadata.id = property.name + "/" + impl.name;
  metadata.description = metadata.id;
  rc::detail::TestParams params;
  params.seed = 20261129;
  params.maxSuccess = 200;
  SilentListener listener;
  return rc::detail::checkTestable([&] { property.check(impl); }, metadata, params, listener);
}

struct NegativeControl {
  std::string broken;
  std::vector<std::string> caughtBy;  ///< every property that must catch it
};

void PrintTo(const NegativeControl& c, std::ostream* os) { *os << c.broken; }

std::vector<NegativeControl> negativeControls() {
  return {
      {"zip-drops-short-last-batch",
       {"zipStopsAtTheShortest", "zipNeverSeenIsTheTruncatedTails", "oneDatasetIsAPlainEpoch"}},
      {"zip-longest", {"zipStopsAtTheShortest"}},
      {"cycle-without-restart", {"cycleCoversEveryShard"}},
      {"cycle-stops-at-shortest", {"cycleCoversEveryShard"}},
      {"concat-repeats-last-batch", {"concatChainsTheDatasets", "oneDatasetIsAPlainEpoch"}},
      {"concat-interleaves", {"concatChainsTheDatasets"}},
      {"overfull-batches", {"batchesAreFullExceptTheLast", "oneDatasetIsAPlainEpoch"}},
      {"short-batch-first", {"batchesAreFullExceptTheLast", "oneDatasetIsAPlainEpoch"}},
      {"summary-counts-repeat-visits", {"summaryFollowsTheCounts"}},
      {"summary-never-seen-from-visits", {"summaryFollowsTheCounts"}},
  };
}

class DatasetMixNegativeControls : public ::testing::TestWithParam<NegativeControl> {};

TEST_P(DatasetMixNegativeControls, caughtByItsProperties) {
  const NegativeControl& control = GetParam();
  const auto impls = brokenImpls();
  const MixImpl& broken = impls.at(control.broken);
  for (const auto& name : control.caughtBy) {
    const auto result = runProperty(propertyNamed(name), broken);
    ASSERT_TRUE(result.is<rc::detail::FailureResult>())
        << control.broken << " was not caught by " << name;
    const auto& failure = result.get<rc::detail::FailureResult>();
    std::cout << control.broken << " caught by " << name << " after " << failure.numSuccess
              << " passing cases; minimal counterexample:";
    for (const auto& [label, value] : failure.counterExample)
      std::cout << " " << label << "=" << value;
    std::cout << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(BrokenPlanners, DatasetMixNegativeControls,
                         ::testing::ValuesIn(negativeControls()), [](const auto& info) {
                           std::string name = info.param.broken;
                           for (auto& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// Every property can fail (some control is caught by it), and with the same fixed seed the real
// implementation passes it: the controls fail for their bug, not for the search.
TEST(DatasetMixNegativeControlsCoverage, everyPropertyIsCaughtFailingAndHoldsForDdph) {
  for (const auto& property : properties()) {
    bool caught = false;
    for (const auto& control : negativeControls()) {
      caught =
          caught || std::count(control.caughtBy.begin(), control.caughtBy.end(), property.name) > 0;
    }
    EXPECT_TRUE(caught) << property.name << " has no negative control";
    const auto result = runProperty(property, realImpl());
    ASSERT_TRUE(result.is<rc::detail::SuccessResult>())
        << property.name << " fails for ddph's planner";
    EXPECT_EQ(result.get<rc::detail::SuccessResult>().numSuccess, 200) << property.name;
  }
  EXPECT_EQ(brokenImpls().size(), negativeControls().size());
}

}  // namespace
}  // namespace ddph::data
