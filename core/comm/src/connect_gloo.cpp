// connectGloo: picks the engine (NOTE [Gloo engines] in gloo_communicator.h). The direct engine
// is gloo_direct/gloo_direct_communicator.cpp; c10d's is in the on-demand LibTorch module
// (core/libtorch/src/process_group_gloo.cpp). And the programs' one reader of the engine's
// environment variables, glooOptionsFromEnvironment.
#include "ddph/comm/gloo_communicator.h"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "ddph/comm/collective_errors.h"
#include "ddph/common/error.h"
#include "ddph/config.h"
#include "gloo_direct/gloo_direct_communicator.h"
#include "ddph/common/libtorch_module.h"

namespace ddph::comm {

using common::Error;

namespace {

// The value of `name`, or nothing where it is unset or empty.
std::optional<std::string_view> variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string_view(value);
}

}  // namespace

GlooOptions glooOptionsFromEnvironment(GlooOptions options) {
  if (const auto value = variable("DDPH_GLOO_ENGINE")) {
    DDPH_CHECK(*value == "direct" || *value == "process-group",
               "DDPH_GLOO_ENGINE={} is neither 'direct' nor 'process-group'", *value);
    // NOTE [Which Gloo]: without Gloo's headers in this build's LibTorch there is no direct engine.
    DDPH_CHECK(*value != "direct" || DDPH_HAVE_DIRECT_GLOO,
               "DDPH_GLOO_ENGINE=direct: this build has no direct Gloo engine (LibTorch {} ships "
               "no Gloo headers); use process-group",
               DDPH_TORCH_VERSION);
    options.engine = *value == "direct" ? GlooEngine::kDirect : GlooEngine::kProcessGroup;
  }
  if (const auto value = variable("DDPH_GLOO_WAIT")) {
    DDPH_CHECK(*value == "loop-thread" || *value == "sync" || *value == "busy-poll" ||
                   *value == "auto",
               "DDPH_GLOO_WAIT={} is none of 'auto', 'loop-thread', 'sync', 'busy-poll'", *value);
    options.wait = *value == "loop-thread" ? GlooWait::kLoopThread
                   : *value == "sync"      ? GlooWait::kSync
                   : *value == "busy-poll" ? GlooWait::kBusyPoll
                                           : GlooWait::kAuto;
  }
  return options;
}

std::string loopbackAddressForRank(int rank) {
  return fmt::format("127.0.{}.{}", 1 + rank / 250, 1 + rank % 250);
}

std::unique_ptr<Communicator> connectGloo(std::shared_ptr<RendezvousStore> store, int rank,
                                          int size, const GlooOptions& options,
                                          const std::string& groupName) {
  DDPH_CHECK(size > 0 && rank >= 0 && rank < size, "rank {} is outside a world of {}", rank, size);
  // What Gloo or c10d threw while connecting becomes a typed error naming the rank, for either
  // engine (their collectives map their own errors).
  try {
#if DDPH_HAVE_DIRECT_GLOO
    if (options.engine == GlooEngine::kDirect) {
      return connectGlooDirect(std::move(store), rank, size, options, groupName);
    }
#endif
    // NOTE [Which Gloo]: a build whose LibTorch carries its own Gloo without headers for it has
    // no direct engine; kDirect (the default) runs on c10d's engine there.
    return libtorch::backend().connectProcessGroupGloo(std::move(store), rank, size, options,
                                                      groupName);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    detail::rethrowTyped(e, fmt::format("connecting rank {} of {} (Gloo on {})", rank, size,
                                        options.hostname),
                         "init", options.timeout);
  }
}

}  // namespace ddph::comm
