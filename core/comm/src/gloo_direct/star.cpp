#include "star.h"

#include <gloo/transport/unbound_buffer.h>

#include <cstring>
#include <memory>

namespace ddph::comm::gloo_direct {
namespace {

// Slot prefixes of the star collectives; Gloo's own prefixes are 0x01..0x08 (gloo/types.h).
constexpr std::uint8_t kStarGatherSlot = 0x40;
constexpr std::uint8_t kStarBroadcastSlot = 0x41;
constexpr std::uint8_t kRelaySlot = 0x42;

}  // namespace

void starGather(SparseContext& context, const void* mine, std::size_t bytes, void* all,
                std::uint32_t tag, Clock::time_point deadline) {
  const auto slot = gloo::Slot::build(kStarGatherSlot, tag);
  if (context.rank == 0) {
    char* out = static_cast<char*>(all);
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    char token = 0;
    if (out == nullptr) {  // a barrier: every rank's byte lands on the same one
      buffer = context.createUnboundBuffer(&token, 1);
      for (int r = 1; r < context.size; ++r) buffer->recv(r, slot, 0, bytes);
    } else {
      std::memcpy(out, mine, bytes);
      buffer = context.createUnboundBuffer(out, bytes * static_cast<std::size_t>(context.size));
      for (int r = 1; r < context.size; ++r) buffer->recv(r, slot, r * bytes, bytes);
    }
    for (int r = 1; r < context.size; ++r) checkCompleted(buffer->waitRecv(timeLeft(deadline)));
  } else {
    auto buffer = context.createUnboundBuffer(const_cast<void*>(mine), bytes);
    buffer->send(0, slot, 0, bytes);
    checkCompleted(buffer->waitSend(timeLeft(deadline)));
  }
}

void starBroadcast(SparseContext& context, void* data, std::size_t bytes, int root,
                   std::uint32_t tag, Clock::time_point deadline) {
  auto buffer = context.createUnboundBuffer(data, bytes);
  if (root != 0) {
    const auto relay = gloo::Slot::build(kRelaySlot, tag);
    if (context.rank == root) {
      buffer->send(0, relay, 0, bytes);
      checkCompleted(buffer->waitSend(timeLeft(deadline)));
    } else if (context.rank == 0) {
      buffer->recv(root, relay, 0, bytes);
      checkCompleted(buffer->waitRecv(timeLeft(deadline)));
    }
  }
  const auto slot = gloo::Slot::build(kStarBroadcastSlot, tag);
  if (context.rank == 0) {
    int sends = 0;
    for (int r = 1; r < context.size; ++r) {
      if (r == root) continue;
      buffer->send(r, slot, 0, bytes);
      ++sends;
    }
    for (int i = 0; i < sends; ++i) checkCompleted(buffer->waitSend(timeLeft(deadline)));
  } else if (context.rank != root) {
    buffer->recv(0, slot, 0, bytes);
    checkCompleted(buffer->waitRecv(timeLeft(deadline)));
  }
}

}  // namespace ddph::comm::gloo_direct
