// replica-consistency: every rank holds the same model at the same point of the run (the hash of
// each DDP module's parameters, taken at the start of every pass and at the end; not its buffers:
// BatchNorm's running statistics differ between forwards on healthy ranks).
// parameter-updates: between two such points where the module ran backward passes, its
// parameters changed.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "audit_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

// Whether `group` on rank `t` holds every rank: the default group, a group of all the ranks, or
// one whose members the trace does not say (taken as the world's).
bool spansTheWorld(const RankTrace& t, const std::string& group, int worldSize) {
  if (group == "0") return true;
  const auto members = t.groups.find(group);
  return members == t.groups.end() || static_cast<int>(members->second.size()) >= worldSize;
}

// The first collective of any rank that `matches`, or null.
template <typename Match>
const CollectiveRecord* firstCollective(const Trace& trace, Match matches) {
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    for (const auto& [group, calls] : t->collectives) {
      for (const auto& c : calls) {
        if (matches(c)) return &c;
      }
    }
  }
  return nullptr;
}

struct Point {
  std::string where;  ///< "the start of epoch 1 of loader 0 (…)", "the end of the run"
  std::int64_t epoch = -1;
  std::int64_t line = 0;
  ParamsSnapshot params;
};

// One rank's snapshots of module `ddp`, in the order they were taken.
std::vector<Point> pointsOf(const RankTrace& t, std::int64_t ddp) {
  std::vector<Point> points;
  for (const auto& p : t.passes) {
    const auto it = p.params.find(ddp);
    if (it == p.params.end()) continue;
    points.push_back({fmt::format("the start of epoch {} of {}", p.iter, describeLoader(t, p.loader)),
                      p.iter, p.startLine, it->second});
  }
  const auto d = t.ddp.find(ddp);
  if (d != t.ddp.end() && d->second.atEnd) {
    points.push_back({"the end of the run", -1, t.lines + 1, *d->second.atEnd});
  }
  return points;
}

std::string shortHash(const std::string& h) { return h.substr(0, 12); }

std::string moduleName(const RankTrace& t, std::int64_t ddp) {
  const auto d = t.ddp.find(ddp);
  if (d != t.ddp.end() && d->second.outsideDdp) {
    return fmt::format("the model of optimizer {} ({}, {} parameters that no DDP module holds)",
                       ddp, d->second.module, d->second.parameters);
  }
  if (d != t.ddp.end() && !d->second.averagedBy.empty()) {
    return fmt::format("the model of optimizer {} ({}, {} parameters, gradients averaged by the "
                       "program's own {})",
                       ddp, d->second.module, d->second.parameters, d->second.averagedBy);
  }
  if (d == t.ddp.end() || d->second.module.empty()) return fmt::format("DDP module {}", ddp);
  return fmt::format("DDP module {} ({})", ddp, d->second.module);
}

// Every forward with gradients ran under no_sync() on every rank: no backward allreduced its
// gradients, so each rank stepped on its own. The cause then, else empty (the catalogue's).
Explanation noSyncCause(const Trace& trace, std::int64_t ddp, std::string& detail) {
  std::int64_t unsynced = 0, synced = 0;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    const auto d = t->ddp.find(ddp);
    if (d == t->ddp.end() || d->second.unsyncedGradForwards == 0) return {};
    unsynced = std::max(unsynced, d->second.unsyncedGradForwards);
    synced = std::max(synced, d->second.syncedGradForwards);
  }
  if (synced > 0) {
    // Accumulation whose optimizer step follows a backward under no_sync() (a micro-batch counter
    // off by one): that step applies each rank's own gradients.
    return {fmt::format(
        "{} of its {} forwards with gradients ran under model.no_sync() (gradient accumulation), "
        "and the replicas still differ: an optimizer.step() taken after a backward under "
        "no_sync() applies each rank's own, unreduced gradients (an accumulation counter off by "
        "one, stepping before the synchronising micro-batch)",
        unsynced, unsynced + synced),
        "run the micro-batch that precedes each optimizer.step() outside no_sync()"};
  }
  detail += fmt::format("; all {} of its forwards with gradients ran under no_sync(), and no "
                        "backward allreduced the gradients",
                        unsynced);
  return {"every backward runs under model.no_sync(), which skips DDP's gradient allreduce, so "
          "each rank steps on its own gradients and the replicas drift apart",
          "for gradient accumulation, run the last micro-batch of each step outside no_sync() (its "
          "backward allreduces the accumulated gradients) before optimizer.step()"};
}

// A rank whose own all_reduces (of more than a metric's two values) all run on groups that
// together hold only part of the world (a per-node group used as the world, a hierarchical
// all-reduce without its last broadcast): its averaged gradients never reach the other ranks.
// The ranks in `first` (those whose replicas parted) are looked at first.
std::optional<Explanation> reducedWithinAPartOfTheWorld(const Trace& trace,
                                                         const std::vector<std::int64_t>& first) {
  std::vector<std::int64_t> order(first);
  for (int r = 0; r < trace.worldSize; ++r) {
    if (std::find(order.begin(), order.end(), r) == order.end()) order.push_back(r);
  }
  for (auto r : order) {
    const auto& t = trace.ranks[static_cast<std::size_t>(r)];
    if (!t) continue;
    std::set<std::int64_t> reached;
    std::set<std::string> used;
    bool world = false;
    for (const auto& [group, list] : t->collectives) {
      for (const auto& c : list) {
        // A metric (a loss, correct and total) reduced over the world says nothing of gradients.
        if (c.src != "user" || c.op != "all_reduce" || c.numel <= 2) continue;
        used.insert(group);
        if (spansTheWorld(*t, group, trace.worldSize)) {
          world = true;
          continue;
        }
        const auto& members = t->groups.at(group);
        reached.insert(members.begin(), members.end());
      }
    }
    if (world || used.empty() || static_cast<int>(reached.size()) >= trace.worldSize) continue;
    std::set<int> nodes;
    for (auto m : reached) {
      const auto& other = trace.ranks[static_cast<std::size_t>(m)];
      if (other && other->node) nodes.insert(*other->node);
    }
    return Explanation{
        fmt::format(
            "rank {} all-reduces its gradients only within group{} {} ({} of the {} ranks{}), "
            "never across the world, so its model parts from the others: a group of one node's "
            "ranks (new_subgroups(), new_group of the node's ranks) used as the world, or a "
            "hierarchical all-reduce whose cross-node sum never comes back to this rank (no "
            "broadcast within the node after the leaders' all_reduce)",
            t->rank, used.size() == 1 ? "" : "s", fmt::join(used, ", "),
            rankList(std::vector<std::int64_t>(reached.begin(), reached.end())), trace.worldSize,
            nodes.size() == 1 ? fmt::format(", all on node {}", *nodes.begin()) : ""),
        "all-reduce over the default group, or complete the hierarchical all-reduce (after the "
        "leaders' cross-node all_reduce, broadcast the sum within each node)"};
  }
  return std::nullopt;
}

