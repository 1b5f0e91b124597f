// Samplers that draw with replacement (a WeightedRandomSampler, a hand-written weighted one):
// they never promised to cover the dataset, so coverage, disjointness and reshuffle do not apply;
// they are judged by the `with-replacement` contract, ranks-agree: each rank draws its own
// indices, and ranks that drew the same ones train on the same samples.
#include <fmt/format.h>

#include <map>
#include <set>

#include "data_checks.h"

namespace ddph::audit {

using sampler::checkRanksAgree;
using sampler::Index;
using sampler::Partition;
namespace property = sampler::property;

namespace {

// Draws with replacement by its own word (replacement=True).
bool declaresReplacement(const SamplerRecord* s) {
  return s && s->replacement.value_or(false);
}

// A sampler that does not declare replacement but whose own order repeats indices within one rank's
// pass (a hand-written weighted sampler drawing with torch.multinomial(replacement=True)): it never
// promised to cover the dataset. A sampler without replacement repeats an index within one rank
// only when it pads N < W samples, one repeat at most per missing sample.
bool repeatsWithinARank(const SamplerRecord* s,
                        const std::vector<std::optional<std::vector<Index>>>& orders,
                        std::int64_t datasetLen) {
  if (s && s->order != OrderKind::kRecorded) return false;
  const auto world = static_cast<std::int64_t>(orders.size());
  for (const auto& order : orders) {
    if (!order) continue;
    std::set<Index> distinct(order->begin(), order->end());
    const auto repeats = static_cast<std::int64_t>(order->size() - distinct.size());
    if (repeats >= 2 && repeats > world - datasetLen) return true;
  }
  return false;
}

// The most ranks that drew one and the same order.
std::vector<std::int64_t> ranksWithTheSameDraw(const std::vector<RankPass>& ranks) {
  std::map<std::vector<Index>, std::vector<std::int64_t>> byDraw;
  for (const auto& rp : ranks) byDraw[*rp.order].push_back(rp.trace->rank);
  std::vector<std::int64_t> same;
  for (const auto& [draw, rs] : byDraw) {
    if (rs.size() > same.size()) same = rs;
  }
  return same;
}

}  // namespace

bool drawsWithReplacement(const std::vector<RankPass>& ranks, std::int64_t loader, std::int64_t n) {
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  std::vector<std::optional<std::vector<Index>>> orders;
  for (const auto& rp : ranks) orders.push_back(rp.order);
  return declaresReplacement(s) || repeatsWithinARank(s, orders, n);
}

// The `with-replacement` contract: each rank draws its own indices; ranks that drew the same
// ones (the same generator seed on every rank) train on the same samples.
void checkDrawsDiffer(DataFindings& findings, std::int64_t loader, std::int64_t k, std::int64_t n,
                      const std::vector<RankPass>& ranks) {
  findings.notApplicable(loader, fmt::format("{} draws with replacement: coverage, disjointness "
                                             "and reshuffle do not apply; judged by ranks-agree",
                                             samplerName(ranks[0])));
  const Partition part = partitionOf(ranks, n, k, false);
  findings.judged(property::kValidRange);
  findings.judged(property::kRanksAgree);
  auto v = checkRanksAgree(part);
  if (!v) return;
  v->ranks = ranksWithTheSameDraw(ranks);
  v->detail = fmt::format("{}, {}: {} drew the same {} indices in this epoch, so they train on "
                          "the same samples",
                          describeLoader(*ranks[0].trace, loader), samplerName(ranks[0]),
                          rankList(v->ranks), ranks[0].order->size());
  v->likelyCause = fmt::format(
      "{} draws with replacement from a generator seeded alike on every rank (or the global "
      "seed, set alike)",
      samplerClass(ranks[0]));
  v->help = "give each rank its own draw: a generator seeded with seed + rank, or one draw of "
            "world_size x num_samples indices shared by all and indices[rank::world_size]";
  findings.record(loader, *v);
}

}  // namespace ddph::audit
