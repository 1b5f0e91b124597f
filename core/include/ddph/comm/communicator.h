#pragma once
// Communicator: the collectives a data-parallel rank needs, on plain buffers, each with a deadline.
//
// The interface is deliberately small (as c10d's Backend is) so that the rest of ddp-harness never
// sees c10d: the only implementation that touches it lives in src/comm/gloo_communicator.cpp,
// where the differences between LibTorch versions stay. Every call is collective: all ranks must
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
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddph {

/// Reduction applied by allreduce.
enum class ReduceOp { kSum, kMax, kMin };

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
};

}  // namespace ddph
