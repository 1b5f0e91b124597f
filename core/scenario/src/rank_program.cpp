#include "ddph/scenario/rank_program.h"

#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <thread>

#include "ddph/common/error.h"
#include "ddph/verify/batching.h"
#include "epoch_checks.h"
#include "epoch_schedule.h"
#include "pipeline_hints.h"
#include "rank_sources.h"
#include "scenario_trace.h"
#include "step_mismatch.h"

namespace ddph::scenario {

using common::ConfigError;
using common::ProtocolError;
using common::TimeoutError;
using verify::Index;
using verify::makeBatches;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class RankRun {
 public:
  RankRun(const Scenario& s, comm::Communicator& comm, RankObserver& observer, ScenarioTrace& trace)
      : s_(s),
        comm_(comm),
        observer_(observer),
        trace_(trace),
        rank_(comm.rank()),
        world_(comm.size()),
        data_(buildRankSources(s, rank_)),
        checks_(s, data_.checked, world_, observer) {
    std::vector<DatasetSpec> specs;
    std::vector<std::vector<Index>> listings;
    for (const auto& src : data_.sources) {
      specs.push_back(src.spec);
      listings.push_back(src.listing);
    }
    trace_.declare(specs, listings, s_);
  }

  RankRunStats run() {
    const auto start = Clock::now();
    for (std::int64_t epoch = 0; epoch < s_.epochs; ++epoch) {
      if (!runEpoch(epoch)) {
        stats_.stoppedOnMismatch = true;
        break;
      }
      checkEpoch(epoch);
    }
    stats_.epochSeconds = secondsSince(start);
    return stats_;
  }

 private:
  // This rank's batches of every source in `epoch`.
  std::vector<std::vector<std::vector<Index>>> epochBatches(std::int64_t epoch, std::int64_t seed) {
    const std::int64_t samplerEpoch = s_.faults.skipSetEpoch ? 0 : epoch;
    std::vector<std::vector<std::vector<Index>>> batches;
    for (const auto& src : data_.sources) {
      batches.push_back(makeBatches(shardOf(src, world_, rank_, samplerEpoch, seed),
                                    {s_.batchSize, s_.dropLast}));
    }
    if (s_.resume && epoch == 0) resumeMidEpoch(batches.front(), epoch, seed);
    return batches;
  }

  // [resume]: the first stopAfterSteps batches on this world, then, on ranks below the resumed
  // world size, the rest of the epoch as the sampler resumes it (NOTE [Elastic resume]).
  void resumeMidEpoch(std::vector<std::vector<Index>>& batches, std::int64_t epoch, std::int64_t seed) {
    const ResumeSpec& r = *s_.resume;
    const Source& src = data_.sources.front();
    batches.resize(std::min<std::size_t>(batches.size(), static_cast<std::size_t>(r.stopAfterSteps)));
    stoppedAfter_ = static_cast<std::int64_t>(batches.size());
    resumeConsumed_ = 0;
    for (const auto& b : batches) resumeConsumed_ += static_cast<std::int64_t>(b.size());
    if (rank_ >= r.worldSize) return;  // this rank is not part of the resumed job
    const std::int64_t n = src.spec.size;
    std::vector<Index> rest;
    if (r.keepRankPositions) {  // its own shard on the new world, from where it had stopped
      rest = src.sampler->indices({n, r.worldSize, rank_, epoch, seed});
      rest.erase(rest.begin(), rest.begin() + std::min<std::int64_t>(resumeConsumed_, rest.size()));
    } else {
      rest = src.sampler->indices({n, r.worldSize, rank_, epoch, seed, {{world_, resumeConsumed_}}});
    }
    for (auto& b : makeBatches(rest, {s_.batchSize, s_.dropLast})) batches.push_back(std::move(b));
  }

  // How many ranks take `step` of `epoch`: all, or the resumed world after the stop.
  int ranksAt(std::int64_t epoch, std::int64_t step) const {
    return s_.resume && epoch == 0 && step >= stoppedAfter_ ? s_.resume->worldSize : world_;
  }

  // Returns false when the ranks disagreed on the number of steps (collective-mismatch).
  bool runEpoch(std::int64_t epoch) {
    const std::int64_t seed = s_.seed + (s_.faults.perRankSeed ? rank_ : 0);
    const auto batches = epochBatches(epoch, seed);
    std::vector<std::size_t> counts;
    for (const auto& b : batches) counts.push_back(b.size());
    if (epoch == 0 && rank_ == 0) {
      std::vector<DatasetSpec> specs;
      for (const auto& src : data_.sources) specs.push_back(src.spec);
      checks_.explainWith(pipelineHints(s_, specs, counts, world_));
    }
    const auto schedule = epochSchedule(s_, counts, epoch);
    std::vector<std::int64_t> batchCounts, drawn(batches.size(), 0);
    for (const auto& b : batches) batchCounts.push_back(static_cast<std::int64_t>(b.size()));
    trace_.startEpoch(epoch, s_.faults.skipSetEpoch ? std::nullopt : std::optional<std::int64_t>(epoch),
                      seed, batchCounts);
    consumed_.assign(batches.size(), {});

    // NOTE [Step agreement] + consumed counts: [W has-batch flags][W x D consumed counts][gradient].
    // Rank r writes only its own slots, so the sum is an all-gather of flags and counts for free;
    // the epoch-end all-gather then needs no extra collective for the lengths.
    const std::size_t w = static_cast<std::size_t>(world_);
    const std::size_t nd = batches.size();
    const std::size_t g = static_cast<std::size_t>(s_.gradientSize);
    const std::size_t gradAt = w + w * nd;
    std::vector<float> buffer(gradAt + g);
    for (std::int64_t step = 0;; ++step) {
      const bool hasBatch = step < static_cast<std::int64_t>(schedule.size());
      const auto computeStart = Clock::now();
      std::fill(buffer.begin(), buffer.end(), 0.0f);
      if (hasBatch) {
        observer_.onStep(epoch, step);
        buffer[static_cast<std::size_t>(rank_)] = 1.0f;
        for (const auto& [d, b] : schedule[static_cast<std::size_t>(step)]) {
          trace_.batch(epoch, d, batches[d][b]);
          ++drawn[d];
          for (Index id : batches[d][b]) {
            consumed_[d].push_back(id);
            const auto h = splitmix64(static_cast<std::uint64_t>(id) * 31 + d);
            buffer[gradAt + h % g] += static_cast<float>((h >> 32) & 0xff) / 255.0f;
          }
        }
        injectFaults(epoch, step);  // in the step, with its batch drawn, as in a training loop
        ++stats_.steps;
      }
      for (std::size_t d = 0; d < nd; ++d) {
        DDPH_ASSERT(consumed_[d].size() < (1u << 24));  // exact in a float
        buffer[w + static_cast<std::size_t>(rank_) * nd + d] = static_cast<float>(consumed_[d].size());
      }
      const auto waitStart = Clock::now();
      stats_.computeSeconds += std::chrono::duration<double>(waitStart - computeStart).count();
      comm_.allreduce(buffer, comm::ReduceOp::kSum, fmt::format("epoch {} step {}", epoch, step));
      stats_.waitSeconds += secondsSince(waitStart);
      const auto participants = static_cast<std::int64_t>(
          std::lround(std::accumulate(buffer.begin(), buffer.begin() + world_, 0.0)));
      if (participants == 0) {  // every rank is done: the epoch ends here
        trace_.endEpoch(epoch, drawn, batchCounts);
        consumedLengths_.assign(nd, std::vector<std::int64_t>(w));
        for (std::size_t r = 0; r < w; ++r) {
          for (std::size_t d = 0; d < nd; ++d) {
            consumedLengths_[d][r] = std::lround(buffer[w + r * nd + d]);
          }
        }
        return true;
      }
      if (participants != ranksAt(epoch, step)) {
        reportMismatch(buffer, epoch, step, static_cast<std::int64_t>(schedule.size()));
        return false;
      }
    }
  }

  void injectFaults(std::int64_t epoch, std::int64_t step) {
    const auto& f = s_.faults;
    if (f.kill && f.kill->rank == rank_ && f.kill->epoch == epoch && f.kill->step == step) {
      ::raise(SIGKILL);  // a real crash: no message, no cleanup, as an OOM kill
    }
    if (f.stop && f.stop->rank == rank_ && f.stop->epoch == epoch && f.stop->step == step) {
      ::raise(SIGSTOP);  // a real hang: alive, holding its sockets, never answering
    }
    if (f.delay && f.delay->rank == rank_ && f.delay->ms > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f.delay->ms));
    }
  }

  void reportMismatch(const std::vector<float>& header, std::int64_t epoch, std::int64_t step,
                      std::int64_t planned) {
    // Everyone knows now (same collective); one more allgather names each rank's step count.
    const auto steps = comm_.allgather({planned}, std::vector<std::int64_t>(static_cast<std::size_t>(world_), 1),
                                       fmt::format("epoch {} step {} mismatch", epoch, step));
    if (rank_ != 0) return;
    std::vector<bool> hasBatch;
    for (int r = 0; r < world_; ++r) hasBatch.push_back(header[static_cast<std::size_t>(r)] > 0.5f);
    observer_.onViolation(describeStepMismatch(hasBatch, epoch, step, steps));
  }

  void checkEpoch(std::int64_t epoch) {
    // One all-gather per source of what every rank consumed (lengths agreed in the last step).
    std::vector<std::vector<std::vector<Index>>> gathered;
    for (std::size_t d = 0; d < data_.sources.size(); ++d) {
      gathered.push_back(comm_.allgather(
          consumed_[d], consumedLengths_[d],
          fmt::format("epoch {} end, gather dataset {}", epoch, data_.sources[d].spec.name)));
    }
    if (rank_ != 0) return;
    if (s_.resume && epoch == 0) {
      checks_.checkResumed(epoch, gathered.front(), resumeConsumed_);
    } else {
      checks_.check(epoch, gathered);
    }
  }

  const Scenario& s_;
  comm::Communicator& comm_;
  RankObserver& observer_;
  ScenarioTrace& trace_;
  int rank_;
  int world_;
  RankSources data_;
  EpochChecks checks_;
  std::int64_t stoppedAfter_ = 0;    // [resume]: steps every rank took before the stop
  std::int64_t resumeConsumed_ = 0;  // [resume]: samples each rank took before the stop
  std::vector<std::vector<Index>> consumed_;
  std::vector<std::vector<std::int64_t>> consumedLengths_;  // [source][rank], agreed each epoch
  RankRunStats stats_;
};

