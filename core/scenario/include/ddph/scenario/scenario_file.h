#pragma once
// Scenario files (TOML). A bad file is a ConfigError naming the file, the line and the key; a
// scenario that parsed is complete and valid (nothing is checked later, nothing runs before).
//
// Schema (every key optional unless marked; unknown keys are errors):
//   name = "my-bug"                description = "one line"        expect = "coverage"
//   world_size = 4                 epochs = 2                      seed = 0
//   batch_size = 32                drop_last = false               phase = "train" | "eval"
//   combine = "zip" | "cycle" | "concat" | "weighted"              weights = [0.7, 0.3]
//   timeout_s = 60                 gradient_size = 16
//   [[datasets]]                   (at least one)
//   name = "mnist"   size = 60000 (required)   sampler = "pytorch" | "libtorch-random" |
//   "libtorch-sequential" | "strided"          shuffle = true       sampler_drop_last = false
//   [faults]
//   skip_set_epoch = false   per_rank_seed = false   per_rank_order = false
//   kill = { rank = 2, epoch = 0, step = 3 }        delay = { rank = 1, ms = 20.0 }

#include <string>
#include <string_view>

#include "ddph/scenario/scenario.h"

namespace ddph::scenario {

/// Parses `text`; `source` names it in errors ("bugs/my.toml", "built-in:healthy").
Scenario parseScenario(std::string_view text, const std::string& source);

/// Reads and parses a file. ConfigError if it cannot be read.
Scenario loadScenarioFile(const std::string& path);

/// The most rank processes `ddp-sim run` starts (each holds W - 1 Gloo connections).
inline constexpr int kMaxWorldSize = 2048;

/// Checks what the parser cannot: world size >= 1, sizes, kill/delay ranks in range, …
/// (also after -n overrides the world size).
void validateScenario(const Scenario& s);

}  // namespace ddph::scenario