// DDP module `ddp` built over a process group that holds only part of the world
// (DDP(model, process_group=group)): its gradient buckets are averaged within that group, so each
// group's replicas stay equal among themselves and the groups drift apart. The groups its buckets
// ran on, with their ranks, or nothing when they ran on the world's.
std::optional<Explanation> ddpOverAPartOfTheWorld(const Trace& trace, std::int64_t ddp) {
  std::map<std::string, std::vector<std::int64_t>> partial;  // group -> its members
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    for (const auto& [group, list] : t->collectives) {
      const bool buckets = std::any_of(list.begin(), list.end(), [&](const CollectiveRecord& c) {
        return c.src == "ddp" && c.ddp == ddp;
      });
      if (!buckets || spansTheWorld(*t, group, trace.worldSize)) continue;
      partial[group] = t->groups.at(group);
    }
  }
  if (partial.empty()) return std::nullopt;
  std::vector<std::string> groups;
  for (const auto& [group, members] : partial) {
    groups.push_back(fmt::format("group {} ({})", group, rankList(members)));
  }
  return Explanation{
      fmt::format("DDP module {} averages its gradients within {}, not across the {} ranks: it was "
                  "built with DDP(model, process_group=...) over a part of the world (a node's "
                  "group from new_group or new_subgroups), so each group's replicas agree among "
                  "themselves and the groups train apart",
                  ddp, fmt::join(groups, " and "), trace.worldSize),
      "build DDP over the default group (leave process_group out); keep subgroups for the "
      "collectives meant to stay within a node"};
}

// NOTE [Post-local SGD] (docs/audit.md): DDP module `ddp` reduced its gradients through torch's
// post_localSGD_hook, which after its start_localSGD_iter averages within its subgroup only and
// leaves the replicas to a model averager. The replicas that part then part by that averaging.
std::string localSgdHook(const Trace& trace, std::int64_t ddp) {
  const CollectiveRecord* c = firstCollective(trace, [&](const CollectiveRecord& c) {
    return c.op == "comm_hook" && c.ddp == ddp && c.hook.find("localSGD") != std::string::npos;
  });
  return c ? c->hook : "";
}

// Whether every rank averaged module `ddp`'s parameters over the whole world at least once: an
// all_reduce of the program's own on the default group (or a group of every rank), of the
// module's parameter count (a PeriodicModelAverager's flattened buffer).
bool averagedOverTheWorld(const Trace& trace, std::int64_t ddp) {
  for (const auto& t : trace.ranks) {
    if (!t) return false;
    const auto d = t->ddp.find(ddp);
    if (d == t->ddp.end()) return false;
    const bool averaged = std::any_of(t->collectives.begin(), t->collectives.end(), [&](const auto& g) {
      return spansTheWorld(*t, g.first, trace.worldSize) &&
             std::any_of(g.second.begin(), g.second.end(), [&](const CollectiveRecord& c) {
               return c.src == "user" && c.op == "all_reduce" && c.numel == d->second.parameters;
             });
    });
    if (!averaged) return false;
  }
  return true;
}

std::optional<Explanation> localSgdCause(const Trace& trace, std::int64_t ddp,
                                         const std::vector<std::int64_t>& odd) {
  const std::string hook = localSgdHook(trace, ddp);
  if (hook.empty()) return std::nullopt;
  const auto nodes = wholeNodesOf(trace, odd);
  return Explanation{
      fmt::format("DDP reduces the gradients with {}: after its start_localSGD_iter it averages "
                  "them within its subgroup only, and the replicas agree again only where a "
                  "model averager (PeriodicModelAverager) averages the parameters; {}",
                  hook,
                  nodes.empty()
                      ? "here they part, so the averager does not span the ranks that parted "
                        "(its process_group a subgroup) or never runs"
                      : fmt::format("here they part by node (node{} {} against the rest), so the "
                                    "averager's process_group is a node's group, not the world",
                                    nodes.size() == 1 ? "" : "s", fmt::join(nodes, ", "))),
      "average the model over the whole world (PeriodicModelAverager with the default group), "
      "keeping the node's subgroup for the hook only"};
}

// NOTE [An object list nobody keeps] (docs/audit.md): broadcast_object_list given a list display
// (`[cfg]`) before trace line `before` on a rank it sends to: that rank's received objects went
// into the list and were thrown away with it. Its record, or nothing.
const CollectiveRecord* discardedBroadcast(const Trace& trace, std::int64_t before) {
  return firstCollective(trace, [&](const CollectiveRecord& c) {
    return c.line < before && c.discarded && c.op == "broadcast_object_list";
  });
}

