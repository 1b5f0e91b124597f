// collective-mismatch: every rank issues the same collectives, in the same order, with the same
// shapes. Two ways to break it, each reported at the first collective where it shows:
//  - desynchronised: at the same sequence number ranks call different ops, dtypes or sizes;
//  - uneven: some ranks ran more collectives than others that ended normally (uneven inputs:
//    the extra DDP allreduce has no partner, and the job hangs or crashes).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "audit_checks.h"
#include "data_pass.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

bool isPointToPoint(const std::string& op) {
  return op == "send" || op == "recv" || op == "isend" || op == "irecv";
}

// The ranks of `group` that left a trace.
std::vector<std::int64_t> groupRanks(const Trace& trace, const std::string& group) {
  std::vector<std::int64_t> ranks;
  std::vector<std::int64_t> members;
  if (group == "0") {
    for (int r = 0; r < trace.worldSize; ++r) members.push_back(r);
  } else {
    for (const auto& t : trace.ranks) {
      if (t && t->groups.count(group)) {
        members = t->groups.at(group);
        break;
      }
    }
  }
  for (auto r : members) {
    if (r >= 0 && r < trace.worldSize && trace.ranks[static_cast<std::size_t>(r)]) ranks.push_back(r);
  }
  return ranks;
}

// Batches each rank was handed in the pass of `loader`/`iter` (or its last pass of that loader).
std::string batchCounts(const Trace& trace, std::int64_t loader, std::int64_t iter,
                        const std::vector<std::int64_t>& ranks) {
  std::map<std::int64_t, std::vector<std::int64_t>> byCount;
  for (auto r : ranks) {
    const RankTrace& t = *trace.ranks[static_cast<std::size_t>(r)];
    const PassRecord* p = t.findPass(loader, iter);
    if (!p) {
      for (const auto& q : t.passes) {
        if (q.loader == loader) p = &q;
      }
    }
    byCount[p ? static_cast<std::int64_t>(p->batches.size()) : 0].push_back(r);
  }
  std::vector<std::string> parts;
  for (const auto& [count, rs] : byCount) parts.push_back(fmt::format("{}: {}", rankList(rs), count));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// The first (loader, epoch) whose pass handed out different numbers of batches on `ranks`. With
// `wholePassesOnly`, a pass its rank's failure cut short (no StopIteration, and the rank did not
// end normally) is left out: its length says when the rank failed, not what its shard holds.
std::optional<std::pair<std::int64_t, std::int64_t>> firstUnevenPass(
    const Trace& trace, const std::vector<std::int64_t>& ranks, bool wholePassesOnly = false) {
  auto judged = [&](const RankTrace& t, const PassRecord* p) -> const PassRecord* {
    return p && wholePassesOnly && !p->ended && !t.endedNormally() ? nullptr : p;
  };
  const RankTrace& first = *trace.ranks[static_cast<std::size_t>(ranks.front())];
  for (const auto& p : first.passes) {
    if (!judged(first, &p)) continue;
    for (auto r : ranks) {
      const RankTrace& t = *trace.ranks[static_cast<std::size_t>(r)];
      const PassRecord* q = judged(t, t.findPass(p.loader, p.iter));
      if (q && q->batches.size() != p.batches.size()) return std::make_pair(p.loader, p.iter);
    }
  }
  return std::nullopt;
}

std::vector<const CollectiveRecord*> collectivesOf(const RankTrace& t, const std::string& group) {
  std::vector<const CollectiveRecord*> out;
  const auto it = t.collectives.find(group);
  if (it == t.collectives.end()) return out;
  for (const auto& c : it->second) {
    if (!isPointToPoint(c.op)) out.push_back(&c);
  }
  return out;
}

// A value logged with sync_dist on some of `ranks` only (the `logged` lines): Lightning reduces it
// across ranks when it computes the epoch's results, so those ranks run an all_reduce the others
// never join. The first such value, by the order its first rank logged it; nothing when every rank
// logged the same values.
std::optional<Explanation> loggedOnSomeRanks(const Trace& trace,
                                             const std::vector<std::int64_t>& ranks) {
  std::map<std::string, std::vector<std::int64_t>> byName;
  std::vector<const LoggedValue*> firstSeen;
  for (auto r : ranks) {
    for (const auto& l : trace.ranks[static_cast<std::size_t>(r)]->loggedWithSync) {
      auto& who = byName[l.name];
      if (who.empty()) firstSeen.push_back(&l);
      if (who.empty() || who.back() != r) who.push_back(r);
    }
  }
  for (const LoggedValue* l : firstSeen) {
    const auto& who = byName[l->name];
    if (who.size() == ranks.size()) continue;
    std::vector<std::int64_t> others;
    for (auto r : ranks) {
      if (std::find(who.begin(), who.end(), r) == who.end()) others.push_back(r);
    }
    return Explanation{
        fmt::format("self.log('{}', sync_dist=True){} ran on {} only, never on {}: Lightning "
                    "reduces a sync_dist value across ranks when it computes the epoch's results, "
                    "so {} ran an all_reduce the others never joined",
                    l->name, l->at.empty() ? "" : " at " + l->at, rankList(who), rankList(others),
                    who.size() == 1 ? "that rank" : "those ranks"),
        "log it on every rank (Lightning reduces it for you), or log it on rank 0 alone with "
        "rank_zero_only=True and without sync_dist"};
  }
  return std::nullopt;
}

void explainParting(const Trace& trace, const std::vector<std::int64_t>& ranks,
                    const std::vector<std::int64_t>& behind,
                    const std::pair<std::int64_t, std::int64_t>& parted, Violation& v);

// The ranks at `c`'s collective number that had handed out fewer batches of the pass `c` was made
// in than the ranks still in it: the pass parted them (uneven inputs, or skipped steps), and the
// ones that ran out went on to the program's next collective. Nothing when the pass did not part.
std::optional<std::vector<std::int64_t>> partedInItsPass(const Trace& trace,
                                                         const std::vector<std::int64_t>& ranks,
                                                         const CollectiveRecord& c) {
  const auto parted = firstUnevenPass(trace, ranks);
  if (!parted || c.loader != parted->first || c.iter != parted->second) return std::nullopt;
  std::size_t most = 0;
  std::map<std::int64_t, std::size_t> counts;
  for (auto r : ranks) {
    const PassRecord* p = trace.ranks[static_cast<std::size_t>(r)]->findPass(c.loader, c.iter);
    counts[r] = p ? p->batches.size() : 0;
    most = std::max(most, counts[r]);
  }
  std::vector<std::int64_t> behind;
  for (const auto& [r, n] : counts) {
    if (n < most) behind.push_back(r);
  }
  return behind;
}

// Every rank in the same call of the program's own (one line, one op, one dtype), with sizes that
// differ: the sides, each "ranks … N", or nothing.
std::optional<std::vector<std::string>> sizesAtOneCall(
    const std::map<std::int64_t, std::vector<const CollectiveRecord*>>& lists,
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& sides, std::size_t s) {
  const CollectiveRecord& first = *lists.at(sides.front().second.front())[s];
  if (first.src != "user" || first.at.empty()) return std::nullopt;
  std::vector<std::string> sizes;
  for (const auto& [sig, rs] : sides) {
    const CollectiveRecord& c = *lists.at(rs.front())[s];
    if (c.src != "user" || c.at != first.at || c.op != first.op || c.dtype != first.dtype)
      return std::nullopt;
    sizes.push_back(fmt::format("{} {}", rankList(rs), c.numel));
  }
  return sizes;
}

// The same, with gradients averaged by hand (a replica declared by the program's own all_reduce):
// the ranks reduce different parameters' gradients at that point, whatever their batches did
// since (they may have parted in their pass as a consequence: not uneven inputs).
std::optional<Explanation> gradientsOfOtherParameters(
    const Trace& trace, const std::map<std::int64_t, std::vector<const CollectiveRecord*>>& lists,
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& sides, std::size_t s) {
  const auto sizes = sizesAtOneCall(lists, sides, s);
  const CollectiveRecord& first = *lists.at(sides.front().second.front())[s];
  const RankTrace* t = firstTraced(trace);
  const bool byHand = t && std::any_of(t->ddp.begin(), t->ddp.end(), [](const auto& d) {
    return !d.second.averagedBy.empty();
  });
  if (!sizes || !byHand || first.op != "all_reduce") return std::nullopt;
  return Explanation{
      fmt::format("every rank called all_reduce at {} at this point, each with another "
                  "parameter's gradient ({} elements): the program averages gradients by hand in "
                  "a loop whose parameters differ per rank, one that skips a parameter whose .grad "
                  "is None (a branch of the model some ranks' batches did not use) or walks them "
                  "in a per-rank order, so the ranks reduce unrelated tensors",
                  first.at, fmt::join(*sizes, "; ")),
      "all-reduce every parameter's gradient on every rank, in the parameters' own order (a zero "
      "tensor for a gradient that is None), or wrap the model in DDP (find_unused_parameters=True)"};
}

// Every rank in the same call of the program's own, with the same tensor, naming roots that differ:
// a root each rank took from its own position (its node's leader) on a group that spans them all.
std::optional<Explanation> rootsOfTheirOwn(
    const std::map<std::int64_t, std::vector<const CollectiveRecord*>>& lists,
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& sides, std::size_t s) {
  const CollectiveRecord& first = *lists.at(sides.front().second.front())[s];
  if (first.src != "user" || first.at.empty() || first.root < 0) return std::nullopt;
  std::vector<std::string> roots;
  for (const auto& [sig, rs] : sides) {
    const CollectiveRecord& c = *lists.at(rs.front())[s];
    if (c.at != first.at || c.op != first.op || c.numel != first.numel || c.root < 0)
      return std::nullopt;
    roots.push_back(fmt::format("{} rank {}", rankList(rs), c.root));
  }
  return Explanation{
      fmt::format("every rank called {} at {} with the same tensor but another root ({}): each "
                  "rank took the root from its own place (its node's leader, its group's first "
                  "rank), while the call is on {}, whose members must all name the same root",
                  first.op, first.at, fmt::join(roots, "; "),
                  first.group == "0" ? std::string("the default group") : "group " + first.group),
      fmt::format("{} within each group of its own (group=new_group(the node's ranks), src=the "
                  "leader), or from one root on the whole group",
                  first.op)};
}

// Every rank in the same call of the program's own, with sizes that differ: a tensor each rank
// shaped from its own data (a list of misclassified samples gathered, a per-rank count). The cause
// then, naming the line and each rank's size.
std::optional<Explanation> sizedByEachRanksData(
    const std::map<std::int64_t, std::vector<const CollectiveRecord*>>& lists,
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& sides, std::size_t s) {
  const auto sizes = sizesAtOneCall(lists, sides, s);
  if (!sizes) return std::nullopt;
  const CollectiveRecord& first = *lists.at(sides.front().second.front())[s];
  const bool gather = first.op.find("gather") != std::string::npos;
  return Explanation{
      fmt::format("every rank called {} at {}{}, each with a tensor of its own size ({} "
                  "elements): its size comes from each rank's own data (the samples it "
                  "misclassified, a per-rank count), and {} needs the same shape on every rank",
                  first.op, first.at, first.via.empty() ? "" : " through " + first.via,
                  fmt::join(*sizes, "; "), first.op),
      gather ? "pad the tensor to one size first (all_gather the sizes, pad to the largest, cut "
               "after), or gather Python objects with all_gather_object"
             : "give the tensor the same size on every rank (a fixed length, minlength=…)"};
}

std::optional<Violation> desync(const Trace& trace, const std::vector<std::int64_t>& ranks,
                                const std::map<std::int64_t, std::vector<const CollectiveRecord*>>& lists) {
  std::size_t common = SIZE_MAX;
  for (auto r : ranks) common = std::min(common, lists.at(r).size());
  for (std::size_t s = 0; s < common; ++s) {
    std::map<std::string, std::vector<std::int64_t>> bySignature;
    for (auto r : ranks) bySignature[collectiveSignature(*lists.at(r)[s])].push_back(r);
    if (bySignature.size() == 1) continue;
    // The majority's call first, then each other call with its ranks.
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> sides(bySignature.begin(),
                                                                          bySignature.end());
    std::stable_sort(sides.begin(), sides.end(),
                     [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
    std::vector<std::string> parts;
    std::vector<std::int64_t> involved;
    for (const auto& [sig, rs] : sides) {
      parts.push_back(fmt::format("{} {}", rankList(rs), describeCollective(*lists.at(rs[0])[s])));
      if (&sig != &sides.front().first) involved.insert(involved.end(), rs.begin(), rs.end());
    }
    const CollectiveRecord& first = *lists.at(sides.front().second.front())[s];
    Violation v;
    v.property = std::string(property::kCollectiveMismatch);
    v.ranks = involved;
    std::sort(v.ranks.begin(), v.ranks.end());
    v.epoch = first.iter;
    v.step = first.batchSeq;
    v.detail = fmt::format("collective {} differs across ranks: {}", collectiveNumber(first),
                           fmt::join(parts, "; "));
    // A value logged with sync_dist on some ranks only, unless a pass had parted the ranks
    // before it (the ranks that ran out of batches first went on to log in their evaluation).
    const bool partedByAPass = std::any_of(sides.begin(), sides.end(), [&](const auto& side) {
      const CollectiveRecord& c = *lists.at(side.second.front())[s];
      if (c.src != "ddp" && c.src != "user") return false;
      const auto behind = partedInItsPass(trace, ranks, c);
      return behind && !behind->empty();
    });
    if (auto logged = partedByAPass ? std::nullopt : loggedOnSomeRanks(trace, ranks)) {
      explain(v, std::move(*logged));
      return v;
    }
    // Gradients of other parameters reduced at one line of a hand-written loop: the pass may
    // have parted the ranks since, as a consequence, not by uneven inputs.
    if (auto other = gradientsOfOtherParameters(trace, lists, sides, s)) {
      explain(v, std::move(*other));
      return v;
    }
    // One side still in a pass whose batches the other side had run out of: not a branch around
    // a collective, but the pass parting the ranks (their next collectives then differ).
    for (const auto& [sig, rs] : sides) {
      const CollectiveRecord& c = *lists.at(rs.front())[s];
      if (c.src != "ddp" && c.src != "user") continue;
      if (auto behind = partedInItsPass(trace, ranks, c); behind && !behind->empty()) {
        const RankTrace& t = *trace.ranks[static_cast<std::size_t>(rs.front())];
        const std::string counts = batchCounts(trace, c.loader, c.iter, ranks);
        v.detail += fmt::format("; the ranks parted at epoch {} of {} (batches: {})", c.iter,
                                describeLoader(t, c.loader), counts);
        const PassRecord* pass = t.findPass(c.loader, c.iter);
        if (c.src == "user" && !c.at.empty() && pass && isEvaluation(*pass)) {
          // An evaluation over shards of other lengths that reduces a metric per batch.
          explain(v, {fmt::format("the evaluation pass gave the ranks different numbers of batches "
                                  "({}: a split without padding), and the program calls {} at {} "
                                  "for every batch, so the ranks with more batches call it more "
                                  "often and their collectives no longer pair up",
                                  counts, c.op, c.at),
                      "reduce the metric once, after the evaluation loop (sum it locally per "
                      "batch), or give every rank the same number of batches"});
          return v;
        }
        explainParting(trace, ranks, *behind, {c.loader, c.iter}, v);
        return v;
      }
    }
    // The fewer ranks in a call of the program's own, straight from its code: a branch only
    // they took.
    const auto& [lastSig, few] = sides.back();
    const CollectiveRecord& own = *lists.at(few.front())[s];
    const bool ownCall = sides.size() == 2 && few.size() < sides.front().second.size() &&
                         own.src == "user" && !own.at.empty();
    if (ownCall && own.op == first.op && first.src == "user") {
      v.likelyCause = fmt::format(
          "{} called {} at {} with {} where the others passed {}: the tensor's size or dtype "
          "depends on the rank (a metric list built differently on one code path, a per-rank "
          "count), and Gloo and NCCL may then hang, fail, or reduce mismatched buffers",
          rankList(few), own.op, own.at, fmt::format("{}[{}]", own.dtype, own.numel),
          fmt::format("{}[{}]", first.dtype, first.numel));
      v.help = "give the collective the same size and dtype on every rank";
      return v;
    }
    if (ownCall) {
      const std::string through =
          own.via == "lightning"
              ? " through Lightning (trainer.save_checkpoint, self.all_gather and the strategy's "
                "barrier are collectives: every rank must call them; `if "
                "self.trainer.is_global_zero:` around one is such a branch)"
          : own.via.empty() ? ""
                            : " through " + own.via;
      v.likelyCause = fmt::format(
          "{} called {} at {}{} and the other ranks did not (they were in {}): a collective "
          "inside a branch only some ranks take (`if rank == 0:` around saving, logging or "
          "evaluation), so the ranks' collectives no longer pair up (a hang, or mismatched "
          "buffers reduced together)",
          rankList(few), own.op, own.at, through, describeCollective(first));
      v.help = "call the collective on every rank (move it out of the branch), or leave it out of "
               "the branch's work";
      return v;
    }
    // Every rank in the same call of the program's own, naming another root.
    if (auto rooted = rootsOfTheirOwn(lists, sides, s)) {
      explain(v, std::move(*rooted));
      return v;
    }
    // Every rank in the same call of the program's own, the same op and dtype, sizes that differ:
    // a tensor shaped by each rank's own data.
    if (auto sized = sizedByEachRanksData(lists, sides, s)) {
      explain(v, std::move(*sized));
      return v;
    }
    v.likelyCause =
        "the ranks issue different collectives at the same point (rank-dependent control flow or "
        "tensor shapes); Gloo and NCCL may then hang, fail, or reduce mismatched buffers without "
        "an error";
    v.help = "make every rank call the same collectives with the same shapes";
    return v;
  }
  return std::nullopt;
}

// The last epoch of `loader` a rank ran to its end, or -1.
std::int64_t lastWholeEpoch(const RankTrace& t, std::int64_t loader) {
  std::int64_t last = -1;
  for (const auto& p : t.passes) {
    if (p.loader == loader && p.ended) last = std::max(last, p.iter);
  }
  return last;
}

// Ranks that ended normally without beginning the epoch in which the others issued their extra
// collective, each having run its previous epochs to their ends: they left the epoch loop (an
// early stop, a NaN check, a time limit decided on one rank), they did not run out of batches.
bool leftTheLoop(const Trace& trace, const std::vector<std::int64_t>& behind,
                 const CollectiveRecord& extra) {
  if (extra.loader < 0 || extra.iter < 0) return false;
  for (auto r : behind) {
    const RankTrace& t = *trace.ranks[static_cast<std::size_t>(r)];
    if (t.findPass(extra.loader, extra.iter) || lastWholeEpoch(t, extra.loader) != extra.iter - 1)
      return false;
  }
  return true;
}

std::optional<Violation> loopLeftEarly(const Trace& trace, const std::vector<std::int64_t>& ahead,
                                       const std::vector<std::int64_t>& behind,
                                       const CollectiveRecord& extra, Violation v) {
  const RankTrace& first = *trace.ranks[static_cast<std::size_t>(ahead.front())];
  const std::string loader = describeLoader(first, extra.loader);
  v.detail = fmt::format(
      "{} ended normally after epoch {} of {} and never began epoch {}, while {} went on into it: "
      "{} ({}) has no partner",
      rankList(behind), extra.iter - 1, loader, extra.iter, rankList(ahead),
      collectiveNumber(extra), describeCollective(extra));
  v.likelyCause = fmt::format(
      "{} left the training loop by a decision of {} own (an early stop on {} own validation "
      "loss, a NaN check, a time limit, another number of epochs) while the others went on, so "
      "their next collective waits forever (a hang, or a crash when {} exit{})",
      rankList(behind), behind.size() == 1 ? "its" : "their", behind.size() == 1 ? "its" : "their",
      behind.size() == 1 ? "it" : "they", behind.size() == 1 ? "s" : "");
  v.help = "take the decision on every rank together, e.g. all_reduce the stop flag "
           "(dist.all_reduce(flag, op=dist.ReduceOp.MAX)) and break on every rank";
  return v;
}

// The ranks `behind` drew every batch of the pass `parted` that every rank's loader declared
// (len(loader), the same on every rank): they did not run out of data, they ran fewer steps over it.
bool behindDrewTheWholePass(const Trace& trace, const std::vector<std::int64_t>& ranks,
                            const std::vector<std::int64_t>& behind,
                            const std::pair<std::int64_t, std::int64_t>& parted) {
  std::optional<std::int64_t> declared;
  for (auto r : ranks) {
    const PassRecord* p = trace.ranks[static_cast<std::size_t>(r)]->findPass(parted.first, parted.second);
    if (!p || !p->declaredBatches || (declared && *declared != *p->declaredBatches)) return false;
    declared = p->declaredBatches;
  }
  for (auto r : behind) {
    const PassRecord* p = trace.ranks[static_cast<std::size_t>(r)]->findPass(parted.first, parted.second);
    if (static_cast<std::int64_t>(p->batches.size()) < *declared) return false;
  }
  return declared.has_value();
}

// More collectives on some ranks although no pass the trace follows gave the ranks different
// numbers of batches: uneven inputs are not what the evidence shows; the candidates.
std::string unpartneredCause(const CollectiveRecord& extra, const std::vector<std::int64_t>& ahead) {
  return fmt::format(
      "the ranks' loaders handed out the same numbers of batches, so {} did not simply have more "
      "data; the trace cannot single out why {} called one more collective: {}a rank-dependent "
      "branch around a collective (`if rank == 0:` with an all_reduce, a barrier or a broadcast "
      "inside, e.g. around logging or saving), or steps run on data the trace does not follow",
      rankList(ahead), ahead.size() == 1 ? "it" : "they",
      extra.src == "user" ? "the first one without a partner is the program's own call, so most "
                            "likely "
                          : "");
}

// Within the pass that parted the ranks, their forwards under no_sync() fall on other batches:
// each rank closes its accumulation window on a condition of its own (a token budget counted on
// its own batches), so one rank's synchronising backward meets another's silent one. The cause,
// naming the forward where they first differ, or nothing.
std::optional<Explanation> accumulatedDifferently(const Trace& trace,
                                                  const std::vector<std::int64_t>& ranks,
                                                  const std::pair<std::int64_t, std::int64_t>& parted) {
  std::vector<std::vector<bool>> flags;
  bool unsynced = false;
  for (auto r : ranks) {
    const RankTrace& t = *trace.ranks[static_cast<std::size_t>(r)];
    const PassRecord* p = t.findPass(parted.first, parted.second);
    if (!p || t.gradForwardSynced.size() != t.gradForwardLines.size()) return std::nullopt;
    const std::int64_t end = p->ended ? p->endLine : t.lines + 1;
    std::vector<bool> mine;
    for (std::size_t i = 0; i < t.gradForwardLines.size(); ++i) {
      if (t.gradForwardLines[i] > p->startLine && t.gradForwardLines[i] < end) {
        mine.push_back(t.gradForwardSynced[i]);
        unsynced = unsynced || !t.gradForwardSynced[i];
      }
    }
    flags.push_back(std::move(mine));
  }
  if (!unsynced) return std::nullopt;
  std::size_t common = SIZE_MAX;
  for (const auto& f : flags) common = std::min(common, f.size());
  for (std::size_t b = 0; b < common; ++b) {
    const bool differ = std::any_of(flags.begin(), flags.end(),
                                    [&](const std::vector<bool>& f) { return f[b] != flags.front()[b]; });
    if (!differ) continue;
    return Explanation{
        fmt::format("the ranks accumulate gradients under model.no_sync() over different "
                    "micro-batches: at the pass's forward {} some synchronise and others do not, "
                    "so each rank closes its accumulation window on a condition of its own (a "
                    "token or sample budget counted on its own batches, a per-rank schedule) and "
                    "one rank's gradient allreduce meets another's next collective",
                    b + 1),
        "decide when to step on every rank together (all_reduce the budget's count before "
        "choosing no_sync), or accumulate a fixed number of micro-batches"};
  }
  return std::nullopt;
}

// NOTE [Forwards that no backward followed] (docs/audit.md): DDP modules whose forwards with
// gradients outnumber their backwards by more than the one a hang can leave in flight, by other
// counts on different ranks: a per-rank condition skipped backward() after the forward (a
// training_step that returns None, `if …: continue` between forward and backward). The
// explanation, or nothing.
std::optional<Explanation> backwardsSkipped(const Trace& trace, const std::vector<std::int64_t>& ranks) {
  std::map<std::int64_t, std::vector<std::int64_t>> bySkipped;
  std::vector<std::string> counts;
  for (auto r : ranks) {
    const RankTrace& t = *trace.ranks[static_cast<std::size_t>(r)];
    std::int64_t forwards = 0, backwards = 0;
    for (const auto& [id, d] : t.ddp) {
      forwards += d.syncedGradForwards + d.unsyncedGradForwards;
      backwards += d.backwards;
    }
    bySkipped[std::max<std::int64_t>(forwards - backwards, 0)].push_back(r);
    counts.push_back(fmt::format("rank {}: {} forwards, {} backwards", r, forwards, backwards));
  }
  if (bySkipped.size() < 2 || bySkipped.rbegin()->first < 2) return std::nullopt;
  return Explanation{
      fmt::format("the ranks ran forwards with gradients that no backward followed, each rank a "
                  "different number ({}): a per-rank condition skips backward() after the forward "
                  "(a training_step that returns None, which Lightning takes as 'skip this batch'; "
                  "`if …: continue` between the forward and loss.backward()), so the ranks' "
                  "gradient allreduces no longer pair up",
                  fmt::join(counts, "; ")),
      "run backward on every rank for every batch (return the loss times 0 instead of None), or "
      "decide a skip on every rank together (all_reduce the flag)"};
}

// The cause and help of ranks that parted in a pass: their accumulation windows closed apart,
// the ranks behind skipped steps over a whole pass, or ran out of batches first (uneven inputs).
void explainParting(const Trace& trace, const std::vector<std::int64_t>& ranks,
                    const std::vector<std::int64_t>& behind,
                    const std::pair<std::int64_t, std::int64_t>& parted, Violation& v) {
  if (auto accumulated = accumulatedDifferently(trace, ranks, parted)) {
    explain(v, std::move(*accumulated));
    return;
  }
  if (auto skipped = backwardsSkipped(trace, ranks)) {
    explain(v, std::move(*skipped));
    return;
  }
  if (behindDrewTheWholePass(trace, ranks, behind, parted)) {
    v.likelyCause = fmt::format(
        "{} drew every batch of that pass, as many as every rank's loader holds, but ran fewer "
        "collectives over {}: not uneven inputs but skipped steps, a per-rank condition around "
        "backward() or the optimizer step (`if …: continue` on a loss threshold, a NaN or a bad "
        "label; a training_step that returns None or skips manual_backward) that leaves the "
        "others' gradient allreduce without a partner (a hang, or a crash when {} exit{})",
        rankList(behind), behind.size() == 1 ? "it" : "them", behind.size() == 1 ? "it" : "they",
        behind.size() == 1 ? "s" : "");
    v.help = "decide a skip on every rank together (all_reduce the flag and skip everywhere), or "
             "keep the step and zero its loss (loss * 0) so that every rank runs the same "
             "collectives";
    return;
  }
  v.likelyCause = fmt::format(
      "uneven inputs: {} ran out of batches first, and the others' next gradient allreduce waits "
      "for them forever (a hang, or a crash when they exit)",
      rankList(behind));
  v.help = "give every rank the same number of batches (DistributedSampler pads shards to equal "
           "length, drop_last=True cuts them) or wrap the loop in DDP's join() context manager "
           "(torch.distributed.algorithms.Join)";
}

std::optional<Violation> uneven(const Trace& trace, const std::vector<std::int64_t>& ranks,
                                const std::map<std::int64_t, std::vector<const CollectiveRecord*>>& lists) {
  std::size_t fewest = SIZE_MAX, most = 0;
  for (auto r : ranks) {
    fewest = std::min(fewest, lists.at(r).size());
    most = std::max(most, lists.at(r).size());
  }
  if (fewest == most) return std::nullopt;
  std::vector<std::int64_t> ahead, behind;
  for (auto r : ranks) (lists.at(r).size() > fewest ? ahead : behind).push_back(r);
  // Only ranks that ended normally "ran out"; a rank that died is a rank-failure.
  for (auto r : behind) {
    if (!trace.ranks[static_cast<std::size_t>(r)]->endedNormally()) return std::nullopt;
  }
  const CollectiveRecord& extra = *lists.at(ahead.front())[fewest];
  Violation v;
  v.property = std::string(property::kCollectiveMismatch);
  v.ranks = ahead;
  v.epoch = extra.iter;
  v.step = extra.batchSeq;
  if (leftTheLoop(trace, behind, extra)) return loopLeftEarly(trace, ahead, behind, extra, v);
  std::string counts;
  const auto parted = firstUnevenPass(trace, ranks);
  if (parted) {
    counts = fmt::format("; the ranks parted at epoch {} of {} (batches: {})",
                         parted->second,
                         describeLoader(*trace.ranks[static_cast<std::size_t>(ahead.front())], parted->first),
                         batchCounts(trace, parted->first, parted->second, ranks));
  } else if (extra.loader >= 0) {
    counts = fmt::format("; batches in epoch {} of {}: {}", extra.iter,
                         describeLoader(*trace.ranks[static_cast<std::size_t>(ahead.front())], extra.loader),
                         batchCounts(trace, extra.loader, extra.iter, ranks));
  }
  v.detail = fmt::format(
      "{} entered collective {} ({}) that {} never entered: {} ended normally after {} "
      "collective{}, so it has no partner{}",
      rankList(ahead), collectiveNumber(extra), describeCollective(extra), rankList(behind),
      behind.size() == 1 ? "it" : "they", fewest, fewest == 1 ? "" : "s", counts);
  if (!parted) {
    // The loaders held as many batches; the accumulation windows may still have parted them.
    if (auto accumulated = extra.loader >= 0 ? accumulatedDifferently(trace, ranks, {extra.loader, extra.iter})
                                             : std::nullopt) {
      explain(v, std::move(*accumulated));
      return v;
    }
    v.likelyCause = unpartneredCause(extra, ahead);
    v.help = "make every rank call the same collectives, or none";
    return v;
  }
  explainParting(trace, ranks, behind, *parted, v);
  return v;
}

}  // namespace

namespace {

// NOTE [Uneven inputs under Join] (docs/audit.md): torch's Join lets ranks run a pass in different
// numbers of steps: a rank that ran out shadows the others' collectives (its DDP buckets as
// allreduces of zeros, `shadow` lines) until every rank has joined. The shadows pair with the
// others' real collectives, so the collective lists agree; the steps differ by design.
bool shadowedUnderJoin(const Trace& trace, const std::pair<std::int64_t, std::int64_t>& pass) {
  for (const auto& t : trace.ranks) {
    for (const auto& [group, list] : t->collectives) {
      for (const auto& c : list) {
        if (c.shadow && c.loader == pass.first && c.iter == pass.second) return true;
      }
    }
  }
  return false;
}

}  // namespace

// Ranks that ran a whole pass over the same loader in different numbers of steps, while they
// exchange collectives during it (DDP's allreduce, a program's own): in a plain DDP loop the extra
// steps have no partner. Reported when the collectives themselves did not show it (a program that
// agrees on steps first, or uses Join, keeps them aligned).
std::optional<Violation> unevenSteps(const Trace& trace) {
  std::vector<std::int64_t> ranks;
  for (const auto& t : trace.ranks) {
    if (!t) return std::nullopt;
    ranks.push_back(t->rank);
  }
  if (ranks.size() < 2) return std::nullopt;
  const auto parted = firstUnevenPass(trace, ranks, /*wholePassesOnly=*/true);
  if (!parted) return std::nullopt;
  // Collectives between the pass's batches (one after its last batch, a barrier after the loop,
  // waits for nothing the pass's length decides).
  bool collectivesInside = false;
  const PassRecord* pass0 = trace.ranks[0]->findPass(parted->first, parted->second);
  const auto lastSeq = pass0 ? static_cast<std::int64_t>(pass0->batches.size()) - 1 : -1;
  for (const auto& [group, list] : trace.ranks[0]->collectives) {
    for (const auto& c : list) {
      collectivesInside = collectivesInside || (c.loader == parted->first &&
                                                c.iter == parted->second && c.batchSeq < lastSeq);
    }
  }
  if (!collectivesInside) return std::nullopt;
  if (shadowedUnderJoin(trace, *parted)) return std::nullopt;
  const RankTrace& first = *trace.ranks[0];
  // The ranks that ran out first, and the step they never ran: where a DDP loop hangs.
  std::int64_t fewest = INT64_MAX;
  std::vector<std::int64_t> outFirst;
  for (auto r : ranks) {
    const PassRecord* p =
        trace.ranks[static_cast<std::size_t>(r)]->findPass(parted->first, parted->second);
    const auto n = p ? static_cast<std::int64_t>(p->batches.size()) : 0;
    if (n < fewest) outFirst.clear();
    if (n <= fewest) {
      fewest = n;
      outFirst.push_back(r);
    }
  }
  Violation v;
  v.property = std::string(property::kCollectiveMismatch);
  v.ranks = outFirst;
  v.epoch = parted->second;
  v.step = fewest;
  v.detail = fmt::format(
      "the ranks ran epoch {} of {} in different numbers of steps (batches: {}), "
      "with collectives in every step: {} ran out of batches after {} steps, "
      "and the others' step {} has no partner for its collectives",
      parted->second, describeLoader(first, parted->first),
      batchCounts(trace, parted->first, parted->second, ranks), rankList(outFirst), fewest, fewest);
  v.likelyCause =
      "uneven inputs: each rank's shard gives it another number of batches, so in a DDP loop the "
      "ranks with more steps wait for a gradient allreduce nobody joins (a hang)";
  v.help = "give every rank the same number of batches (DistributedSampler pads shards to equal "
           "length, drop_last=True cuts them) or wrap the loop in DDP's join() context manager";
  return v;
}

namespace {

// NOTE [A forward on some ranks only]: DDP's forward broadcasts the module's buffers from rank 0
// (broadcast_buffers=True, a module with BatchNorm): a collective the recorder does not see, that
// every rank must join. Forwards without gradients (an evaluation, a logging pass) run on some
// ranks only are answered by the others' next forwards, out of step, or by none (a hang, or a
// lost connection once the others are done). Judged on forwards without gradients only: uneven
// inputs under DDP's join() differ in training forwards and are shadowed.
std::optional<Violation> forwardsOnSomeRanks(const Trace& trace) {
  const auto& first = trace.ranks[0];
  if (!first) return std::nullopt;
  for (const auto& [id, module] : first->ddp) {
    if (!module.broadcastBuffers || *module.broadcastBuffers == 0) continue;
    std::map<std::int64_t, std::vector<std::int64_t>> byCount;  // grad-free forwards -> ranks
    for (const auto& t : trace.ranks) {
      if (!t) return std::nullopt;
      const auto d = t->ddp.find(id);
      byCount[d == t->ddp.end() ? 0 : d->second.gradFreeForwards].push_back(t->rank);
    }
    if (byCount.size() < 2) continue;
    const auto& [most, ahead] = *byCount.rbegin();
    std::vector<std::string> counts;
    for (const auto& [n, rs] : byCount) counts.push_back(fmt::format("{}: {}", rankList(rs), n));
    Violation v;
    v.property = std::string(property::kCollectiveMismatch);
    v.ranks = ahead;
    v.detail = fmt::format(
        "DDP module {} ({}) ran forwards without gradients on some ranks only ({}), and its "
        "forward broadcasts the module's {} buffer{} from rank 0, a collective every rank must "
        "join: the others answered {}'s extra forwards with their own next ones, out of step, or "
        "not at all",
        id, module.module, fmt::join(counts, "; "), *module.broadcastBuffers,
        *module.broadcastBuffers == 1 ? "" : "s", rankList(ahead));
    v.likelyCause =
        "an evaluation (or a logging pass) through the DDP wrapper on one rank only: evaluate "
        "model.module, the wrapped module, on that rank, or evaluate on every rank with its own "
        "shard; DistributedDataParallel(broadcast_buffers=False) also takes the collective out of "
        "forward";
    return v;
  }
  return std::nullopt;
}

}  // namespace

void checkCollectives(const Trace& trace, std::vector<Violation>& out) {
  std::set<std::string> groups;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    for (const auto& [g, list] : t->collectives) groups.insert(g);
  }
  const std::size_t before = out.size();
  for (const auto& group : groups) {
    const auto ranks = groupRanks(trace, group);
    if (ranks.size() < 2) continue;
    std::map<std::int64_t, std::vector<const CollectiveRecord*>> lists;
    for (auto r : ranks) lists[r] = collectivesOf(*trace.ranks[static_cast<std::size_t>(r)], group);
    if (auto v = desync(trace, ranks, lists)) {
      out.push_back(std::move(*v));
    } else if (auto u = uneven(trace, ranks, lists)) {
      out.push_back(std::move(*u));
    }
  }
  if (out.size() == before) {
    if (auto b = bucketsNeverReduced(trace)) {
      out.push_back(std::move(*b));
    } else if (auto v = forwardsOnSomeRanks(trace)) {
      out.push_back(std::move(*v));
    } else if (auto u = unevenSteps(trace)) {
      out.push_back(std::move(*u));
    }
  }
}

}  // namespace ddph::audit
