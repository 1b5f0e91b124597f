#pragma once
// The samplers ddp-harness ships, by the names the command line uses.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/sampler/sampler.h"

namespace ddph::sampler {

/// "pytorch", "libtorch-random", "libtorch-sequential".
std::vector<std::string> builtinSamplerNames();

/// Throws ConfigError for an unknown name. `dropLast` maps to LibTorch's allow_duplicates=false;
/// `shuffle` applies to the PyTorch port only (LibTorch's samplers are random or sequential by kind).
std::unique_ptr<Sampler> makeBuiltinSampler(std::string_view name, bool shuffle, bool dropLast);

}  // namespace ddph::sampler
