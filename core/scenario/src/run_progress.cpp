#include "ddph/scenario/run_progress.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <new>

#include <fmt/format.h>

#include "ddph/common/error.h"

namespace ddph::scenario {

using common::Error;

struct RunProgress::Slot {
  std::atomic<int> joined{0};
  std::atomic<std::int64_t> epoch{0};
};
static_assert(std::atomic<std::int64_t>::is_always_lock_free, "shared between processes");

RunProgress::RunProgress(int worldSize) : worldSize_(worldSize) {
  void* memory = ::mmap(nullptr, sizeof(Slot) * static_cast<std::size_t>(worldSize), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw Error(fmt::format("cannot map the run's progress table for {} ranks", worldSize));
  slots_ = static_cast<Slot*>(memory);
  for (int r = 0; r < worldSize; ++r) new (&slots_[r]) Slot();
}

RunProgress::~RunProgress() { ::munmap(slots_, sizeof(Slot) * static_cast<std::size_t>(worldSize_)); }

void RunProgress::joined(int rank) { slots_[rank].joined.store(1); }

void RunProgress::inEpoch(int rank, std::int64_t epoch) { slots_[rank].epoch.store(epoch); }

int RunProgress::joinedRanks() const {
  int n = 0;
  for (int r = 0; r < worldSize_; ++r) n += slots_[r].joined.load();
  return n;
}

std::int64_t RunProgress::epochsDone() const {
  std::int64_t done = slots_[0].epoch.load();
  for (int r = 1; r < worldSize_; ++r) done = std::min(done, slots_[r].epoch.load());
  return done;
}

}  // namespace ddph::scenario
