#pragma once
// Private to ddph::comm: the direct Gloo engine (NOTE [Gloo engines] in gloo_communicator.h),
// reached through connectGloo with GlooOptions::engine = GlooEngine::kDirect.

#include <memory>
#include <string>

#include "ddph/comm/gloo_communicator.h"

namespace ddph::comm {

std::unique_ptr<Communicator> connectGlooDirect(std::shared_ptr<RendezvousStore> store, int rank,
                                                int size, const GlooOptions& options,
                                                const std::string& groupName);

}  // namespace ddph::comm