// The ranks' optimizers stepped with different learning rates before the point where the replicas
// parted (the `step` lines' lr): a per-rank rate or schedule (a sweep over ranks, a plateau
// scheduler stepped on each rank's own loss). The first step whose rates differ, or nothing.
std::optional<Explanation> differentLearningRates(const Trace& trace, std::int64_t before) {
  std::vector<std::pair<std::int64_t, const std::vector<std::optional<double>>*>> ranks;
  std::vector<std::size_t> counts;
  for (const auto& t : trace.ranks) {
    if (!t || t->stepLr.empty()) continue;
    const auto upTo = std::lower_bound(t->stepLines.begin(), t->stepLines.end(), before);
    counts.push_back(static_cast<std::size_t>(upTo - t->stepLines.begin()));
    ranks.push_back({t->rank, &t->stepLr});
  }
  if (ranks.size() < 2) return std::nullopt;
  const std::size_t steps = *std::min_element(counts.begin(), counts.end());
  for (std::size_t k = 0; k < steps; ++k) {
    std::map<double, std::vector<std::int64_t>> byLr;
    for (const auto& [rank, lrs] : ranks) {
      if (!(*lrs)[k]) return std::nullopt;
      byLr[*(*lrs)[k]].push_back(rank);
    }
    if (byLr.size() < 2) continue;
    std::vector<std::string> parts;
    for (const auto& [lr, rs] : byLr) parts.push_back(fmt::format("{}: {:g}", rankList(rs), lr));
    if (const CollectiveRecord* b = discardedBroadcast(trace, before)) {
      return Explanation{
          fmt::format("the ranks' optimizers stepped with different learning rates from their "
                      "step {} on ({}), and broadcast_object_list was given a list display{}: "
                      "it fills that list with the root's objects on the other ranks, and the "
                      "list is thrown away with the call, so each rank kept its own values (a "
                      "configuration drawn per rank) and applies DDP's averaged gradients at its "
                      "own rate",
                      k + 1, fmt::join(parts, "; "), b->at.empty() ? "" : " at " + b->at),
          "keep the list and read the values back from it: objs = [cfg]; "
          "dist.broadcast_object_list(objs, src=0); cfg = objs[0]"};
    }
    return Explanation{
        fmt::format("the ranks' optimizers stepped with different learning rates from their step "
                    "{} on ({}): DDP averages the gradients, but each rank applies them at its own "
                    "rate (a rate chosen per rank, or a scheduler stepped on each rank's own "
                    "metric such as ReduceLROnPlateau on a local loss), so the replicas part",
                    k + 1, fmt::join(parts, "; ")),
        "use one learning rate and schedule on every rank (step a metric-driven scheduler on a "
        "metric all-reduced across the ranks)"};
  }
  return std::nullopt;
}

// At sampled step `k` the ranks applied equal gradients, but their optimizers held state for
// different numbers of parameters (momentum, Adam's moments): a state loaded on some ranks only.
std::optional<Explanation> differentOptimizerState(const std::vector<const RankTrace*>& ranks,
                                                   std::size_t k) {
  std::map<std::int64_t, std::vector<std::int64_t>> byState;
  for (const RankTrace* t : ranks) {
    if (k >= t->stepState.size() || !t->stepState[k]) return std::nullopt;
    byState[*t->stepState[k]].push_back(t->rank);
  }
  if (byState.size() < 2) return std::nullopt;
  std::vector<std::string> parts;
  for (const auto& [n, rs] : byState) parts.push_back(fmt::format("{}: {}", rankList(rs), n));
  return Explanation{
      fmt::format("at their step {} the ranks applied the same gradients, but their optimizers "
                  "held state for different numbers of parameters ({}): an optimizer state "
                  "(momentum, Adam's moments) loaded on some ranks only, such as "
                  "optimizer.load_state_dict after reading a checkpoint under `if rank == 0:`; "
                  "DDP broadcasts the parameters when it is built, never the optimizer's state",
                  k + 1, fmt::join(parts, "; ")),
      "load the optimizer state on every rank (every rank reads the checkpoint, with "
      "map_location), or on none"};
}

// NOTE [Gradients at the step] (docs/audit.md): DDP leaves every rank the same averaged
// gradients, and the recorder hashes module `ddp`'s gradients (those DDP reduces) as a sampled
// optimizer step finds them (`step`'s grads). The first step before line `before` whose gradients
// differ across the ranks is the cause: the program changed them after the all-reduce. When some
// were compared and all agree, `note` says so (the steps applied the same gradients).
std::optional<Explanation> changedGradients(const Trace& trace, std::int64_t ddp,
                                            std::int64_t before, std::string& note) {
  std::vector<const RankTrace*> ranks;
  std::size_t steps = SIZE_MAX;
  for (const auto& t : trace.ranks) {
    if (!t || t->stepGrads.empty()) continue;
    ranks.push_back(&*t);
    const auto upTo = std::lower_bound(t->stepLines.begin(), t->stepLines.end(), before);
    steps = std::min(steps, static_cast<std::size_t>(upTo - t->stepLines.begin()));
  }
  if (ranks.size() < 2) return std::nullopt;
  std::vector<std::size_t> agreed;
  for (std::size_t k = 0; k < steps; ++k) {
    std::map<std::string, std::vector<std::int64_t>> byHash;
    for (const RankTrace* t : ranks) {
      const auto it = t->stepGrads[k].find(ddp);
      if (it == t->stepGrads[k].end()) break;
      byHash[it->second].push_back(t->rank);
    }
    const std::size_t seen = std::accumulate(byHash.begin(), byHash.end(), std::size_t{0},
                                             [](std::size_t n, const auto& kv) { return n + kv.second.size(); });
    if (seen < ranks.size()) continue;  // not sampled on every rank
    if (byHash.size() == 1) {
      if (auto state = differentOptimizerState(ranks, k)) return state;
      agreed.push_back(k + 1);
      continue;
    }
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> sides(byHash.begin(), byHash.end());
    std::sort(sides.begin(), sides.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    std::vector<std::string> parts;
    for (const auto& [hash, rs] : sides) parts.push_back(fmt::format("{} {}", rankList(rs), shortHash(hash)));
    return Explanation{
        fmt::format("the gradients the ranks' optimizers applied at their step {} differ ({}), "
                    "although DDP leaves every rank the same averaged gradients after backward: "
                    "the program changed p.grad between loss.backward() and optimizer.step() with "
                    "something of each rank's own (noise from a generator or seed that differs "
                    "per rank, a per-rank clip, scale or mask), so each replica took another step",
                    k + 1, fmt::join(parts, "; ")),
        "change the gradients alike on every rank (noise from a generator seeded the same on every "
        "rank, clipping by the all-reduced norm), or before DDP's all-reduce (a comm hook)"};
  }
  if (!agreed.empty()) {
    note = fmt::format("the gradients were the same on every rank at the optimizer step{} {} "
                       "(hashed as each step found them): the steps applied equal gradients",
                       agreed.size() == 1 ? "" : "s", fmt::join(agreed, ", "));
  }
  return std::nullopt;
}

// The program's own all_reduces that came after an optimizer step and before the next batch (the
// `step` lines): most of them on some rank means the gradients were averaged after the step had
// used each rank's own. The cause then, or nothing.
std::optional<Explanation> reducedAfterTheStep(const Trace& trace) {
  for (const auto& t : trace.ranks) {
    if (!t || t->stepLines.empty()) continue;
    std::vector<std::int64_t> batches;
    for (const auto& p : t->passes) {
      for (const auto& b : p.batches) batches.push_back(b.line);
    }
    std::sort(batches.begin(), batches.end());
    std::int64_t reduces = 0, afterStep = 0;
    for (const auto& [group, list] : t->collectives) {
      for (const auto& c : list) {
        if (c.src != "user" || c.op != "all_reduce") continue;
        ++reduces;
        const auto s = std::lower_bound(t->stepLines.begin(), t->stepLines.end(), c.line);
        const auto b = std::lower_bound(batches.begin(), batches.end(), c.line);
        if (s == t->stepLines.begin()) continue;
        const std::int64_t lastStep = *std::prev(s);
        const std::int64_t lastBatch = b == batches.begin() ? -1 : *std::prev(b);
        if (lastStep > lastBatch) ++afterStep;
      }
    }
    if (reduces == 0 || afterStep * 2 <= reduces) continue;
    return Explanation{
        fmt::format(
            "the program all-reduces its gradients after optimizer.step() (rank {}: {} of its {} "
            "all_reduces came after a step and before the next batch), so every step used each "
            "rank's own gradients and the averaged ones are thrown away by the next zero_grad()",
            t->rank, afterStep, reduces),
        "average the gradients between loss.backward() and optimizer.step()"};
  }
  return std::nullopt;
}

// The program's own broadcasts before its first optimizer step that should have made the
// replicas start equal, and why they did not: within a group of part of the world only (each
// node's leader to its node), or of a tensor as large as all the parameters on the world
// (parameters_to_vector's copy, never written back). The cause, or nothing.
std::optional<Explanation> initialBroadcastMissed(const Trace& trace, std::int64_t ddp) {
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    const auto d = t->ddp.find(ddp);
    if (d == t->ddp.end()) continue;
    const std::int64_t firstStep = t->stepLines.empty() ? t->lines + 1 : t->stepLines.front();
    std::set<std::string> partial;
    std::optional<std::string> copyAt;
    for (const auto& [group, list] : t->collectives) {
      for (const auto& c : list) {
        if (c.src != "user" || c.op != "broadcast" || c.line > firstStep) continue;
        if (!spansTheWorld(*t, group, trace.worldSize)) {
          partial.insert(fmt::format("group {} ({})", group, rankList(t->groups.at(group))));
        } else if (group == "0" && c.numel == d->second.parameters && !copyAt) {
          copyAt = c.at;
        }
      }
    }
    if (!partial.empty()) {
      return Explanation{
          fmt::format("rank {} received the initial parameters by broadcast within {} only, a "
                      "group of part of the world (each node's leader to its own node): the "
                      "groups start from different models, and averaging the same gradients keeps "
                      "them apart",
                      t->rank, fmt::join(partial, " and ")),
          "broadcast the initial parameters from rank 0 over the default group (or wrap the model "
          "in DDP, which does)"};
    }
    if (copyAt) {
      return Explanation{
          fmt::format("the program broadcast a tensor as large as all the parameters ({} "
                      "elements{}) before training, yet the replicas differ: it broadcast a copy "
                      "(torch.nn.utils.parameters_to_vector makes a new tensor) and never wrote it "
                      "back, so each rank kept its own initial parameters",
                      d->second.parameters, copyAt->empty() ? "" : ", at " + *copyAt),
          "copy the broadcast vector back (torch.nn.utils.vector_to_parameters(vec, "
          "model.parameters())), or broadcast each parameter's .data in place"};
    }
  }
  return std::nullopt;
}

