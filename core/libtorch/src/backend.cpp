// The on-demand LibTorch library's entry point (NOTE [LibTorch on demand] in
// ddph/common/libtorch_module.h).
#include "ddph/common/libtorch_module.h"

#include "ddph/config.h"
#include "torch_parts.h"

namespace ddph::libtorch {

using sampler::Index;
using sampler::LibTorchSamplerKind;
using sampler::ShardRequest;

namespace {

class TorchBackend final : public Backend {
 public:
  std::string version() const override { return DDPH_TORCH_VERSION; }
  std::vector<Index> randperm(std::int64_t n, std::uint64_t seed) const override {
    return libtorchRandperm(n, seed);
  }
  std::vector<Index> samplerIndices(LibTorchSamplerKind kind, bool allowDuplicates,
                                    const ShardRequest& request) const override {
    return libtorchSamplerIndices(kind, allowDuplicates, request);
  }
  std::shared_ptr<comm::RendezvousStore> inProcessStore() const override { return c10dHashStore(); }
  std::shared_ptr<comm::RendezvousStore> tcpStore(
      const std::string& host, std::uint16_t port, bool isServer, int worldSize,
      std::chrono::milliseconds timeout) const override {
    return c10dTcpStore(host, port, isServer, worldSize, timeout);
  }
  std::unique_ptr<comm::Communicator> connectProcessGroupGloo(
      std::shared_ptr<comm::RendezvousStore> store, int rank, int size,
      const comm::GlooOptions& options, const std::string& groupName) const override {
    return libtorch::connectProcessGroupGloo(std::move(store), rank, size, options, groupName);
  }
};

}  // namespace
}  // namespace ddph::libtorch

extern "C" __attribute__((visibility("default"))) const ddph::libtorch::Backend*
DDPH_LIBTORCH_ENTRY() {
  static const ddph::libtorch::TorchBackend backend;
  return &backend;
}
