#pragma once
// The on-demand LibTorch module (libddph_libtorch.so, built from core/libtorch/): every call the
// torch-free libraries (sampler, comm) make into LibTorch goes through this interface, so that a
// program pays LibTorch's start-up (about 0.7 s of dynamic loading) only when it asks for
// something only LibTorch has: c10d's stores and its ProcessGroupGloo engine, torch::randperm
// itself, LibTorch's C++ samplers.
//
// NOTE [LibTorch on demand]: design-notes.md#libtorch-on-demand. The module is found beside the
// running program (<bin>/../<libdir>), then in the install's libdir, then through the program's
// RUNPATH, and loaded with dlopen once per process; a program that links LibTorch itself
// (ddp-train, the DDP tests) loads the same libtorch.so, not a second one. This header is
// torch-free and names the types of sampler and comm only by declaration: the module, which
// implements it, sits above both.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddph::comm {
class Communicator;                // ddph/comm/communicator.h
class RendezvousStore;             // ddph/comm/rendezvous_store.h
struct GlooOptions;                // ddph/comm/gloo_communicator.h
}  // namespace ddph::comm

namespace ddph::sampler {
struct ShardRequest;               // ddph/sampler/sampler.h
enum class LibTorchSamplerKind;    // ddph/sampler/libtorch_samplers.h
using Index = std::int64_t;        // ddph/sampler/sampler.h
}  // namespace ddph::sampler

namespace ddph::libtorch {

class Backend {
 public:
  virtual ~Backend() = default;

  /// The LibTorch version the library was built against.
  virtual std::string version() const = 0;

  /// torch::randperm(n) on a CPU generator seeded with `seed`.
  virtual std::vector<sampler::Index> randperm(std::int64_t n, std::uint64_t seed) const = 0;

  /// The indices LibTorch's own distributed sampler of `kind` yields for `request`.
  virtual std::vector<sampler::Index> samplerIndices(sampler::LibTorchSamplerKind kind,
                                                    bool allowDuplicates,
                                                    const sampler::ShardRequest& request) const = 0;

  /// c10d::HashStore.
  virtual std::shared_ptr<comm::RendezvousStore> inProcessStore() const = 0;

  /// c10d::TCPStore (see makeTcpStore).
  virtual std::shared_ptr<comm::RendezvousStore> tcpStore(
      const std::string& host, std::uint16_t port, bool isServer, int worldSize,
      std::chrono::milliseconds timeout) const = 0;

  /// c10d's ProcessGroupGloo engine (GlooEngine::kProcessGroup).
  virtual std::unique_ptr<comm::Communicator> connectProcessGroupGloo(
      std::shared_ptr<comm::RendezvousStore> store, int rank, int size,
      const comm::GlooOptions& options, const std::string& groupName) const = 0;
};

/// The library, loaded on the first call (thread-safe). Throws ddph::common::Error, one line naming
/// every place it looked, where it cannot be loaded.
const Backend& backend();

}  // namespace ddph::libtorch

/// The library's one exported symbol; its name carries the interface's version.
#define DDPH_LIBTORCH_ENTRY ddph_libtorch_backend_v1