// NOTE [Parameters outside DDP] (docs/audit.md): an optimizer stepped, beside a DDP module,
// parameters no DDP module holds; nothing averages their gradients. The cause then, else empty.
Explanation outsideDdpCause(const Trace& trace, std::int64_t ddp) {
  const RankTrace* t = firstTraced(trace);
  if (!t) return {};
  const auto d = t->ddp.find(ddp);
  if (d == t->ddp.end() || !d->second.outsideDdp) return {};
  return {fmt::format("optimizer {} ({}) steps {} parameters that are in no DDP module, beside a "
                      "model DDP trains, and nothing averages their gradients: each rank steps "
                      "them with its own (a second network left unwrapped, such as a GAN's "
                      "generator trained through a wrapped discriminator, or a learnable weight "
                      "of the loss kept outside the model), so those replicas part",
                      ddp, d->second.module, d->second.parameters),
          "wrap that network in DistributedDataParallel too (or put the parameters inside the "
          "wrapped model), or all-reduce their gradients before the step"};
}

// NOTE [Hand-written gradient averaging] (docs/audit.md): no DDP, the program all-reduces its
// parameters' gradients itself. That keeps replicas equal only if they start equal (DDP
// broadcasts rank 0's at construction; a hand-written loop must) and every rank sums the same
// gradients in the same order. The cause then, else empty.
Explanation handWrittenCause(const Trace& trace, std::int64_t ddp,
                             const std::vector<std::int64_t>& parted) {
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    const auto d = t->ddp.find(ddp);
    if (d == t->ddp.end() || d->second.averagedBy.empty()) return {};
  }
  if (auto within = reducedWithinAPartOfTheWorld(trace, parted)) return *within;
  if (auto late = reducedAfterTheStep(trace)) return *late;
  if (auto missed = initialBroadcastMissed(trace, ddp)) return *missed;
  return {"the program averages gradients itself (dist.all_reduce of each parameter's .grad, no "
          "DDP), which keeps the replicas equal only if they start equal and every rank reduces "
          "the same tensors in the same order: nothing broadcasts rank 0's initial parameters as "
          "DDP does (a per-rank seed such as torch.manual_seed(rank) before building the model "
          "gives each rank its own), or the ranks all-reduce their gradients in different orders "
          "(iterating a set or dict whose order differs per rank) and sum unrelated tensors",
          "broadcast the parameters from rank 0 once before training (dist.broadcast(p.data, "
          "src=0)), reduce in the parameters' own order, or wrap the model in "
          "DistributedDataParallel"};
}

// A DDP module that ran no forward on any rank while the program trained on batches: the model was
// called around its wrapper (model.module(x)), so no backward all-reduced a gradient. The cause
// then, else empty.
Explanation bypassedCause(const Trace& trace, std::int64_t ddp) {
  std::int64_t trained = 0;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    const auto d = t->ddp.find(ddp);
    if (d == t->ddp.end() || d->second.forwards > 0 || !d->second.averagedBy.empty()) return {};
    for (const auto& p : t->passes) {
      for (const auto& b : p.batches) trained += b.grad ? 1 : 0;
    }
  }
  if (trained == 0) return {};
  return {fmt::format(
              "{} never ran its forward on any rank while the ranks trained on {} batches: the "
              "model was called around its DistributedDataParallel wrapper (model.module(x), or "
              "the model kept before wrapping it), so no backward all-reduced a gradient and each "
              "rank trained its own model",
              moduleName(*firstTraced(trace), ddp), trained),
          "call the wrapper (ddp_model(x)) in training"};
}

