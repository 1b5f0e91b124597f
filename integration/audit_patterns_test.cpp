// The bug patterns users bring, each a real PyTorch script under integration/audit_programs/ run
// unmodified under `ddp-sim launch --audit -n 4`: the property found, its ranks and epoch, and the
// cause chosen from the trace's evidence (the program's own construct named). Their healthy
// counterparts are the audit_healthy.* tests (audit_programs/healthy/, docs/audit.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "audited_launch.h"
#include "test_support.h"

using Json = nlohmann::json;

namespace ddph::test_support {
namespace {

const std::string kPython = DDPH_PYTHON;
const std::string kPrograms = DDPH_AUDIT_PROGRAMS_DIR;

std::vector<std::string> python(const std::string& program, std::vector<std::string> args = {}) {
  std::vector<std::string> argv = {kPython, kPrograms + "/" + program};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string text(const Json& v, const char* key) {
  return v.contains(key) && v[key].is_string() ? v[key].get<std::string>() : "";
}

// The one violation of `property`; fails the test when there is not exactly one.
Json only(const Audited& a, const std::string& property) {
  const auto found = violationsOf(a, property);
  EXPECT_EQ(found.size(), 1u) << property << "\n" << shown(a);
  return found.empty() ? Json::object() : found[0];
}

TEST(AuditPattern, ShuffleTrueWithoutDistributedSamplerNamesTheMissingSampler) {
  const auto a = launchAudited(4, python("no_distributed_sampler.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "disjointness");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "RandomSampler")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "no DistributedSampler")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "shuffle=False")) << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "same seed")) << shown(a);
}

TEST(AuditPattern, SetEpochAfterIterWithWorkersIsReshuffleCalledTooLate) {
  const auto a = launchAudited(4, python("set_epoch_after_iter.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "set_epoch(1) was called after iter(loader) had begun epoch 1"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "2 worker processes")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "before iter(loader)")) << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "same value every epoch")) << shown(a);
}

TEST(AuditPattern, SetEpochAfterIterWithoutWorkersIsInTime) {
  // The same loop without workers: torch draws the order at the first next(), after set_epoch.
  const auto a = launchAudited(4, python("set_epoch_after_iter.py", {"--workers", "0"}));
  EXPECT_EQ(a.command.exitCode, 0) << shown(a);
  EXPECT_TRUE(a.report["passed"].get<bool>()) << shown(a);
}

TEST(AuditPattern, EarlyStopOnOneRankLeftTheLoopAndIsNotUnevenInputs) {
  const auto a = launchAudited(4, python("early_stop_rank0.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json m = only(a, "collective-mismatch");
  EXPECT_EQ(m["ranks"], Json::array({1, 2, 3})) << shown(a);
  EXPECT_EQ(m["epoch"], 2) << shown(a);
  EXPECT_TRUE(has(text(m, "detail"), "rank 0 ended normally after epoch 1")) << shown(a);
  EXPECT_TRUE(has(text(m, "detail"), "never began epoch 2")) << shown(a);
  EXPECT_TRUE(has(text(m, "help"), "all_reduce the stop flag")) << shown(a);
  EXPECT_FALSE(has(text(m, "likely_cause"), "ran out of batches")) << shown(a);
  // The others' failed allreduce leaves their last step undone: a consequence, not a finding.
  EXPECT_TRUE(violationsOf(a, "parameter-updates").empty()) << shown(a);
  EXPECT_TRUE(violationsOf(a, "replica-consistency").empty()) << shown(a);
  // Rank 0's missing epoch 2 is the early stop, not a shard left unread (NOTE [A loader on some
  // ranks only] is about loaders a rank never iterates).
  EXPECT_TRUE(violationsOf(a, "coverage").empty()) << shown(a);
}

TEST(AuditPattern, EveryBackwardUnderNoSyncIsReplicaConsistencyNamingNoSync) {
  const auto a = launchAudited(4, python("no_sync_always.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_EQ(v["epoch"], 1) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "ran under no_sync()")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "last micro-batch")) << shown(a);
}

TEST(AuditPattern, WeightedSamplerSeededAlikeOnEveryRankIsRanksAgree) {
  const auto a = launchAudited(4, python("weighted_same_seed.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "ranks-agree");
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "drew the same 200 indices")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "seed + rank")) << shown(a);
  // Coverage does not apply to a draw with replacement, and the report says so.
  bool said = false;
  for (const auto& n : a.report["notes"]) said = said || has(n.get<std::string>(), "do not apply");
  EXPECT_TRUE(said) << shown(a);
  // Nothing else in the run was judged by them: "n/a", never "ok".
  EXPECT_EQ(a.report["not_applicable"],
            Json::array({"coverage", "disjointness", "no-duplicates", "reshuffle"}))
      << shown(a);
}

TEST(AuditPattern, EvaluationSamplerWithDropLastLeavesSamplesUnscored) {
  const auto a = launchAudited(4, python("eval_drop_last.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "2 of its 402 samples were never evaluated (400, 401)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "drop_last=True")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "indices[rank::world_size]")) << shown(a);
}

TEST(AuditPattern, TheTrainingSamplerOnTheEvaluationLoaderLeavesItsTailUnscored) {
  const auto a = launchAudited(4, python("eval_with_train_sampler.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "loader 1 (TensorDataset, 1000 samples)")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "was built over 400 samples, the sampler of loader 0")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "600 of the loader's 1000 samples (400..999) are on no rank"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "a sampler made for another dataset (loader 0's)")) << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "seed")) << shown(a);
}

TEST(AuditPattern, RandomSplitAfterAPerRankSeedGivesEachRankAnotherTrainingSet) {
  const auto a = launchAudited(4, python("random_split_per_rank_seed.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "different Subsets of their base dataset")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "rank 0 in order A")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "random_split")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "generator=torch.Generator().manual_seed(0)")) << shown(a);
}

TEST(AuditPattern, AnUnshardedIterableDatasetGivesEveryRankTheSameBatches) {
  const auto a = launchAudited(4, python("iterable_unsharded.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "disjointness");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "128 of the 128 batches of this epoch are on more than one rank"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "shard it in __iter__ by rank")) << shown(a);
}

TEST(AuditPattern, APartOfAStreamNotShardedByRankIsNamedWithWhereItSits) {
  // 512 corpus records sharded (8 batches of 16 a rank), 128 hard examples not (8 more batches,
  // the same on every rank): half of each rank's batches are shared.
  const auto a = launchAudited(4, python("chained_stream.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "disjointness");
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "32 of the 64 batches of this epoch are on more than one rank"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "its last 8 of 16 batches")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "ChainDataset")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "shard every part of the stream")) << shown(a);
}

TEST(AuditPattern, ADatasetFilteredAfterItsSamplerWasMadeTrainsThePaddingTwice) {
  // 400 samples when the sampler was made, 284 after the filter: 100 per rank still, 116 copies.
  const auto a = launchAudited(4, python("dataset_filtered_after_sampler.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "disjointness");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "built over 400 samples and its dataset has 284 when iterated"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "116 samples are trained twice")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "shrank after its DistributedSampler was made")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "after the dataset is final")) << shown(a);
}

// A custom sampler that never takes its rank's share, with no rank of its own to show for it: the
// trace shows every rank's order whole and the same, so the cause is definite, not a candidate
// list. With --shard (indices[rank::world] of the same order) it passes.
TEST(AuditPattern, ACustomSamplerThatIgnoresItsRankIsNamedFromTheOrders) {
  const auto a = launchAudited(4, python("custom_sampler_ignores_rank.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "disjointness");
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "every rank's EpochShuffleSampler yields the same 240 "
                                           "indices in the same order: the sampler ignores its rank"))
      << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "candidates")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "indices[rank::num_replicas]")) << shown(a);
  const auto twin = launchAudited(4, python("custom_sampler_ignores_rank.py", {"--shard"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
  EXPECT_TRUE(twin.report["violations"].empty()) << shown(twin);
}

// One learning rate per rank under DDP: the `step` lines' rates name it, not a candidate list.
TEST(AuditPattern, ALearningRatePerRankIsNamedByTheRatesTheRanksSteppedWith) {
  const auto a = launchAudited(4, python("lr_per_rank.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "the ranks' optimizers stepped with different learning rates from their step 1 "
                  "on (rank 0: 0.001; rank 1: 0.003; rank 2: 0.01; rank 3: 0.03)"))
      << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "cannot tell")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "one learning rate and schedule on every rank")) << shown(a);
  const auto twin = launchAudited(4, python("lr_per_rank.py", {"--same"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

// NOTE [A resume offset that outlives its epoch]: each later epoch is DistributedSampler's order
// with the resumed epoch's head still skipped; the resumed epoch itself is a note.
TEST(AuditPattern, AResumeOffsetNeverResetIsNamedInTheEpochsAfterTheResumedOne) {
  const auto a = launchAudited(4, python("resume_offset_kept.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_EQ(v["epoch"], 1) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "each rank drew DistributedSampler's order for sampler "
                                     "epoch 1 with its first 48 samples skipped (80 of 128 on "
                                     "rank 0)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "192 of 512 indices are on no rank")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "ResumableSampler still skips the samples of the "
                                           "epoch it resumed in"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "reset the offset to 0")) << shown(a);
  const auto twin = launchAudited(4, python("resume_offset_kept.py", {"--reset"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
  EXPECT_TRUE(has(twin.report["notes"].dump(), "its first pass drew DistributedSampler's order "
                                               "with the first 48 samples skipped"))
      << shown(twin);
}

// NOTE [A loader fed from a cache]: a step loop over itertools.cycle(loader) with no other loader;
// the steps after the loader's one pass are the evidence.
TEST(AuditPattern, AStepLoopOverACycledLoaderIsReshuffleFromACache) {
  const auto a = launchAudited(4, python("cycled_step_loop.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_EQ(v["epoch"], 1) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "it was iterated 1 time, its last pass to its end, but "
                                     "set_epoch(1), set_epoch(2) were called"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "17 optimizer steps on rank 0 after its last batch was "
                                     "handed out"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "itertools.cycle(loader)")) << shown(a);
  const auto twin = launchAudited(4, python("cycled_step_loop.py", {"--reiterate"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
  EXPECT_TRUE(twin.report["violations"].empty()) << shown(twin);
}

// NOTE [Forwards that no backward followed]: a per-rank `continue` between DDP's forward and
// backward; the forward and backward counts name it, not uneven inputs.
TEST(AuditPattern, ABackwardSkippedOnOneRanksConditionIsNamedByItsForwardsWithoutBackward) {
  const auto a = launchAudited(4, python("backward_skipped_per_rank.py"), 60);
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const auto found = violationsOf(a, "collective-mismatch");
  ASSERT_FALSE(found.empty()) << shown(a);
  EXPECT_TRUE(has(text(found[0], "likely_cause"),
                  "the ranks ran forwards with gradients that no backward followed, each rank a "
                  "different number (rank 0: "))
      << shown(a);
  EXPECT_FALSE(has(text(found[0], "likely_cause"), "uneven inputs")) << shown(a);
  EXPECT_TRUE(has(text(found[0], "help"), "return the loss times 0 instead of None")) << shown(a);
  const auto twin = launchAudited(4, python("backward_skipped_per_rank.py", {"--all-ranks"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

// NOTE [Steps the ranks took apart]: the same backward passes everywhere, optimizer steps skipped
// on each rank's own loss; then weights edited outside training on rank 0.
TEST(AuditPattern, AStepSkippedOnARanksOwnLossIsNamedByWhereTheStepsPart) {
  const auto a = launchAudited(4, python("step_skipped_on_local_loss.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "likely_cause"), "every rank ran the same backward passes, but the "
                                           "ranks' optimizer steps part at their step "))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "a loss-spike, NaN or gradient-norm guard")) << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "changed p.grad")) << shown(a);
  const auto twin = launchAudited(4, python("step_skipped_on_local_loss.py", {"--agreed"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, WeightsRoundedInPlaceOnRankZeroBetweenEpochsAreAnEditOutsideTraining) {
  const auto a = launchAudited(4, python("weights_rounded_on_rank0.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_EQ(v["ranks"], Json::array({0})) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "rank 0 changed between the last point where the replicas agreed and this one, "
                  "where no rank took an optimizer step"))
      << shown(a);
  const auto twin = launchAudited(4, python("weights_rounded_on_rank0.py", {"--copy"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

// NOTE [An order drawn from the global generators]: seeded alike, but rank 0 draws a preview
// from numpy's generator first (a short draw: only the key's position moves).
TEST(AuditPattern, ARankZeroDrawBetweenTheSeedAndTheSamplersIsNamed) {
  const auto a = launchAudited(4, python("preview_draws_global_rng.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "BlockShuffleSampler draws its order from numpy's global generator "
                  "(np.random.permutation), seeded alike on every rank (np.random.seed(17) at "
                  "preview_draws_global_rng.py:45 in main), yet the ranks drew other orders"))
      << shown(a);
  EXPECT_EQ(text(only(a, "disjointness"), "likely_cause"), text(v, "likely_cause")) << shown(a);
  const auto twin = launchAudited(4, python("preview_draws_global_rng.py", {"--own-generator"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

// NOTE [Steps cut to the shortest rank]: files dealt whole to the ranks, every pass stopped at
// the shortest rank's batch count.
TEST(AuditPattern, StepsCutToTheShortestRanksShardAreCoverageNamedByTheLengths) {
  const auto a = launchAudited(4, python("files_split_min_steps.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_TRUE(has(text(v, "detail"),
                  "the ranks' loaders hold different numbers of batches (ranks 2, 3: 4; ranks 0, "
                  "1: 6), and every rank's pass stopped at the shortest one's 4: 128 of the 640 "
                  "samples were trained by no rank in this epoch"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "all_reduce(MIN)")) << shown(a);
  const auto twin = launchAudited(4, python("files_split_min_steps.py", {"--records"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

// NOTE [Steps the ranks took apart]: the same steps after the same batches everywhere, the
// weights edited between steps on rank 0 only.
TEST(AuditPattern, WeightsEditedBetweenStepsOnRankZeroAreNamedAfterTheStepsAgree) {
  const auto a = launchAudited(4, python("lookahead_on_rank0.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_EQ(v["ranks"], Json::array({0})) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "every rank ran the same backward passes and took the same 8 optimizer steps "
                  "after the same batches, so the weights of rank 0 were changed in place "
                  "between steps"))
      << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "cannot tell")) << shown(a);
  const auto twin = launchAudited(4, python("lookahead_on_rank0.py", {"--every-rank"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

// NOTE [An object list nobody keeps]: a configuration broadcast into a list display never reaches
// ranks 1-3; the rates they stepped with show the effect, the broadcast's line the construct.
TEST(AuditPattern, AConfigBroadcastIntoAListDisplayIsNamedWithItsLine) {
  const auto a = launchAudited(4, python("config_broadcast_discarded.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "likely_cause"), "stepped with different learning rates from their "
                                           "step 1 on")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "broadcast_object_list was given a list display at "
                  "config_broadcast_discarded.py:32 in main"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "cfg = objs[0]")) << shown(a);
  const auto twin = launchAudited(4, python("config_broadcast_discarded.py", {"--keep"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
  EXPECT_TRUE(twin.report["violations"].empty()) << shown(twin);
}

TEST(AuditPattern, ShardsMadeByHandThenShardedAgainNameTheDoubleSharding) {
  const auto a = launchAudited(4, python("sharded_twice.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_TRUE(has(text(v, "likely_cause"), "already split the base of 800 samples by rank")) << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "random state")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "shard once")) << shown(a);
}

TEST(AuditPattern, WorkersOfAnIterableDatasetShardedByRankOnlyRepeatEveryBatch) {
  const auto a = launchAudited(4, python("iterable_unsharded.py", {"--shard-by-rank", "--workers", "2"}));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "no-duplicates");
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "2 worker processes")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "get_worker_info()")) << shown(a);
}

TEST(AuditPattern, ACorruptSampleOnOneRankIsNamedFirstWithItsLine) {
  for (const char* workers : {"0", "2"}) {
    const auto a = launchAudited(4, python("corrupt_sample.py", {"--workers", workers}));
    EXPECT_EQ(a.command.exitCode, 1) << shown(a);
    const auto failures = violationsOf(a, "rank-failure");
    ASSERT_FALSE(failures.empty()) << shown(a);
    const Json& first = failures.front();
    EXPECT_EQ(first["ranks"], Json::array({0})) << workers << "\n" << shown(a);
    EXPECT_TRUE(has(text(first, "detail"),
                    "raised ValueError: corrupt sample 28"))
        << workers << "\n" << shown(a);
    EXPECT_TRUE(has(text(first, "detail"), "at corrupt_sample.py:"))
        << workers << "\n" << shown(a);
    EXPECT_TRUE(has(text(first, "detail"), "in __getitem__")) << workers << "\n" << shown(a);
    EXPECT_TRUE(has(text(first, "likely_cause"), "rank 0 raised the error itself")) << shown(a);
    EXPECT_FALSE(has(text(first, "likely_cause"), "OOM")) << shown(a);
    for (std::size_t i = 1; i < failures.size(); ++i) {
      EXPECT_TRUE(has(text(failures[i], "likely_cause"), "consequence")) << shown(a);
    }
  }
}

// NOTE [A forward on some ranks only]: rank 0 evaluates through the DDP wrapper of a model with
// BatchNorm, whose forward broadcasts its buffers; the twin evaluates model.module.
TEST(AuditPattern, EvaluatingThroughDdpOnRankZeroOnlyIsACollectiveMismatch) {
  const auto a = launchAudited(4, python("eval_rank0_through_ddp.py"), 120);
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_FALSE(a.report["violations"].empty()) << shown(a);
  const Json v = a.report["violations"][0];  // the cause first, the lost connection after it
  EXPECT_EQ(v["property"], "collective-mismatch") << shown(a);
  EXPECT_EQ(v["ranks"], Json::array({0})) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"),
                  "ran forwards without gradients on some ranks only "
                  "(ranks 1, 2, 3: 0; rank 0: 3)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "broadcasts the module's 3 buffers from rank 0")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "evaluate model.module")) << shown(a);
}

// NOTE [A loader on some ranks only]: rank 0 evaluates over a validation loader sharded with
// DistributedSampler; the other ranks' shards are never read.
// (healthy/eval_rank0_batchnorm_module.py evaluates on rank 0 with an unsharded loader: no
// finding.)
TEST(AuditPattern, EvaluatingAShardedLoaderOnRankZeroOnlyIsCoverage) {
  const auto a = launchAudited(3, python("eval_rank0_sharded.py"), 120);
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  EXPECT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = onlyViolation(a, "coverage");
  EXPECT_EQ(v["ranks"], Json::array({1, 2})) << shown(a);
  EXPECT_EQ(v["epoch"], 0) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"),
                  "splits its 120 samples across 3 ranks, but only rank 0 iterates it in pass 0: "
                  "ranks 1, 2 never read their shards, so 80 of the 120 samples are never seen"))
      << shown(a);
  EXPECT_EQ(v["notes"], Json::array({"the same in 2 epochs"})) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "give that loop an unsharded loader")) << shown(a);
}

TEST(AuditPattern, AnImportErrorOnEveryRankIsOneFindingWithItsCause) {
  const auto a = launchAudited(4, python("import_error.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  // Every rank that raised before the launcher stopped the rest: one finding (how many raised
  // first is a race; the ranks stopped before they raised are the failure's consequence).
  const Json v = only(a, "rank-failure");
  EXPECT_FALSE(v["ranks"].empty()) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"),
                  "raised ModuleNotFoundError: No module named 'wandb_logger_of_our_team'"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "at import_error.py:8 in <module>")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "failed at an import")) << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "OOM")) << shown(a);
  if (v["ranks"].size() > 1) {
    EXPECT_FALSE(has(text(v, "detail"), "the first rank to raise")) << shown(a);
  }
}

// NOTE [Dataset identity] (docs/audit.md): ranks whose datasets differ beyond a file listing.
TEST(AuditPattern, ConcatDatasetOfSourcesShuffledPerRankNamesTheParts) {
  const auto a = launchAudited(4, python("concat_per_rank_order.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_EQ(v["ranks"], Json::array({0})) << shown(a);  // random.seed(0)'s order; 1-3 agree
  EXPECT_TRUE(has(text(v, "detail"), "hold the same 3 parts in different orders")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "ranks 1, 2, 3: A B C; rank 0: C B A")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "A = Source 'books', 300 samples")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "a shuffle of the list after a per-rank seed")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "sort the list of parts")) << shown(a);
}

TEST(AuditPattern, ConcatDatasetWithAPartFilteredPerRankNamesThePartAndItsLengths) {
  const auto a = launchAudited(4, python("concat_per_rank_filter.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "differ in 1 of their 3 parts (part 2 (Source 'code'): "
                                     "rank 0 319, rank 1 316, rank 2 335, rank 3 322 samples)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "a random filter or subsample after a per-rank seed"))
      << shown(a);
}

TEST(AuditPattern, RandomSubsetAfterAPerRankSeedGivesEachRankOtherSamples) {
  const auto a = launchAudited(4, python("tensor_data_per_rank_seed.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "TensorDatasets hold different samples (each rank its own"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "torch.manual_seed(rank)")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "the trace cannot tell which")) << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "shuffle")) << shown(a);  // the content differs
}

TEST(AuditPattern, DataPermutedOnceAfterAPerRankSeedIsTheSameSamplesInAnotherOrder) {
  const auto a = launchAudited(4, python("tensor_data_per_rank_seed.py", {"--permute"}));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  // Samples on two ranks and on none: two findings of one cause (NOTE [A split that loses and
  // copies]).
  ASSERT_EQ(a.report["violations"].size(), 2u) << shown(a);
  EXPECT_TRUE(has(text(only(a, "disjointness"), "detail"),
                  "samples are trained on more than one rank"))
      << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "hold the same samples in different orders")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "permuted on each rank before the sampler")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "leave the shuffling to DistributedSampler")) << shown(a);
}

// NOTE [A dataset of column tensors]: a dataset of the program's own built (and sorted) on rank 0
// and loaded from a cache on the others holds the same rows in another order there.
TEST(AuditPattern, ADatasetSortedOnRankZeroAndCachedForTheOthersIsReadFromItsColumns) {
  TempDir cache("ddph-token-cache");
  const auto a = launchAudited(4, python("dataset_cached_on_rank0.py", {"--cache-dir", cache.path()}));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 2u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_EQ(v["ranks"], Json::array({0})) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"),
                  "the ranks' TokenDatasets hold the same samples in different orders (ranks 1, "
                  "2, 3 data A; rank 0 data B; compared by its column tensors labels, lengths, "
                  "tokens"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "loaded from a cache or file on the others")) << shown(a);
  EXPECT_TRUE(has(text(only(a, "disjointness"), "detail"), "samples are trained on more than one "
                                                           "rank"))
      << shown(a);
  TempDir twinCache("ddph-token-cache");
  const auto twin = launchAudited(
      4, python("dataset_cached_on_rank0.py", {"--cache-dir", twinCache.path(), "--load-everywhere"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, SetEpochOnASamplerNoLoaderUsesNamesBothSamplers) {
  const auto a = launchAudited(4, python("set_epoch_on_other_sampler.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "set_epoch is never called on sampler 1")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "but on sampler 0")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "which no loader draws from")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "loader.sampler.set_epoch(epoch)")) << shown(a);
}

TEST(AuditPattern, ACustomSamplersOverlapListsCandidatesNotADifferentSeed) {
  // Its ranks share one seed: "seed every rank identically" (the catalogue's) would be wrong.
  const auto a = launchAudited(4, python("custom_overlapping_sampler.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "disjointness");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_EQ(v["ranks"], Json::array({0, 3})) << shown(a);
  const std::string cause = text(v, "likely_cause");
  EXPECT_TRUE(has(cause, "ShardSampler is not torch's DistributedSampler")) << shown(a);
  EXPECT_TRUE(has(cause, "its ranks share one seed (0)")) << shown(a);
  EXPECT_TRUE(has(cause, "cannot single out")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "serve_sampler " + kPrograms + "/custom_overlapping_sampler.py:ShardSampler"))
      << shown(a);
  EXPECT_FALSE(has(cause, "seed every rank identically")) << shown(a);
}

TEST(AuditPattern, DropLastOverAnUnshuffledSamplerNeverTrainsTheSameSamples) {
  // NOTE [Across epochs]: each epoch alone drops a partial batch per rank, as drop_last says; only
  // the run shows that they are the same samples every time.
  const auto a = launchAudited(4, python("drop_last_no_shuffle.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "104 of its 1000 samples (896..999) were trained in none of "
                                     "its 3 epochs"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "DataLoader(drop_last=True)")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "DistributedSampler(shuffle=False)")) << shown(a);
}

TEST(AuditPattern, ACycledLoaderReplaysItsFirstPassAndItsSetEpochReachesNothing) {
  const auto a = launchAudited(4, python("cycled_aux_loader.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_EQ(v["epoch"], 1);
  EXPECT_TRUE(has(text(v, "detail"), "(TensorDataset, 200 samples): it was iterated 1 time"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "set_epoch(1), set_epoch(2) were called")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "itertools.cycle(loader)")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "it = iter(loader)")) << shown(a);
}

TEST(AuditPattern, ShardsDrawnAfterAPerRankSeedOverlapOverTheirBase) {
  // NOTE [Shards that are Subsets of one base]: each rank's Subset indices, counted over the base.
  const auto a = launchAudited(4, python("subset_per_rank_permutation.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_TRUE(has(text(v, "detail"), "the ranks' datasets are Subsets of one base of 400 samples, "
                                     "400 samples together as a split of it would be, but "))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "after a per-rank seed")) << shown(a);
  EXPECT_FALSE(has(a.report["notes"].dump(), "no epoch's partition could be checked")) << shown(a);
}

TEST(AuditPattern, TwoLoadersDrivenForTheShortersLengthLeaveTheLongersRest) {
  // CombinedLoader(mode="min_size")'s loop: the shorter loader handed out len() batches (complete,
  // no StopIteration), the longer one was cut there every epoch: zip's truncation, not a budget.
  const auto a = launchAudited(4, python("min_size_by_len.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_TRUE(has(text(v, "detail"), "(TensorDataset, 1280 samples): only 320 of its 1280 samples "
                                     "were consumed in this epoch"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "zip() over loaders of different lengths")) << shown(a);
}

TEST(AuditPattern, AModelCalledAroundItsDdpWrapperIsNamed) {
  const auto a = launchAudited(4, python("module_forward_bypass.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "likely_cause"), "never ran its forward on any rank while the ranks "
                                           "trained on 84 batches"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "model.module(x)")) << shown(a);
}

TEST(AuditPattern, AnAccumulationStepAfterANoSyncBackwardIsNamed) {
  const auto a = launchAudited(4, python("accumulation_step_before_sync.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "likely_cause"), "27 of its 36 forwards with gradients ran under "
                                           "model.no_sync()"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "an optimizer.step() taken after a backward under "
                                           "no_sync()"))
      << shown(a);
}

TEST(AuditPattern, GradientsAveragedThroughGradDataAfterTheStepAreFound) {
  // all_reduce(param.grad.data): a new tensor over the gradient's storage, still that gradient.
  const auto a = launchAudited(4, python("healthy/manual_allreduce_grad_data.py",
                                         {"--average-after-step"}));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "detail"), "gradients averaged by the program's own all_reduce"))
      << shown(a);
  // The `step` lines: every all_reduce came after a step and before the next batch.
  EXPECT_TRUE(has(text(v, "likely_cause"), "the program all-reduces its gradients after "
                                           "optimizer.step() (rank 0: 60 of its 60 all_reduces"))
      << shown(a);
}

TEST(AuditPattern, HandWrittenGradientAveragingFromPerRankInitsIsReplicaConsistency) {
  // NOTE [Hand-written gradient averaging]: no DDP module, but the optimizer whose gradients the
  // program all-reduces is a replica; its twin broadcasts rank 0's parameters first and passes.
  const auto a = launchAudited(4, python("manual_allreduce_per_rank_seed.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_EQ(v["epoch"], 1);
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "the model of optimizer 0 (SGD, 178 parameters, gradients "
                                     "averaged by the program's own all_reduce)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "torch.manual_seed(rank)")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "dist.broadcast(p.data, src=0)")) << shown(a);
  EXPECT_FALSE(has(text(v, "likely_cause"), "although DDP broadcasts")) << shown(a);
}

TEST(AuditPattern, ARunThatEndsInsideAnEpochIsANoteNotCoverage) {
  // NOTE [A run that ends inside a pass]: a step budget or a job stopped to be resumed.
  const auto a = launchAudited(4, python("healthy/drop_last_loader_shuffled.py", {"--max-steps", "12"}));
  EXPECT_EQ(a.command.exitCode, 0) << shown(a);
  EXPECT_TRUE(a.report["passed"].get<bool>()) << shown(a);
  bool said = false;
  for (const auto& n : a.report["notes"]) said = said || has(n.get<std::string>(), "the run ended inside epoch 1");
  EXPECT_TRUE(said) << shown(a);
}

TEST(AuditPattern, AnAveragedModelUpdatedOnRankZeroOnlyAndRunEverywhereIsNamed) {
  // Averaged models (docs/audit.md): the SWA weights evaluated on every rank, updated on rank 0.
  const auto a = launchAudited(4, python("averaged_model_rank0_only.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "averaged model 0 (AveragedModel) ran with other weights"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "rank 0: 3 updates")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "ranks 1, 2, 3: no update")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "update_parameters (averaged_model_rank0_only.py:44 in main) ran on rank 0 only"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "update the averaged model on every rank")) << shown(a);
  const auto twin = launchAudited(4, python("averaged_model_rank0_only.py", {"--every-rank"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, GradientsChangedPerRankAfterTheAllReduceAreNamedFromTheStep) {
  // NOTE [Gradients at the step]: noise from a generator seeded per rank, added to p.grad after
  // backward; the gradients hashed at the first optimizer step already differ.
  const auto a = launchAudited(4, python("gradient_noise_per_rank.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "the gradients the ranks' optimizers applied at their step 1 differ"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "between loss.backward() and optimizer.step()"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "a generator seeded the same on every rank")) << shown(a);
  const auto twin = launchAudited(4, python("gradient_noise_per_rank.py", {"--same-seed"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AStreamWhosePersistentWorkersNeverSeeSetEpochIsReshuffle) {
  // NOTE [A stream whose set_epoch reaches nothing]: the same batches, by content, every epoch.
  const auto a = launchAudited(4, python("stream_persistent_workers.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_TRUE(has(text(v, "detail"), "although the program called ShuffledShards.set_epoch(1)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "DataLoader(num_workers=2, persistent_workers=True)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "drop persistent_workers")) << shown(a);
  const auto twin = launchAudited(4, python("stream_persistent_workers.py", {"--fresh-workers"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AStreamWhoseWorkersAreReseededAlikeIsReshuffle) {
  // NOTE [A stream whose workers are reseeded alike]: numpy drawn in the workers, worker_init_fn
  // seeding it with a fixed base seed: the same batches, by content, every epoch.
  const auto a = launchAudited(4, python("stream_workers_reseeded.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_TRUE(has(text(v, "detail"), "its 2 DataLoader workers drew them from numpy's global "
                                     "generator"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "worker_init_fn reseeds numpy's global generator "
                                           "alike in every pass"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "torch.initial_seed()")) << shown(a);
  const auto twin = launchAudited(4, python("stream_workers_reseeded.py", {"--seed-from-torch"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, ABatchSamplerThatTakesAnEpochItIsNeverGivenIsReshuffle) {
  // NOTE [A sampler that takes an epoch it is never given]: set_epoch defined, never called, a
  // shuffled order repeated; the loop reached for loader.sampler only.
  const auto a = launchAudited(4, python("batch_sampler_epoch_never_given.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_TRUE(has(text(v, "detail"), "set_epoch is never called on sampler 0 "
                                     "(__main__.BucketBatchSampler), the loader's batch_sampler"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "loader.sampler is a SequentialSampler")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "loader.batch_sampler.set_epoch(epoch)")) << shown(a);
  const auto twin =
      launchAudited(4, python("batch_sampler_epoch_never_given.py", {"--set-batch-sampler-epoch"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, ResultsGatheredThenSummedAreCountedOncePerRank) {
  // NOTE [Results gathered, then summed]: all_gather, then all_reduce of the gathered counts.
  const auto a = launchAudited(4, python("eval_gathered_then_summed.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "no-duplicates");
  EXPECT_TRUE(has(text(v, "detail"), "the ranks evaluated 400 samples, each once, then every rank "
                                     "called all_gather and an all_reduce after it summed 1600"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "every sample is counted 4 times")) << shown(a);
  const auto twin = launchAudited(4, python("eval_gathered_then_summed.py", {"--sum-own"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AnEpochResumedInTheSameProcessPastWhatWasTrainedIsCoverage) {
  // NOTE [An epoch resumed in the same process]: the interrupted pass trained 32 samples per rank,
  // the resumed one skipped 128 (the world's count).
  const auto a = launchAudited(4, python("resumed_in_process.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_TRUE(has(text(v, "detail"), "with the first 128 samples of each rank's "
                                     "DistributedSampler order skipped, but the interrupted pass "
                                     "before it trained only the first 32"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "96 samples per rank (384 of 1024)")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "4 x the 32 each rank trained")) << shown(a);
  const auto twin = launchAudited(4, python("resumed_in_process.py", {"--own-count"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AParameterFrozenOnSomeRanksIsABackwardTheyNeverReduced) {
  // NOTE [A backward some ranks never reduced]: the encoder frozen on each rank's own loss.
  const auto a = launchAudited(4, python("frozen_on_local_loss.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = only(a, "collective-mismatch");
  EXPECT_TRUE(has(text(v, "detail"), "made no collective for that backward")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "received no gradient (encoder.0.weight")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "decide freezing")) << shown(a);
  const Json r = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(r, "likely_cause"), "a consequence of the collective-mismatch finding"))
      << shown(a);
  const auto twin = launchAudited(4, python("frozen_on_local_loss.py", {"--agreed"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, ATailEvaluatedOnEveryRankCountsOnceWhenReducedFirst) {
  // NOTE [A tail evaluated on every rank]: pytorch/examples' ImageNet validation, reduced after
  // the tail (the bug) or before it (the twin).
  const auto a = launchAudited(4, python("eval_tail_reduced_after.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "no-duplicates");
  EXPECT_TRUE(has(text(v, "detail"), "every rank then evaluates in loader 2 (Subset, 3 samples), "
                                     "and an all_reduce after that summed 1012: 1000 + 4 x 3"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "counted 4 times")) << shown(a);
  const auto twin = launchAudited(4, python("eval_tail_reduced_after.py", {"--reduce-first"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
  EXPECT_TRUE(has(twin.report.dump(), "after the metric was reduced over the ranks")) << shown(twin);
}

TEST(AuditPattern, ABatchSamplerLongerThanItsLenIsCoverageUnderALenLoop) {
  // NOTE [A batch sampler longer than its __len__]: flushed groups past len(loader) steps.
  const auto a = launchAudited(4, python("grouped_batch_sampler_len.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_TRUE(has(text(v, "detail"), "every rank's pass was left after len(loader) = 16 batches"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "yields more batches than its __len__ counts"))
      << shown(a);
  const auto twin = launchAudited(4, python("grouped_batch_sampler_len.py", {"--merge-leftovers"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, LoadersMadeAnewEachEpochAfterTheSameSeedAreReshuffle) {
  // NOTE [Loaders made anew each epoch]: a fairseq-style batch iterator whose epoch stays at 1.
  const auto a = launchAudited(4, python("loader_per_epoch_reseeded.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_TRUE(has(text(v, "detail"), "made anew for its epoch as loader 0")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "both drawn after np.random.seed(8)")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "the epoch never reaches the seed")) << shown(a);
  const auto twin = launchAudited(4, python("loader_per_epoch_reseeded.py", {"--pass-epoch"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AMiscountedStepsPerEpochIsCoverageWithItsArithmetic) {
  // NOTE [A miscounted batch budget]: whole accumulation windows only (8 // 3 = 2 of 3 batches).
  const auto a = launchAudited(4, python("steps_per_epoch_miscounted.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_TRUE(has(text(v, "detail"), "every training pass stopped at 6 of its 8 batches")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "were never trained in the whole run")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "the last 8 % 3 = 2 batches of every epoch are never drawn"))
      << shown(a);
  const auto world = launchAudited(4, python("steps_per_epoch_miscounted.py", {"--divide-by-world"}));
  EXPECT_EQ(world.command.exitCode, 1) << shown(world);
  EXPECT_TRUE(has(text(only(world, "coverage"), "likely_cause"),
                  "len(loader) // world_size = 8 // 4 = 2 batches"))
      << shown(world);
  const auto twin = launchAudited(4, python("steps_per_epoch_miscounted.py", {"--ceil"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AnOptimizerStateLoadedOnRankZeroOnlyIsNamedFromTheStep) {
  // NOTE [Gradients at the step]: equal gradients at the new optimizer's first step, state for 4
  // parameters on rank 0 and none elsewhere.
  const auto a = launchAudited(4, python("optimizer_state_rank0.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "their optimizers held state for different numbers of parameters (ranks 1, 2, 3: "
                  "0; rank 0: 4)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "load the optimizer state on every rank")) << shown(a);
  const auto twin = launchAudited(4, python("optimizer_state_rank0.py", {"--every-rank"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, ASamplerBuiltBeforeInitProcessGroupIsNamed) {
  const auto a = launchAudited(4, python("sampler_before_init.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "disjointness");
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "sampler 0 (__main__.BucketSampler) was built before init_process_group"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "fell back to num_replicas 1, rank 0")) << shown(a);
  const auto twin = launchAudited(4, python("sampler_before_init.py", {"--after-init"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AnInitialBroadcastOfAParameterCopyIsNamed) {
  const auto a = launchAudited(4, python("broadcast_vector_copy.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "the program broadcast a tensor as large as all the parameters (178 elements, at "
                  "broadcast_vector_copy.py:17 in sync_initial_params)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "vector_to_parameters")) << shown(a);
  const auto twin = launchAudited(4, python("broadcast_vector_copy.py", {"--write-back"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, HandAveragingThatSkipsGradientsThatAreNoneIsNamed) {
  // The ranks' all_reduces at one line pair unrelated gradients; Gloo aborts on the sizes.
  const auto a = launchAudited(4, python("grads_skipped_when_none.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = only(a, "collective-mismatch");
  EXPECT_TRUE(has(text(v, "likely_cause"), "each with another parameter's gradient")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "skips a parameter whose .grad is None")) << shown(a);
  const auto twin = launchAudited(4, python("grads_skipped_when_none.py", {"--zeros"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, WeightsSwappedForARankZeroEvaluationAndNotRestoredAreNamed) {
  // Replicas compared where each rank was: rank 0's extra evaluation passes do not hide the point
  // where all four ran the same pass.
  const auto a = launchAudited(4, python("ema_swap_shallow_backup.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_EQ(v["ranks"], Json::array({0})) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "rank 0 alone ran loader 1 (TensorDataset, 128 samples) (the other ranks never "
                  "iterate it)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "v.clone()")) << shown(a);
  const auto twin = launchAudited(4, python("ema_swap_shallow_backup.py", {"--deepcopy"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, ASamplerHeldByABatchSamplerThatDoesNotForwardSetEpochIsNamed) {
  const auto a = launchAudited(4, python("batch_sampler_holds_sampler.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "SortedBatches.set_epoch does not forward the epoch to sampler 0"))
      << shown(a);
  const auto twin = launchAudited(4, python("batch_sampler_holds_sampler.py", {"--forward"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, ABatchSamplerThatStopsShortOfItsLenIsCoverage) {
  // NOTE [A batch sampler that stops short]: 7 of the 8 batches len(loader) promises.
  const auto a = launchAudited(4, python("batch_sampler_off_by_one.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_TRUE(has(text(v, "detail"), "ranks 0, 1, 2, 3 used 7 of 8 batches")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "were never trained in the whole run")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "stops before its own __len__")) << shown(a);
  const auto twin = launchAudited(4, python("batch_sampler_off_by_one.py", {"--fixed"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AGeneratorLeftOutOfDdpIsNamedFromItsOptimizer) {
  // NOTE [Parameters outside DDP]: the generator's optimizer steps parameters no DDP module holds.
  const auto a = launchAudited(4, python("gan_generator_unwrapped.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "detail"), "216 parameters that no DDP module holds")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "steps 216 parameters that are in no DDP module"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "wrap that network in DistributedDataParallel too")) << shown(a);
  const auto twin = launchAudited(4, python("gan_generator_unwrapped.py", {"--wrap-both"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AccumulationWindowsClosedPerRankAreNamedFromTheirNoSyncForwards) {
  // The ranks' loaders hold as many batches; their no_sync() forwards fall on other batches.
  const auto a = launchAudited(4, python("token_budget_accumulation.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = only(a, "collective-mismatch");
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "the ranks accumulate gradients under model.no_sync() over different "
                  "micro-batches"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "all_reduce the budget's count")) << shown(a);
  const auto twin = launchAudited(4, python("token_budget_accumulation.py", {"--synced"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AnOrderFromTheGlobalGeneratorReseededEveryEpochIsReshuffle) {
  // NOTE [An order drawn from the global generators]: the sampler's first draw advanced torch's
  // generator, and torch.manual_seed(7) came before each pass.
  const auto a = launchAudited(4, python("reseeded_every_epoch.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "torch.manual_seed(7) (reseeded_every_epoch.py:33 in seed_all) runs before every "
                  "epoch and resets torch's global generator"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "StridedShuffle draws its order from")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "seed once before training")) << shown(a);
  const auto twin = launchAudited(4, python("reseeded_every_epoch.py", {"--seed-once"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, RecordsShardedByHashAreExecdAndNamedFromWhatTheLauncherFound) {
  // The fork server declines a script that calls hash(): torchrun's ranks each have their own
  // PYTHONHASHSEED, forked ones would share one and hide the bug. launch.json says where.
  const auto a = launchAudited(4, python("records_sharded_by_hash.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  EXPECT_TRUE(has(a.command.err, "each rank execs the program (the program depends on each "
                                 "process's own string hashing (records_sharded_by_hash.py:38 "
                                 "calls hash())"))
      << shown(a);
  ASSERT_FALSE(a.report["violations"].empty()) << shown(a);
  const Json v = a.report["violations"][0];
  EXPECT_TRUE(v["property"] == "coverage" || v["property"] == "disjointness") << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "under torchrun every rank has its own PYTHONHASHSEED"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "zlib.crc32")) << shown(a);
  const auto twin = launchAudited(4, python("records_sharded_by_hash.py", {"--stable"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, ARandomSamplerShareDrawnAlikeOnEveryRankIsNamed) {
  // RandomSampler(num_samples=N / W) from torch's global generator, seeded alike everywhere.
  const auto a = launchAudited(4, python("random_sampler_share.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_FALSE(a.report["violations"].empty()) << shown(a);
  const Json v = a.report["violations"][0];
  EXPECT_TRUE(has(text(v, "likely_cause"),
                  "every rank's RandomSampler drew the same 128 of the 512 samples in the same "
                  "order: it draws 128 samples (num_samples) but knows no rank, and its generator, "
                  "torch's global one, was seeded alike on every rank (torch.manual_seed(2024) at "
                  "random_sampler_share.py:21 in main)"))
      << shown(a);
  const auto twin = launchAudited(4, python("random_sampler_share.py", {"--distributed"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AGatherOfTensorsSizedByEachRanksDataIsNamedWithItsSizes) {
  const auto a = launchAudited(4, python("gather_misclassified.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const auto found = violationsOf(a, "collective-mismatch");
  ASSERT_FALSE(found.empty()) << shown(a);
  EXPECT_TRUE(has(text(found[0], "likely_cause"),
                  "every rank called all_gather at gather_misclassified.py:18 in gather_rows, each "
                  "with a tensor of its own size"))
      << shown(a);
  EXPECT_TRUE(has(text(found[0], "help"), "all_gather_object")) << shown(a);
  const auto twin = launchAudited(4, python("gather_misclassified.py", {"--padded"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, RunningStatisticsKeptAsParametersAreNamedByTheParametersThatParted) {
  // NOTE [Which parameters parted]: the end's per-parameter hashes name them; they do not train.
  const auto a = launchAudited(4, python("running_stats_as_parameters.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "likely_cause"), "0.mean, 0.std do not train (requires_grad=False)"))
      << shown(a);
  EXPECT_TRUE(has(v["notes"].dump(), "the parameters that differ are 0.mean, 0.std (2 of 4)"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "register_buffer")) << shown(a);
  const auto twin = launchAudited(4, python("running_stats_as_parameters.py", {"--buffers"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AnEmbeddingWithMaxNormIsNamedByTheWeightThatParted) {
  const auto a = launchAudited(4, python("embedding_max_norm.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "replica-consistency");
  EXPECT_TRUE(has(text(v, "likely_cause"), "emb.weight belongs to nn.Embedding(max_norm=…)"))
      << shown(a);
  const auto twin = launchAudited(4, python("embedding_max_norm.py", {"--renorm-after-step"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, ASubsetSamplerIsJudgedOverTheRunNotPerEpoch) {
  // NOTE [A sampler that draws a subset]: the same subset every epoch is coverage over the run;
  // a new subset each epoch (an undersampler) is a note, never a finding.
  const auto a = launchAudited(4, python("class_balanced_subset.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "coverage");
  EXPECT_TRUE(has(text(v, "detail"), "200 of 400 indices are on no rank in any of the 3 epochs: "
                                     "the ranks drew the same 200 samples every epoch"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "ClassBalancedSampler draws the same subset every "
                                           "epoch (in a new order each time): it picks its "
                                           "samples before it shuffles"))
      << shown(a);
  const auto twin = launchAudited(4, python("class_balanced_subset.py", {"--shuffle-first"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
  bool noted = false;
  for (const auto& n : twin.report["notes"]) {
    noted = noted || has(n.get<std::string>(), "draws a subset, 200 of the 400 samples, without "
                                               "overlap between ranks, and a new one each epoch");
  }
  EXPECT_TRUE(noted) << shown(twin);
}

TEST(AuditPattern, BatchesListedOnceBeforeTheEpochLoopAreReshuffle) {
  const auto a = launchAudited(4, python("batches_listed_once.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = only(a, "reshuffle");
  EXPECT_TRUE(has(text(v, "likely_cause"), "the loader's batches were listed once from sampler 0"))
      << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "pass the BatchSampler itself as batch_sampler")) << shown(a);
  const auto twin = launchAudited(4, python("batches_listed_once.py", {"--in-loop"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AnOrderFromNumpysUnseededGeneratorIsNamed) {
  // NOTE [An order drawn from the global generators]: the ranks never seeded numpy.
  const auto a = launchAudited(4, python("numpy_permutation_unseeded.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_FALSE(a.report["violations"].empty()) << shown(a);
  EXPECT_TRUE(has(text(a.report["violations"][0], "likely_cause"),
                  "BlockSampler draws its order from numpy's global generator "
                  "(np.random.permutation), which the program never seeds"))
      << shown(a);
  const auto twin = launchAudited(4, python("numpy_permutation_unseeded.py", {"--seeded"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, AMetricReducedPerBatchOverUnevenEvaluationShardsIsNamed) {
  const auto a = launchAudited(4, python("eval_allreduce_per_batch.py"), 180);
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const auto found = violationsOf(a, "collective-mismatch");
  ASSERT_FALSE(found.empty()) << shown(a);
  EXPECT_TRUE(has(text(found[0], "likely_cause"),
                  "the evaluation pass gave the ranks different numbers of batches (ranks 1, 2, 3: "
                  "4; rank 0: 5: a split without padding), and the program calls all_reduce at "
                  "eval_allreduce_per_batch.py:41 in main for every batch"))
      << shown(a);
  const auto twin = launchAudited(4, python("eval_allreduce_per_batch.py", {"--once"}));
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(AuditPattern, ARankThatHangsAtExitAfterItsWorkIsEndedAndANote) {
  // NOTE [Hung at exit]: rank 1's trace says its work is done (its DDP module freed after
  // destroy_process_group) and its process waits for ever: the launcher ends it, the run passes.
  TempDir traces("ddph-hung-at-exit");
  const auto a = launchAudited(4, python("healthy/hangs_at_exit_after_its_work.py"), 240,
                               {"--trace-dir", traces.path()});
  EXPECT_EQ(a.command.exitCode, 0) << shown(a);
  EXPECT_TRUE(a.report["passed"].get<bool>()) << shown(a);
  EXPECT_TRUE(has(a.command.err, "rank 1 hung at exit (blocked for 10 s) and was ended by "
                                 "the launcher")) << shown(a);
  bool said = false;
  for (const auto& n : a.report["notes"]) {
    const std::string note = n.get<std::string>();
    said = said || (has(note, "rank 1 hung at exit after its work") &&
                    has(note, "pytorch/pytorch#75097") && has(note, "del model"));
  }
  EXPECT_TRUE(said) << shown(a);
  const Json launched = Json::parse(readFile(traces.path() + "/launch.json"));
  EXPECT_EQ(launched["ranks"][1]["outcome"], "hung-at-exit") << launched.dump();
  EXPECT_EQ(launched["ranks"][0]["outcome"], "exited") << launched.dump();
}

TEST(AuditPattern, AScriptThatDoesNotExistIsExitTwoWithOneLine) {
  TempDir dir("ddph-audit-missing");
  const auto r = runCommand({DDPH_DDP_SIM, "launch", "--audit", "-n", "2", "--", kPython,
                             dir.path() + "/trian.py"},
                            std::chrono::seconds(120));
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  EXPECT_TRUE(has(r.err, "trian.py does not exist")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace ddph::test_support