// The error line's type: the harness's own error classes by name (common/error.h).
std::string errorTypeName(const std::exception& e) {
  if (dynamic_cast<const TimeoutError*>(&e)) return "TimeoutError";
  if (dynamic_cast<const ProtocolError*>(&e)) return "ProtocolError";
  if (dynamic_cast<const ConfigError*>(&e)) return "ConfigError";
  return "InternalError";
}

}  // namespace

bool sampleCorrect(std::int64_t dataset, std::int64_t id) {
  return splitmix64(static_cast<std::uint64_t>(id) ^ (static_cast<std::uint64_t>(dataset) << 48)) %
             100 <
         70;
}

RankRunStats runRankProgram(const Scenario& scenario, comm::Communicator& comm,
                            RankObserver& observer, const RankTraceTarget& target) {
  DDPH_CHECK(comm.size() == scenario.worldSize, "scenario {} needs {} ranks, the world has {}",
             scenario.name, scenario.worldSize, comm.size());
  ScenarioTrace trace(comm.rank(), comm.size(), target);
  RankRun run(scenario, trace.record(comm), observer, trace);
  try {
    RankRunStats stats = run.run();
    trace.end();
    stats.traceFailure = trace.failure();
    return stats;
  } catch (const std::exception& e) {
    trace.error(errorTypeName(e), e.what());  // the audit's rank-failure reads it
    throw;
  }
}

}  // namespace ddph::scenario
