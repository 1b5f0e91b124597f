#pragma once
// Private to the scenario library: the datasets one rank of a scenario reads (a concatenation
// counts as one source), the datasets the epoch-end checks are about, and each source's shard.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddph/scenario/scenario.h"
#include "ddph/sampler/sampler.h"

namespace ddph::scenario {

/// One dataset as a rank reads it.
struct Source {
  DatasetSpec spec;
  std::unique_ptr<sampler::Sampler> sampler;  ///< null for "strided"
  /// per-rank file order (faults.per_rank_order); empty: identity
  std::vector<sampler::Index> listing;
};

/// A dataset the epoch-end checks are about: a slice [offset, offset + size) of a source's ids.
struct Checked {
  std::string name;
  std::int64_t size = 0;
  std::size_t source = 0;
  std::int64_t offset = 0;
  const DatasetSpec* spec = nullptr;
  /// NOTE [Checking a concatenation]: coverage is judged per dataset (which one lost samples),
  /// lengths, disjointness (padding) and reshuffle over the whole concatenation the sampler saw.
  enum class Scope { kWhole, kPartOfConcat, kConcatenation } scope = Scope::kWhole;
};

struct RankSources {
  std::vector<Source> sources;
  std::vector<Checked> checked;  ///< points into the scenario's datasets
};

/// The sources of scenario `s` as rank `rank` reads them.
RankSources buildRankSources(const Scenario& s, std::int64_t rank);

/// The ids rank `rank` of `world` reads from `src` in `epoch` (its file listing applied).
std::vector<sampler::Index> shardOf(const Source& src, std::int64_t world, std::int64_t rank,
                                   std::int64_t epoch, std::int64_t seed);

/// The batches rank `rank` of `world` draws from `src` in `epoch`, batched as the scenario says.
std::vector<std::vector<sampler::Index>> batchesOf(const Scenario& s, const Source& src,
                                                  std::int64_t world, std::int64_t rank,
                                                  std::int64_t epoch, std::int64_t seed);

/// [resume]: the steps of epoch 0 every rank takes on the first world before the stop
/// (stop_after_steps, or all of its shard's batches when they are fewer; shards are equal).
std::int64_t stepsBeforeStop(const Scenario& s, const Source& src);

}  // namespace ddph::scenario
