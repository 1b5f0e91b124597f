#pragma once
// Communicator: the collectives a data-parallel rank needs, on plain buffers, each with a deadline.
//
// The interface is deliberately small (as c10d's Backend is) so that the rest of ddp-harness never
// sees c10d: the implementations that touch it live in core/libtorch/src/process_group_gloo.cpp
// and core/ddp/src/nccl_communicator.cpp, where the differences between LibTorch versions stay.
// Every call is collective: all ranks must call the same operations in the same order, as with
// torch.distributed.
//
// Errors: a call that runs past its deadline throws ddph::common::TimeoutError; a peer that died or
// broke the connection makes it throw ddph::common::ProtocolError. Both messages name the operation
// and the `step` label the caller gave ("epoch 1 step 7"). After either error the communicator is
// unusable (as a ProcessGroup is after a failed collective): the caller reports and exits.
//
// Concurrency: one thread uses one Communicator; different ranks may live in different threads of
// one process (thread-per-rank over an in-process store) or in different processes.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ddph/common/error.h"

namespace ddph::comm {

/// Reduction applied by allreduce.
enum class ReduceOp { kSum, kMax, kMin };

/// The element types collectives carry.
enum class ElementType { kFloat32, kFloat64, kInt64 };

template <typename T>
constexpr ElementType elementTypeOf() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, std::int64_t>,
                "collectives carry float, double or std::int64_t");
  if constexpr (std::is_same_v<T, float>) return ElementType::kFloat32;
  if constexpr (std::is_same_v<T, double>) return ElementType::kFloat64;
  return ElementType::kInt64;
}

/// "float32", "float64", "int64" (PyTorch's names, as the audit trace writes them).
std::string_view elementTypeName(ElementType type);
std::size_t elementSize(ElementType type);

/// Where a buffer's memory is, for an engine whose collectives run on device memory (NCCL):
/// host memory it stages through the device (the std::vector front), or memory it works on as
/// it is (the pointer front: device memory for NCCL, host memory for Gloo).
enum class Memory { kHost, kNative };

/// `count` elements at `data`, their type with them: what every engine's collective takes.
struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;
  ElementType type = ElementType::kFloat32;
  Memory memory = Memory::kHost;

  template <typename T>
  static Buffer of(T* data, std::size_t count, Memory memory) {
    return {data, count, elementTypeOf<T>(), memory};
  }
  std::size_t bytes() const { return count * elementSize(type); }
};

/// Calls `f` with the buffer's data as a pointer of its element type (float*, double* or
/// std::int64_t*): how an engine written once as a template serves every type.
template <typename F>
decltype(auto) withElements(const Buffer& buffer, F&& f) {
  switch (buffer.type) {
    case ElementType::kFloat32: return f(static_cast<float*>(buffer.data));
    case ElementType::kFloat64: return f(static_cast<double*>(buffer.data));
    case ElementType::kInt64: break;
  }
  return f(static_cast<std::int64_t*>(buffer.data));
}

/// A collective that was started and not yet waited for (see Communicator::allreduceAsync).
/// The buffer it was started on must stay alive and untouched until wait() returned.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  /// Blocks until the collective finished, at most the communicator's timeout; throws
  /// TimeoutError or ProtocolError naming the operation and step, like the blocking calls.
  virtual void wait() = 0;
};

/// Two parts: the typed front callers use (non-virtual: allreduce, allreduceAsync, broadcast,
/// allgather, barrier), and one virtual per collective that each engine implements once, on a
/// Buffer whose element type travels with it (allreduceBuffer, allreduceBufferAsync,
/// broadcastBuffer, allgatherv over gatherBlocks, barrier).
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// The deadline each following call gets (default: the one the communicator was made with).
  virtual void setTimeout(std::chrono::milliseconds timeout) = 0;
  virtual std::chrono::milliseconds timeout() const = 0;

  /// Name of the backend ("gloo", "nccl"), for messages.
  virtual std::string backendName() const { return "unknown"; }

  // --- The typed front ------------------------------------------------------------------------

  /// In place: every rank ends with the element-wise reduction of all ranks' `data`. All ranks
  /// pass the same length.
  template <typename T>
  void allreduce(std::vector<T>& data, ReduceOp op, std::string_view step) {
    allreduceBuffer(Buffer::of(data.data(), data.size(), Memory::kHost), op, step);
  }

  /// Starts an in-place allreduce of `count` elements at `data` and returns without waiting, so
  /// that communication overlaps computation (DDP starts one per gradient bucket from autograd
  /// hooks). Collectives still complete in the order they were started, on every rank. An engine
  /// may complete the collective before returning (the direct Gloo engine does: on 2 shared cores
  /// a hand-off to another thread costs more than the overlap gains); its TimeoutError or
  /// ProtocolError then comes from this call instead of from wait(). `data` is host memory for
  /// Gloo, device memory for NCCL.
  template <typename T>
  std::unique_ptr<PendingCollective> allreduceAsync(T* data, std::size_t count, ReduceOp op,
                                                    std::string_view step) {
    return allreduceBufferAsync(Buffer::of(data, count, Memory::kNative), op, step);
  }

  /// In place: every rank ends with `root`'s `data`. All ranks pass the same length.
  template <typename T>
  void broadcast(std::vector<T>& data, int root, std::string_view step) {
    broadcastBuffer(Buffer::of(data.data(), data.size(), Memory::kHost), root, step);
  }
  /// The same on `count` elements at `data` (a tensor's storage: no copy; device memory for
  /// NCCL).
  template <typename T>
  void broadcast(T* data, std::size_t count, int root, std::string_view step) {
    broadcastBuffer(Buffer::of(data, count, Memory::kNative), root, step);
  }

  /// Every rank's `mine`, indexed by rank. Lengths may differ between ranks (two collectives:
  /// the lengths, then the padded blocks).
  std::vector<std::vector<std::int64_t>> allgather(const std::vector<std::int64_t>& mine,
                                                   std::string_view step) {
    return allgatherv(mine, nullptr, step);
  }
  /// The same, when every rank already knows every rank's length (`lengths[r]`, identical on all
  /// ranks): one collective instead of two.
  std::vector<std::vector<std::int64_t>> allgather(const std::vector<std::int64_t>& mine,
                                                   const std::vector<std::int64_t>& lengths,
                                                   std::string_view step) {
    return allgatherv(mine, &lengths, step);
  }

  virtual void barrier(std::string_view step) = 0;

  // --- What an engine implements: one virtual per collective -----------------------------------

  virtual void allreduceBuffer(Buffer data, ReduceOp op, std::string_view step) = 0;
  /// Default: allreduceBuffer, then a collective already complete.
  virtual std::unique_ptr<PendingCollective> allreduceBufferAsync(Buffer data, ReduceOp op,
                                                                  std::string_view step);
  virtual void broadcastBuffer(Buffer data, int root, std::string_view step) = 0;
  /// Every rank's `block`, all of the same length, concatenated in rank order.
  virtual std::vector<std::int64_t> gatherBlocks(std::vector<std::int64_t> block,
                                                 std::string_view step) = 0;
  /// allgather's one virtual (`lengths` may be null). Default: the padded allgather over
  /// gatherBlocks, with its length check (communicator.cpp); a decorator (the audit's
  /// RecordingCommunicator) overrides it to see one collective, not its parts.
  virtual std::vector<std::vector<std::int64_t>> allgatherv(
      const std::vector<std::int64_t>& mine, const std::vector<std::int64_t>* lengths,
      std::string_view step);
};

}  // namespace ddph::comm
