#pragma once
// Private to the reader (trace_reader.cpp): what a rank's whole trace decides about its passes.

#include <cstdint>
#include <vector>

#include "ddph/trace/trace.h"

namespace ddph::trace {

/// Once every line of `t` is read (`lastLine` its last, `forwardLines` the lines of its DDP
/// forwards, ascending): a pass that handed out len(loader) batches is complete, unless zip threw
/// its last batch away; a pass never ended ends after the file; a pass whose sampler yielded
/// indices past its own dataset's length, within the loader's, indexes the loader's dataset;
/// peeks and cut evaluations (a sanity check) leave the passes and the loader's later passes are
/// renumbered.
void settlePasses(RankTrace& t, const std::vector<std::int64_t>& forwardLines, std::int64_t lastLine);

}  // namespace ddph::trace
