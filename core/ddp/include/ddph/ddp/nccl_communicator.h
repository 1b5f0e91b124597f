#pragma once
// NCCL communicator (c10d ProcessGroupNCCL) for CUDA tensors: DistributedDataParallel on GPUs.
// Declared only when the LibTorch this build found has CUDA (ddph/config.h); otherwise the build
// says "NCCL: not built (LibTorch without CUDA)" and DDP runs on Gloo with CPU tensors.
//
// The raw-buffer collectives (broadcast, allreduceAsync) take DEVICE pointers on `device`; the
// std::vector ones stage through the device. Same errors and deadlines as the Gloo communicator.

#include <chrono>
#include <memory>
#include <string>

#include "ddph/comm/communicator.h"
#include "ddph/comm/rendezvous_store.h"
#include "ddph/config.h"

namespace ddph::ddp {

#if DDPH_TORCH_HAS_CUDA
/// Connects rank `rank` of `size` through `store` with NCCL on CUDA device `device`.
std::unique_ptr<comm::Communicator> connectNccl(std::shared_ptr<comm::RendezvousStore> store,
                                                int rank, int size, int device,
                                                std::chrono::milliseconds timeout,
                                                const std::string& groupName = "default");
#endif

}  // namespace ddph::ddp
