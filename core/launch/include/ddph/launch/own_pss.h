#pragma once
// A rank's proportional set size: what `ddp-sim run` reports as the world's memory (pss_mb_sum).
// RSS counts a page shared by the W forked ranks W times; PSS counts 1/W of it in each, so the sum
// of the ranks' PSS is the memory the world really holds (docs/ddp-sim.md, Scale).

#include <optional>

namespace ddph::launch {

/// The calling process's PSS in MiB, from the "Pss:" line of /proc/self/smaps_rollup (Linux 4.14
/// and later); nothing where that file cannot be read.
std::optional<double> ownPssMb();

}  // namespace ddph::launch
