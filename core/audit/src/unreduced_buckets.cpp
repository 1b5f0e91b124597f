// collective-mismatch: a DDP backward whose gradient buckets some ranks never reduced (NOTE [A
// backward some ranks never reduced], docs/audit.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>

#include "audit_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

// DDP's error when a backward left some of its parameters without a gradient: the reduction it
// began never finished, and the next forward finds it so.
constexpr std::string_view kUnfinishedReduction =
    "Expected to have finished reduction in the prior iteration";
constexpr std::string_view kIndicesWithoutGrad = "did not receive grad for rank";

// The last DDP backward that launched a gradient bucket's all_reduce on `t`, and that collective.
const CollectiveRecord* lastBucket(const RankTrace& t) {
  const CollectiveRecord* last = nullptr;
  for (const auto& [group, list] : t.collectives) {
    for (const auto& c : list) {
      if (c.src == "ddp" && c.backward >= 0 && (!last || c.backward > last->backward)) last = &c;
    }
  }
  return last;
}

// The parameter indices DDP's error names ("… did not receive grad for rank 1: 0 1 2"), as the
// parameters' names where the end-of-run hashes list them in order.
std::vector<std::string> parametersWithoutGrad(const RankTrace& t) {
  std::vector<std::string> out;
  const std::string& m = *t.errorMessage;
  const auto at = m.find(kIndicesWithoutGrad);
  if (at == std::string::npos) return out;
  const auto colon = m.find(':', at);
  if (colon == std::string::npos) return out;
  std::istringstream in(m.substr(colon + 1, m.find('\n', colon) - colon - 1));
  const auto& parts = t.ddp.empty() || !t.ddp.begin()->second.atEnd
                          ? std::vector<std::pair<std::string, std::string>>{}
                          : t.ddp.begin()->second.atEnd->parts;
  for (long i = 0; in >> i;) {
    out.push_back(i >= 0 && static_cast<std::size_t>(i) < parts.size() ? parts[i].first
                                                                       : std::to_string(i));
  }
  return out;
}

}  // namespace

std::optional<Violation> bucketsNeverReduced(const Trace& trace) {
  std::vector<std::int64_t> raised, waiting;
  const CollectiveRecord* ahead = nullptr;
  std::int64_t behindBackward = -1;
  for (std::size_t r = 0; r < trace.ranks.size(); ++r) {
    const auto& t = trace.ranks[r];
    if (!t) return std::nullopt;
    const CollectiveRecord* last = lastBucket(*t);
    if (!last) return std::nullopt;
    if (t->errorMessage && t->errorMessage->find(kUnfinishedReduction) != std::string::npos) {
      raised.push_back(static_cast<std::int64_t>(r));
      behindBackward = std::max(behindBackward, last->backward);
    } else if (!last->done) {
      waiting.push_back(static_cast<std::int64_t>(r));
      if (!ahead || last->backward > ahead->backward) ahead = last;
    }
  }
  // The ranks that raised reduced every bucket up to a backward the waiting ranks went past.
  if (raised.empty() || waiting.empty() || !ahead || ahead->backward <= behindBackward)
    return std::nullopt;
  const RankTrace& first = *trace.ranks[static_cast<std::size_t>(raised.front())];
  const std::vector<std::string> params = parametersWithoutGrad(first);
  Violation v;
  v.property = std::string(property::kCollectiveMismatch);
  v.ranks = raised;
  v.epoch = ahead->iter;
  v.step = ahead->batchSeq;
  v.detail = fmt::format(
      "{} waited in {}; {} made no collective for that backward (their last gradient all_reduce "
      "was backward {}'s), and their next forward raised DDP's \"{}\"",
      rankList(waiting), describeCollective(*ahead), rankList(raised), behindBackward,
      kUnfinishedReduction);
  v.likelyCause = fmt::format(
      "in backward {} of {} some parameters DDP reduces received no gradient{}: parameters frozen "
      "(requires_grad_(False)) or left out of the forward on those ranks only, by a condition of "
      "their own, after DDP was built; their gradient bucket never became ready, so they never "
      "joined the all_reduce the other ranks waited in",
      ahead->backward, rankList(raised),
      params.empty() ? "" : fmt::format(" ({})", fmt::join(params, ", ")));
  v.help = "decide freezing (or skipping a part of the model) on every rank together (all_reduce "
           "the condition first); freeze before wrapping the model in DDP, or wrap it again after";
  return v;
}

}  // namespace ddph::audit
