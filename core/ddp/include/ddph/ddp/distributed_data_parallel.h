#pragma once
// DistributedDataParallel for LibTorch modules: what torch.nn.parallel.DistributedDataParallel does
// for Python, over a ddph::Communicator (Gloo for CPU tensors, NCCL for CUDA tensors).
//
//  - Construction broadcasts every parameter and buffer from rank 0, so all ranks start equal.
//  - Parameters are grouped into buckets of at most `bucketCapBytes` (25 MiB by default, as in
//    PyTorch), in reverse registration order (roughly the order backward produces gradients).
//  - A post-hook on each parameter's gradient accumulator marks it ready during backward; when
//    a bucket is complete its gradients are copied into one flat buffer, divided by the world size
//    and allreduced asynchronously, so communication overlaps the rest of the backward pass.
//    Buckets are launched strictly in bucket order on every rank (Gloo pairs collectives by
//    order). At the end of backward (an autograd engine callback) every bucket is waited for and
//    the averaged gradients are copied back into `param.grad()`: when `loss.backward()` returns,
//    every rank holds the same averaged gradients.
//  - noSync() suspends synchronisation for gradient accumulation: gradients accumulate locally,
//    and the next synchronised backward averages the accumulated gradients.
//  - A parameter that got no gradient in a synchronised backward is an error naming it (PyTorch's
//    "Expected to have finished reduction in the prior iteration"), unless
//    `findUnusedParameters` is set: then it contributes zeros, and its gradient stays undefined
//    when no rank used it.
//
// Unlike Python's DDP there is no forward wrapper (LibTorch modules have no virtual forward): call
// `module()`'s forward as usual; the hooks do the rest. Buffers are broadcast at construction only
// (Python's DDP re-broadcasts them before every forward; BatchNorm statistics are therefore per
// rank in both unless SyncBatchNorm is used — see the negative controls).
//
// Concurrency: one DistributedDataParallel belongs to one rank, used from one thread, the one that
// calls backward (CPU autograd runs hooks on the calling thread). Thread ranks in one process each
// own their module replica, communicator and DistributedDataParallel.

#include <torch/nn/module.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddph/comm/communicator.h"
#include "ddph/ddp/ddp_mutant.h"

namespace ddph::ddp {

struct DdpOptions {
  /// Largest bucket in bytes (PyTorch's bucket_cap_mb = 25).
  std::size_t bucketCapBytes = std::size_t{25} << 20;
  /// Allow parameters that get no gradient in a step (PyTorch's find_unused_parameters).
  bool findUnusedParameters = false;
  /// Broadcast parameters and buffers from rank 0 at construction. Turning this off is only
  /// useful to demonstrate what goes wrong without it (a negative control).
  bool broadcastAtConstruction = true;
  /// A deliberately broken variant (negative controls only).
  DdpMutant mutant = DdpMutant::kNone;
};

class DistributedDataParallel {
 public:
  /// Broadcasts `module`'s parameters and buffers from rank 0 (collective: every rank constructs
  /// its DistributedDataParallel at the same point) and installs the gradient hooks. `comm` must
  /// outlive this object. Throws ConfigError for parameters of a dtype the communicator cannot
  /// reduce (float32 and float64 are supported).
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, comm::Communicator& comm,
                          DdpOptions options = {});
  /// Removes the hooks. Waits for nothing: destroy only after the last backward returned.
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  torch::nn::Module& module();
  const std::shared_ptr<torch::nn::Module>& modulePtr() const;

  /// While alive, backward passes do not synchronise (gradient accumulation).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  /// `auto guard = ddp.noSync();` as Python's `with ddp.no_sync():`.
  NoSyncGuard noSync() { return NoSyncGuard(*this); }

  /// Number of synchronised backward passes completed so far (the step in error messages).
  std::int64_t syncedSteps() const;

  /// The bucket layout: parameter indices (into module().parameters()) per bucket, in launch order.
  std::vector<std::vector<std::size_t>> bucketAssignment() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddph::ddp
