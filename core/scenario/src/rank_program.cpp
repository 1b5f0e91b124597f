#include "ddph/scenario/rank_program.h"

#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <thread>

#include "ddph/common/error.h"
#include "ddph/sampler/batching.h"
#include "epoch_schedule.h"
#include "rank_sources.h"
#include "scenario_trace.h"
#include "step_mismatch.h"

namespace ddph::scenario {

using common::ConfigError;
using common::ProtocolError;
using common::TimeoutError;
using sampler::Index;
using sampler::makeBatches;

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
        data_(buildRankSources(s, rank_)) {
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
      if (!runEpoch(epoch)) break;  // the ranks disagreed on the number of steps
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
      batches.push_back(batchesOf(s_, src, world_, rank_, samplerEpoch, seed));
    }
    if (s_.resume && epoch == 0) resumeMidEpoch(batches.front(), epoch, seed);
    return batches;
  }

  // [resume]: the first stopAfterSteps batches on this world, then, on ranks below the resumed
  // world size, the rest of the epoch as the sampler resumes it (NOTE [Elastic resume]).
  void resumeMidEpoch(std::vector<std::vector<Index>>& batches, std::int64_t epoch, std::int64_t seed) {
    const ResumeSpec& r = *s_.resume;
    const Source& src = data_.sources.front();
    stoppedAfter_ = stepsBeforeStop(s_, src);
    batches.resize(static_cast<std::size_t>(stoppedAfter_));
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

  // Returns false when the ranks disagreed on the number of steps (collective-mismatch).
  bool runEpoch(std::int64_t epoch) {
    const std::int64_t seed = s_.seed + (s_.faults.perRankSeed ? rank_ : 0);
    const auto batches = epochBatches(epoch, seed);
    std::vector<std::size_t> counts;
    for (const auto& b : batches) counts.push_back(b.size());
    const auto schedule = epochSchedule(s_, counts, epoch);
    std::vector<std::int64_t> batchCounts, drawn(batches.size(), 0);
    for (const auto& b : batches) batchCounts.push_back(static_cast<std::int64_t>(b.size()));
    trace_.startEpoch(epoch,
                      s_.faults.skipSetEpoch ? std::nullopt : std::optional<std::int64_t>(epoch),
                      seed, batchCounts);

    // NOTE [Step agreement]: [W has-batch flags][gradient]; rank r writes only its own flag.
    const std::size_t gradAt = static_cast<std::size_t>(world_);
    const std::size_t g = static_cast<std::size_t>(s_.gradientSize);
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
            const auto h = splitmix64(static_cast<std::uint64_t>(id) * 31 + d);
            buffer[gradAt + h % g] += static_cast<float>((h >> 32) & 0xff) / 255.0f;
          }
        }
        injectFaults(epoch, step);  // in the step, with its batch drawn, as in a training loop
        ++stats_.steps;
      }
      const auto waitStart = Clock::now();
      stats_.computeSeconds += std::chrono::duration<double>(waitStart - computeStart).count();
      comm_.allreduce(buffer, comm::ReduceOp::kSum, fmt::format("epoch {} step {}", epoch, step));
      stats_.waitSeconds += secondsSince(waitStart);
      const auto participants = static_cast<std::int64_t>(
          std::lround(std::accumulate(buffer.begin(), buffer.begin() + world_, 0.0)));
      if (participants == 0) {  // every rank is done: the epoch ends here
        trace_.endEpoch(epoch, drawn, batchCounts);
        return true;
      }
      if (participants != ranksTakingStep(s_, world_, epoch, step, stoppedAfter_)) {
        reportMismatch(epoch, step, static_cast<std::int64_t>(schedule.size()));
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

  // Everyone knows now (same collective); one more all-gather tells each rank every rank's
  // planned steps, so rank 0 can name the sides (`ddp-sim rank-run` prints it; `ddp-sim run`
  // judges the trace with the audit: scenario_plan.h).
  void reportMismatch(std::int64_t epoch, std::int64_t step, std::int64_t planned) {
    const auto steps = comm_.allgather({planned}, std::vector<std::int64_t>(static_cast<std::size_t>(world_), 1),
                                       fmt::format("epoch {} step {} mismatch", epoch, step));
    std::vector<std::int64_t> plannedSteps;
    for (const auto& own : steps) plannedSteps.push_back(own.at(0));
    stats_.stepMismatch = findStepMismatch(s_, epoch, plannedSteps, stoppedAfter_);
    DDPH_ASSERT(stats_.stepMismatch);
  }

  const Scenario& s_;
  comm::Communicator& comm_;
  RankObserver& observer_;
  ScenarioTrace& trace_;
  int rank_;
  int world_;
  RankSources data_;
  std::int64_t stoppedAfter_ = 0;    // [resume]: steps every rank took before the stop
  std::int64_t resumeConsumed_ = 0;  // [resume]: samples each rank took before the stop
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

RankRunStats runRankProgram(const Scenario& scenario, comm::Communicator& comm,
                            const RankTraceTarget& target) {
  RankObserver quiet;
  return runRankProgram(scenario, comm, quiet, target);
}

}  // namespace ddph::scenario
