#pragma once
// A scenario: the data pipeline every rank runs, and the faults injected into it.
//
// Scenario files are TOML (schema in scenario_file.h and docs/ddp-sim.md, "Scenario files"). The built-in
// catalogue (builtin_scenarios.h) is written in the same format, so both go through one parser.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddph::scenario {

/// One dataset and the distributed sampler over it.
struct DatasetSpec {
  std::string name;
  std::int64_t size = 0;
  /// "pytorch" | "elastic" | "libtorch-random" | "libtorch-sequential" | "strided" (rank::W
  /// without padding, the hand-rolled sharding that gives ranks different lengths).
  std::string sampler = "pytorch";
  bool shuffle = true;
  bool samplerDropLast = false;  ///< DistributedSampler(drop_last=…)
};

/// How several datasets are iterated together in one step.
enum class Combine {
  kZip,       ///< one batch of each per step; stops with the shortest (zip())
  kCycle,     ///< one batch of each per step; the shorter ones restart (itertools.cycle)
  kConcat,    ///< one ConcatDataset, sampled as a whole
  kWeighted,  ///< one batch per step from a dataset drawn by weight, until all are exhausted
};

struct KillFault {
  int rank = 0;
  std::int64_t epoch = 0;
  std::int64_t step = 0;
};

struct DelayFault {
  int rank = 0;
  double ms = 0;  ///< extra compute time per step
};

/// The job is stopped mid-epoch and resumed on another number of ranks (NOTE [Elastic resume]):
/// every rank takes `stopAfterSteps` steps of the first epoch, then ranks 0..worldSize-1 take the
/// rest; the other ranks sit the rest out. The sampler decides what the rest is: "elastic" resumes,
/// the others ignore the resume and restart the epoch.
struct ResumeSpec {
  std::int64_t stopAfterSteps = 0;
  int worldSize = 1;  ///< the world the epoch resumes on, at most the scenario's
  /// The other naive resume: each rank continues its own shard of the epoch on the new world
  /// size from the position it had reached.
  bool keepRankPositions = false;
};

struct FaultSpec {
  bool skipSetEpoch = false;  ///< sampler.set_epoch(epoch) is never called
  bool perRankSeed = false;   ///< rank r seeds its sampler with seed + r
  bool perRankOrder = false;  ///< each rank lists the dataset in its own order (unsorted listdir)
  std::optional<KillFault> kill;    ///< rank dies by SIGKILL before this step
  std::optional<KillFault> stop;    ///< rank stops itself with SIGSTOP before this step (a hang)
  std::optional<DelayFault> delay;  ///< rank computes slower
};

struct Scenario {
  std::string name;
  std::string description;  ///< one line
  std::string source;       ///< file name, or "built-in"
  int worldSize = 4;
  int epochs = 2;
  std::int64_t seed = 0;
  std::int64_t batchSize = 1;
  bool dropLast = false;  ///< DataLoader(drop_last=…)
  /// "train": padding copies are allowed (DistributedSampler's contract); "eval": every sample
  /// must be seen exactly once, and the metric over duplicates is reported.
  std::string phase = "train";
  Combine combine = Combine::kZip;
  std::vector<double> weights;  ///< kWeighted only, one per dataset
  std::vector<DatasetSpec> datasets;
  FaultSpec faults;
  std::optional<ResumeSpec> resume;  ///< one dataset, one epoch
  double timeoutS = 60;  ///< deadline of every collective and store wait
  std::int64_t gradientSize = 16;  ///< floats in each step's gradient allreduce
  /// The property this scenario is expected to violate ("" when it should pass).
  std::string expect;
};

const char* combineName(Combine c);

}  // namespace ddph::scenario
