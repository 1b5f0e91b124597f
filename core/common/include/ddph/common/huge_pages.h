#pragma once
// Transparent huge pages for large buffers that are about to be written once (NOTE [Huge pages]).

#include <cstddef>

namespace ddph::common {

/// NOTE [Huge pages]: a permutation of 10^7 indices is 80 MB, 19,500 pages of 4 KiB, and on a
/// virtual machine each first touch is a costly fault (a third of `ddp-sim sampler -N 10^7`'s time
/// went to them). Asking the kernel for 2 MiB pages (madvise(MADV_HUGEPAGE), where transparent
/// huge pages are in "madvise" mode, as on Debian) before the first write turns them into a few
/// dozen faults. Call it on memory that is reserved but not yet touched; buffers under 4 MiB and
/// kernels that refuse are left as they are (it is only advice).
void adviseHugePages(const void* data, std::size_t bytes);

}  // namespace ddph::common
