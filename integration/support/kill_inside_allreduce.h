#pragma once
// A Communicator decorator for the multiprocess DDP test (ddp_rank_worker --kill-inside-allreduce):
// its rank SIGKILLs itself in the middle of the first large (>= 1 MiB) gradient allreduce of one
// DDP step, as the OOM killer would, while its data is on the wire.
//
// When that allreduce (step label `step`) starts, a watcher thread reads this process's
// /proc/self/io `wchar` (the bytes it has handed to write/writev: Gloo's TCP pairs send with
// writev) and raises SIGKILL once a quarter of the buffer's bytes have been written since. No
// timing decides where the kill lands: only the bytes written. Should the allreduce finish before
// the watcher saw them (a starved thread), the rank dies right after it instead, still inside the
// step's backward: its peers then wait in that step's next bucket. Either way `report` gets one
// line first saying which ("inside: N of M bytes written" or "after").
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "ddph/comm/communicator.h"

namespace ddph::test_support {

inline long long writtenBytes() {
  std::ifstream io("/proc/self/io");
  std::string key;
  long long value = 0;
  while (io >> key >> value) {
    if (key == "wchar:") return value;
  }
  return -1;
}

class KillInsideAllreduce final : public comm::Communicator {
 public:
  KillInsideAllreduce(std::unique_ptr<comm::Communicator> inner, std::string step,
                      std::string report)
      : inner_(std::move(inner)), step_(std::move(step)), report_(std::move(report)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void setTimeout(std::chrono::milliseconds t) override { inner_->setTimeout(t); }
  std::chrono::milliseconds timeout() const override { return inner_->timeout(); }
  std::string backendName() const override { return inner_->backendName(); }
  void barrier(std::string_view step) override { inner_->barrier(step); }
  void allreduceBuffer(comm::Buffer data, comm::ReduceOp op, std::string_view step) override {
    inner_->allreduceBuffer(data, op, step);
  }
  std::unique_ptr<comm::PendingCollective> allreduceBufferAsync(comm::Buffer data,
                                                                comm::ReduceOp op,
                                                                std::string_view step) override {
    if (step != step_ || data.bytes() < kLarge) return inner_->allreduceBufferAsync(data, op, step);
    const long long start = writtenBytes();
    const auto bytes = static_cast<long long>(data.bytes());
    std::thread([this, start, bytes] {
      for (;;) {  // ends with the process, one way or the other
        const long long now = writtenBytes();
        if (now - start >= bytes / 4) die(fmt::format("inside: {} of {} bytes written", now - start, bytes));
        std::this_thread::yield();
      }
    }).detach();
    auto pending = inner_->allreduceBufferAsync(data, op, step);
    pending->wait();
    die("after");
    return pending;
  }
  void broadcastBuffer(comm::Buffer data, int root, std::string_view step) override {
    inner_->broadcastBuffer(data, root, step);
  }
  std::vector<std::int64_t> gatherBlocks(std::vector<std::int64_t> block,
                                         std::string_view step) override {
    return inner_->gatherBlocks(std::move(block), step);
  }

 private:
  static constexpr std::size_t kLarge = std::size_t{1} << 20;

  void die(const std::string& where) {
    if (!dying_.exchange(true)) {
      if (std::FILE* f = std::fopen(report_.c_str(), "w")) {
        std::fputs(where.c_str(), f);
        std::fclose(f);
      }
      ::raise(SIGKILL);
    }
    for (;;) std::this_thread::yield();  // the other thread is raising it
  }

  std::unique_ptr<comm::Communicator> inner_;
  std::string step_;
  std::string report_;
  std::atomic<bool> dying_{false};
};

}  // namespace ddph::test_support
