#pragma once
// The two trainings the checker compares: the reference (one process, the global batch of each
// step) and DDP (W thread ranks over an in-process store and real Gloo collectives), each
// recording its gradients per step and its weights before and after.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddph/comm/communicator.h"
#include "ddph/ddp/distributed_data_parallel.h"
#include "ddph/ddp/gradient_equivalence.h"
#include "ddph/ddp/negative_controls.h"

namespace ddph::ddp::equivalence {

// What one training run (the reference or one rank) produced.
struct Run {
  std::vector<at::Tensor> initial;
  std::vector<std::vector<at::Tensor>> grads;  // per step; empty when the step was skipped
  std::vector<at::Tensor> final;
  std::vector<std::int64_t> batchSizes;        // per step, 0 when skipped
  std::vector<std::string> names;              // parameter names (reference only)
  int stepsRun = 0;
  int buckets = 0;
  std::vector<std::vector<std::size_t>> bucketParams;  // parameter indices per bucket
  int failedStep = -1;
  std::string error;
  // Kept until every rank finished, then destroyed communicator first (NOTE [Teardown order]).
  std::unique_ptr<comm::Communicator> comm;
  std::unique_ptr<DistributedDataParallel> ddp;
};

/// The single process on the global batch of every step.
Run runReference(const TrainingSetup& s, const NegativeControls& n);

/// Trains rank `comm.rank()` with DistributedDataParallel over `comm`; throws what the
/// collectives throw. `step` tracks progress (the step it failed in).
void trainRank(const TrainingSetup& s, const NegativeControls& n, comm::Communicator& comm,
               Run& run, int& step);

/// Every rank in a thread of its own over an in-process store, each recording its run (a rank
/// that failed records its error and step).
std::vector<Run> runDdpRanks(const TrainingSetup& s, const NegativeControls& n);

}  // namespace ddph::ddp::equivalence
