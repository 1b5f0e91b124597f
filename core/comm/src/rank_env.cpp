#include "ddph/comm/rank_env.h"

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <limits>
#include <string>

#include "ddph/common/error.h"

namespace ddph::comm {
namespace {

std::string requireVar(const char* name) {
  const char* value = std::getenv(name);
  DDPH_CHECK(value != nullptr && *value != '\0',
             "environment variable {} is not set (start ranks with `ddp-sim launch` or torchrun)",
             name);
  return value;
}

long parseInt(const char* name, const std::string& text, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  DDPH_CHECK(errno == 0 && end != text.c_str() && *end == '\0' && value >= lo && value <= hi,
             "environment variable {}={} is not an integer in [{}, {}]", name, text, lo, hi);
  return value;
}

int intVar(const char* name, long lo, long hi, std::optional<int> fallback = std::nullopt) {
  const char* value = std::getenv(name);
  if ((value == nullptr || *value == '\0') && fallback) return *fallback;
  return static_cast<int>(parseInt(name, requireVar(name), lo, hi));
}

}  // namespace

RankEnv rankEnvFromEnvironment() {
  RankEnv env;
  constexpr long kMax = std::numeric_limits<int>::max();
  env.worldSize = intVar("WORLD_SIZE", 1, kMax);
  env.rank = intVar("RANK", 0, env.worldSize - 1);
  env.localRank = intVar("LOCAL_RANK", 0, kMax, env.rank);
  env.localWorldSize = intVar("LOCAL_WORLD_SIZE", 1, kMax, env.worldSize);
  env.masterAddr = requireVar("MASTER_ADDR");
  env.masterPort = static_cast<std::uint16_t>(parseInt("MASTER_PORT", requireVar("MASTER_PORT"), 1, 65535));
  return env;
}

RankWorld initRankWorld(const RankEnv& env, std::chrono::milliseconds timeout,
                        bool perRankLoopback, const GlooOptions& gloo) {
  RankWorld world;
  world.env = env;
  world.store = makeTcpStore(env.masterAddr, env.masterPort, env.rank == 0, env.worldSize, timeout);
  GlooOptions options = gloo;
  options.timeout = timeout;
  options.hostname = perRankLoopback ? loopbackAddressForRank(env.rank) : env.masterAddr;
  world.comm = connectGloo(world.store, env.rank, env.worldSize, options);
  return world;
}

}  // namespace ddph::comm
