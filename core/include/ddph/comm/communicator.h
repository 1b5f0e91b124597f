#pragma once
// Communicator: the collectives a data-parallel rank needs, on plain buffers, each with a deadline.
//
// The interface is deliberately small (as c10d's Backend is) so that the rest of ddp-harness never
// sees c10d: the implementations that touch it live in src/libtorch/process_group_gloo.cpp and
// src/comm/nccl_communicator.cpp, where the differences between LibTorch versions stay. Every call is collective: all ranks must
// call the same operations in the same order, as with torch.distributed.
//
// Errors: a call that runs past its deadline throws ddph::TimeoutError; a peer that died or broke
// the connection makes it throw ddph::ProtocolError. Both messages name the operation and the
// `step` label the caller gave ("epoch 1 step 7"). After either error the communicator is unusable
// (as a ProcessGroup is after a failed collective): the caller reports and exits.
//
// Concurrency: one thread uses one Communicator; different ranks may live in different threads of
// one process (thread-per-rank over an in-process store) or in different processes.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/common/error.h"

namespace ddph {

/// Reduction applied by allreduce.
enum class ReduceOp { kSum, kMax, kMin };

/// A collective that was started and not yet waited for (see Communicator::allreduceAsync).
/// The buffer it was started on must stay alive and untouched until wait() returned.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  /// Blocks until the collective finished, at most the communicator's timeout; throws
  /// TimeoutError or ProtocolError naming the operation and step, like the blocking calls.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// The deadline each following call gets (default: the one the communicator was made with).
  virtual void setTimeout(std::chrono::milliseconds timeout) = 0;
  virtual std::chrono::milliseconds timeout() const = 0;

  /// In place: every rank ends with the element-wise reduction of all ranks' `data`. All ranks
  /// pass the same length.
  virtual void allreduce(std::vector<float>& data, ReduceOp op, std::string_view step) = 0;
  virtual void allreduce(std::vector<std::int64_t>& data, ReduceOp op, std::string_view step) = 0;

  /// Every rank's `mine`, indexed by rank. Lengths may differ between ranks.
  virtual std::vector<std::vector<std::int64_t>> allgather(const std::vector<std::int64_t>& mine,
                                                           std::string_view step) = 0;

  /// The same, when every rank already knows every rank's length (`lengths[r]`, identical on all
  /// ranks): one collective instead of two.
  virtual std::vector<std::vector<std::int64_t>> allgather(const std::vector<std::int64_t>& mine,
                                                           const std::vector<std::int64_t>& lengths,
                                                           std::string_view step) = 0;

  /// In place: every rank ends with `root`'s `data`. All ranks pass the same length.
  virtual void broadcast(std::vector<std::int64_t>& data, int root, std::string_view step) = 0;

  virtual void barrier(std::string_view step) = 0;

  // Raw-buffer collectives for DistributedDataParallel (no copy: `data` points into a tensor's
  // storage). Optional capabilities, as c10d's Backend has them: the base throws "does not
  // support"; the Gloo communicator implements them for CPU memory, the NCCL one for device
  // memory. Added after the vector API; callers that do not need them are unaffected.

  /// In place: every rank ends with `root`'s `count` elements at `data`.
  virtual void broadcast(float* data, std::size_t count, int root, std::string_view step) {
    unsupported("broadcast(float*)");
  }
  virtual void broadcast(double* data, std::size_t count, int root, std::string_view step) {
    unsupported("broadcast(double*)");
  }

  /// Starts an in-place allreduce of `count` elements at `data` and returns without waiting, so
  /// that communication overlaps computation (DDP launches one per gradient bucket from autograd
  /// hooks). Collectives still complete in the order they were started, on every rank. An
  /// implementation may complete the collective before returning (the direct Gloo engine does:
  /// on 2 shared cores a hand-off to another thread costs more than the overlap gains); its
  /// TimeoutError or ProtocolError then comes from this call instead of from wait().
  virtual std::unique_ptr<PendingCollective> allreduceAsync(float* data, std::size_t count,
                                                            ReduceOp op, std::string_view step) {
    unsupported("allreduceAsync(float*)");
  }
  virtual std::unique_ptr<PendingCollective> allreduceAsync(double* data, std::size_t count,
                                                            ReduceOp op, std::string_view step) {
    unsupported("allreduceAsync(double*)");
  }

  /// Name of the backend ("gloo", "nccl"), for messages.
  virtual std::string backendName() const { return "unknown"; }

 private:
  [[noreturn]] void unsupported(std::string_view what) const {
    throw Error(fmt::format("the {} communicator does not support {}", backendName(), what));
  }
};

}  // namespace ddph
