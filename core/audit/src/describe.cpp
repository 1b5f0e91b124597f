// Descriptions of trace events for findings (audit_checks.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "audit_checks.h"
#include "ddph/sampler/line_protocol_sampler.h"

namespace ddph::audit {

using sampler::Violation;

std::string describeCollective(const CollectiveRecord& c) {
  std::string what = c.op;
  if (!c.dtype.empty()) what += fmt::format(" {}[{}]", c.dtype, c.numel);
  if (c.peer >= 0) what += fmt::format(" with rank {}", c.peer);
  if (c.root >= 0) what += fmt::format(" rooted at rank {}", c.root);
  if (c.src == "ddp") {
    what += c.shadow ? fmt::format(" (DDP gradient bucket {}, Join's shadow of backward {})",
                                   c.bucket, c.backward)
                     : fmt::format(" (DDP gradient bucket {} of backward {})", c.bucket, c.backward);
  } else if (!c.at.empty()) {
    what += c.via.empty() ? fmt::format(" (the program's own call at {})", c.at)
                          : fmt::format(" (the program's own call at {}, through {})", c.at, c.via);
  } else {
    what += " (the program's own call)";
  }
  return what;
}

std::string describeGroupCall(const GroupCall& c) {
  return fmt::format("new_group([{}]){}", fmt::join(c.ranks, ", "), c.at.empty() ? "" : " at " + c.at);
}

bool drivenByLightning(const RankTrace& t) { return t.framework.rfind("lightning", 0) == 0; }

std::string frameworkHint(const RankTrace& t, std::string_view lightning) {
  return drivenByLightning(t) ? std::string(lightning) : std::string();
}

// Pickled objects (all_gather_object, …) differ in size legitimately: their op must agree.
std::string collectiveSignature(const CollectiveRecord& c) {
  // A rooted call's root is part of it: torch requires every member to name the same one.
  const std::string root = c.root >= 0 ? fmt::format(" root {}", c.root) : "";
  if (c.op.find("object") != std::string::npos) return c.op + root;
  return fmt::format("{} {}[{}]{}", c.op, c.dtype, c.numel, root);
}

std::string collectiveNumber(const CollectiveRecord& c) {
  return c.group == "0" ? fmt::format("#{} on the default group", c.seq)
                        : fmt::format("#{} on group {}", c.seq, c.group);
}

std::string describeLoader(const RankTrace& t, std::int64_t loader) {
  const auto it = t.loaders.find(loader);
  if (it == t.loaders.end()) return fmt::format("loader {}", loader);
  const LoaderRecord& l = it->second;
  if (l.sampler < 0 && l.datasetLen == 0) {  // an iterable dataset: no sampler, no length
    return fmt::format("loader {} ({}an iterable dataset)", loader,
                       l.dataset.empty() ? "" : l.dataset + ", ");
  }
  return l.dataset.empty()
             ? fmt::format("loader {} ({} samples)", loader, l.datasetLen)
             : fmt::format("loader {} ({}, {} samples)", loader, l.dataset, l.datasetLen);
}

const PassRecord* lastBatchPass(const RankTrace& t) {
  const PassRecord* last = nullptr;
  std::int64_t lastLine = -1;
  for (const auto& p : t.passes) {
    if (!p.batches.empty() && p.batches.back().line > lastLine) {
      last = &p;
      lastLine = p.batches.back().line;
    }
  }
  return last;
}

std::string whereRankStood(const RankTrace& t) {
  const PassRecord* last = lastBatchPass(t);
  if (!last) return "before its first batch";
  return fmt::format("at epoch {} step {} of {}", last->iter, last->batches.back().seq,
                     describeLoader(t, last->loader));
}

const RankTrace* firstTraced(const Trace& trace) {
  for (const auto& t : trace.ranks) {
    if (t) return &*t;
  }
  return nullptr;
}

void explain(Violation& v, Explanation e) {
  v.likelyCause = std::move(e.cause);
  v.help = std::move(e.help);
}

std::string rankList(const std::vector<std::int64_t>& ranks) {
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "));
}

std::vector<std::pair<std::int64_t, std::int64_t>> consecutiveRuns(
    const std::vector<std::int64_t>& sorted) {
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    runs.emplace_back(sorted[i], sorted[j]);
    i = j + 1;
  }
  return runs;
}

std::string interpreterOf(const Trace& trace) {
  if (trace.launch && !trace.launch->command.empty()) return trace.launch->command.front();
  return "python3";
}

std::string rerunCommand(const Trace& trace, RerunWith with) {
  std::vector<std::string> words{"ddp-sim", "launch", "--audit"};
  const LaunchRecord* launch = trace.launch && !trace.launch->command.empty() ? &*trace.launch
                                                                               : nullptr;
  if (with.cpu || (launch && launch->cpu)) words.emplace_back("--cpu");
  if (launch && launch->gpus) words.push_back(fmt::format("--gpus {}", *launch->gpus));
  if (with.standInData || (launch && launch->standInData)) words.emplace_back("--stand-in-data");
  // Emulated nodes (the headers' node and LOCAL_WORLD_SIZE): the same --nnodes N -n M.
  int nodes = 1, perNode = 0;
  for (const auto& t : trace.ranks) {
    if (!t || !t->node) continue;
    nodes = std::max(nodes, *t->node + 1);
    perNode = t->localWorldSize.value_or(perNode);
  }
  if (nodes > 1 && perNode > 0) {
    words.push_back(fmt::format("--nnodes {} -n {}", nodes, perNode));
  } else {
    words.push_back(fmt::format("-n {}", launch ? launch->worldSize : trace.worldSize));
  }
  words.emplace_back("--");
  if (launch) {
    for (const auto& a : launch->command) words.push_back(sampler::shellQuote(a));
  } else {
    words.push_back(interpreterOf(trace));
    const auto first = std::find_if(trace.ranks.begin(), trace.ranks.end(),
                                    [](const auto& t) { return t.has_value(); });
    if (first != trace.ranks.end()) {
      for (const auto& a : (*first)->argv) words.push_back(sampler::shellQuote(a));
    }
  }
  return fmt::format("{}", fmt::join(words, " "));
}

// "896..999", "3, 17, 40" or "3, 17, 40, … (12 in all)": runs of consecutive indices as ranges.
std::string describeIndices(const std::vector<sampler::Index>& sorted) {
  std::vector<std::string> runs;
  for (const auto& [first, last] : consecutiveRuns(sorted)) {
    runs.push_back(last - first >= 2  ? fmt::format("{}..{}", first, last)
                   : last == first + 1 ? fmt::format("{}, {}", first, last)
                                       : fmt::format("{}", first));
  }
  constexpr std::size_t kShown = 6;
  if (runs.size() <= kShown) return fmt::format("{}", fmt::join(runs, ", "));
  return fmt::format("{}, … ({} in all)",
                     fmt::join(runs.begin(), runs.begin() + static_cast<long>(kShown), ", "),
                     sorted.size());
}

}  // namespace ddph::audit
