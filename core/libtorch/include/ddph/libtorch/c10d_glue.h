#pragma once
// A collective's element type as LibTorch's scalar type: for the engines that hand buffers to c10d
// (ProcessGroupGloo in this module, ProcessGroupNCCL in ddph::ddp). Includes LibTorch.

#include <c10/core/ScalarType.h>

#include "ddph/comm/communicator.h"

namespace ddph::libtorch {

inline c10::ScalarType scalarType(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return c10::kFloat;
    case ElementType::kFloat64: return c10::kDouble;
    case ElementType::kInt64: break;
  }
  return c10::kLong;
}

}  // namespace ddph::libtorch
