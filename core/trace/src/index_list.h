#pragma once
// Decoding the index lists of a trace (docs/trace-format.md, "Index lists"): a JSON array, runs
// `{"runs": [[start, length], …]}`, or base64 little-endian int64 `{"i64": "…"}`.

#include <nlohmann/json.hpp>
#include <vector>

#include "ddph/sampler/sampler.h"

namespace ddph::trace {

/// Throws ConfigError (without file context; the caller adds it) on a malformed list.
std::vector<sampler::Index> decodeIndexList(const nlohmann::json& value);

/// The shortest of the three forms for `indices` (an array for a few, runs when they compress,
/// else base64 int64).
nlohmann::ordered_json encodeIndexList(const std::vector<sampler::Index>& indices);

}  // namespace ddph::trace
