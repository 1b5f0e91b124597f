// connectGloo: picks the engine (NOTE [Gloo engines] in gloo_communicator.h). The direct engine
// is gloo_direct_communicator.cpp; c10d's is in the on-demand LibTorch library
// (libtorch/process_group_gloo.cpp).
#include "ddph/comm/gloo_communicator.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "ddph/common/error.h"
#include "ddph/config.h"
#include "gloo_direct_communicator.h"
#include "libtorch/backend.h"

namespace ddph {

std::string loopbackAddressForRank(int rank) {
  return fmt::format("127.0.{}.{}", 1 + rank / 250, 1 + rank % 250);
}

std::unique_ptr<Communicator> connectGloo(std::shared_ptr<RendezvousStore> store, int rank,
                                          int size, const GlooOptions& options,
                                          const std::string& groupName) {
  DDPH_CHECK(size > 0 && rank >= 0 && rank < size, "rank {} is outside a world of {}", rank, size);
  GlooEngine engine = options.engine;
  [[maybe_unused]] bool forced = false;  // read only without the direct engine
  if (const char* name = std::getenv("DDPH_GLOO_ENGINE"); name != nullptr && *name != '\0') {
    const std::string_view value(name);
    DDPH_CHECK(value == "direct" || value == "process-group",
               "DDPH_GLOO_ENGINE={} is neither 'direct' nor 'process-group'", value);
    engine = value == "direct" ? GlooEngine::kDirect : GlooEngine::kProcessGroup;
    forced = true;
  }
  if (engine == GlooEngine::kDirect) {
#if DDPH_HAVE_DIRECT_GLOO
    return connectGlooDirect(std::move(store), rank, size, options, groupName);
#else
    // NOTE [Which Gloo]: this build's LibTorch carries its own Gloo without headers for it; an
    // unforced kDirect (the default) runs on c10d's engine below.
    DDPH_CHECK(!forced,
               "DDPH_GLOO_ENGINE=direct: this build has no direct Gloo engine (LibTorch {} ships "
               "no Gloo headers); use process-group",
               DDPH_TORCH_VERSION);
#endif
  }
  return libtorch::backend().connectProcessGroupGloo(std::move(store), rank, size, options,
                                                    groupName);
}

}  // namespace ddph
