#pragma once
// What the c10d engines share (ProcessGroupGloo in this module, ProcessGroupNCCL in ddph::ddp): a
// collective's element type and reduction as c10d's, and a started c10d Work as a
// PendingCollective. Includes LibTorch.

#include <c10/core/ScalarType.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "ddph/comm/communicator.h"

namespace ddph::libtorch {

inline c10::ScalarType scalarType(comm::ElementType type) {
  switch (type) {
    case comm::ElementType::kFloat32:
      return c10::kFloat;
    case comm::ElementType::kFloat64:
      return c10::kDouble;
    case comm::ElementType::kInt64:
      break;
  }
  return c10::kLong;
}

inline c10d::ReduceOp toC10d(comm::ReduceOp op) {
  switch (op) {
    case comm::ReduceOp::kSum:
      return c10d::ReduceOp::SUM;
    case comm::ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
    case comm::ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

/// Maps what c10d threw to ddph's typed errors, naming the operation and step (never returns).
using ErrorMapper = void (*)(const std::exception& e, std::string_view operation,
                             std::string_view step, std::chrono::milliseconds timeout);

/// A started c10d allreduce; wait() waits at most `timeout` and maps a failure with `rethrow`.
class PendingWork final : public comm::PendingCollective {
 public:
  PendingWork(c10::intrusive_ptr<c10d::Work> work, std::string step,
              std::chrono::milliseconds timeout, ErrorMapper rethrow)
      : work_(std::move(work)), step_(std::move(step)), timeout_(timeout), rethrow_(rethrow) {}

  void wait() override {
    if (!work_) return;
    auto work = std::move(work_);
    try {
      work->wait(timeout_);  // on CUDA: orders the current stream after the collective
    } catch (const std::exception& e) {
      rethrow_(e, "allreduce", step_, timeout_);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::string step_;
  std::chrono::milliseconds timeout_;
  ErrorMapper rethrow_;
};

}  // namespace ddph::libtorch