// Ranks whose parameters at point `i` are the ones they held at an earlier point: their model went
// back (a checkpoint of that time loaded). Each such rank and where it had them.
// `index`: each rank's point at the place compared.
std::map<int, std::string> wentBack(const std::map<int, std::vector<Point>>& byRank,
                                    const std::map<int, std::size_t>& index) {
  std::map<int, std::string> back;
  for (const auto& [rank, i] : index) {
    const auto& points = byRank.at(rank);
    for (std::size_t j = 0; j < i; ++j) {
      if (points[j].params.hash == points[i].params.hash &&
          points[j].params.backwards < points[i].params.backwards) {
        back.emplace(rank, points[j].where);
        break;
      }
    }
  }
  return back;
}

Explanation restoredCause(const Trace& trace, const std::map<int, std::string>& back) {
  const auto& [rank, earlier] = *back.begin();
  std::vector<std::int64_t> ranks;
  for (const auto& [r, where] : back) ranks.push_back(r);
  // NOTE [A checkpoint on some nodes only] (docs/multi-node.md): the ranks that went back are
  // whole nodes, the others none: the file was where only those nodes could read it.
  const auto nodes = wholeNodesOf(trace, ranks);
  if (!nodes.empty()) {
    return {fmt::format("{} (every rank of node{} {}, and no other) hold the parameters they had "
                        "at {}, although they trained since: they loaded a checkpoint the other "
                        "nodes' ranks did not, a file on a path only {} could read (a node-local "
                        "directory or disk, written by one rank of one node), so a load under "
                        "`if os.path.exists(path):` ran on some nodes only",
                        rankList(ranks), nodes.size() == 1 ? "" : "s", fmt::join(nodes, ", "),
                        earlier, nodes.size() == 1 ? "that node" : "those nodes"),
            "save the checkpoint where every node reads it (shared storage), or on each node's "
            "local rank 0, then dist.barrier(); load the same file on every rank"};
  }
  return {fmt::format("rank {} holds the parameters it had at {}, although it trained since: its "
                      "model was restored to an earlier state, a checkpoint loaded that was not "
                      "the one the other ranks loaded (read before rank 0 had finished writing the "
                      "new one: no barrier after torch.save, or another file)",
                      rank, earlier),
          "after rank 0 saves, call dist.barrier() before any rank loads, and load the same file "
          "on every rank"};
}

// NOTE [Which parameters parted] (docs/audit.md): the names of the module's parameters whose
// hashes at the end differ across the ranks (`params`' parts), or none when not recorded.
std::vector<std::string> partedParameters(const Trace& trace, std::int64_t ddp,
                                          const ParamsSnapshot** any) {
  std::map<std::string, std::set<std::string>> hashes;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    const auto d = t->ddp.find(ddp);
    if (d == t->ddp.end() || !d->second.atEnd || d->second.atEnd->parts.empty()) return {};
    *any = &*d->second.atEnd;
    for (const auto& [name, hash] : d->second.atEnd->parts) hashes[name].insert(hash);
  }
  std::vector<std::string> parted;
  for (const auto& [name, hs] : hashes) {
    if (hs.size() > 1) parted.push_back(name);
  }
  return parted;
}

bool allIn(const std::vector<std::string>& names, const std::vector<std::string>& among) {
  return !names.empty() && std::all_of(names.begin(), names.end(), [&](const std::string& n) {
    return std::find(among.begin(), among.end(), n) != among.end();
  });
}

// The parameters that parted, when they tell the cause: all of them do not train (updated in
// forward from each rank's own batch), or all are weights nn.Embedding(max_norm=…) renormalises.
// The cause then, else empty; `note` gets their names whenever they are known.
Explanation partedParametersCause(const Trace& trace, std::int64_t ddp, std::string& note) {
  const ParamsSnapshot* any = nullptr;
  const std::vector<std::string> parted = partedParameters(trace, ddp, &any);
  if (parted.empty() || !any) return {};
  note = fmt::format("at the end of the run the parameters that differ are {} ({} of {})",
                     fmt::join(parted, ", "), parted.size(), any->parts.size());
  if (allIn(parted, any->frozen)) {
    return {fmt::format("{} do{} not train (requires_grad=False) and differ across ranks: the "
                        "program changes them in place from each rank's own data (running "
                        "statistics kept as nn.Parameter, updated in forward), and DDP neither "
                        "averages nor broadcasts parameters after it is built",
                        fmt::join(parted, ", "), parted.size() == 1 ? "es" : ""),
            "keep such statistics as buffers (self.register_buffer: DDP broadcasts rank 0's at "
            "every forward), or all_reduce them before using them"};
  }
  if (allIn(parted, any->renorm)) {
    return {fmt::format("{} belong{} to nn.Embedding(max_norm=…), whose forward renormalises in "
                        "place the rows each rank's batch looks up: every rank changes other "
                        "rows, outside the gradient allreduce",
                        fmt::join(parted, ", "), parted.size() == 1 ? "s" : ""),
            "drop max_norm and renormalise after optimizer.step() on every rank alike (with "
            "torch.no_grad(): weight.renorm_(…) over all rows)"};
  }
  return {};
}

