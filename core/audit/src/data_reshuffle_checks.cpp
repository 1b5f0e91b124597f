// reshuffle: a shuffling sampler draws a new order every epoch. Judged on two consecutive
// training passes whose partitions are healthy; when the order repeats, the set_epoch calls the
// trace holds (none, on another sampler, too late, the same value) and the passes' epochs say
// why. A cached loader, whose epochs are never drawn, shows only over the loader's whole run
// (across_epochs_checks.cpp, replayedFromACache).
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "data_checks.h"

namespace ddph::audit {

using sampler::Expectations;
using sampler::Partition;
namespace property = sampler::property;

namespace {

// A set_epoch call on `s` made while pass `p` ran (after its iter()), to a value that is not the
// epoch its order was drawn with: it came too late for this pass.
const SetEpochCall* setEpochInside(const SamplerRecord& s, const PassRecord& p) {
  for (const auto& c : s.setEpochCalls) {
    if (c.line > p.startLine && c.line < p.endLine && c.epoch != p.samplerEpoch.value_or(c.epoch))
      return &c;
  }
  return nullptr;
}

// A sampler whose set_epoch was called and that no loader draws from, or null.
const SamplerRecord* unusedSamplerWithEpochs(const RankTrace& t) {
  for (const auto& [id, s] : t.samplers) {
    if (!s.setEpochCalls.empty() && !drawnByALoader(t, id)) return &s;
  }
  return nullptr;
}

// A shuffling sampler over `n` samples that no loader draws from and whose set_epoch is never
// called: one the loader's own sampler holds and draws from (a batch sampler of the program's
// keeping its DistributedSampler as `.base`), or null.
const SamplerRecord* heldShufflingSampler(const RankTrace& t, std::int64_t n) {
  for (const auto& [id, s] : t.samplers) {
    if (s.setEpochCalls.empty() && s.shuffle.value_or(false) && s.datasetLen == n &&
        !drawnByALoader(t, id)) {
      return &s;
    }
  }
  return nullptr;
}

// NOTE [A loader cycled inside an epoch] (docs/audit.md, "Across epochs"): the shorter loader
// of two trained together is restarted when it runs out (Lightning's CombinedLoader
// max_size_cycle, a hand-written cycle), inside one pass of the longer one: its restarts are
// not epochs, and the same order again within one epoch is how its sampler was asked (its epoch
// is set once an epoch). Its reshuffle is judged across the longer loader's epochs.
bool restartedInsideOnePass(const RankTrace& t, const PassRecord& a, const PassRecord& b) {
  return std::any_of(t.passes.begin(), t.passes.end(), [&](const PassRecord& q) {
    return q.loader != a.loader && a.endLine > q.startLine && q.startLine < b.startLine &&
           b.startLine < q.endLine && trainsOnBatches(q);
  });
}

// Whether some rank's order is not ascending: the sampler shuffles (or buckets), it does not walk
// its share in order.
bool shuffledOrder(const std::vector<RankPass>& ranks) {
  return std::any_of(ranks.begin(), ranks.end(), [](const RankPass& rp) {
    return rp.order && !std::is_sorted(rp.order->begin(), rp.order->end());
  });
}

// NOTE [A sampler that takes an epoch it is never given] (docs/audit.md): a sampler class of the
// program's own that defines set_epoch, never called, and whose order is shuffled: its order was
// meant to change with the epoch.
bool epochNeverGiven(const SamplerRecord* s, const std::vector<RankPass>& before) {
  return s && s->takesEpoch && s->setEpochCalls.empty() && shuffledOrder(before);
}

// NOTE [A list drawn once in train_dataloader] (docs/audit.md): Lightning calls the module's
// train_dataloader() once (reload_dataloaders_every_n_epochs=0), so an order it drew there as a
// list of indices (the sampler) is the order of every epoch.
bool listDrawnInTrainDataloader(const RankTrace& t, const SamplerRecord* s,
                                const std::vector<RankPass>& before) {
  if (!s || (s->className != "builtins.list" && s->className != "builtins.tuple")) return false;
  const LoaderRecord& l = t.loaders.at(before[0].pass->loader);
  return drivenByLightning(t) && l.builtAt.find(" in train_dataloader") != std::string::npos &&
         shuffledOrder(before);
}

// Whether the two passes must differ in order: training passes of a sampler that shuffles (or,
// saying nothing of shuffling, is given epochs), both orders known, not a cycle's restart.
bool reshuffleApplies(std::int64_t loader, const std::vector<RankPass>& before,
                      const std::vector<RankPass>& after) {
  // The order of an evaluation does not matter: the same order every epoch harms nothing.
  if (isEvaluation(*before[0].pass) || isEvaluation(*after[0].pass)) return false;
  if (!allKnown(before, false) || !allKnown(after, false)) return false;
  if (restartedInsideOnePass(*before[0].trace, *before[0].pass, *after[0].pass)) return false;
  const SamplerRecord* s = samplerOf(*before[0].trace, loader);
  const auto shuffle = before[0].pass->shuffle ? before[0].pass->shuffle
                                               : (s ? s->shuffle : std::nullopt);
  const bool epochsSet = s && !s->setEpochCalls.empty();
  // NOTE [An order drawn from the global generators]: its first draw advanced them, so its order
  // is random: the same order again is a repeat.
  const bool drawsRandom = !before[0].pass->globalDraws.empty();
  // A shuffling sampler over the same data whose set_epoch is called while no loader draws from
  // it: the program meant this loader's order to change (its batches were listed from it once).
  const SamplerRecord* meant = unusedSamplerWithEpochs(*before[0].trace);
  const bool meantToShuffle = meant && meant->shuffle.value_or(false) &&
                              meant->datasetLen == before[0].pass->datasetLen;
  const bool holdsAShuffler =
      !shuffle && heldShufflingSampler(*before[0].trace, before[0].pass->datasetLen) != nullptr;
  return shuffle.value_or(false) ||
         (!shuffle && (epochsSet || drawsRandom || meantToShuffle || holdsAShuffler ||
                       epochNeverGiven(s, before) ||
                       listDrawnInTrainDataloader(*before[0].trace, s, before)));
}

// Why an order repeated: what the finding adds to its detail, its likely cause and the remedy.
struct RepeatedOrder {
  std::string why, cause, help;
};

// NOTE [An order drawn from the global generators] (docs/audit.md): the order comes from a global
// generator that the program seeded with the same value before both passes: it is drawn again.
std::optional<RepeatedOrder> reseededEveryEpoch(const std::vector<RankPass>& before,
                                                const std::vector<RankPass>& after) {
  const RankTrace& t = *before[0].trace;
  for (const auto& g : after[0].pass->globalDraws) {
    const SeedCall* first = lastSeedBefore(t, g, before[0].pass->startLine);
    const SeedCall* second = lastSeedBefore(t, g, after[0].pass->startLine);
    if (!first || !second || first == second || !first->value || first->value != second->value)
      continue;
    const auto [what, call] = globalGenerator(g);
    const std::string at = second->at.empty() ? "" : fmt::format(" ({})", second->at);
    return RepeatedOrder{
        fmt::format("{} draws its order from {}, seeded with {} before each epoch",
                    samplerName(before[0]), what, *second->value),
        fmt::format("{}({}){} runs before every epoch and resets {} that {} draws its order from, "
                    "so every epoch draws epoch 0's order again",
                    call, *second->value, at, what, samplerClass(before[0])),
        fmt::format("seed once before training, or give the sampler a generator of its own seeded "
                    "with seed + epoch (torch.Generator().manual_seed(seed + epoch) in __iter__, "
                    "the epoch set by set_epoch)")};
  }
  return std::nullopt;
}

// set_epoch never called on the loader's sampler (perhaps on another one), or nothing.
std::optional<RepeatedOrder> setEpochNeverCalled(const SamplerRecord* s,
                                                 const std::vector<RankPass>& before) {
  if (!s || !s->setEpochCalls.empty()) return std::nullopt;
  if (const SamplerRecord* other = unusedSamplerWithEpochs(*before[0].trace);
      other && s && (s->className == "builtins.list" || s->className == "builtins.tuple")) {
    return RepeatedOrder{
        fmt::format("the loader draws from a list of batches, and set_epoch is called on sampler "
                    "{} ({}), which no loader draws from",
                    other->id, other->className),
        fmt::format("the loader's batches were listed once from sampler {} "
                    "(list(BatchSampler(sampler, …)) before the epoch loop), so set_epoch on it "
                    "reaches nothing and every epoch replays that list",
                    other->id),
        "pass the BatchSampler itself as batch_sampler (not a list of it), or list the batches "
        "inside the epoch loop, after set_epoch"};
  }
  if (const SamplerRecord* other = unusedSamplerWithEpochs(*before[0].trace)) {
    return RepeatedOrder{
        fmt::format("set_epoch is never called on {}, but on sampler {} ({}), which no loader "
                    "draws from",
                    samplerName(before[0]), other->id, other->className),
        "set_epoch(epoch) is called on another sampler than the one this DataLoader "
        "draws from (a second sampler made for the same data, or a name rebound "
        "after the loader was built)",
        "call set_epoch on the loader's own sampler (loader.sampler.set_epoch(epoch))"};
  }
  if (const SamplerRecord* held = heldShufflingSampler(*before[0].trace, before[0].pass->datasetLen)) {
    const bool lightning = drivenByLightning(*before[0].trace);
    return RepeatedOrder{
        fmt::format("set_epoch is never called on {}, nor on sampler {} ({}, shuffle=True, over "
                    "the same {} samples), which no loader draws from and which it holds",
                    samplerName(before[0]), held->id, held->className, held->datasetLen),
        fmt::format("{} draws its order from sampler {} ({}), kept under an attribute of its own, "
                    "and nothing gives that sampler its epoch: {}",
                    samplerClass(before[0]), held->id, held->className,
                    lightning ? "Lightning calls set_epoch on loader.sampler and on "
                                "loader.batch_sampler.sampler only, never on a sampler held "
                                "under another name (.base), so every epoch repeats epoch 0's order"
                              : "the loop never calls its set_epoch (nor the holder's), so every "
                                "epoch repeats epoch 0's order"),
        lightning ? "keep the inner sampler as the batch sampler's .sampler (or subclass "
                    "BatchSampler), or forward set_epoch to it yourself in on_train_epoch_start"
                  : "call set_epoch(epoch) on the sampler it holds (or on the holder, forwarding "
                    "it) at the start of every epoch"};
  }
  const LoaderRecord& l = before[0].trace->loaders.at(before[0].pass->loader);
  if (listDrawnInTrainDataloader(*before[0].trace, s, before)) {
    return RepeatedOrder{
        fmt::format("the loader's sampler is a list of indices in a shuffled order, made at {}",
                    l.builtAt),
        "Lightning calls train_dataloader() once (reload_dataloaders_every_n_epochs=0), so the "
        "order drawn there (with trainer.current_epoch, a generator, a permutation) is made for "
        "epoch 0 only and every epoch repeats it",
        "give the loader a sampler that draws each epoch's order in its __iter__ from seed + the "
        "epoch set_epoch gives it (Lightning calls set_epoch on the loader's sampler), or set "
        "Trainer(reload_dataloaders_every_n_epochs=1)"};
  }
  if (s->takesEpoch && !l.torchBatching) {
    const bool lightning = drivenByLightning(*before[0].trace);
    return RepeatedOrder{
        fmt::format("set_epoch is never called on {}, the loader's batch_sampler, whose class "
                    "defines set_epoch",
                    samplerName(before[0])),
        lightning
            ? fmt::format("{}.set_epoch is never called: Lightning calls set_epoch on "
                          "loader.sampler and on loader.batch_sampler.sampler only, never on the "
                          "batch sampler itself, so every epoch repeats epoch 0's order",
                          samplerClass(before[0]))
            : fmt::format("{}.set_epoch is never called: with DataLoader(batch_sampler=…), "
                          "loader.sampler is a SequentialSampler that has no set_epoch, so a loop "
                          "that calls set_epoch on loader.sampler (or only where "
                          "hasattr(loader.sampler, 'set_epoch')) never reaches the batch sampler, "
                          "and every epoch repeats epoch 0's order",
                          samplerClass(before[0])),
        lightning ? "call self.trainer.train_dataloader.batch_sampler.set_epoch(self.current_epoch) "
                    "in on_train_epoch_start, or keep the epoch-aware sampler as the batch "
                    "sampler's .sampler"
                  : "call loader.batch_sampler.set_epoch(epoch) at the start of every epoch"};
  }
  return RepeatedOrder{
      fmt::format("set_epoch is never called on {}{}", samplerName(before[0]),
                  s->takesEpoch ? ", whose class defines set_epoch" : ""),
      "set_epoch(epoch) is not called before each epoch, so every epoch repeats "
      "epoch 0's order",
      "call sampler.set_epoch(epoch) at the start of every epoch"};
}

// set_epoch called after the later pass's iterator drew its order, or nothing.
std::optional<RepeatedOrder> setEpochTooLate(const SamplerRecord* s, std::int64_t loader,
                                             std::int64_t k, const std::vector<RankPass>& after) {
  const auto e1 = after[0].pass->samplerEpoch;
  const SetEpochCall* late = s ? setEpochInside(*s, *after[0].pass) : nullptr;
  if (!late || !e1) return std::nullopt;
  const LoaderRecord& l = after[0].trace->loaders.at(loader);
  return RepeatedOrder{
      fmt::format("set_epoch({}) was called after iter(loader) had begun epoch {}, whose "
                  "order was drawn with epoch {}",
                  late->epoch, k + 1, *e1),
      fmt::format(
          "set_epoch(epoch) runs after the epoch's iterator was made{}, so each epoch is drawn "
          "with the previous epoch's value",
          l.numWorkers > 0
              ? fmt::format(" and its {} worker processes were handed their first indices "
                            "inside iter() (DataLoader prefetches)",
                            l.numWorkers)
              : " and its first batch drawn"),
      "call sampler.set_epoch(epoch) before iter(loader) (before the for loop over the loader)"};
}

// What the passes' sampler epochs say: the same value twice, an epoch the sampler ignores, or
// nothing the trace can tell apart.
RepeatedOrder fromSamplerEpochs(const SamplerRecord* s, const std::vector<RankPass>& before,
                                const std::vector<RankPass>& after) {
  const auto e0 = before[0].pass->samplerEpoch, e1 = after[0].pass->samplerEpoch;
  if (e0 && e1 && *e0 == *e1) {
    return RepeatedOrder{fmt::format("set_epoch({}) was in force for both epochs", *e0),
                         "set_epoch is called with the same value every epoch (e.g. a constant or "
                         "the wrong variable)",
                         "pass the epoch number"};
  }
  if (e0 && e1) {
    if (const SamplerRecord* held = heldShufflingSampler(*before[0].trace, before[0].pass->datasetLen)) {
      return RepeatedOrder{
          fmt::format("the sampler's epoch went from {} to {} but its order did not change, and "
                      "sampler {} ({}, shuffle=True, over the same {} samples), which no loader "
                      "draws from, never had set_epoch called",
                      *e0, *e1, held->id, held->className, held->datasetLen),
          fmt::format("{}.set_epoch does not forward the epoch to sampler {} ({}), the sampler it "
                      "holds and draws its order from, so that sampler repeats epoch 0's order",
                      samplerClass(before[0]), held->id, held->className),
          "forward set_epoch to the held sampler (self.base.set_epoch(epoch)) in the holder's "
          "set_epoch"};
    }
    return RepeatedOrder{
        fmt::format("the sampler's epoch went from {} to {} but its order did not change", *e0,
                    *e1),
        "the sampler ignores its epoch", "seed its generator with seed + epoch"};
  }
  return RepeatedOrder{
      s ? fmt::format("set_epoch was called {} times on {}, and the trace has no epoch of "
                      "the sampler at each pass",
                      s->setEpochCalls.size(), samplerName(before[0]))
        : "",
      "the epoch does not reach the sampler's order, and the trace cannot tell why: the "
      "sampler may not use the epoch it is given (seed its generator with seed + epoch), "
      "set_epoch may run after the epoch's iterator drew its order (call it before "
      "iter(loader)), or it may be called with the same value each time (pass the epoch)",
      ""};
}

}  // namespace

namespace {

// The training passes of `t` over loaders iterated exactly once, in the order they began.
std::vector<const PassRecord*> loadersTrainedOnce(const RankTrace& t) {
  std::map<std::int64_t, std::vector<const PassRecord*>> byLoader;
  for (const auto& p : t.passes) byLoader[p.loader].push_back(&p);
  std::vector<const PassRecord*> out;
  for (const auto& [loader, passes] : byLoader) {
    if (passes.size() == 1 && passes[0]->ended && trainsOnBatches(*passes[0]) &&
        !isEvaluation(*passes[0]))
      out.push_back(passes[0]);
  }
  std::sort(out.begin(), out.end(),
            [](const PassRecord* a, const PassRecord* b) { return a->startLine < b->startLine; });
  return out;
}

// A global generator seeded with the same value before both passes began, by two calls, the
// later one after the first pass ended: the later loader was made after the same seed.
const SeedCall* reseededAlike(const RankTrace& t, const PassRecord& a, const PassRecord& b) {
  for (const char* g : {"numpy", "torch", "random"}) {
    const SeedCall* first = lastSeedBefore(t, g, a.startLine);
    const SeedCall* second = lastSeedBefore(t, g, b.startLine);
    if (first && second && first != second && second->line > a.endLine && first->value &&
        first->value == second->value)
      return second;
  }
  return nullptr;
}

}  // namespace

void checkRemadeLoaders(DataFindings& findings) {
  const RankTrace* t = firstTraced(findings.trace());
  if (!t) return;
  const std::vector<const PassRecord*> once = loadersTrainedOnce(*t);
  for (std::size_t k = 1; k < once.size(); ++k) {
    const PassRecord& a = *once[k - 1];
    const PassRecord& b = *once[k];
    const LoaderRecord& la = t->loaders.at(a.loader);
    const LoaderRecord& lb = t->loaders.at(b.loader);
    if (la.datasetLen != lb.datasetLen || datasetIdentity(la) != datasetIdentity(lb) ||
        findings.anyFor(b.loader))
      continue;
    const auto before = passAcrossRanks(findings.trace(), a.loader, 0, findings.orders());
    const auto after = passAcrossRanks(findings.trace(), b.loader, 0, findings.orders());
    if (before.empty() || before.size() != after.size() || !allKnown(before, true) ||
        !allKnown(after, true) || !shuffledOrder(before))
      continue;
    bool same = true;
    for (std::size_t r = 0; r < before.size() && same; ++r) {
      same = *before[r].consumed == *after[r].consumed;
    }
    const SeedCall* seed = same ? reseededAlike(*t, a, b) : nullptr;
    if (!seed) continue;
    findings.judged(property::kReshuffle);
    const auto [what, call] = globalGenerator(seed->generator);
    sampler::Violation v;
    v.property = std::string(property::kReshuffle);
    v.epoch = 1;
    v.detail = fmt::format(
        "{}, made anew for its epoch as {} was before it, gave every rank the same samples in "
        "the same order ({} batches on rank {}), both drawn after {}({})",
        describeLoader(*t, b.loader), describeLoader(*t, a.loader), b.batches.size(), t->rank,
        call, *seed->value);
    v.likelyCause = fmt::format(
        "{}({}){} runs with the same value before every epoch's loader is made, and the order is "
        "drawn from {} after it: the epoch never reaches the seed (an epoch argument left at its "
        "default where the loader or its batches are built), so every epoch draws epoch 0's "
        "order again",
        call, *seed->value, seed->at.empty() ? "" : fmt::format(" ({})", seed->at), what);
    v.help = "pass the epoch to what builds each epoch's loader and seed with seed + epoch, or "
             "build the loader once and give its sampler set_epoch(epoch)";
    findings.record(b.loader, v, "remade");
    return;  // the first repeat says it; the later ones are the same
  }
}

void checkNewOrder(DataFindings& findings, std::int64_t loader, const std::vector<RankPass>& before,
                   const std::vector<RankPass>& after) {
  if (!reshuffleApplies(loader, before, after)) {
    // A training loader over a DistributedSampler built with shuffle=False keeps its promise (one
    // order): said once, never failed (the evaluation setting on a training loader, or meant).
    const SamplerRecord* s = samplerOf(*before[0].trace, loader);
    if (before[0].pass->iter == 0 && s && s->order == OrderKind::kTorchDistributed &&
        s->shuffle == std::optional<bool>(false) && !isEvaluation(*before[0].pass) &&
        !isEvaluation(*after[0].pass)) {
      findings.note(fmt::format(
          "{}: trained in the same order every epoch, each rank on the same share: its "
          "DistributedSampler was built with shuffle=False (the evaluation setting); pass "
          "shuffle=True and call set_epoch(epoch) unless one fixed order is meant",
          describeLoader(*before[0].trace, loader)));
    }
    return;
  }
  Expectations e;
  e.shuffle = true;
  findings.judged(property::kReshuffle);
  const std::int64_t k = before[0].pass->iter;
  const Partition a = partitionOf(before, before[0].pass->datasetLen, k, false);
  const Partition b = partitionOf(after, after[0].pass->datasetLen, k + 1, false);
  auto v = ddph::sampler::checkReshuffle(a, b, e);
  if (!v) return;
  const SamplerRecord* s = samplerOf(*before[0].trace, loader);
  std::optional<RepeatedOrder> why = reseededEveryEpoch(before, after);
  if (!why) why = setEpochNeverCalled(s, before);
  if (!why) why = setEpochTooLate(s, loader, k, after);
  if (!why) why = fromSamplerEpochs(s, before, after);
  v->likelyCause = why->cause;
  v->help = why->help;
  v->detail = fmt::format("{}: {}{}", describeLoader(*before[0].trace, loader), v->detail,
                          why->why.empty() ? "" : "; " + why->why);
  findings.record(loader, *v);
}

}  // namespace ddph::audit
