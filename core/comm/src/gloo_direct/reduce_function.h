#pragma once
// Private to the direct Gloo engine: the element-wise reduction of a ReduceOp, as Gloo takes it.

#include <gloo/math.h>

#include <cstddef>

#include "ddph/comm/communicator.h"

namespace ddph::comm::gloo_direct {

template <typename T>
void (*reduceFunction(ReduceOp op))(void*, const void*, const void*, std::size_t) {
  switch (op) {
    case ReduceOp::kSum: return &gloo::sum<T>;
    case ReduceOp::kMax: return &gloo::max<T>;
    case ReduceOp::kMin: return &gloo::min<T>;
  }
  return &gloo::sum<T>;
}

}  // namespace ddph::comm::gloo_direct
