// What every engine shares: element types, the default asynchronous allreduce, and the padded
// allgather (Gloo's and NCCL's allgather need equal lengths).
#include "ddph/comm/communicator.h"

#include <algorithm>

namespace ddph::comm {
namespace {

class CompletedCollective final : public PendingCollective {
 public:
  void wait() override {}
};

/// Every rank passes the same `lengths` (one per rank), and this rank's entry is mine's length.
void checkAgreedLengths(const std::vector<std::int64_t>& lengths, int rank, int size,
                        std::size_t mineSize, std::string_view step) {
  const auto at = static_cast<std::size_t>(rank);
  DDPH_CHECK(static_cast<int>(lengths.size()) == size &&
                 lengths[at] == static_cast<std::int64_t>(mineSize),
             "allgather at {}: rank {} passes {} values but the agreed lengths say {}", step, rank,
             mineSize, lengths.size() > at ? lengths[at] : -1);
}

}  // namespace

std::string_view elementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return "float32";
    case ElementType::kFloat64: return "float64";
    case ElementType::kInt64: break;
  }
  return "int64";
}

std::size_t elementSize(ElementType type) {
  return type == ElementType::kFloat32 ? sizeof(float) : sizeof(std::int64_t);
}

std::unique_ptr<PendingCollective> Communicator::allreduceBufferAsync(Buffer data, ReduceOp op,
                                                                      std::string_view step) {
  allreduceBuffer(data, op, step);
  return std::make_unique<CompletedCollective>();
}

// Each rank pads its vector to the longest length, the equal blocks are gathered, and each
// rank's block is cut back to its length. Without `lengths`, they are gathered first.
std::vector<std::vector<std::int64_t>> Communicator::allgatherv(
    const std::vector<std::int64_t>& mine, const std::vector<std::int64_t>* lengths,
    std::string_view step) {
  std::vector<std::int64_t> gathered;
  if (lengths == nullptr) {
    gathered = gatherBlocks({static_cast<std::int64_t>(mine.size())}, step);
    lengths = &gathered;
  }
  checkAgreedLengths(*lengths, rank(), size(), mine.size(), step);
  const std::int64_t longest = *std::max_element(lengths->begin(), lengths->end());
  std::vector<std::int64_t> padded(mine);
  padded.resize(static_cast<std::size_t>(std::max<std::int64_t>(longest, 1)), 0);
  const std::size_t stride = padded.size();
  const std::vector<std::int64_t> flat = gatherBlocks(std::move(padded), step);
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(size()));
  for (std::size_t r = 0; r < out.size(); ++r) {
    const auto begin = flat.begin() + static_cast<long>(r * stride);
    out[r].assign(begin, begin + (*lengths)[r]);
  }
  return out;
}

}  // namespace ddph::comm
