// Why the ranks' orders in a pass do not split one dataset (data_checks.h, partitionCause): from
// what the samplers say about themselves (their class, seeds, num_replicas, rank), the node
// topology, and, when their own parameters agree, the candidates the trace cannot tell apart
// with the command that checks the sampler alone.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "data_checks.h"
#include "ddph/sampler/line_protocol_sampler.h"

namespace ddph::audit {

namespace property = sampler::property;

namespace {

// A sampler that knows no rank but draws fewer samples than the dataset holds
// (RandomSampler(num_samples=N / W)), every rank the same ones: their generators were seeded
// alike. Nothing otherwise.
std::optional<Explanation> sameDrawOnEveryRank(const std::vector<RankPass>& ranks) {
  const RankPass& first = ranks[0];
  if (!first.order || first.order->empty()) return std::nullopt;
  const auto n = static_cast<std::int64_t>(first.order->size());
  if (n >= first.pass->datasetLen) return std::nullopt;
  for (const auto& rp : ranks) {
    if (!rp.order || *rp.order != *first.order) return std::nullopt;
  }
  const auto& drew = first.pass->globalDraws;
  const bool global = std::find(drew.begin(), drew.end(), "torch") != drew.end();
  std::string seeded;
  const SeedCall* s = global ? lastSeedBefore(*first.trace, "torch", first.pass->startLine) : nullptr;
  if (s && s->value) {
    seeded = fmt::format(" (torch.manual_seed({}){})", *s->value, s->at.empty() ? "" : " at " + s->at);
  }
  return Explanation{
      fmt::format("every rank's {} drew the same {} of the {} samples in the same order: it "
                  "draws {} samples (num_samples) but knows no rank, and its generator{} was "
                  "seeded alike on every rank{}, so the ranks train the same samples and the rest "
                  "is never trained",
                  samplerClass(first), n, first.pass->datasetLen, n,
                  global ? ", torch's global one," : "", seeded),
      "use DistributedSampler (with set_epoch), which gives each rank its own share of one order"};
}

// The loader has a sampler that knows nothing of ranks (RandomSampler, SequentialSampler).
Explanation wholeDatasetCause(const std::vector<RankPass>& ranks) {
  if (auto same = sameDrawOnEveryRank(ranks)) return std::move(*same);
  const auto w = static_cast<std::int64_t>(ranks.size());
  const std::string lightning = frameworkHint(
      *ranks[0].trace,
      "Trainer(use_distributed_sampler=False) leaves the loader's sampler as it is, so ");
  if (!lightning.empty()) {
    return {fmt::format(
                "the loader has no DistributedSampler: {}its {} draws from the whole dataset on "
                "every rank, the ranks train on the same samples and an epoch is {} epochs' work",
                lightning, samplerClass(ranks[0]), w),
            "drop use_distributed_sampler=False (Lightning then puts a DistributedSampler under "
            "the loader and sets its epoch), or give the loader a DistributedSampler yourself"};
  }
  return {fmt::format(
              "the loader has no DistributedSampler: its {} (what DataLoader(shuffle=True) or "
              "DataLoader() makes) draws from the whole dataset on every rank, so the ranks train "
              "on the same samples and an epoch is {} epochs' work",
              samplerClass(ranks[0]), w),
          "pass sampler=DistributedSampler(dataset) with shuffle=False on the loader, and call "
          "sampler.set_epoch(epoch) every epoch"};
}

// The samplers' rank or num_replicas are their node's (LOCAL_RANK, LOCAL_WORLD_SIZE).
std::optional<Explanation> nodeCause(const std::vector<RankPass>& ranks,
                                     const std::vector<std::int64_t>& named) {
  const SamplerRecord* s = samplerOf(*ranks[0].trace, ranks[0].pass->loader);
  if (!s) return std::nullopt;
  std::vector<SamplerOnRank> samplers;
  for (const auto& rp : ranks) samplers.push_back({rp.trace, rp.pass->rank, rp.pass->numReplicas});
  return nodeTopologyCause(samplers, s->id, named);
}

// Every rank's sampler yields the same order, whole: it ignores its rank (a custom sampler that
// shuffles with a shared seed and never takes its rank's share). Nothing when any order differs
// or is unknown.
std::optional<Explanation> rankIgnored(const std::vector<RankPass>& ranks) {
  if (ranks.size() < 2 || !ranks[0].order || ranks[0].order->empty()) return std::nullopt;
  for (const auto& rp : ranks) {
    if (!rp.order || *rp.order != *ranks[0].order) return std::nullopt;
  }
  const std::string lightning = frameworkHint(
      *ranks[0].trace,
      " (Trainer(use_distributed_sampler=False) leaves the loader's sampler as it is)");
  return Explanation{
      fmt::format("every rank's {} yields the same {} indices in the same order: the sampler "
                  "ignores its rank{}, so every rank trains the whole dataset and an epoch is {} "
                  "epochs' work",
                  samplerClass(ranks[0]), ranks[0].order->size(), lightning, ranks.size()),
      "take the rank's share in the sampler (indices[rank::num_replicas] of the epoch's order, as "
      "DistributedSampler does), or use DistributedSampler"};
}

// Several ranks gave their sampler the same rank: which, and, across nodes, the formula it follows
// (the node's rank plus the local rank, without the local world size's factor).
Explanation sharedSamplerRanks(const std::vector<RankPass>& ranks) {
  std::map<std::int64_t, std::vector<const RankPass*>> bySamplerRank;
  bool nodePlusLocal = true, severalNodes = false;
  for (const auto& rp : ranks) {
    if (!rp.pass->rank) continue;
    bySamplerRank[*rp.pass->rank].push_back(&rp);
    const RankTrace& t = *rp.trace;
    nodePlusLocal = nodePlusLocal && t.node && t.localRank &&
                    *rp.pass->rank == *t.node + *t.localRank;
    severalNodes = severalNodes || (t.node && *t.node > 0);
  }
  nodePlusLocal = nodePlusLocal && severalNodes;
  std::vector<std::string> shared;
  for (const auto& [r, rps] : bySamplerRank) {
    if (rps.size() < 2) continue;
    std::vector<std::string> who;
    for (const RankPass* rp : rps) {
      const RankTrace& t = *rp->trace;
      who.push_back(t.node && t.localRank
                        ? fmt::format("rank {} (local rank {} on node {})", t.rank, *t.localRank, *t.node)
                        : fmt::format("rank {}", t.rank));
    }
    shared.push_back(fmt::format("{} all pass rank={}", fmt::join(who, ", "), r));
  }
  const std::string formula =
      nodePlusLocal ? ": the sampler's rank is the node's rank plus the local rank (GROUP_RANK + "
                      "LOCAL_RANK), without the factor LOCAL_WORLD_SIZE"
                    : "";
  return {fmt::format("several ranks give their sampler the same rank ({}){}",
                      fmt::join(shared, "; "), formula),
          nodePlusLocal ? "pass rank=dist.get_rank() (GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK)"
                        : "pass rank=dist.get_rank()"};
}

// NOTE [An order drawn from the global generators] (docs/audit.md): the sampler's order comes
// from a global generator that the ranks never seeded (Python's and numpy's are seeded from the
// operating system in each process; torch's has one fixed default) or seeded with other values:
// each rank draws its own order. Nothing otherwise.
std::optional<Explanation> globalGeneratorPerRank(const std::vector<RankPass>& ranks) {
  for (const auto& g : ranks[0].pass->globalDraws) {
    bool unseeded = false;
    std::set<std::int64_t> values;
    std::string at;
    for (const auto& rp : ranks) {
      const SeedCall* s = lastSeedBefore(*rp.trace, g, rp.pass->startLine);
      if (!s) {
        unseeded = true;
      } else if (s->value) {
        values.insert(*s->value);
        if (at.empty()) at = s->at;
      }
    }
    const auto [what, call] = globalGenerator(g);
    if (unseeded && g != "torch") {
      return Explanation{
          fmt::format("{} draws its order from {}, which the program never seeds ({}): each "
                      "process seeds it from the operating system, so every rank draws its own "
                      "order and the ranks' shares overlap and leave samples out",
                      samplerClass(ranks[0]), what, call),
          fmt::format("give the sampler a generator of its own seeded with seed + epoch, the same "
                      "on every rank (np.random.default_rng(seed + epoch), "
                      "torch.Generator().manual_seed(seed + epoch))")};
    }
    if (values.size() > 1) {
      return Explanation{
          fmt::format("{} draws its order from {}, seeded with a value per rank ({}({}){}): every "
                      "rank draws its own order and the ranks' shares overlap and leave samples "
                      "out",
                      samplerClass(ranks[0]), what, call, fmt::join(values, ", "),
                      at.empty() ? "" : " at " + at),
          "seed the sampler's generator alike on every rank (seed + epoch), and draw per-rank "
          "randomness from a generator of its own"};
    }
    if (!unseeded && values.size() == 1) {
      // Seeded alike, yet the orders differ: the ranks' generators stood at other states when
      // the sampler drew, so some ranks drew from them in between.
      return Explanation{
          fmt::format("{} draws its order from {}, seeded alike on every rank ({}({}){}), yet "
                      "the ranks drew other orders: between the seed and the sampler's draw some "
                      "ranks drew from that generator and the others did not (a preview, an "
                      "augmentation or a check under `if rank == 0:`), so the ranks' shares "
                      "overlap and leave samples out",
                      samplerClass(ranks[0]), what, call, *values.begin(),
                      at.empty() ? "" : " at " + at),
          "give the sampler a generator of its own seeded with seed + epoch "
          "(np.random.default_rng(seed + epoch), torch.Generator().manual_seed(seed + epoch)), "
          "and draw rank 0's extras from another"};
    }
  }
  return std::nullopt;
}

// "0 and 2", "0, 2 and 4".
std::string andList(const std::vector<std::int64_t>& values) {
  if (values.size() < 2) return fmt::format("{}", fmt::join(values, ""));
  const std::vector<std::int64_t> head(values.begin(), values.end() - 1);
  return fmt::format("{} and {}", fmt::join(head, ", "), values.back());
}

// NOTE [The same share on every node] (docs/multi-node.md): the ranks span nodes, and the ranks
// of one local rank on different nodes drew the same order while other local ranks drew others:
// the split knows the local rank but not the node (the node's rank read as 0 everywhere, e.g.
// NODE_RANK that torchrun does not set, or LOCAL_RANK taken for the rank). Nothing otherwise.
std::optional<Explanation> sameShareOnEveryNode(const std::vector<RankPass>& ranks) {
  std::map<std::int64_t, std::vector<const RankPass*>> byLocal;
  std::set<std::int64_t> nodes;
  for (const auto& rp : ranks) {
    const RankTrace& t = *rp.trace;
    if (!t.localRank || !t.node || !rp.order || rp.order->empty()) return std::nullopt;
    byLocal[*t.localRank].push_back(&rp);
    nodes.insert(*t.node);
  }
  if (nodes.size() < 2 || byLocal.size() < 2) return std::nullopt;
  std::vector<std::string> pairs;
  for (const auto& [local, group] : byLocal) {
    if (group.size() < 2) return std::nullopt;
    std::vector<std::int64_t> rs, ns;
    for (const RankPass* rp : group) {
      if (*rp->order != *group[0]->order) return std::nullopt;
      rs.push_back(rp->trace->rank);
      ns.push_back(*rp->trace->node);
    }
    pairs.push_back(fmt::format("ranks {} (local rank {} on nodes {})", andList(rs), local,
                                andList(ns)));
  }
  if (*byLocal.begin()->second[0]->order == *std::next(byLocal.begin())->second[0]->order) {
    return std::nullopt;  // every rank alike: the rank is ignored altogether (rankIgnored)
  }
  return Explanation{
      fmt::format("{} drew the same samples in the same order: {} splits the data by the local "
                  "rank but not by the node, so every node trains the same part and the rest is "
                  "never trained (the node's rank is the same on every node: NODE_RANK, which "
                  "torchrun does not set, read with a default of 0, or LOCAL_RANK taken for the "
                  "rank)",
                  fmt::join(pairs, "; "), samplerClass(ranks[0])),
      "split by the global rank (dist.get_rank(), RANK), or take the node's rank from GROUP_RANK, "
      "which torchrun sets"};
}

// The launcher found that the program depends on each process's own string hashing (launch.json
// "hash_dependence"): a split computed from hash() differs between ranks, each with its own
// PYTHONHASHSEED. Nothing otherwise.
std::optional<Explanation> splitByProcessHash(const Trace& trace) {
  if (!trace.launch || trace.launch->hashDependence.empty()) return std::nullopt;
  return Explanation{
      fmt::format("the program depends on each process's own string hashing ({}): under torchrun "
                  "every rank has its own PYTHONHASHSEED, so a split computed from hash() (or from "
                  "a set's order) differs between ranks, sending some samples to two ranks and "
                  "others to none",
                  trace.launch->hashDependence),
      "split by a hash that is the same in every process (zlib.crc32 of the key, hashlib), or "
      "sort what comes from a set"};
}

// The sampler's own parameters agree: say what is known and list what remains, never the
// catalogue's "seed every rank identically" (their seeds may well agree already).
Explanation splitCandidates(const std::vector<RankPass>& ranks, const std::string& property,
                            const std::set<std::int64_t>& seeds, const std::string& interpreter) {
  const SamplerRecord* s = samplerOf(*ranks[0].trace, ranks[0].pass->loader);
  const LoaderRecord& l = ranks[0].trace->loaders.at(ranks[0].pass->loader);
  if (s && s->datasetLen > 0 && l.datasetLen > 0 && s->datasetLen != l.datasetLen) {
    return {fmt::format("{} was built over {} samples but its loader's dataset has {}: a sampler "
                        "made for another dataset (the training set's sampler on another "
                        "loader, or a dataset changed after the sampler was made)",
                        samplerClass(ranks[0]), s->datasetLen, l.datasetLen),
            "build the sampler over the loader's own dataset"};
  }
  std::vector<std::string> known;
  if (!s || s->order != OrderKind::kTorchDistributed) {
    known.push_back(fmt::format("{} is not torch's DistributedSampler", samplerClass(ranks[0])));
  }
  if (seeds.size() == 1)
    known.push_back(fmt::format("its ranks share one seed ({})", *seeds.begin()));
  const std::string candidates =
      property == property::kDisjointness
          ? "a shard length or offset by rank that reaches into the next rank's part, padding "
            "taken from other ranks' parts, rank ignored (every rank iterating the whole "
            "order), or a random state that differs per rank (a generator not seeded from the "
            "sampler's seed, the global one after a per-rank seed)"
      : property == property::kCoverage
          ? "a split that rounds N / W down and drops the rest, an offset by rank that skips "
            "indices, or a random state that differs per rank (a generator not seeded from the "
            "sampler's seed, the global one after a per-rank seed)"
          : "padding or wrap-around computed with another length than the dataset's";
  return {fmt::format("{}; the trace cannot single out where its split goes wrong, candidates: {}",
                      known.empty() ? "the samplers' own parameters agree"
                                    : fmt::format("{}", fmt::join(known, ", ")),
                      candidates),
          fmt::format("check the sampler on its own: ddp-sim check-sampler -- {} -m "
                      "ddph_audit.serve_sampler {} (built as DistributedSampler is, with "
                      "num_replicas, rank and seed), which shrinks a failure to a minimal request",
                      sampler::shellQuote(interpreter), serveSpec(ranks[0]))};
}

// Every rank's sampler of the pass was described before its process group existed (the
// `sampler` line before the `process_group` line).
bool builtBeforeTheProcessGroup(const std::vector<RankPass>& ranks) {
  for (const auto& rp : ranks) {
    const SamplerRecord* s = samplerOf(*rp.trace, rp.pass->loader);
    if (!s || s->line == 0 || rp.trace->processGroupLine == 0 || s->line > rp.trace->processGroupLine) {
      return false;
    }
  }
  return true;
}

}  // namespace

Explanation partitionCause(const std::vector<RankPass>& ranks, const std::string& property,
                           const std::vector<std::int64_t>& named, const Trace& trace) {
  std::set<std::int64_t> seeds, replicas, samplerRanks;
  for (const auto& rp : ranks) {
    if (rp.pass->seed) seeds.insert(*rp.pass->seed);
    if (rp.pass->numReplicas) replicas.insert(*rp.pass->numReplicas);
    if (rp.pass->rank) samplerRanks.insert(*rp.pass->rank);
  }
  const auto w = static_cast<std::int64_t>(ranks.size());
  if (isWholeDatasetSampler(samplerOf(*ranks[0].trace, ranks[0].pass->loader))) {
    return wholeDatasetCause(ranks);
  }
  if (seeds.size() > 1) {
    // Lightning's own DistributedSampler takes its seed from seed_everything (PL_GLOBAL_SEED).
    const SamplerRecord* s = samplerOf(*ranks[0].trace, ranks[0].pass->loader);
    if (s && s->via == "lightning") {
      return {fmt::format("the ranks' DistributedSamplers, which Lightning builds with the seed of "
                          "seed_everything (PL_GLOBAL_SEED), have different seeds ({}): "
                          "seed_everything was called with a seed per rank, so each rank shuffles "
                          "its own order and their shards overlap and leave samples out",
                          fmt::join(seeds, ", ")),
              "call seed_everything with the same seed on every rank (draw per-rank randomness, "
              "such as augmentation noise, from a generator of its own seeded with the rank)"};
    }
    return {fmt::format("the ranks' samplers have different seeds ({}), so each shuffles its own "
                        "order and their shards overlap and leave samples out",
                        fmt::join(seeds, ", ")),
            "give every rank the same seed"};
  }
  if (auto onNodes = nodeCause(ranks, named)) return std::move(*onNodes);
  if (replicas.size() == 1 && *replicas.begin() == 1 && builtBeforeTheProcessGroup(ranks)) {
    const SamplerRecord* s = samplerOf(*ranks[0].trace, ranks[0].pass->loader);
    return {fmt::format("sampler {} ({}) was built before init_process_group (its line comes "
                        "first in every rank's trace): it asked for the world size and rank of a "
                        "process group that did not exist yet and fell back to num_replicas 1, "
                        "rank 0, so every rank draws the whole dataset",
                        s->id, s->className),
            "build the samplers after dist.init_process_group (or pass them num_replicas and "
            "rank)"};
  }
  if (!replicas.empty() && (replicas.size() > 1 || *replicas.begin() != w)) {
    return {fmt::format("the samplers' num_replicas ({}) is not the world size {}",
                        fmt::join(replicas, ", "), w),
            "pass num_replicas=world_size (or leave it to the default)"};
  }
  if (!samplerRanks.empty() && static_cast<std::int64_t>(samplerRanks.size()) != w) {
    return sharedSamplerRanks(ranks);
  }
  if (auto ignored = rankIgnored(ranks)) return std::move(*ignored);
  if (auto perNode = sameShareOnEveryNode(ranks)) return std::move(*perNode);
  if (auto hashed = splitByProcessHash(trace)) return std::move(*hashed);
  if (auto perRank = globalGeneratorPerRank(ranks)) return std::move(*perRank);
  return splitCandidates(ranks, property, seeds, interpreterOf(trace));
}

}  // namespace ddph::audit
