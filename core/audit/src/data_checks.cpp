// The data properties on a real run. For every pass over a loader (its epoch k), each rank's full
// order is known when the sampler's order is (torch's DistributedSampler recomputed bit-exactly,
// SequentialSampler) or when a recorded pass ran to its end; what each rank consumed is known from
// its batches (data_pass.cpp). Partitions of those go through the property definitions of
// partition_checks.h, one family of checks a file (data_checks.h):
//  - the sampler's partition: coverage, disjointness (data_partition_checks.cpp, whether the
//    ranks hold one dataset first: data_one_dataset_checks.cpp; samplers that draw with
//    replacement: data_replacement_checks.cpp); consecutive epochs: reshuffle
//    (data_reshuffle_checks.cpp);
//  - a pass dropped before its end (zip, break, islice): coverage of what was consumed
//    (data_consumed_checks.cpp);
//  - an evaluation pass (every batch under no_grad): no-duplicates of what was consumed
//    (data_evaluation_checks.cpp);
//  - an iterable dataset's pass, known by its batches' content (data_stream_checks.cpp).
// Each finding is reported once per loader and property, at the first epoch it shows, with the
// number of epochs where it shows. This file is the driver: each loader's passes, in order,
// through the families, then what only the loader's whole run shows (across_epochs_checks.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "data_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

void DataFindings::record(std::int64_t loader, const Violation& v, const std::string& kind) {
  auto key = std::make_tuple(loader, v.property, kind);
  auto it = findings_.find(key);
  if (it == findings_.end()) {
    findings_.emplace(key, Finding{v, 1});
  } else {
    ++it->second.epochs;
  }
}

void DataFindings::notApplicable(std::int64_t loader, const std::string& why) {
  const std::string note = fmt::format("{}: {}", describeLoader(*firstTraced(trace_), loader), why);
  if (std::find(notes_.begin(), notes_.end(), note) == notes_.end()) notes_.push_back(note);
}

bool DataFindings::anyFor(std::int64_t loader) const {
  return std::any_of(findings_.begin(), findings_.end(),
                     [&](const auto& f) { return std::get<0>(f.first) == loader; });
}

std::optional<std::pair<std::int64_t, std::int64_t>> DataFindings::neverTrained(
    std::int64_t loader, const std::vector<RankPass>& ranks) {
  const std::int64_t n = ranks[0].pass->datasetLen;
  const auto key = std::make_tuple(loader, ranks[0].trace->rank, n);
  if (const auto it = neverTrained_.find(key); it != neverTrained_.end()) return it->second;
  std::optional<std::pair<std::int64_t, std::int64_t>> answer;
  std::set<sampler::Index> trained;
  bool known = true;
  for (const auto& rp : ranks) {
    for (const auto& p : rp.trace->passes) {
      if (!known || p.loader != loader || !trainsOnBatches(p) || p.datasetLen != n) continue;
      const auto used = consumedIndices(*rp.trace, p, samplerOrder(*rp.trace, p, orders_));
      if (!used) known = false;
      else trained.insert(used->begin(), used->end());
    }
  }
  if (known) answer = std::make_pair(n - static_cast<std::int64_t>(trained.size()), n);
  neverTrained_.emplace(key, answer);
  return answer;
}

void DataFindings::appendTo(std::vector<Violation>& out) {
  for (auto& [key, f] : findings_) {
    if (f.epochs > 1) f.first.notes.push_back(fmt::format("the same in {} epochs", f.epochs));
    out.push_back(std::move(f.first));
  }
}

namespace {

// The loaders any rank built.
std::set<std::int64_t> loadersOf(const Trace& trace) {
  std::set<std::int64_t> loaders;
  for (const auto& t : trace.ranks) {
    if (t) for (const auto& [id, l] : t->loaders) loaders.insert(id);
  }
  return loaders;
}

// The passes over `loader` of the rank that iterated it most often.
std::int64_t passCount(const Trace& trace, std::int64_t loader) {
  std::int64_t iters = 0;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    for (const auto& p : t->passes) {
      if (p.loader == loader) iters = std::max(iters, p.iter + 1);
    }
  }
  return iters;
}

// Every pass of `loader`, in order, through the families: a pass on some ranks only, an iterable
// dataset's stream, else the partition and what builds on it, and the evaluation's checks.
void checkLoader(DataFindings& findings, std::int64_t loader) {
  const std::int64_t iters = passCount(findings.trace(), loader);
  std::vector<RankPass> previous, previousStream;
  bool judged = false;
  for (std::int64_t k = 0; k < iters; ++k) {
    auto ranks = passAcrossRanks(findings.trace(), loader, k, findings.orders());
    if (ranks.empty()) {
      if (!checkPassOnSomeRanks(findings, loader, k)) break;
      judged = true;
      continue;
    }
    if (checkStream(findings, loader, k, ranks)) {
      judged = true;
      if (!previousStream.empty()) checkStreamOrder(findings, loader, previousStream, ranks);
      previousStream = std::move(ranks);
      continue;
    }
    judged = judged || allKnown(ranks, false);
    const bool partitionOk = checkPartition(findings, loader, k, ranks);
    if (partitionOk && !previous.empty()) checkNewOrder(findings, loader, previous, ranks);
    if (partitionOk) checkConsumed(findings, loader, k, ranks);
    checkEvaluation(findings, loader, k, ranks);
    previous = std::move(ranks);
  }
  if (!judged && !findings.anyFor(loader) && iters > 0) {
    findings.note(fmt::format(
        "{}: no epoch's partition could be checked (its sampler's order is known only from a "
        "pass run to its end on every rank)",
        describeLoader(*firstTraced(findings.trace()), loader)));
  }
}

// NOTE [Across epochs] (docs/audit.md): what only the loader's whole run shows, for a loader
// whose epochs each look healthy (no finding of its own so far).
void checkAcrossEpochs(DataFindings& findings, std::int64_t loader) {
  if (findings.anyFor(loader)) return;
  if (auto v = neverTrainedInAnyEpoch(findings.trace(), loader, findings.orders())) {
    findings.judged(property::kCoverage);
    findings.record(loader, *v, "across-epochs");
  }
  if (auto v = replayedFromACache(findings.trace(), loader)) {
    findings.judged(property::kReshuffle);
    findings.record(loader, *v, "across-epochs");
  }
}

}  // namespace

void checkData(const Trace& trace, std::vector<Violation>& out, std::vector<std::string>& notes,
               std::set<std::string>& judged) {
  DataFindings findings(trace, notes, judged);
  for (auto loader : loadersOf(trace)) {
    checkLoader(findings, loader);
    checkAcrossEpochs(findings, loader);
  }
  checkRemadeLoaders(findings);
  findings.appendTo(out);
}

}  // namespace ddph::audit
