#include "ddph/verify/case_gen.h"

#include <algorithm>

namespace ddph::verify {

using sampler::ResumePoint;
using sampler::SamplerCase;

rc::Gen<SamplerCase> genSamplerCase(const CaseBounds& bounds) {
  using rc::gen::inRange;
  const std::int64_t smallN = std::min<std::int64_t>(bounds.maxDatasetSize, 40);
  const std::int64_t smallW = std::min<std::int64_t>(bounds.maxReplicas, 8);
  return rc::gen::build<SamplerCase>(
      rc::gen::set(&SamplerCase::datasetSize,
                   rc::gen::oneOf(inRange<std::int64_t>(0, smallN + 1),
                                  inRange<std::int64_t>(0, bounds.maxDatasetSize + 1))),
      rc::gen::set(&SamplerCase::numReplicas,
                   rc::gen::oneOf(inRange<std::int64_t>(1, smallW + 1),
                                  inRange<std::int64_t>(1, bounds.maxReplicas + 1))),
      rc::gen::set(&SamplerCase::epoch, inRange<std::int64_t>(0, bounds.maxEpoch + 1)),
      // Small seeds, and large ones of either sign; both shrink towards 0.
      rc::gen::set(&SamplerCase::seed,
                   rc::gen::oneOf(inRange<std::int64_t>(0, 100),
                                  rc::gen::map(rc::gen::pair(inRange<std::int64_t>(0, std::int64_t{1} << 40),
                                                             rc::gen::arbitrary<bool>()),
                                               [](const std::pair<std::int64_t, bool>& p) {
                                                 return p.second ? -p.first : p.first;
                                               }))));
}

rc::Gen<std::vector<ResumePoint>> genResume(std::int64_t datasetSize, const CaseBounds& bounds) {
  return rc::gen::exec([datasetSize, bounds] {
    using rc::gen::inRange;
    const std::int64_t smallW = std::min<std::int64_t>(bounds.maxReplicas, 8);
    const int runs = *inRange(1, 3);  // one earlier run, sometimes two: shrinks towards one
    std::vector<ResumePoint> resume;
    std::int64_t left = datasetSize;
    for (int k = 0; k < runs; ++k) {
      ResumePoint p;
      p.numReplicas = *rc::gen::oneOf(inRange<std::int64_t>(1, smallW + 1),
                                      inRange<std::int64_t>(1, bounds.maxReplicas + 1));
      // At most what every rank holds before padding or the drop_last cut, so the point is valid
      // with and without drop_last.
      p.consumed = *inRange<std::int64_t>(0, left / p.numReplicas + 1);
      left -= p.consumed * p.numReplicas;
      resume.push_back(p);
    }
    return resume;
  });
}

}  // namespace ddph::verify
