// One loader, one id, on every rank (NOTE [Loaders that only some ranks build]).
#include "loader_ids.h"

#include <map>
#include <string>
#include <utility>

namespace ddph::trace {

namespace {

// What names a loader across ranks: the line that made it and its place among the rank's loaders
// made at that line (not its dataset: ranks may hold shards of other lengths).
using LoaderKey = std::pair<std::string, int>;

std::map<std::int64_t, LoaderKey> keysOf(const RankTrace& t) {
  std::map<std::int64_t, LoaderKey> keys;
  std::map<std::string, int> seen;
  for (const auto& [id, l] : t.loaders) keys[id] = {l.builtAt, seen[l.builtAt]++};
  return keys;
}

// Whether some id names loaders of different keys on two ranks (every loader saying where it was
// made; a trace without `built_at` is left as it is).
bool idsDisagree(const Trace& trace) {
  std::map<std::int64_t, LoaderKey> first;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    for (const auto& [id, key] : keysOf(*t)) {
      if (key.first.empty()) return false;
      const auto [it, fresh] = first.emplace(id, key);
      if (!fresh && it->second != key) return true;
    }
  }
  return false;
}

void renumber(RankTrace& t, const std::map<std::int64_t, std::int64_t>& to) {
  std::map<std::int64_t, LoaderRecord> loaders;
  for (auto& [id, l] : t.loaders) {
    l.id = to.at(id);
    loaders.emplace(l.id, std::move(l));
  }
  t.loaders = std::move(loaders);
  t.passIndex.clear();
  for (std::size_t i = 0; i < t.passes.size(); ++i) {
    t.passes[i].loader = to.at(t.passes[i].loader);
    t.passIndex[{t.passes[i].loader, t.passes[i].iter}] = i;
  }
  for (auto& [group, list] : t.collectives) {
    for (auto& c : list) {
      if (c.loader >= 0 && to.count(c.loader)) c.loader = to.at(c.loader);
    }
  }
}

}  // namespace

void alignLoaderIds(Trace& trace) {
  if (!idsDisagree(trace)) return;
  // Ids by first appearance, rank by rank, each rank's loaders in their own order.
  std::map<LoaderKey, std::int64_t> ids;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    for (const auto& [id, key] : keysOf(*t)) ids.emplace(key, static_cast<std::int64_t>(ids.size()));
  }
  for (auto& t : trace.ranks) {
    if (!t) continue;
    std::map<std::int64_t, std::int64_t> to;
    for (const auto& [id, key] : keysOf(*t)) to[id] = ids.at(key);
    renumber(*t, to);
  }
}

}  // namespace ddph::trace
