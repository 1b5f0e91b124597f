// The built-in catalogue, written in the scenario file format (so `ddp-sim scenarios --show NAME`
// prints a file users can copy and edit).
#include "ddph/scenario/builtin_scenarios.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include "ddph/common/error.h"
#include "ddph/scenario/scenario_file.h"

namespace ddph::scenario {

using common::ConfigError;

const std::vector<BuiltinScenario>& builtinScenarios() {
  static const std::vector<BuiltinScenario> kCatalogue = {
      {"healthy", R"(name = "healthy"
description = "DistributedSampler with set_epoch and one seed on every rank: every property holds"
world_size = 4
epochs = 2
batch_size = 32
[[datasets]]
name = "train"
size = 10000
)"},
      {"missing-set-epoch", R"(name = "missing-set-epoch"
description = "sampler.set_epoch(epoch) is never called: every epoch repeats epoch 0's order"
expect = "reshuffle"
world_size = 4
epochs = 3
batch_size = 32
[[datasets]]
name = "train"
size = 2000
[faults]
skip_set_epoch = true
)"},
      {"rank-seed-skew", R"(name = "rank-seed-skew"
description = "each rank seeds its sampler with seed + rank: shards overlap and samples are lost"
expect = "coverage"
world_size = 4
epochs = 1
batch_size = 32
[[datasets]]
name = "train"
size = 2000
[faults]
per_rank_seed = true
)"},
      {"unsorted-file-listing", R"(name = "unsorted-file-listing"
description = "the dataset lists its files unsorted (os.listdir): index i names a different file on each rank"
expect = "coverage"
world_size = 4
epochs = 1
batch_size = 32
[[datasets]]
name = "images"
size = 2000
[faults]
per_rank_order = true
)"},
      {"zip-truncation", R"(name = "zip-truncation"
description = "zip() over MNIST-sized (60000) and CIFAR-10-sized (50000) loaders stops with the shorter: 10000 MNIST samples unseen per epoch"
expect = "coverage"
world_size = 4
epochs = 2
batch_size = 50
combine = "zip"
[[datasets]]
name = "mnist"
size = 60000
[[datasets]]
name = "cifar10"
size = 50000
)"},
      {"uneven-batches-hang", R"(name = "uneven-batches-hang"
description = "hand-rolled sharding indices[rank::W] without padding: ranks get different step counts and a real job hangs"
expect = "collective-mismatch"
world_size = 4
epochs = 2
batch_size = 10
[[datasets]]
name = "train"
size = 1002
sampler = "strided"
)"},
      {"drop-last-confusion", R"(name = "drop-last-confusion"
description = "DataLoader(drop_last=True) taken for DistributedSampler(drop_last=True): every rank drops its own partial batch"
expect = "coverage"
world_size = 4
epochs = 1
batch_size = 32
drop_last = true
[[datasets]]
name = "train"
size = 1000
sampler_drop_last = false
)"},
      {"padding-inflates-eval", R"(name = "padding-inflates-eval"
description = "evaluation with DistributedSampler: padding evaluates 7 samples twice and skews the metric"
expect = "no-duplicates"
phase = "eval"
world_size = 8
epochs = 1
batch_size = 16
[[datasets]]
name = "validation"
size = 1001
shuffle = false
)"},
      {"tiny-dataset-many-ranks", R"(name = "tiny-dataset-many-ranks"
description = "10 samples on 16 ranks with DistributedSampler(drop_last=True): num_samples = 0, the epoch trains on nothing"
expect = "coverage"
world_size = 16
epochs = 1
batch_size = 4
[[datasets]]
name = "tiny"
size = 10
sampler_drop_last = true
)"},
      {"rank-crash", R"(name = "rank-crash"
description = "rank 2 is killed (SIGKILL, as by the OOM killer) at step 3: the others must stop, nothing is left running"
expect = "rank-failure"
world_size = 4
epochs = 2
batch_size = 32
timeout_s = 30
[[datasets]]
name = "train"
size = 2000
[faults]
kill = { rank = 2, epoch = 0, step = 3 }
)"},
      {"rank-stopped", R"(name = "rank-stopped"
description = "rank 1 is stopped (SIGSTOP, as by a debugger or a frozen host) at step 3: a hang, not a crash; it is named as the rank that never arrived"
expect = "rank-failure"
world_size = 4
epochs = 1
batch_size = 32
timeout_s = 5
[[datasets]]
name = "train"
size = 2000
[faults]
stop = { rank = 1, epoch = 0, step = 3 }
)"},
      {"slow-rank", R"(name = "slow-rank"
description = "rank 1 takes 40 ms longer per step (slow data loading): the others wait for it in every allreduce"
expect = "straggler"
world_size = 4
epochs = 1
batch_size = 16
[[datasets]]
name = "train"
size = 640
[faults]
delay = { rank = 1, ms = 40 }
)"},
      {"elastic-resume", R"(name = "elastic-resume"
description = "stopped after 13 steps on 4 ranks, resumed on 3 with DistributedSampler: the epoch restarts and samples repeat"
expect = "resume-exactly-once"
world_size = 4
epochs = 1
batch_size = 8
[[datasets]]
name = "train"
size = 768
[resume]
stop_after_steps = 13
world_size = 3
)"},
      {"elastic-resume-per-rank", R"(name = "elastic-resume-per-rank"
description = "resumed on 3 ranks, each rank skipping what it had taken of its own shard on 3 ranks: samples taken twice"
expect = "resume-exactly-once"
world_size = 4
epochs = 1
batch_size = 8
[[datasets]]
name = "train"
size = 768
[resume]
stop_after_steps = 13
world_size = 3
keep_rank_positions = true
)"},
      {"elastic-resume-fixed", R"(name = "elastic-resume-fixed"
description = "the same stop and resume with the elastic sampler: the rest of the epoch, every sample once"
world_size = 4
epochs = 1
batch_size = 8
[[datasets]]
name = "train"
size = 768
sampler = "elastic"
[resume]
stop_after_steps = 13
world_size = 3
)"},
  };
  return kCatalogue;
}

bool isBuiltinScenario(std::string_view name) {
  for (const auto& b : builtinScenarios()) {
    if (b.name == name) return true;
  }
  return false;
}

Scenario builtinScenario(std::string_view name) {
  for (const auto& b : builtinScenarios()) {
    if (b.name == name) {
      Scenario s = parseScenario(b.toml, "built-in:" + std::string(name));
      return s;
    }
  }
  throw ConfigError(fmt::format("no built-in scenario '{}' (see `ddp-sim scenarios`)", name));
}

Scenario resolveScenario(const std::string& nameOrPath) {
  std::error_code ec;
  if (std::filesystem::exists(nameOrPath, ec)) return loadScenarioFile(nameOrPath);
  if (isBuiltinScenario(nameOrPath)) return builtinScenario(nameOrPath);
  throw ConfigError(fmt::format(
      "no scenario '{}': not a built-in name (see `ddp-sim scenarios`) and no such file",
      nameOrPath));
}

}  // namespace ddph::scenario