// The ranks of `odd` (the minority) alone ran a pass of some loader the others never iterate (an
// evaluation under `if rank == 0:`), between the last point where the replicas agreed (`before`
// on each rank, its line) and the one where they differ: their weights were changed around it.
// The cause, or nothing.
std::optional<Explanation> changedAroundTheirOwnPass(const Trace& trace,
                                                     const std::map<int, std::vector<Point>>& byRank,
                                                     const std::map<int, std::size_t>& index,
                                                     const std::vector<std::int64_t>& odd) {
  if (odd.empty() || odd.size() == index.size()) return std::nullopt;
  const auto isOdd = [&](std::int64_t r) { return std::count(odd.begin(), odd.end(), r) > 0; };
  // What the other ranks have: the points they took, the loaders they iterated.
  std::set<std::string> theirPoints;
  std::set<std::int64_t> theirLoaders;
  for (const auto& [r, points] : byRank) {
    const auto& t = trace.ranks[static_cast<std::size_t>(r)];
    if (isOdd(r) || !t) continue;
    for (const auto& q : points) theirPoints.insert(q.where);
    for (const auto& p : t->passes) theirLoaders.insert(p.loader);
  }
  std::optional<std::int64_t> loader;
  std::string where;
  for (auto rank : odd) {
    const auto& t = trace.ranks[static_cast<std::size_t>(rank)];
    const auto i = index.find(static_cast<int>(rank));
    if (!t || i == index.end()) return std::nullopt;
    // `before`: its latest earlier point that the other ranks have too (a pass they all ran).
    const auto& points = byRank.at(static_cast<int>(rank));
    const Point& now = points[i->second];
    const Point* before = nullptr;
    for (std::size_t j = i->second; j-- > 0 && !before;) {
      if (theirPoints.count(points[j].where)) before = &points[j];
    }
    if (!before) return std::nullopt;
    std::optional<std::int64_t> own;
    for (const auto& p : t->passes) {
      if (p.startLine > before->line && p.startLine < now.line && !theirLoaders.count(p.loader)) {
        own = p.loader;
      }
    }
    if (!own || (loader && *loader != *own)) return std::nullopt;
    loader = own;
    where = before->where;
  }
  const RankTrace& first = *trace.ranks[static_cast<std::size_t>(odd.front())];
  return Explanation{
      fmt::format("{} alone ran {} (the other ranks never iterate it) after {}, where the replicas "
                  "still agreed, and {} parameters differ after it: the weights were changed "
                  "around that pass on {} only, such as EMA or averaged weights loaded for an "
                  "evaluation under `if rank == 0:` and not restored (a state_dict() kept as the "
                  "backup holds references to the live tensors, not copies)",
                  rankList(odd), describeLoader(first, *loader), where,
                  odd.size() == 1 ? "its" : "their", odd.size() == 1 ? "that rank" : "those ranks"),
      "back the weights up with copies ({k: v.clone() for k, v in model.state_dict().items()} or "
      "copy.deepcopy) before swapping, or evaluate a separate copy of the model"};
}

// The optimizer steps rank `t` took between trace lines `from` and `to`.
std::int64_t stepsBetween(const RankTrace& t, std::int64_t from, std::int64_t to) {
  const auto a = std::upper_bound(t.stepLines.begin(), t.stepLines.end(), from);
  const auto b = std::lower_bound(t.stepLines.begin(), t.stepLines.end(), to);
  return a < b ? static_cast<std::int64_t>(b - a) : 0;
}

// Each rank's optimizer steps before the point compared, each as the number of forwards with
// gradients before it; nothing when some rank's steps are not recorded.
using StepPositions = std::map<std::int64_t, std::vector<std::int64_t>>;
std::optional<StepPositions> stepsAfterForwards(
    const Trace& trace, const std::map<int, std::vector<Point>>& byRank,
    const std::map<int, std::size_t>& index) {
  StepPositions afterForward;
  for (const auto& [rank, i] : index) {
    const auto& t = trace.ranks[static_cast<std::size_t>(rank)];
    if (!t || t->stepLines.empty()) return std::nullopt;
    const auto& points = byRank.at(rank);
    auto& after = afterForward[rank];
    for (auto line : t->stepLines) {
      if (line >= points[i].line) break;
      after.push_back(std::lower_bound(t->gradForwardLines.begin(), t->gradForwardLines.end(), line) -
                      t->gradForwardLines.begin());
    }
  }
  return afterForward;
}

// NOTE [Steps the ranks took apart] (docs/audit.md): the same backward passes on every rank but
// optimizer steps taken after other forwards by the point compared (the `step` lines): a step
// skipped on a rank's own condition after DDP had averaged the gradients. (The same steps
// everywhere and no step since the replicas agreed, or the same steps after the same batches:
// the weights were changed outside training, divergedCause.)
std::optional<Explanation> stepsParted(const Trace& trace, const std::optional<StepPositions>& steps) {
  if (!steps) return std::nullopt;
  const auto& afterForward = *steps;
  // The first step at which the ranks part: taken after other forwards, or not taken.
  std::size_t most = 0;
  for (const auto& [rank, after] : afterForward) most = std::max(most, after.size());
  for (std::size_t j = 0; j < most; ++j) {
    std::map<std::int64_t, std::vector<std::int64_t>> byForward;  // -1: no such step
    for (const auto& [rank, after] : afterForward) {
      byForward[j < after.size() ? after[j] : -1].push_back(rank);
    }
    if (byForward.size() < 2) continue;
    // The ranks whose step j came later (or never) skipped a step before it.
    std::vector<std::int64_t> skipped;
    std::vector<std::string> parts;
    const auto taken = byForward.upper_bound(-1);  // the earliest forward a step j came after
    const std::int64_t earliest = taken == byForward.end() ? -1 : taken->first;
    for (const auto& [f, rs] : byForward) {
      parts.push_back(f < 0 ? fmt::format("{}: none", rankList(rs))
                            : fmt::format("{}: after forward {}", rankList(rs), f));
      if (f != earliest) skipped.insert(skipped.end(), rs.begin(), rs.end());
    }
    std::sort(skipped.begin(), skipped.end());
    const auto nodes = wholeNodesOf(trace, skipped);
    return Explanation{
        fmt::format("every rank ran the same backward passes, but the ranks' optimizer steps part "
                    "at their step {} ({}): optimizer.step() was skipped on {} on a condition of "
                    "{} own{} after DDP had averaged the gradients, so the replicas that skipped "
                    "kept their old weights",
                    j + 1, fmt::join(parts, "; "), rankList(skipped),
                    skipped.size() == 1 ? "its" : "their",
                    nodes.empty()
                        ? " (a loss-spike, NaN or gradient-norm guard on the rank's own loss, a "
                          "step under `if rank == 0:`)"
                        : fmt::format(", decided per node (the ranks of node{} {} skipped "
                                      "together: a value reduced within a node's group, not "
                                      "across the world)",
                                      nodes.size() == 1 ? "" : "s", fmt::join(nodes, ", "))),
        "decide a skip on every rank together (all_reduce the loss or the flag over the whole "
        "world before choosing), or zero the update on every rank"};
  }
  return std::nullopt;
}

