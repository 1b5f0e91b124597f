#pragma once
// Private to the on-demand LibTorch module: the parts backend.cpp puts behind libtorch::Backend
// (ddph/common/libtorch_module.h), one file each. With the DDP library's, these are the only
// files of ddp-harness that include LibTorch.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddph/comm/communicator.h"
#include "ddph/comm/gloo_communicator.h"
#include "ddph/comm/rendezvous_store.h"
#include "ddph/common/libtorch_module.h"
#include "ddph/sampler/libtorch_samplers.h"
#include "ddph/sampler/sampler.h"

namespace ddph::libtorch {

std::vector<sampler::Index> libtorchRandperm(std::int64_t n, std::uint64_t seed);  // randperm.cpp
std::vector<sampler::Index> libtorchSamplerIndices(
    sampler::LibTorchSamplerKind kind, bool allowDuplicates,
    const sampler::ShardRequest& request);                // samplers.cpp
std::shared_ptr<comm::RendezvousStore> c10dHashStore();  // c10d_store.cpp
std::shared_ptr<comm::RendezvousStore> c10dTcpStore(
    const std::string& host, std::uint16_t port, bool isServer, int worldSize,
    std::chrono::milliseconds timeout);  // c10d_store.cpp
std::unique_ptr<comm::Communicator> connectProcessGroupGloo(
    std::shared_ptr<comm::RendezvousStore> store, int rank, int size,
    const comm::GlooOptions& options,
    const std::string& groupName);  // process_group_gloo.cpp

}  // namespace ddph::libtorch
