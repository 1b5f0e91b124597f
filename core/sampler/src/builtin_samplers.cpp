#include "ddph/sampler/builtin_samplers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddph/common/error.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/sampler/elastic_sampler.h"
#include "ddph/sampler/libtorch_samplers.h"

namespace ddph::sampler {

using common::ConfigError;

std::vector<std::string> builtinSamplerNames() {
  return {"pytorch", "elastic", "libtorch-random", "libtorch-sequential"};
}

std::unique_ptr<Sampler> makeBuiltinSampler(std::string_view name, bool shuffle, bool dropLast) {
  DistributedSamplerOptions options;
  options.shuffle = shuffle;
  options.dropLast = dropLast;
  if (name == "pytorch") return std::make_unique<DistributedSampler>(options);
  if (name == "elastic") return std::make_unique<ElasticSampler>(options);
  if (name == "libtorch-random") {
    return std::make_unique<LibTorchSampler>(LibTorchSamplerKind::kRandom, !dropLast);
  }
  if (name == "libtorch-sequential") {
    return std::make_unique<LibTorchSampler>(LibTorchSamplerKind::kSequential, !dropLast);
  }
  throw ConfigError(fmt::format("unknown sampler '{}' (expected one of: {})", name,
                                fmt::join(builtinSamplerNames(), ", ")));
}

}  // namespace ddph::sampler