// No rank took an optimizer step between the last point where the replicas agreed and this one
// (NOTE [Steps the ranks took apart]): the weights were edited outside training.
std::optional<Explanation> editedOutsideTraining(const Trace& trace,
                                                 const std::map<int, std::vector<Point>>& byRank,
                                                 const std::map<int, std::size_t>& index,
                                                 const std::vector<std::int64_t>& odd) {
  for (const auto& [rank, i] : index) {
    const auto& t = trace.ranks[static_cast<std::size_t>(rank)];
    if (!t || t->stepLines.empty() || i == 0) return std::nullopt;
    const auto& points = byRank.at(rank);
    if (stepsBetween(*t, points[i - 1].line, points[i].line) > 0) return std::nullopt;
  }
  return Explanation{
      fmt::format("{} changed between the last point where the replicas agreed and this one, "
                  "where no rank took an optimizer step: the weights were edited in place outside "
                  "training on {} only (pruning, rounding the live weights for an export, a "
                  "callback or hook under `if rank == 0:` or @rank_zero_only)",
                  rankList(odd), odd.size() == 1 ? "that rank" : "those ranks"),
      "change the weights on every rank, or change a copy (copy.deepcopy) for the export"};
}

Explanation divergedCause(const Trace& trace, const std::map<int, std::vector<Point>>& byRank,
                          const std::map<int, std::size_t>& index,
                          const std::vector<std::int64_t>& odd,
                          const std::optional<StepPositions>& steps) {
  if (const auto back = wentBack(byRank, index); !back.empty()) return restoredCause(trace, back);
  std::set<std::int64_t> backwards;
  for (const auto& [rank, i] : index) backwards.insert(byRank.at(rank)[i].params.backwards);
  if (backwards.size() == 1 && *backwards.begin() == 0) {
    return {"the replicas differ before any backward pass, although DDP broadcasts rank 0's "
            "parameters and buffers when it is built: the model was changed on some ranks after "
            "DDP(model) (a checkpoint loaded or weights re-initialised on one rank, a parameter "
            "edited in place)",
            "load or change the model before wrapping it, on every rank"};
  }
  if (backwards.size() > 1) {
    return {fmt::format("the ranks had run different numbers of backward passes by then ({}), "
                        "so their models took different steps: a rank that skipped or added a "
                        "step (a per-rank condition around backward or optimizer.step())",
                        fmt::join(backwards, ", ")),
            "run the same steps on every rank"};
  }
  if (auto edited = editedOutsideTraining(trace, byRank, index, odd)) return std::move(*edited);
  // The same steps after the same batches on every rank (the gradients and rates they applied
  // already compared): what is left is a change to the weights between steps.
  if (steps) {
    const auto& first = steps->begin()->second;
    const bool same = !first.empty() && std::all_of(steps->begin(), steps->end(), [&](const auto& r) {
      return r.second == first;
    });
    if (same) {
      return {fmt::format("every rank ran the same backward passes and took the same {} optimizer "
                          "steps after the same batches, so the weights of {} were changed in "
                          "place between steps: a callback or hook that edits them under "
                          "@rank_zero_only or `if rank == 0:` (Lookahead's slow weights, pruning, "
                          "a weight reset), or parameters made trainable after DDP was built "
                          "(DDP reduces only the gradients it registered at construction)",
                          first.size(), rankList(odd)),
              "change the weights on every rank (drop rank_zero_only from a callback that edits "
              "them), and unfreeze by rebuilding the DDP wrapper"};
    }
  }
  return {fmt::format(
      "every rank had run the same {} backward passes, whose gradients DDP averages alike, so the "
      "models were changed outside the allreduce on some ranks: an optimizer step on some ranks "
      "only (`if rank == 0: optimizer.step()`), an optimizer or learning-rate schedule that "
      "differs per rank, a parameter changed in place on one rank, or parameters made trainable "
      "after DDP was built (requires_grad set after wrapping, a fine-tuning unfreeze: DDP "
      "reduces only the gradients it registered at construction); the trace cannot tell these "
      "apart",
      *backwards.begin()),
      "step the same optimizer on every rank, and unfreeze by rebuilding the DDP wrapper"};
}

