#pragma once
// Private to the reader (trace_folder.cpp): one loader, one id, on every rank.

#include "ddph/trace/trace.h"

namespace ddph::trace {

/// NOTE [Loaders that only some ranks build] (docs/trace-format.md): the recorder numbers a rank's
/// loaders as it first iterates them, so a loader that only some ranks build (a node leader's
/// loader that broadcasts its batches) shifts the others' ids. Where one id names loaders made at
/// different lines on different ranks, every rank's loaders are renumbered by the line that made
/// them (and their order among the rank's loaders made there): the same loader
/// then has the same id everywhere, and one that only some ranks built an id of its own.
void alignLoaderIds(Trace& trace);

}  // namespace ddph::trace
