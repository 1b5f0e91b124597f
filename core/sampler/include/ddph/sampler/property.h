#pragma once
// The named properties of distributed data loading, and what a violation of one looks like.
//
// The names are the project's vocabulary: property tests, `ddp-sim check-sampler`, the simulator's
// run reports and the README all use exactly these strings.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddph::sampler {

namespace property {
inline constexpr std::string_view kValidRange = "valid-range";
inline constexpr std::string_view kEqualLength = "equal-length";
inline constexpr std::string_view kCoverage = "coverage";
inline constexpr std::string_view kDisjointness = "disjointness";
inline constexpr std::string_view kPadding = "padding";
inline constexpr std::string_view kReshuffle = "reshuffle";
inline constexpr std::string_view kDeterminism = "determinism";
/// PyTorch's seeding: the order depends on seed and epoch only through seed + epoch.
inline constexpr std::string_view kSeedPlusEpoch = "seed-plus-epoch";
inline constexpr std::string_view kNoDuplicates = "no-duplicates";
inline constexpr std::string_view kBalancedLength = "balanced-length";
inline constexpr std::string_view kRanksAgree = "ranks-agree";
// Elastic resume (NOTE [Elastic resume]): an epoch stopped on W ranks and resumed on W'.
inline constexpr std::string_view kResumeExactlyOnce = "resume-exactly-once";
inline constexpr std::string_view kResumeOrder = "resume-order";
inline constexpr std::string_view kResumeBalance = "resume-balance";
// Run-level properties, judged on real rank processes by `ddp-sim run`.
inline constexpr std::string_view kCollectiveMismatch = "collective-mismatch";
inline constexpr std::string_view kRankFailure = "rank-failure";
inline constexpr std::string_view kStraggler = "straggler";
/// Judged on a trace: the ranks of a distributed run joined a process group.
inline constexpr std::string_view kProcessGroup = "process-group";
/// Training: W DDP ranks compute the gradients and parameters of one process on the global batch.
inline constexpr std::string_view kGradientEquivalence = "gradient-equivalence";
/// Training, judged on a trace of a real run (ddph/audit): every rank holds the same model.
inline constexpr std::string_view kReplicaConsistency = "replica-consistency";
/// Training, judged on a trace: an epoch that ran backward passes changed the parameters.
inline constexpr std::string_view kParameterUpdates = "parameter-updates";
}  // namespace property

/// One entry of the property catalogue.
struct PropertyInfo {
  std::string_view name;
  std::string_view summary;      ///< what holds when the property holds
  std::string_view likelyCause;  ///< the usual bug behind a violation
  std::string_view help;         ///< its usual fix
};

/// The sampler properties, in the order they are checked and reported.
const std::vector<PropertyInfo>& samplerProperties();

/// The run-level properties (collective-mismatch, rank-failure, straggler): about the ranks of a
/// running job rather than a sampler's partitions.
const std::vector<PropertyInfo>& runProperties();

/// The training properties (data-parallel training as a whole, checked by ddph/ddp).
const std::vector<PropertyInfo>& trainingProperties();

/// The catalogue entry for `name` (sampler, run or training property), or nullptr.
const PropertyInfo* findProperty(std::string_view name);

/// One broken property, located as precisely as the checker can.
struct Violation {
  std::string property;
  std::vector<std::int64_t> ranks;  ///< ranks involved; empty when it is about the whole world
  std::int64_t epoch = -1;          ///< -1: not tied to an epoch
  std::int64_t step = -1;           ///< -1: not tied to a step
  std::string detail;               ///< one line, readable without context
  /// This violation's own cause when the checker knows it (else the catalogue's is shown).
  std::string likelyCause;
  /// What follows from it or qualifies it, one line each ("the same in 3 epochs"), shown as
  /// `note:` lines under the finding (docs/audit.md, "Reading a finding").
  std::vector<std::string> notes;
  /// The remedy, one line, shown as `help:` (else the catalogue's, with the catalogue's cause).
  std::string help;
};

/// The likely cause to show for `v`: its own, else the catalogue's, else empty.
std::string likelyCauseOf(const Violation& v);

/// The remedy to show for `v`: its own; else, when its cause is the catalogue's, the catalogue's.
std::string helpOf(const Violation& v);

/// "coverage at epoch 3 on ranks [1, 2]: …", one line.
std::string formatViolation(const Violation& v);

}  // namespace ddph::sampler