void checkConsistency(const Trace& trace, std::int64_t ddp, std::vector<Violation>& out) {
  // NOTE [Post-local SGD]: under post_localSGD_hook the replicas agree only at the steps where
  // the program averages them over the world; between those they differ by design.
  if (!localSgdHook(trace, ddp).empty() && averagedOverTheWorld(trace, ddp)) return;
  std::map<int, std::vector<Point>> byRank;
  for (const auto& t : trace.ranks) {
    if (t) byRank[t->rank] = pointsOf(*t, ddp);
  }
  if (byRank.size() < 2) return;
  const auto& reference = byRank.begin()->second;
  // Each rank's points by where they were taken: a pass some ranks ran and others did not (an
  // evaluation on rank 0 only) is compared among those that ran it, the others' points still
  // with each other.
  std::map<int, std::map<std::string, std::size_t>> at;
  for (const auto& [rank, points] : byRank) {
    for (std::size_t j = 0; j < points.size(); ++j) at[rank].emplace(points[j].where, j);
  }
  for (std::size_t i = 0; i < reference.size(); ++i) {
    std::map<std::string, std::vector<std::int64_t>> byHash;
    std::map<int, std::size_t> index;  // rank -> its point at reference[i].where
    for (const auto& [rank, points] : byRank) {
      const auto j = at[rank].find(reference[i].where);
      if (j == at[rank].end()) continue;
      index[rank] = j->second;
      byHash[points[j->second].params.hash].push_back(rank);
    }
    if (byHash.size() < 2) continue;
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> sides(byHash.begin(), byHash.end());
    std::stable_sort(sides.begin(), sides.end(),
                     [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
    std::vector<std::string> parts;
    std::vector<std::int64_t> odd;
    for (std::size_t k = 0; k < sides.size(); ++k) {
      parts.push_back(fmt::format("{} {}", rankList(sides[k].second), shortHash(sides[k].first)));
      if (k > 0) odd.insert(odd.end(), sides[k].second.begin(), sides[k].second.end());
    }
    if (sides.front().second.size() == 1) {  // no majority: every rank holds its own model
      odd.clear();
      for (const auto& [rank, points] : byRank) odd.push_back(rank);
    }
    std::sort(odd.begin(), odd.end());
    Violation v;
    v.property = std::string(property::kReplicaConsistency);
    v.ranks = odd;
    v.epoch = reference[i].epoch;
    v.detail = fmt::format("{} differs across ranks at {}: parameter hashes {}",
                           moduleName(*trace.ranks[static_cast<std::size_t>(byRank.begin()->first)], ddp),
                           reference[i].where, fmt::join(parts, "; "));
    std::string partedNote;
    Explanation byParts = partedParametersCause(trace, ddp, partedNote);
    Explanation why = outsideDdpCause(trace, ddp);
    if (why.empty()) why = handWrittenCause(trace, ddp, odd);
    if (why.empty()) why = bypassedCause(trace, ddp);
    if (why.empty()) why = noSyncCause(trace, ddp, v.detail);
    if (why.empty()) why = ddpOverAPartOfTheWorld(trace, ddp).value_or(Explanation{});
    if (why.empty()) why = differentLearningRates(trace, reference[i].line).value_or(Explanation{});
    if (why.empty()) why = localSgdCause(trace, ddp, odd).value_or(Explanation{});
    // NOTE [A backward some ranks never reduced]: their step applied their own gradients.
    if (why.empty()) {
      if (const auto unreduced = bucketsNeverReduced(trace)) {
        why = {fmt::format("a consequence of the collective-mismatch finding: {} stepped after a "
                           "backward whose gradients they never all-reduced, with their own",
                           rankList(unreduced->ranks)),
               unreduced->help};
      }
    }
    // A step skipped on some ranks makes their later steps apply other batches' gradients:
    // named before the gradients those steps compare.
    const auto steps = stepsAfterForwards(trace, byRank, index);
    if (why.empty()) why = stepsParted(trace, steps).value_or(Explanation{});
    std::string gradientsNote;
    if (why.empty()) {
      why = changedGradients(trace, ddp, reference[i].line, gradientsNote).value_or(Explanation{});
    }
    if (why.empty()) why = std::move(byParts);
    if (why.empty()) why = changedAroundTheirOwnPass(trace, byRank, index, odd).value_or(Explanation{});
    if (why.empty()) why = divergedCause(trace, byRank, index, odd, steps);
    if (!partedNote.empty()) v.notes.push_back(partedNote);
    if (!gradientsNote.empty()) v.notes.push_back(gradientsNote);
    explain(v, std::move(why));
    out.push_back(std::move(v));
    return;  // once diverged, every later point differs too
  }
}

// NOTE [A trial's model, restored] (docs/audit.md): a module whose optimizer stepped between two
// points (the `step` lines) and whose parameters are the same at both, while the program went on
// to train another DDP module: a trial run restored its weights (Lightning's learning-rate finder
// and batch-size scaler do, then fit builds the module it trains). Not updates that never landed.
bool restoredForAnother(const RankTrace& t, std::int64_t ddp, std::int64_t from, std::int64_t to) {
  const bool stepped = std::any_of(t.stepLines.begin(), t.stepLines.end(),
                                   [&](std::int64_t l) { return l > from && l < to; });
  if (!stepped) return false;
  return std::any_of(t.passes.begin(), t.passes.end(), [&](const PassRecord& q) {
    return q.startLine > from && !q.params.empty() && q.params.count(ddp) == 0 &&
           std::any_of(q.batches.begin(), q.batches.end(), [](const BatchRecord& b) { return b.grad; });
  });
}

// A rank not among `still` whose parameters changed between the two points where `still`'s did
// not (the same points by their place in the run), or nothing.
std::optional<int> movedElsewhere(const Trace& trace, std::int64_t ddp,
                                  const std::vector<std::int64_t>& still) {
  const auto& stillRank = trace.ranks[static_cast<std::size_t>(still.front())];
  if (!stillRank) return std::nullopt;
  const auto stuck = pointsOf(*stillRank, ddp);
  for (std::size_t i = 0; i + 1 < stuck.size(); ++i) {
    if (stuck[i].params.hash != stuck[i + 1].params.hash) continue;
    for (const auto& t : trace.ranks) {
      if (!t || std::count(still.begin(), still.end(), t->rank)) continue;
      const auto points = pointsOf(*t, ddp);
      if (i + 1 < points.size() && points[i].where == stuck[i].where &&
          points[i + 1].where == stuck[i + 1].where && points[i].params.hash == stuck[i].params.hash &&
          points[i + 1].params.hash != points[i].params.hash) {
        return t->rank;
      }
    }
  }
  return std::nullopt;
}

void checkUpdates(const Trace& trace, std::int64_t ddp, std::vector<Violation>& out) {
  std::vector<std::int64_t> ranks;
  std::optional<Violation> first;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    const auto points = pointsOf(*t, ddp);
    // A rank that failed: its last interval was cut by the failure (an allreduce that raised
    // leaves the step undone), a consequence of the rank-failure, not a finding of its own.
    const std::size_t judged = t->endedNormally() || points.empty() ? points.size() : points.size() - 1;
    for (std::size_t i = 0; i + 1 < judged; ++i) {
      const std::int64_t backwards = points[i + 1].params.backwards - points[i].params.backwards;
      if (backwards <= 0 || points[i].params.hash != points[i + 1].params.hash) continue;
      if (restoredForAnother(*t, ddp, points[i].line, points[i + 1].line)) continue;
      ranks.push_back(t->rank);
      if (!first) {
        Violation v;
        v.property = std::string(property::kParameterUpdates);
        v.epoch = points[i].epoch;
        v.detail = fmt::format("{}'s parameters are the same at {} and at {}, although it ran {} "
                               "backward pass{} in between",
                               moduleName(*t, ddp), points[i].where, points[i + 1].where, backwards,
                               backwards == 1 ? "" : "es");
        first = std::move(v);
      }
      break;
    }
  }
  if (!first) return;
  first->ranks = ranks;
  if (const auto moved = movedElsewhere(trace, ddp, ranks)) {
    first->likelyCause = fmt::format(
        "rank {}'s parameters moved over the same interval, and DDP gives every rank the same "
        "averaged gradients, so these ranks' updates were made and then undone: their model was "
        "restored to the earlier state (a checkpoint of that time loaded: read before rank 0 had "
        "finished writing the new one, with no barrier after torch.save)",
        *moved);
    first->help = "after rank 0 saves, call dist.barrier() before any rank loads, and load the "
                  "same file on every rank";
  }
  out.push_back(std::move(*first));
}

}  // namespace

void checkReplicas(const Trace& trace, std::vector<Violation>& out) {
  std::set<std::int64_t> modules;
  for (const auto& t : trace.ranks) {
    if (t) for (const auto& [id, d] : t->ddp) modules.insert(id);
  }
  for (auto ddp : modules) {
    checkConsistency(trace, ddp, out);
    checkUpdates(trace, ddp, out);
  }
}

}  // namespace ddph::audit
