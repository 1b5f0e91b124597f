// The verifier on traces written here, line for line as the recorders write them
// (docs/trace-format.md): a healthy run gives no finding, and each deliberately broken run gives
// the property it breaks, on the right ranks and epoch, with the right detail. Bad traces give a
// one-line error naming the file and line, never a crash.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ddph/audit/audit.h"
#include "ddph/audit/audit_page.h"
#include "ddph/audit/rank_lanes.h"
#include "ddph/audit/step_times.h"
#include "ddph/trace/trace.h"
#include "ddph/trace/trace_progress.h"
#include "ddph/common/error.h"
#include "ddph/sampler/distributed_sampler.h"
#include "test_support.h"

namespace ddph::test_support {

using common::ConfigError;
using sampler::distributedNumSamples;
using sampler::helpOf;
using sampler::likelyCauseOf;
using sampler::Violation;
namespace property = sampler::property;

namespace {
using nlohmann::json;
using audit::AuditReport;
namespace fs = std::filesystem;

// What a synthetic run does; each field a way to break it.
struct RunSpec {
  int world = 4;
  std::int64_t n = 100;
  std::int64_t batch = 10;
  int epochs = 3;
  bool setEpoch = true;
  bool seedPerRank = false;
  bool stepOptimizer = true;
  int divergentRank = -1;    ///< its parameters differ from epoch 1 on
  int restoredRank = -1;     ///< from epoch 2 on, one step behind: a stale checkpoint loaded
  int extraStepRank = -1;    ///< runs one more DDP step after the others ended, and fails in it
  int killedRank = -1;       ///< SIGKILLed while writing a line in epoch 1
  int raisedRank = -1;       ///< raises an exception at the same point (error, then end code 1)
  int noTraceRank = -1;      ///< leaves no file
  std::int64_t takeBatches = -1;  ///< each pass is left after this many batches (break)
  bool evalPadded = false;   ///< an evaluation pass over N = 10 with DistributedSampler
  bool evalSummed = true;    ///< ... after which the counts are summed with all_reduce (12)
  int desyncRank = -1;       ///< its user all_reduce in epoch 0 has another size
  int rootGroups = 0;        ///< after epoch 0 every rank broadcasts from its group's first rank
  int hungAtExitRank = -1;   ///< destroys its process group, then hangs before its end line
  bool ddpAliveAtDestroy = true;  ///< ... with its DDP module still alive then
  int attempt = 0;           ///< torchrun's restarts before this run (header "attempt")
  bool peek = false;         ///< next(iter(loader)) before each epoch (the tutorial's batch size)
  int loneCollectiveRank = -1;  ///< calls one more all_reduce of its own after training (a hang)
  int hungRank = -1;  ///< stops answering before epoch 1's second batch; the others time out
  bool hangInRecordedCollective = true;  ///< ... in step 1's DDP allreduce, else in one unrecorded
  int nodes = 0;  ///< the ranks run on this many nodes of world / nodes ranks (0: one)
  bool headerSaysNode = true;     ///< ... and their headers say so (local_rank, node, hostname)
  bool samplerLocalRank = false;  ///< DistributedSampler(rank=local_rank)
};

class RankWriter {
 public:
  RankWriter(const std::string& path, int rank, int world, int attempt = 0,
             const json& where = json::object())
      : out_(path) {
    json header = {{"ev", "header"}, {"trace", "ddph-audit"}, {"version", 1}, {"rank", rank},
                   {"world_size", world}, {"run_id", "test"}, {"attempt", attempt},
                   {"producer", "audit_trace_test"}, {"argv", {"train.py"}}};
    header.update(where);
    emit(header);
  }
  void emit(json j) {
    j["t"] = 0.0;
    out_ << j.dump() << "\n";
  }
  void raw(const std::string& text) { out_ << text; }
  std::int64_t nextSeq() { return seq_++; }

 private:
  std::ofstream out_;
  std::int64_t seq_ = 0;
};

void writeRank(const std::string& dir, const RunSpec& s, int rank) {
  if (rank == s.noTraceRank) return;
  const int perNode = s.nodes > 0 ? s.world / s.nodes : s.world;
  const json where = s.nodes == 0 || !s.headerSaysNode ? json::object()
                                  : json{{"local_rank", rank % perNode}, {"local_world_size", perNode},
                                         {"node", rank / perNode},
                                         {"hostname", "node" + std::to_string(rank / perNode)}};
  RankWriter w(dir + "/rank-" + std::to_string(rank) + ".jsonl", rank, s.world, s.attempt, where);
  const std::int64_t seed = s.seedPerRank ? rank : 0;
  const int samplerRank = s.samplerLocalRank ? rank % perNode : rank;
  w.emit({{"ev", "sampler"}, {"id", 0}, {"class", "torch.utils.data.distributed.DistributedSampler"},
          {"dataset_len", s.n}, {"num_replicas", s.world}, {"rank", samplerRank}, {"seed", seed},
          {"shuffle", true}, {"drop_last", false}, {"order", "torch-distributed"}});
  w.emit({{"ev", "loader"}, {"id", 0}, {"sampler", 0}, {"dataset", "Train"}, {"dataset_len", s.n},
          {"batch_size", s.batch}, {"drop_last", false}, {"batching", "torch"}});
  w.emit({{"ev", "ddp"}, {"id", 0}, {"module", "Linear"}, {"parameters", 11}});
  const std::int64_t perRank = distributedNumSamples(s.n, s.world, false);
  const std::int64_t batches = (perRank + s.batch - 1) / s.batch;
  std::int64_t backwards = 0;
  auto step = [&](std::int64_t epoch, std::int64_t seq, std::int64_t size, bool done) {
    w.emit({{"ev", "batch"}, {"loader", 0}, {"iter", epoch}, {"seq", seq}, {"size", size},
            {"grad", true}});
    w.emit({{"ev", "forward"}, {"ddp", 0}, {"n", backwards}, {"training", true}, {"grad", true}});
    const std::int64_t collSeq = w.nextSeq();
    w.emit({{"ev", "coll"}, {"group", "0"}, {"seq", collSeq}, {"op", "all_reduce"},
            {"dtype", "float32"}, {"numel", 11}, {"src", "ddp"}, {"ddp", 0}, {"bucket", 0},
            {"backward", backwards}});
    if (done) w.emit({{"ev", "coll_done"}, {"group", "0"}, {"seq", collSeq}});
    ++backwards;
  };
  std::int64_t version = 0;
  auto hash = [&] {
    const std::int64_t held = rank == s.restoredRank && version >= 2 ? version - 1 : version;
    return "h" + std::to_string(held) + (rank == s.divergentRank && version > 0 ? "x" : "");
  };
  auto startPass = [&](std::int64_t iter, std::int64_t samplerEpoch) {
    w.emit({{"ev", "epoch"}, {"loader", 0}, {"iter", iter}, {"sampler_epoch", samplerEpoch},
            {"seed", seed}, {"num_replicas", s.world}, {"rank", samplerRank}, {"shuffle", true},
            {"drop_last", false}, {"dataset_len", s.n}, {"batches", batches},
            {"params", {{"0", hash()}}}});
  };
  std::int64_t iters = 0;  // iter(loader) calls: the epochs, and the peeks before them
  for (int epoch = 0; epoch < s.epochs; ++epoch) {
    if (s.peek) {  // a batch drawn and dropped, no forward: not an epoch
      startPass(iters, s.setEpoch ? std::max(epoch - 1, 0) : 0);
      w.emit({{"ev", "batch"}, {"loader", 0}, {"iter", iters++}, {"seq", 0}, {"size", s.batch},
              {"grad", true}});
    }
    const std::int64_t iter = iters++;
    if (s.setEpoch) w.emit({{"ev", "set_epoch"}, {"sampler", 0}, {"epoch", epoch}});
    startPass(iter, s.setEpoch ? epoch : 0);
    const std::int64_t take = s.takeBatches >= 0 ? std::min(s.takeBatches, batches) : batches;
    for (std::int64_t b = 0; b < take; ++b) {
      if (rank == s.killedRank && epoch == 1 && b == 1) {
        w.raw(R"({"ev":"batch","t":0.5,"loader":0,"it)");  // cut short by the kill
        return;
      }
      if (rank == s.hungRank && epoch == 1 && b == 1) return;  // alive, never answering
      if (s.hungRank >= 0 && epoch == 1 && b == 1) {           // waits for it, then times out
        if (s.hangInRecordedCollective) {
          step(iter, b, std::min(s.batch, perRank - b * s.batch), /*done=*/false);
        } else {
          w.emit({{"ev", "batch"},
                  {"loader", 0},
                  {"iter", iter},
                  {"seq", b},
                  {"size", s.batch},
                  {"grad", true}});
        }
        w.emit({{"ev", "error"},
                {"type", "RuntimeError"},
                {"message",
                 "[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 10000ms "
                 "for recv operation to complete"}});
        w.emit({{"ev", "end"}, {"code", 1}});
        return;
      }
      if (rank == s.raisedRank && epoch == 1 && b == 1) {
        w.emit({{"ev", "error"}, {"type", "RuntimeError"}, {"message", "CUDA out of memory"}});
        w.emit({{"ev", "end"}, {"code", 1}});
        return;
      }
      step(iter, b, std::min(s.batch, perRank - b * s.batch), true);
    }
    if (take == batches) w.emit({{"ev", "epoch_end"}, {"loader", 0}, {"iter", iter}, {"batches", batches}});
    if (s.stepOptimizer) ++version;
    if (epoch == 0 && s.rootGroups > 0) {  // dist.broadcast(stats, src=leader), default group
      const std::int64_t collSeq = w.nextSeq();
      const int size = s.world / s.rootGroups;
      w.emit({{"ev", "coll"}, {"group", "0"}, {"seq", collSeq}, {"op", "broadcast"},
              {"dtype", "float32"}, {"numel", 32}, {"src", "user"},
              {"at", "train.py:58 in main"}, {"root", rank / size * size}});
      w.emit({{"ev", "coll_done"}, {"group", "0"}, {"seq", collSeq}});
    }
    if (epoch == 0 && s.desyncRank >= 0) {
      const std::int64_t collSeq = w.nextSeq();
      w.emit({{"ev", "coll"}, {"group", "0"}, {"seq", collSeq}, {"op", "all_reduce"},
              {"dtype", "int64"}, {"numel", rank == s.desyncRank ? 2 : 1}, {"src", "user"}});
      w.emit({{"ev", "coll_done"}, {"group", "0"}, {"seq", collSeq}});
    }
  }
  if (rank == s.loneCollectiveRank) {  // `if rank == 0: dist.all_reduce(metric)`: no partner
    w.emit({{"ev", "coll"}, {"group", "0"}, {"seq", w.nextSeq()}, {"op", "all_reduce"},
            {"dtype", "float32"}, {"numel", 1}, {"src", "user"}});
    return;
  }
  if (s.evalPadded) {
    w.emit({{"ev", "sampler"}, {"id", 1}, {"class", "torch.utils.data.distributed.DistributedSampler"},
            {"dataset_len", 10}, {"num_replicas", s.world}, {"rank", rank}, {"seed", 0},
            {"shuffle", false}, {"drop_last", false}, {"order", "torch-distributed"}});
    w.emit({{"ev", "loader"}, {"id", 1}, {"sampler", 1}, {"dataset", "Eval"}, {"dataset_len", 10},
            {"batch_size", 4}, {"drop_last", false}, {"batching", "torch"}});
    w.emit({{"ev", "epoch"}, {"loader", 1}, {"iter", 0}, {"sampler_epoch", 0}, {"seed", 0},
            {"num_replicas", s.world}, {"rank", rank}, {"shuffle", false}, {"drop_last", false},
            {"dataset_len", 10}, {"batches", 1}, {"params", {{"0", hash()}}}});
    w.emit({{"ev", "batch"}, {"loader", 1}, {"iter", 0}, {"seq", 0},
            {"size", distributedNumSamples(10, s.world, false)}, {"grad", false}});
    w.emit({{"ev", "epoch_end"}, {"loader", 1}, {"iter", 0}, {"batches", 1}});
    if (s.evalSummed) {  // dist.all_reduce(torch.tensor([correct, seen]))
      const std::int64_t collSeq = w.nextSeq();
      w.emit({{"ev", "coll"}, {"group", "0"}, {"seq", collSeq}, {"op", "all_reduce"},
              {"dtype", "float32"}, {"numel", 2}, {"src", "user"}, {"at", "train.py:80 in main"}});
      w.emit({{"ev", "coll_done"}, {"group", "0"}, {"seq", collSeq}, {"values", {7, 12}}});
    }
  }
  if (rank == s.extraStepRank) {
    startPass(s.epochs, s.epochs);
    step(s.epochs, 0, s.batch, false);
    w.emit({{"ev", "error"}, {"type", "RuntimeError"}, {"message", "Connection closed by peer"}});
    return;
  }
  w.emit({{"ev", "destroy"}, {"group", "0"},
          {"ddp_alive", s.ddpAliveAtDestroy ? json::array({0}) : json::array()}});
  w.emit({{"ev", "params"}, {"ddp", 0}, {"hash", hash()}, {"at", "end"}});
  if (rank == s.hungAtExitRank) return;
  w.emit({{"ev", "end"}, {"code", 0}});
}

// launch.json of a run that rank `first` ended: `timedOut`, it was still running at the
// launcher's timeout (the others had exited 0); else it exited with code 1 and the launcher
// stopped the others (SIGTERM).
void writeLaunch(const std::string& dir, const RunSpec& s, int first, bool timedOut) {
  json ranks = json::array();
  for (int r = 0; r < s.world; ++r) {
    const char* outcome = r == first ? (timedOut ? "timed-out" : "exited") : (timedOut ? "exited" : "stopped");
    ranks.push_back({{"rank", r}, {"pid", 100 + r}, {"outcome", outcome},
                     {"code", r == first && !timedOut ? 1 : 0},
                     {"signal", r != first && !timedOut ? 15 : 0}});
  }
  std::ofstream(dir + "/launch.json")
      << json{{"launcher", "ddp-sim launch"}, {"world_size", s.world}, {"exit_code", 1},
              {"timed_out", timedOut}, {"interrupted_by_signal", 0}, {"ranks", ranks}}.dump();
}

AuditReport auditRun(const RunSpec& s) {
  TempDir dir("ddph-audit-trace");
  for (int r = 0; r < s.world; ++r) writeRank(dir.path(), s, r);
  return audit::auditTrace(trace::readTrace(dir.path()));
}

std::string summary(const AuditReport& r) { return audit::auditReportText(r); }

// The one violation of `property`, asserting there is exactly one.
const Violation& only(const AuditReport& r, std::string_view property) {
  const Violation* found = nullptr;
  int count = 0;
  for (const auto& v : r.violations) {
    if (v.property == property) {
      found = &v;
      ++count;
    }
  }
  if (count != 1) throw std::runtime_error("expected one " + std::string(property) + "\n" + summary(r));
  return *found;
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(AuditTrace, HealthyRunHasNoFinding) {
  const auto r = auditRun({});
  EXPECT_TRUE(r.passed) << summary(r);
  EXPECT_TRUE(r.notes.empty()) << summary(r);
  EXPECT_EQ(r.ranksTraced, 4);
  EXPECT_EQ(r.seen.collectives, 3 * 3);
}

TEST(AuditTrace, MissingSetEpochIsReshuffle) {
  RunSpec s;
  s.setEpoch = false;
  const auto r = auditRun(s);
  ASSERT_EQ(r.violations.size(), 1u) << summary(r);
  const Violation& v = only(r, property::kReshuffle);
  EXPECT_EQ(v.epoch, 0);
  EXPECT_TRUE(has(v.detail, "set_epoch is never called")) << v.detail;
  EXPECT_EQ(v.notes, std::vector<std::string>{"the same in 2 epochs"}) << v.detail;
}

TEST(AuditTrace, PerRankSeedsBreakCoverage) {
  RunSpec s;
  s.seedPerRank = true;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kCoverage);
  EXPECT_EQ(v.epoch, 0);
  EXPECT_TRUE(has(v.detail, "indices are on no rank")) << v.detail;
  EXPECT_TRUE(has(v.likelyCause, "different seeds (0, 1, 2, 3)")) << v.likelyCause;
}

// The cause comes from the headers' node topology, not from the program: the same samplers say
// LOCAL_RANK where the ranks span two nodes, pass on one node, and without node fields get the
// topology-free cause.
TEST(AuditTrace, ASamplerGivenLocalRankIsNamedFromTheNodeTopology) {
  RunSpec s;
  s.nodes = 2;
  s.samplerLocalRank = true;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kCoverage);
  EXPECT_EQ(v.likelyCause,
            "sampler 0's rank is LOCAL_RANK, not RANK: ranks 0 and 2 (local rank 0 on nodes 0 and "
            "1) drew the same samples");
  EXPECT_EQ(v.help,
            "pass rank=dist.get_rank() (or leave rank and num_replicas to DistributedSampler)");
  EXPECT_EQ(r.seen.ranksPerNode, (std::vector<std::string>{
                                     "node 0 (node0): ranks 0, 1 (local ranks 0, 1)",
                                     "node 1 (node1): ranks 2, 3 (local ranks 0, 1)"}));
  s.nodes = 1;  // local rank = rank: nothing wrong
  const auto one = auditRun(s);
  EXPECT_TRUE(one.violations.empty()) << auditReportText(one);
  EXPECT_TRUE(one.seen.ranksPerNode.empty());
  s.nodes = 2;  // headers without node fields (an older recorder), the same samplers
  s.headerSaysNode = false;
  const auto unsaid = auditRun(s);
  const Violation& u = only(unsaid, property::kCoverage);
  EXPECT_TRUE(has(u.likelyCause, "several ranks give their sampler the same rank")) << u.likelyCause;
  EXPECT_FALSE(has(u.likelyCause, "LOCAL_RANK")) << u.likelyCause;
}

TEST(AuditTrace, BreakingOutOfEveryPassLeavesSamplesUnseen) {
  RunSpec s;
  s.takeBatches = 2;  // of 3 per rank: 25 samples each, 20 taken
  s.setEpoch = false;  // the same order every epoch: the same 20 samples never trained
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kCoverage);
  EXPECT_TRUE(has(v.detail, "only 80 of its 100 samples were consumed")) << v.detail;
  EXPECT_TRUE(has(v.detail, "ranks 0, 1, 2, 3 used 2 of 3 batches")) << v.detail;
  EXPECT_TRUE(has(v.likelyCause, "break")) << v.likelyCause;
}

TEST(AuditTrace, ABatchBudgetOverReshuffledEpochsIsANote) {
  // NOTE [A batch budget]: every pass cut at 2 of 3 batches (limit_train_batches), a new order
  // each epoch: other samples left out each time, by design.
  RunSpec s;
  s.takeBatches = 2;
  const auto r = auditRun(s);
  EXPECT_TRUE(r.passed) << summary(r);
  EXPECT_TRUE(has(summary(r), "every training pass was cut at 2 of its 3 batches on every rank (a "
                              "batch budget: limit_train_batches"))
      << summary(r);
}

TEST(AuditTrace, PeekingAtABatchBeforeEachEpochIsNotAnEpoch) {
  // PyTorch's DDP tutorial prints len(next(iter(loader))[0]) before each epoch: without the rule
  // each peek was an epoch cut short (coverage) repeating the last order (reshuffle).
  RunSpec s;
  s.peek = true;
  const auto r = auditRun(s);
  EXPECT_TRUE(r.violations.empty()) << auditReportText(r);
  ASSERT_EQ(r.seen.loaders.size(), 1u);
  EXPECT_TRUE(has(r.seen.loaders[0], "3 epochs, 9 batches; 3 peeks")) << r.seen.loaders[0];
  // A pass left early after training steps is still a pass: its samples are still unseen (the same
  // ones each epoch, without set_epoch: NOTE [A batch budget]).
  s.takeBatches = 2;
  s.setEpoch = false;
  const Violation& v = only(auditRun(s), property::kCoverage);
  EXPECT_TRUE(has(v.detail, "only 80 of its 100 samples were consumed")) << v.detail;
}

// A rank that left the loop early and was destroying its process group when the launcher
// stopped it (its peers had failed on the closed connections first) still left normally: the
// extra epoch of the others is its early leave, not its failure.
TEST(AuditTrace, ARankStoppedInsideDestroyProcessGroupHadLeftTheLoopNormally) {
  RunSpec s;
  s.extraStepRank = 0;
  s.hungAtExitRank = 1;  // destroy written, then stopped: no end line
  s.ddpAliveAtDestroy = false;
  TempDir dir("ddph-audit-trace");
  for (int r = 0; r < s.world; ++r) writeRank(dir.path(), s, r);
  writeLaunch(dir.path(), s, 0, /*timedOut=*/false);
  const auto r = audit::auditTrace(trace::readTrace(dir.path()));
  const Violation& m = only(r, property::kCollectiveMismatch);
  EXPECT_TRUE(has(m.detail, "ranks 1, 2, 3 ended normally after epoch 2 of loader 0")) << m.detail;
  EXPECT_EQ(r.violations.front().property, property::kCollectiveMismatch);
  // Stopped there after a timeout, it is a rank that hung at its exit.
  TempDir hung("ddph-audit-trace");
  for (int k = 0; k < s.world; ++k) writeRank(hung.path(), s, k);
  writeLaunch(hung.path(), s, 1, /*timedOut=*/true);
  const auto h = audit::auditTrace(trace::readTrace(hung.path()));
  EXPECT_FALSE(has(summary(h), "ranks 1, 2, 3 ended normally")) << summary(h);
}

TEST(AuditTrace, AnExtraEpochOnOneRankIsTheOthersLeavingTheLoopAndItsFailure) {
  // Rank 0 begins a fourth epoch after the others ran three to their ends and stopped: they left
  // the loop (a stop decided per rank), which is not running out of batches inside an epoch.
  RunSpec s;
  s.extraStepRank = 0;
  const auto r = auditRun(s);
  const Violation& m = only(r, property::kCollectiveMismatch);
  EXPECT_EQ(m.ranks, std::vector<std::int64_t>{0});
  EXPECT_EQ(m.epoch, 3);
  EXPECT_TRUE(has(m.detail, "ranks 1, 2, 3 ended normally after epoch 2 of loader 0")) << m.detail;
  EXPECT_TRUE(has(m.detail, "never began epoch 3, while rank 0 went on into it: #9 on the "
                            "default group"))
      << m.detail;
  EXPECT_TRUE(has(m.help, "all_reduce the stop flag")) << m.help;
  EXPECT_FALSE(has(m.likelyCause, "ran out of batches")) << m.likelyCause;
  const Violation& f = only(r, property::kRankFailure);
  EXPECT_EQ(f.ranks, std::vector<std::int64_t>{0});
  EXPECT_TRUE(has(f.detail, "raised RuntimeError: Connection closed by peer")) << f.detail;
  EXPECT_TRUE(has(f.detail, "it was in collective #9")) << f.detail;
  EXPECT_EQ(r.violations.front().property, property::kCollectiveMismatch);  // the cause first
}

TEST(AuditTrace, ACollectiveOnOneRankWithEvenBatchesIsNotCalledUnevenInputs) {
  RunSpec s;
  s.loneCollectiveRank = 0;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kCollectiveMismatch);
  EXPECT_EQ(v.ranks, std::vector<std::int64_t>{0});
  const std::string cause = likelyCauseOf(v);
  EXPECT_TRUE(has(cause, "handed out the same numbers of batches")) << cause;
  EXPECT_TRUE(has(cause, "the program's own call")) << cause;
  EXPECT_TRUE(has(cause, "rank-dependent branch")) << cause;
  EXPECT_FALSE(has(cause, "ran out of batches")) << cause;
}

TEST(AuditTrace, DesynchronisedCollectiveNamesBothSides) {
  RunSpec s;
  s.desyncRank = 2;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kCollectiveMismatch);
  EXPECT_EQ(v.ranks, std::vector<std::int64_t>{2});
  EXPECT_TRUE(has(v.detail, "collective #3 on the default group differs")) << v.detail;
  EXPECT_TRUE(has(v.detail, "ranks 0, 1, 3 all_reduce int64[1]")) << v.detail;
  EXPECT_TRUE(has(v.detail, "rank 2 all_reduce int64[2]")) << v.detail;
}

TEST(AuditTrace, ABroadcastWhoseRanksNameOtherRootsIsACollectiveMismatch) {
  // Each node's leader as the root of one broadcast on the default group.
  RunSpec s;
  s.rootGroups = 2;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kCollectiveMismatch);
  EXPECT_TRUE(has(v.detail, "ranks 0, 1 broadcast float32[32] rooted at rank 0")) << v.detail;
  EXPECT_TRUE(has(v.detail, "ranks 2, 3 broadcast float32[32] rooted at rank 2")) << v.detail;
  const std::string cause = likelyCauseOf(v);
  EXPECT_TRUE(has(cause, "with the same tensor but another root (ranks 0, 1 rank 0; ranks 2, 3 "
                         "rank 2)"))
      << cause;
  // One root on every rank: the same call.
  RunSpec one;
  one.rootGroups = 1;
  EXPECT_TRUE(auditRun(one).violations.empty());
}

TEST(AuditTrace, KilledRankIsARankFailureAndItsCutLineIsTolerated) {
  RunSpec s;
  s.killedRank = 3;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kRankFailure);
  EXPECT_EQ(v.ranks, std::vector<std::int64_t>{3});
  EXPECT_TRUE(has(v.detail, "its trace has no end")) << v.detail;
  EXPECT_TRUE(has(v.detail, "at epoch 1 step 0")) << v.detail;
  // What a trace without an end leaves open, not the catalogue's "OOM kill, exception, signal".
  EXPECT_TRUE(has(likelyCauseOf(v), "the trace cannot tell which")) << likelyCauseOf(v);
  EXPECT_FALSE(has(likelyCauseOf(v), "exception")) << likelyCauseOf(v);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_TRUE(has(r.notes[0], "cut short")) << r.notes[0];
}

TEST(AuditTrace, RankThatRaisedIsOnlyARankFailureNotUnevenInputs) {
  // The recorder writes `end` with the exit code after an uncaught exception: that rank failed,
  // it did not run out of batches, and its peers' unfinished pass is no drop.
  RunSpec s;
  s.raisedRank = 2;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kRankFailure);
  EXPECT_EQ(v.ranks, std::vector<std::int64_t>{2});
  EXPECT_TRUE(has(v.detail, "raised RuntimeError: CUDA out of memory")) << v.detail;
  EXPECT_EQ(r.violations.size(), 1u) << summary(r);  // no collective-mismatch, no coverage
}

// The Python recorder reserves its file ahead of its lines (a memory mapping): a rank that never
// closed it leaves NUL bytes after its last line, where the trace ends; a line being copied when
// the kill fell may show its head, or stray bytes of its tail beyond a NUL.
TEST(AuditTrace, ReservedNulTailEndsTheTrace) {
  const std::string nuls(8192, '\0');
  const struct {
    std::string tail;
    bool cutLine;
  } cases[] = {
      {nuls, false},
      {R"({"ev":"batch","t":0.5,"loa)" + nuls, true},
      {nuls.substr(0, 40) + "not json\n" + R"({"ev":"end","t":9.0,"code":3})" "\n" + nuls, false},
  };
  for (const auto& c : cases) {
    TempDir dir("ddph-audit-trace");
    const RunSpec s;
    for (int r = 0; r < s.world; ++r) writeRank(dir.path(), s, r);
    std::ofstream(dir.path() + "/rank-3.jsonl", std::ios::app | std::ios::binary) << c.tail;
    const auto r = audit::auditTrace(trace::readTrace(dir.path()));
    EXPECT_TRUE(r.passed) << summary(r);
    ASSERT_EQ(r.notes.size(), c.cutLine ? 1u : 0u) << summary(r);
    if (c.cutLine) {
      EXPECT_TRUE(has(r.notes[0], "rank 3: the last line")) << r.notes[0];
    }
  }
}

TEST(AuditTrace, HangAtExitWithDdpAliveAtDestroyNamesTheTorchDeadlock) {
  RunSpec s;
  s.world = 2;
  s.hungAtExitRank = 1;
  for (const bool alive : {true, false}) {
    s.ddpAliveAtDestroy = alive;
    TempDir dir("ddph-audit-trace");
    for (int r = 0; r < s.world; ++r) writeRank(dir.path(), s, r);
    writeLaunch(dir.path(), s, 1, /*timedOut=*/true);
    const auto r = audit::auditTrace(trace::readTrace(dir.path()));
    const Violation& v = only(r, property::kRankFailure);
    EXPECT_EQ(v.ranks, std::vector<std::int64_t>{1});
    EXPECT_TRUE(has(v.detail, "still running at the launcher's timeout")) << v.detail;
    // Only a module alive at destroy_process_group points at torch's exit deadlock.
    EXPECT_EQ(has(v.detail, "destroyed its process group with DDP module 0 still alive"), alive)
        << v.detail;
    EXPECT_EQ(has(v.help, "del model"), alive) << v.help;
  }
}

TEST(AuditTrace, TorchWithoutLibuvIsNamedWithItsRemedy) {
  // Debian's torch 2.x, built without libuv: init_process_group raises on every rank.
  for (const std::string message :
       {"use_libuv was requested but PyTorch was build without libuv support", "other failure"}) {
    TempDir dir("ddph-audit-trace");
    for (int r = 0; r < 2; ++r) {
      RankWriter w(dir.path() + "/rank-" + std::to_string(r) + ".jsonl", r, 2);
      w.emit({{"ev", "error"}, {"type", "RuntimeError"}, {"message", message}});
      w.emit({{"ev", "end"}, {"code", 1}});
    }
    const auto report = audit::auditTrace(trace::readTrace(dir.path()));
    // The same error on every rank is one finding, naming them all.
    ASSERT_EQ(report.violations.size(), 1u) << summary(report);
    const Violation& v = report.violations[0];
    EXPECT_EQ(v.property, property::kRankFailure);
    EXPECT_EQ(v.ranks, (std::vector<std::int64_t>{0, 1}));
    EXPECT_TRUE(has(v.detail, "ranks 0, 1 raised RuntimeError: " + message)) << v.detail;
    EXPECT_EQ(has(helpOf(v), "USE_LIBUV=0"), message != "other failure") << helpOf(v);
    EXPECT_EQ(has(likelyCauseOf(v), "raised the same error at the same place"),
              message == "other failure")
        << likelyCauseOf(v);
  }
}

// The commands in the causes are the user's own (launch.json's `command` and options): their
// interpreter as they typed it, never "python3"; a dataset that cannot download names
// --stand-in-data; a crash names the interpreter to run with -X faulthandler.
TEST(AuditTrace, HintsRepeatTheUsersOwnCommand) {
  TempDir dir("ddph-audit-trace");
  for (int r = 0; r < 2; ++r) {
    RankWriter w(dir.path() + "/rank-" + std::to_string(r) + ".jsonl", r, 2);
    if (r == 0) {
      w.emit({{"ev", "error"}, {"type", "RuntimeError"},
              {"message", "Error downloading train-images-idx3-ubyte.gz"}});
      w.emit({{"ev", "end"}, {"code", 1}});
    }
  }
  std::ofstream(dir.path() + "/launch.json")
      << json{{"launcher", "ddp-sim launch"}, {"world_size", 2}, {"exit_code", 1},
              {"timed_out", false}, {"interrupted_by_signal", 0},
              {"ranks", json::array({{{"rank", 0}, {"pid", 100}, {"outcome", "exited"}, {"code", 1}, {"signal", 0}},
                                     {{"rank", 1}, {"pid", 101}, {"outcome", "signaled"}, {"code", 0}, {"signal", 11}}})},
              {"command", {"/opt/venv/bin/python", "my train.py", "--epochs", "3"}},
              {"cpu", true}, {"stand_in_data", false}}
             .dump();
  const auto report = audit::auditTrace(trace::readTrace(dir.path()));
  std::string causes;
  for (const auto& v : report.violations) causes += likelyCauseOf(v) + "\n" + helpOf(v) + "\n";
  EXPECT_TRUE(has(causes, "rerun it with --stand-in-data")) << causes;
  EXPECT_TRUE(has(causes, "ddp-sim launch --audit --cpu --stand-in-data -n 2 -- /opt/venv/bin/python "
                          "'my train.py' --epochs 3"))
      << causes;
  EXPECT_TRUE(has(causes, "run the rank with /opt/venv/bin/python -X faulthandler")) << causes;
  EXPECT_FALSE(has(causes, "python3")) << causes;
}

TEST(AuditTrace, PeerLostErrorIsNamedAConsequenceOfTheOtherFailure) {
  // Rank 1 raised; rank 0, waiting for it in DDP's allreduce, lost its gloo connection 0.25 s
  // later (by the wall clock: rank 0's recorder started 1 s before rank 1's).
  TempDir dir("ddph-audit-trace");
  const std::string messages[] = {
      "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
      "[127.0.0.1]:22692",
      "CUDA out of memory"};
  const double startUnix[] = {1000.0, 1001.0}, errorT[] = {2.0, 0.75};
  for (int r = 0; r < 2; ++r) {
    std::ofstream out(dir.path() + "/rank-" + std::to_string(r) + ".jsonl");
    out << json{{"ev", "header"}, {"t", 0.0}, {"trace", "ddph-audit"}, {"version", 1}, {"rank", r},
                {"world_size", 2}, {"start_unix", startUnix[r]}}.dump() << "\n"
        << json{{"ev", "error"}, {"t", errorT[r]}, {"type", "RuntimeError"},
                {"message", messages[r]}}.dump() << "\n"
        << json{{"ev", "end"}, {"t", errorT[r]}, {"code", 1}}.dump() << "\n";
  }
  const auto report = audit::auditTrace(trace::readTrace(dir.path()));
  ASSERT_EQ(report.violations.size(), 2u) << summary(report);
  for (const auto& v : report.violations) {
    EXPECT_EQ(v.property, property::kRankFailure);
    EXPECT_EQ(has(likelyCauseOf(v), "this error is a consequence"), v.ranks[0] == 0)
        << likelyCauseOf(v);
    EXPECT_EQ(has(v.detail, "CUDA out of memory (the first rank to raise, 0.250 s before rank 0)"),
              v.ranks[0] == 1)
        << v.detail;
  }
}

// NOTE [The rank that never arrived]: the others timed out waiting for rank 2, alive elsewhere
// (in its data loading, say, or stopped by SIGSTOP) until the launcher stopped it: one finding
// names it, where it stood, the collective and what the others saw, recorded or inside torch.
TEST(AuditTrace, ARankThatNeverArrivedIsTheFailureTheOthersWaitedFor) {
  for (const bool recorded : {true, false}) {
    for (const bool frozen : {true, false}) {
      for (const int interrupted : {0, 2}) {
        SCOPED_TRACE(
            fmt::format("recorded {} frozen {} interrupted {}", recorded, frozen, interrupted));
        RunSpec s;
        s.hungRank = 2;
        s.hangInRecordedCollective = recorded;
        TempDir dir("ddph-audit-trace");
        for (int r = 0; r < s.world; ++r) writeRank(dir.path(), s, r);
        json ranks = json::array();
        for (int r = 0; r < s.world; ++r) {
          json rank = {{"rank", r},
                       {"pid", 100 + r},
                       {"outcome", r == 2 ? "stopped" : "exited"},
                       {"code", r == 2 ? 0 : 1},
                       {"signal", r == 2 ? 15 : 0}};
          if (r == 2 && frozen) rank["was_stopped"] = true;
          ranks.push_back(rank);
        }
        std::ofstream(dir.path() + "/launch.json") << json{
            {"launcher", "ddp-sim launch"},
            {"world_size", s.world},
            {"exit_code", 1},
            {"timed_out", false},
            {"interrupted_by_signal", interrupted},
            {"ranks", ranks}}.dump();
        const auto r = audit::auditTrace(trace::readTrace(dir.path()));
        if (interrupted != 0) {  // the launcher stopped every rank wherever it was: no such finding
          for (const auto& v : r.violations)
            EXPECT_FALSE(has(v.detail, "never reached")) << v.detail;
          continue;
        }
        const Violation& v = only(r, property::kRankFailure);
        EXPECT_EQ(v.ranks, std::vector<std::int64_t>{2}) << v.detail;
        EXPECT_EQ(v.epoch, 1);
        EXPECT_EQ(v.step, 0);  // its last batch
        EXPECT_TRUE(has(v.detail, "rank 2 never reached the collective the others waited in, "))
            << v.detail;
        EXPECT_EQ(has(v.detail, "#4 on the default group: all_reduce float32[11]"), recorded)
            << v.detail;
        EXPECT_EQ(has(v.detail, "one inside torch that the trace does not record (they timed out"),
                  !recorded)
            << v.detail;
        EXPECT_TRUE(has(v.detail, "it stood at epoch 1 step 0 of loader 0")) << v.detail;
        EXPECT_TRUE(has(v.detail,
                        "ranks 0, 1, 3 waited in it: rank 0 raised RuntimeError: "
                        "[gloo/transport/tcp/unbound_buffer.cc:81] Timed out"))
            << v.detail;
        EXPECT_EQ(has(v.detail, "(rank 2 was stopped, not crashed: state T"), frozen) << v.detail;
        EXPECT_EQ(has(likelyCauseOf(v), "hung or slow outside any collective"), !frozen)
            << likelyCauseOf(v);
      }
    }
  }
}

TEST(AuditTrace, MissingRankFileIsARankFailure) {
  RunSpec s;
  s.noTraceRank = 1;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kRankFailure);
  EXPECT_EQ(v.ranks, std::vector<std::int64_t>{1});
  EXPECT_TRUE(has(v.detail, "left no trace")) << v.detail;
}

TEST(AuditTrace, PaddedEvaluationCountsDuplicates) {
  RunSpec s;
  s.evalPadded = true;  // N = 10 on 4 ranks: 12 evaluated
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kNoDuplicates);
  EXPECT_TRUE(has(v.detail, "evaluated 12 samples for 10 distinct, 2 counted twice")) << v.detail;
  EXPECT_TRUE(has(v.likelyCause, "pads every rank")) << v.likelyCause;
}

TEST(AuditTrace, PaddedEvaluationWhoseResultsNoCollectiveCarriesIsANote) {
  // NOTE [Results combined out of sight]: no reduction or gather after the pass.
  RunSpec s;
  s.evalPadded = true;
  s.evalSummed = false;
  const auto r = auditRun(s);
  EXPECT_TRUE(r.violations.empty());
  bool said = false;
  for (const auto& n : r.notes) said = said || has(n, "no collective after it reduces or gathers");
  EXPECT_TRUE(said);
}

TEST(AuditTrace, DivergedReplicaIsReplicaConsistency) {
  RunSpec s;
  s.divergentRank = 2;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kReplicaConsistency);
  EXPECT_EQ(v.ranks, std::vector<std::int64_t>{2});
  EXPECT_EQ(v.epoch, 1);
  EXPECT_TRUE(has(v.detail, "ranks 0, 1, 3 h1; rank 2 h1x")) << v.detail;
}

TEST(AuditTrace, AReplicaThatWentBackToEarlierParametersIsNamedRestored) {
  RunSpec s;
  s.restoredRank = 3;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kReplicaConsistency);
  EXPECT_EQ(v.ranks, std::vector<std::int64_t>{3});
  EXPECT_EQ(v.epoch, 2);
  EXPECT_TRUE(has(v.likelyCause, "rank 3 holds the parameters it had at the start of epoch 1"))
      << v.likelyCause;
  EXPECT_TRUE(has(v.help, "dist.barrier() before any rank loads")) << v.help;
  const Violation& u = only(r, property::kParameterUpdates);
  EXPECT_EQ(u.ranks, std::vector<std::int64_t>{3});
  EXPECT_TRUE(has(u.likelyCause, "updates were made and then undone")) << u.likelyCause;
}

TEST(AuditTrace, BackwardWithoutStepIsParameterUpdates) {
  RunSpec s;
  s.stepOptimizer = false;
  const auto r = auditRun(s);
  const Violation& v = only(r, property::kParameterUpdates);
  EXPECT_EQ(v.ranks, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(v.epoch, 0);
  EXPECT_TRUE(has(v.detail, "although it ran 3 backward passes")) << v.detail;
}

// --- bad traces: one line naming the file and line ---------------------------------------------

std::string readError(const std::string& dir) {
  try {
    trace::readTrace(dir);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(AuditTraceFiles, GarbageLineNamesFileAndLine) {
  TempDir dir("ddph-audit-trace");
  for (int r = 0; r < 2; ++r) writeRank(dir.path(), RunSpec{2}, r);
  const int line = countLines(readFile(dir.path() + "/rank-1.jsonl"), "") + 1;
  std::ofstream(dir.path() + "/rank-1.jsonl", std::ios::app) << "not json\n{\"ev\":\"end\"}\n";
  const std::string e = readError(dir.path());
  EXPECT_TRUE(has(e, "rank-1.jsonl line " + std::to_string(line) + ": not JSON")) << e;
}

TEST(AuditTraceFiles, EventMissingAFieldNamesIt) {
  TempDir dir("ddph-audit-trace");
  for (int r = 0; r < 2; ++r) writeRank(dir.path(), RunSpec{2}, r);
  const int line = countLines(readFile(dir.path() + "/rank-0.jsonl"), "") + 1;
  std::ofstream(dir.path() + "/rank-0.jsonl", std::ios::app) << "{\"ev\":\"batch\",\"loader\":0}\n";
  const std::string e = readError(dir.path());
  EXPECT_TRUE(has(e, "rank-0.jsonl line " + std::to_string(line) + ": missing \"iter\"")) << e;
}

// Found under load (audit_patterns' import error): the launcher stopped rank 3 while it created
// its file. A file with no whole first line is a rank that left no trace, not a bad folder; a
// whole first line that is not a header is still refused.
TEST(AuditTraceFiles, ARankFileCutBeforeItsFirstLineIsARankThatLeftNoTrace) {
  for (const std::string& cut : {std::string(), std::string(R"({"ev":"head)"),
                                std::string(R"({"ev":"head)") + std::string(64, '\0')}) {
    TempDir dir("ddph-audit-trace");
    RunSpec s;
    s.world = 2;
    writeRank(dir.path(), s, 0);
    std::ofstream(dir.path() + "/rank-1.jsonl", std::ios::binary) << cut;
    writeLaunch(dir.path(), s, 0, /*timedOut=*/false);
    const trace::Trace trace = trace::readTrace(dir.path());
    EXPECT_FALSE(trace.ranks[1].has_value());
    ASSERT_EQ(trace.notes.size(), 1u);
    EXPECT_TRUE(has(trace.notes[0], "rank 1: rank-1.jsonl has no whole first line"))
        << trace.notes[0];
  }
  TempDir dir("ddph-audit-trace");
  std::ofstream(dir.path() + "/rank-0.jsonl") << "\n";
  EXPECT_TRUE(has(readError(dir.path()), "is empty (no header line)"));
}

TEST(AuditTraceFiles, EmptyFolderUnknownVersionAndMixedRunsAreRefused) {
  TempDir empty("ddph-audit-trace");
  EXPECT_TRUE(has(readError(empty.path()), "holds no trace"));
  TempDir dir("ddph-audit-trace");
  std::ofstream(dir.path() + "/rank-0.jsonl")
      << R"({"ev":"header","trace":"ddph-audit","version":7,"rank":0,"world_size":1})" << "\n";
  EXPECT_TRUE(has(readError(dir.path()), "trace format version 7"));
  TempDir mixed("ddph-audit-trace");
  std::ofstream(mixed.path() + "/rank-0.jsonl")
      << R"({"ev":"header","trace":"ddph-audit","version":1,"rank":0,"world_size":2,"run_id":"a"})" << "\n";
  std::ofstream(mixed.path() + "/rank-1.jsonl")
      << R"({"ev":"header","trace":"ddph-audit","version":1,"rank":1,"world_size":2,"run_id":"b"})" << "\n";
  EXPECT_TRUE(has(readError(mixed.path()), "come from different runs"));
}

TEST(AuditTraceFiles, TorchrunRestartsAreAttemptsAuditedOneByOne) {
  // Attempt 0 lost rank 1 (killed); torchrun restarted both ranks, whose recorders wrote
  // attempt-1/, and that attempt ran clean. Each audit names the other attempts' folders.
  TempDir dir("ddph-audit-trace");
  RunSpec failed{2};
  failed.killedRank = 1;
  RunSpec restarted{2};
  restarted.attempt = 1;
  const std::string second = trace::attemptFolder(dir.path(), 1).string();
  ASSERT_EQ(second, dir.path() + "/attempt-1");
  fs::create_directory(second);
  for (int r = 0; r < 2; ++r) {
    writeRank(dir.path(), failed, r);
    writeRank(second, restarted, r);
  }
  const auto first = audit::auditTrace(trace::readTrace(dir.path()));
  EXPECT_FALSE(first.passed) << summary(first);
  EXPECT_EQ(only(first, property::kRankFailure).ranks, std::vector<std::int64_t>{1}) << summary(first);
  EXPECT_TRUE(has(summary(first), "this report judges the run's first attempt; torchrun restarted "
                                  "the ranks after it: audit the later attempts with ddp-sim audit " +
                                      second))
      << summary(first);
  const auto later = audit::auditTrace(trace::readTrace(second));
  EXPECT_TRUE(later.passed) << summary(later);
  EXPECT_TRUE(has(summary(later), "attempt 1 of the run (torchrun restarted its ranks 1 time(s) "
                                  "before; the first attempt is in " + dir.path() + ")"))
      << summary(later);
  // An attempt folder another run left (its run id differs) is not named.
  const std::string stale = trace::attemptFolder(dir.path(), 2).string();
  fs::create_directory(stale);
  std::ofstream(stale + "/rank-0.jsonl")
      << R"({"ev":"header","trace":"ddph-audit","version":1,"rank":0,"world_size":2,"run_id":"old"})"
      << "\n";
  EXPECT_EQ(trace::readTrace(dir.path()).laterAttempts, std::vector<fs::path>{second});
  // One folder, one attempt: a rank file of another attempt is refused.
  fs::copy_file(second + "/rank-1.jsonl", dir.path() + "/rank-1.jsonl",
                fs::copy_options::overwrite_existing);
  EXPECT_TRUE(has(readError(dir.path()), "come from different attempts of the run (0 and 1)"))
      << readError(dir.path());
}

TEST(AuditTraceFiles, TheNodesFoldersOfOneJobAreReadAsOneRun) {
  // Two torchrun agents, each writing its node's folder: ranks 0, 1 in one, 2, 3 in the other.
  // Together they are the job (its LOCAL_RANK bug found across them); alone, half of it.
  RunSpec s;
  s.nodes = 2;
  s.samplerLocalRank = true;
  TempDir node0("ddph-audit-trace"), node1("ddph-audit-trace");
  for (int r = 0; r < 4; ++r) writeRank(r < 2 ? node0.path() : node1.path(), s, r);
  const auto jobs = trace::readRun({node0.path(), node1.path()});
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].folders, (std::vector<fs::path>{node0.path(), node1.path()}));
  const auto r = audit::auditRun(jobs);
  EXPECT_EQ(r.ranksTraced, 4) << summary(r);
  EXPECT_TRUE(r.jobs.empty()) << summary(r);
  EXPECT_TRUE(has(likelyCauseOf(only(r, property::kCoverage)), "sampler 0's rank is LOCAL_RANK"))
      << summary(r);
  // Folders of different runs: a node of a run with another run id, or another world size.
  TempDir other("ddph-audit-trace");
  std::ofstream(other.path() + "/rank-2.jsonl")
      << R"({"ev":"header","trace":"ddph-audit","version":1,"rank":2,"world_size":4,"run_id":"x"})"
      << "\n";
  try {
    trace::readRun({node0.path(), other.path()});
    ADD_FAILURE() << "folders of different runs were read as one";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "hold ranks of different runs (world sizes 4 and 4, run ids 'test' "
                              "and 'x')"))
        << e.what();
  }
}

TEST(AuditTraceFiles, AFolderOfAnotherProgramIsNoJobOfTheRun) {
  TempDir first("ddph-audit-trace"), second("ddph-audit-trace");
  RunSpec s{2};
  for (int r = 0; r < 2; ++r) writeRank(first.path(), s, r);
  for (int r = 0; r < 2; ++r) {
    std::ofstream(second.path() + "/rank-" + std::to_string(r) + ".jsonl")
        << json{{"ev", "header"}, {"trace", "ddph-audit"}, {"version", 1}, {"rank", r},
                {"world_size", 2}, {"run_id", "test"}, {"argv", {"eval.py"}}}.dump()
        << "\n";
  }
  try {
    trace::readRun({first.path(), second.path()});
    ADD_FAILURE() << "jobs of two programs were read as one run";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "are not jobs of one run: their programs differ (train.py and "
                              "eval.py)"))
        << e.what();
  }
}

TEST(AuditTraceFiles, IndexListEncodingsDecodeAlike) {
  // One custom-sampler pass per rank, its batches in the three encodings; rank 1 overlaps rank 0.
  TempDir dir("ddph-audit-trace");
  for (int rank = 0; rank < 2; ++rank) {
    RankWriter w(dir.path() + "/rank-" + std::to_string(rank) + ".jsonl", rank, 2);
    w.emit({{"ev", "sampler"}, {"id", 0}, {"class", "MySampler"}, {"dataset_len", 8}, {"order", "recorded"}});
    w.emit({{"ev", "loader"}, {"id", 0}, {"sampler", 0}, {"dataset_len", 8}, {"batch_size", 2}, {"batching", "torch"}});
    w.emit({{"ev", "epoch"}, {"loader", 0}, {"iter", 0}, {"dataset_len", 8}});
    // rank 0: [0, 1] as an array, [2, 3] as runs; rank 1: [2, 3] as base64 int64, [6, 7] as runs.
    if (rank == 0) {
      w.emit({{"ev", "batch"}, {"loader", 0}, {"iter", 0}, {"seq", 0}, {"size", 2}, {"idx", {0, 1}}});
      w.emit({{"ev", "batch"}, {"loader", 0}, {"iter", 0}, {"seq", 1}, {"size", 2}, {"idx", {{"runs", {{2, 2}}}}}});
    } else {
      w.emit({{"ev", "batch"}, {"loader", 0}, {"iter", 0}, {"seq", 0}, {"size", 2},
              {"idx", {{"i64", "AgAAAAAAAAADAAAAAAAAAA=="}}}});
      w.emit({{"ev", "batch"}, {"loader", 0}, {"iter", 0}, {"seq", 1}, {"size", 2}, {"idx", {{"runs", {{6, 2}}}}}});
    }
    w.emit({{"ev", "epoch_end"}, {"loader", 0}, {"iter", 0}, {"batches", 2}});
    w.emit({{"ev", "end"}, {"code", 0}});
  }
  const auto r = audit::auditTrace(trace::readTrace(dir.path()));
  const Violation& v = only(r, property::kCoverage);
  EXPECT_TRUE(has(v.detail, "2 of 8 indices are on no rank: 4, 5")) << v.detail;
}

TEST(AuditTrace, UnderLightningTheCauseNamesUseDistributedSamplerFalse) {
  // Both ranks draw the whole dataset from a RandomSampler: with a `framework` line (Lightning's
  // Trainer) the cause names the Trainer flag that left the sampler so, without one it does not.
  for (const bool lightning : {true, false}) {
    TempDir dir("ddph-audit-trace");
    for (int rank = 0; rank < 2; ++rank) {
      RankWriter w(dir.path() + "/rank-" + std::to_string(rank) + ".jsonl", rank, 2);
      if (lightning) w.emit({{"ev", "framework"}, {"name", "lightning"}, {"version", "2.1.4"}});
      w.emit({{"ev", "sampler"}, {"id", 0}, {"class", "torch.utils.data.sampler.RandomSampler"},
              {"dataset_len", 4}, {"order", "recorded"}});
      w.emit({{"ev", "loader"}, {"id", 0}, {"sampler", 0}, {"dataset_len", 4}, {"batch_size", 2},
              {"batching", "torch"}});
      w.emit({{"ev", "epoch"}, {"loader", 0}, {"iter", 0}, {"dataset_len", 4}});
      w.emit({{"ev", "batch"}, {"loader", 0}, {"iter", 0}, {"seq", 0}, {"size", 2}, {"idx", {3, 0}}});
      w.emit({{"ev", "batch"}, {"loader", 0}, {"iter", 0}, {"seq", 1}, {"size", 2}, {"idx", {2, 1}}});
      w.emit({{"ev", "epoch_end"}, {"loader", 0}, {"iter", 0}, {"batches", 2}});
      w.emit({{"ev", "end"}, {"code", 0}});
    }
    const auto r = audit::auditTrace(trace::readTrace(dir.path()));
    const Violation& v = only(r, property::kDisjointness);
    EXPECT_EQ(has(v.likelyCause, "Trainer(use_distributed_sampler=False) leaves the loader's "
                                 "sampler as it is"),
              lightning)
        << v.likelyCause;
    EXPECT_TRUE(has(v.likelyCause, "RandomSampler")) << v.likelyCause;
  }
}

// Lightning's self.log(..., sync_dist=True) inside `if self.trainer.is_global_zero:`: rank 0 logs
// val_acc (a `logged` line with the program's own line), and its reduction at the epoch's end is
// an all_reduce placed at trainer.fit, where rank 1 runs Lightning's next barrier. The cause names
// the log call and where it was written, not the fit() line every collective points at.
TEST(AuditTrace, AValueLoggedWithSyncDistOnOneRankIsNamedByItsLogLine) {
  for (const bool onlyRank0 : {true, false}) {
    TempDir dir("ddph-audit-trace");
    for (int r = 0; r < 2; ++r) {
      RankWriter w(dir.path() + "/rank-" + std::to_string(r) + ".jsonl", r, 2);
      w.emit({{"ev", "framework"}, {"name", "lightning"}, {"version", "2.1.4"}});
      const bool logs = r == 0 || !onlyRank0;
      if (logs) {
        w.emit({{"ev", "logged"}, {"name", "val_acc"},
                {"at", "train.py:41 in on_validation_epoch_end"}});
      }
      w.emit({{"ev", "coll"}, {"group", "0"}, {"seq", 0}, {"op", logs ? "all_reduce" : "barrier"},
              {"dtype", "float32"}, {"numel", logs ? 1 : 0}, {"src", "user"},
              {"at", "train.py:58 in <module>"}, {"via", "lightning"}});
      w.emit({{"ev", "coll_done"}, {"group", "0"}, {"seq", 0}});
      w.emit({{"ev", "end"}, {"code", 0}});
    }
    const auto r = audit::auditTrace(trace::readTrace(dir.path()));
    if (!onlyRank0) {
      EXPECT_TRUE(r.violations.empty()) << summary(r);
      continue;
    }
    const Violation& v = only(r, property::kCollectiveMismatch);
    EXPECT_EQ(v.likelyCause,
              "self.log('val_acc', sync_dist=True) at train.py:41 in on_validation_epoch_end ran "
              "on rank 0 only, never on rank 1: Lightning reduces a sync_dist value across ranks "
              "when it computes the epoch's results, so that rank ran an all_reduce the others "
              "never joined");
    EXPECT_TRUE(has(v.help, "rank_zero_only=True")) << v.help;
  }
}

// Rank 0's shard holds 3 batches, rank 1's 2 (a sampler without padding): rank 1 leaves the loop
// and all_reduces its loss for logging while rank 0 runs its third step's gradient allreduce. The
// collectives differ at the same number, and the cause is the pass that parted the ranks, not a
// branch around a collective.
TEST(AuditTrace, CollectivesThatDifferAfterAPassPartedTheRanksAreUnevenInputs) {
  TempDir dir("ddph-audit-trace");
  for (int r = 0; r < 2; ++r) {
    RankWriter w(dir.path() + "/rank-" + std::to_string(r) + ".jsonl", r, 2);
    w.emit({{"ev", "loader"}, {"id", 0}, {"dataset", "Points"}, {"dataset_len", 5},
            {"batch_size", 1}, {"drop_last", false}, {"batching", "torch"}});
    w.emit({{"ev", "ddp"}, {"id", 0}, {"module", "Linear"}, {"parameters", 11}});
    w.emit({{"ev", "epoch"}, {"loader", 0}, {"iter", 0}});
    const int batches = r == 0 ? 3 : 2;
    for (int b = 0; b < batches; ++b) {
      w.emit({{"ev", "batch"}, {"loader", 0}, {"iter", 0}, {"seq", b}, {"size", 1}, {"grad", true}});
      w.emit({{"ev", "forward"}, {"ddp", 0}, {"n", b}, {"training", true}, {"grad", true}});
      w.emit({{"ev", "coll"}, {"group", "0"}, {"seq", b}, {"op", "all_reduce"}, {"dtype", "float32"},
              {"numel", 11}, {"src", "ddp"}, {"ddp", 0}, {"bucket", 0}, {"backward", b}});
      if (b < 2) w.emit({{"ev", "coll_done"}, {"group", "0"}, {"seq", b}});
    }
    if (r == 1) {
      w.emit({{"ev", "epoch_end"}, {"loader", 0}, {"iter", 0}, {"batches", 2}});
      w.emit({{"ev", "coll"}, {"group", "0"}, {"seq", 2}, {"op", "all_reduce"}, {"dtype", "float32"},
              {"numel", 1}, {"src", "user"}, {"at", "train.py:65 in main"}});
    }
  }
  const auto r = audit::auditTrace(trace::readTrace(dir.path()));
  const Violation& v = only(r, property::kCollectiveMismatch);
  EXPECT_TRUE(has(v.detail, "the ranks parted at epoch 0 of loader 0 (Points, 5 samples) (batches: "
                            "rank 1: 2; rank 0: 3)"))
      << v.detail;
  EXPECT_TRUE(has(v.likelyCause, "uneven inputs: rank 1 ran out of batches first")) << v.likelyCause;
  EXPECT_TRUE(has(v.help, "join()")) << v.help;
}

// `if rank == 0: torch.save(...); dist.barrier()`: rank 0's barrier, the program's own call, meets
// the other ranks' next gradient allreduce. Both ran the same batches: the cause is the branch.
// Through Lightning (trainer.save_checkpoint under `if self.trainer.is_global_zero:`) the cause
// says which of its calls are collectives.
TEST(AuditTrace, AProgramCollectiveOnSomeRanksOnlyIsNamedAsABranch) {
  for (const std::string via : {"", "lightning"}) {
    SCOPED_TRACE(via);
    TempDir dir("ddph-audit-trace");
    for (int r = 0; r < 3; ++r) {
      RankWriter w(dir.path() + "/rank-" + std::to_string(r) + ".jsonl", r, 3);
      w.emit({{"ev", "loader"}, {"id", 0}, {"dataset", "Points"}, {"dataset_len", 6},
              {"batch_size", 2}, {"drop_last", false}, {"batching", "torch"}});
      w.emit({{"ev", "ddp"}, {"id", 0}, {"module", "Linear"}, {"parameters", 11}});
      for (int epoch = 0; epoch < 2; ++epoch) {
        w.emit({{"ev", "epoch"}, {"loader", 0}, {"iter", epoch}});
        w.emit({{"ev", "batch"}, {"loader", 0}, {"iter", epoch}, {"seq", 0}, {"size", 2}, {"grad", true}});
        w.emit({{"ev", "forward"}, {"ddp", 0}, {"n", epoch}, {"training", true}, {"grad", true}});
        if (epoch == 1 && r == 0) break;  // rank 0 waits in its barrier
        w.emit({{"ev", "coll"}, {"group", "0"}, {"seq", epoch}, {"op", "all_reduce"},
                {"dtype", "float32"}, {"numel", 11}, {"src", "ddp"}, {"ddp", 0}, {"bucket", 0},
                {"backward", epoch}});
        if (epoch == 0) {
          w.emit({{"ev", "coll_done"}, {"group", "0"}, {"seq", 0}});
          w.emit({{"ev", "epoch_end"}, {"loader", 0}, {"iter", 0}, {"batches", 1}});
          if (r == 0) {
            json barrier = {{"ev", "coll"}, {"group", "0"}, {"seq", 1}, {"op", "barrier"},
                            {"src", "user"}, {"at", "train.py:41 in main"}};
            if (!via.empty()) barrier["via"] = via;
            w.emit(barrier);
          }
        }
      }
    }
    const auto r = audit::auditTrace(trace::readTrace(dir.path()));
    const auto found = r.violations;
    const auto m = std::find_if(found.begin(), found.end(), [](const Violation& v) {
      return v.property == property::kCollectiveMismatch;
    });
    ASSERT_NE(m, found.end()) << summary(r);
    EXPECT_TRUE(has(m->likelyCause, "rank 0 called barrier at train.py:41 in main")) << m->likelyCause;
    EXPECT_TRUE(has(m->likelyCause, "and the other ranks did not")) << m->likelyCause;
    EXPECT_EQ(has(m->likelyCause, "trainer.save_checkpoint"), via == "lightning") << m->likelyCause;
    EXPECT_TRUE(has(m->help, "move it out of the branch")) << m->help;
  }
}

// Two ranks' traces written by hand with their "t": rank 0 waits 0.2 s in its first allreduce and
// 0.3 s in two overlapping ones (counted once), computes 0.7 s between them from its first batch
// to its last completion; its set-up broadcast before the first batch is not a step. Rank 1 never
// completes its second allreduce: it waits from entering it to its last line (the error at 3.0).
const char* const kTimedRank0 = R"({"ev":"header","t":0.0,"trace":"ddph-audit","version":1,"rank":0,"world_size":2}
{"ev":"coll","t":0.2,"group":"0","seq":0,"op":"broadcast"}
{"ev":"coll_done","t":0.5,"group":"0","seq":0}
{"ev":"loader","t":0.9,"id":0,"dataset_len":8,"batch_size":2}
{"ev":"epoch","t":1.0,"loader":0,"iter":0}
{"ev":"batch","t":1.0,"loader":0,"iter":0,"seq":0,"size":2}
{"ev":"coll","t":1.3,"group":"0","seq":1,"op":"all_reduce"}
{"ev":"coll_done","t":1.5,"group":"0","seq":1}
{"ev":"batch","t":1.6,"loader":0,"iter":0,"seq":1,"size":2}
{"ev":"coll","t":1.9,"group":"0","seq":2,"op":"all_reduce"}
{"ev":"coll","t":1.95,"group":"0","seq":3,"op":"all_reduce"}
{"ev":"coll_done","t":2.1,"group":"0","seq":2}
{"ev":"coll_done","t":2.2,"group":"0","seq":3}
{"ev":"end","t":2.5,"code":0}
)";
const char* const kTimedRank1 = R"({"ev":"header","t":0.0,"trace":"ddph-audit","version":1,"rank":1,"world_size":2}
{"ev":"loader","t":0.9,"id":0,"dataset_len":8,"batch_size":2}
{"ev":"epoch","t":1.0,"loader":0,"iter":0}
{"ev":"batch","t":1.0,"loader":0,"iter":0,"seq":0,"size":2}
{"ev":"coll","t":1.1,"group":"0","seq":0,"op":"all_reduce"}
{"ev":"coll_done","t":1.5,"group":"0","seq":0}
{"ev":"batch","t":1.6,"loader":0,"iter":0,"seq":1,"size":2}
{"ev":"coll","t":2.0,"group":"0","seq":1,"op":"all_reduce"}
{"ev":"error","t":3.0,"type":"RuntimeError","message":"peer gone"}
)";

trace::RankTrace timedRank(const char* text) {
  std::istringstream in(text);
  return trace::readRankTrace(in, "rank.jsonl");
}

std::string readRankError(const char* text) {
  try {
    timedRank(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(AuditStepTimes, ComputeBetweenAndWaitInsideCollectivesPerStep) {
  const auto r0 = audit::stepTimesOf(timedRank(kTimedRank0));
  ASSERT_TRUE(r0);
  EXPECT_NEAR(r0->computeMs, 350.0, 1e-6);  // (2.2 - 1.0 - 0.5) s over 2 steps
  EXPECT_NEAR(r0->waitMs, 250.0, 1e-6);     // (0.2 + 0.3) s over 2 steps
  const auto r1 = audit::stepTimesOf(timedRank(kTimedRank1));
  ASSERT_TRUE(r1);
  EXPECT_NEAR(r1->computeMs, 300.0, 1e-6);  // (3.0 - 1.0 - 1.4) s over 2 steps
  EXPECT_NEAR(r1->waitMs, 700.0, 1e-6);     // (0.4 + 1.0) s over 2 steps
}

TEST(AuditStepTimes, TheAuditTimelineShowsThem) {
  TempDir dir("ddph-audit-trace");
  std::ofstream(dir.path() + "/rank-0.jsonl") << kTimedRank0;
  std::ofstream(dir.path() + "/rank-1.jsonl") << kTimedRank1;
  const auto trace = trace::readTrace(dir.path());
  const auto timeline = audit::timelineOf(trace, {});
  ASSERT_EQ(timeline.ranks.size(), 2u);
  ASSERT_TRUE(timeline.ranks[0].computeMs && timeline.ranks[0].waitMs);
  EXPECT_NEAR(*timeline.ranks[0].computeMs, 350.0, 1e-6);
  EXPECT_NEAR(*timeline.ranks[1].waitMs, 700.0, 1e-6);
  report::Page page;
  page.timeline = timeline;
  const std::string html = report::renderHtml(page);
  EXPECT_TRUE(has(html, "compute 350 ms, wait 250 ms per step")) << html;
  EXPECT_TRUE(has(html, "compute 300 ms, wait 700 ms per step")) << html;
}

TEST(AuditStepTimes, NoneWithoutTimesOrSteps) {
  std::string untimed = kTimedRank0;
  untimed.replace(untimed.find("\"t\":1.0,\"loader\":0,\"iter\":0,\"seq\":0"), 8, "");
  EXPECT_FALSE(audit::stepTimesOf(timedRank(untimed.c_str())));
  EXPECT_FALSE(audit::stepTimesOf(timedRank(
      R"({"ev":"header","t":0.0,"trace":"ddph-audit","version":1,"rank":0,"world_size":1})")));
  EXPECT_TRUE(has(readRankError(R"({"ev":"header","t":"soon","trace":"ddph-audit","version":1,"rank":0,"world_size":1})"),
                  "\"t\" has the wrong type"));
}

// A lane's spans as "c 0.000-0.200 w 0.200-0.500 …" (c compute, w wait), to the millisecond.
std::string spansText(const report::RankLane& lane) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3);
  for (const auto& s : lane.spans) {
    out << (out.tellp() > 0 ? " " : "") << (s.state == report::LaneState::kWait ? "w " : "c ") << s.from << "-" << s.to;
  }
  return out.str();
}

// The same two ranks as lanes on the time axis: rank 0 waits in its set-up broadcast, its first
// allreduce and the two overlapping ones (one stretch), computes between them and after its last
// completion until its end line; rank 1 waits from entering its second allreduce until its error.
// The first divergent collective is #0 (a broadcast on rank 0, an allreduce on rank 1): marked where
// each entered it.
TEST(AuditRankLanes, WaitInsideCollectivesComputeBetweenAndHowEachEnds) {
  TempDir dir("ddph-audit-trace");
  std::ofstream(dir.path() + "/rank-0.jsonl") << kTimedRank0;
  std::ofstream(dir.path() + "/rank-1.jsonl") << kTimedRank1;
  const auto timeline = audit::timelineOf(trace::readTrace(dir.path()), {});
  ASSERT_EQ(timeline.lanes.size(), 2u);
  const auto& r0 = timeline.lanes[0];
  const auto& r1 = timeline.lanes[1];
  EXPECT_EQ(spansText(r0),
            "c 0.000-0.200 w 0.200-0.500 c 0.500-1.300 w 1.300-1.500 c 1.500-1.900 w 1.900-2.200 c 2.200-2.500");
  EXPECT_EQ(spansText(r1), "c 0.000-1.100 w 1.100-1.500 c 1.500-2.000 w 2.000-3.000");
  EXPECT_EQ(r0.end, report::LaneEnd::kEnded);
  EXPECT_EQ(r1.end, report::LaneEnd::kFailed);  // its error line, inside the allreduce
  EXPECT_DOUBLE_EQ(r0.endsAt, 2.5);
  EXPECT_DOUBLE_EQ(r1.endsAt, 3.0);
  EXPECT_EQ(r0.lastCollective, "all_reduce #3");
  EXPECT_TRUE(r0.lastCompleted);
  EXPECT_EQ(r1.lastCollective, "all_reduce #1");
  EXPECT_FALSE(r1.lastCompleted);
  ASSERT_TRUE(timeline.firstDivergence && r0.divergentAt && r1.divergentAt);
  EXPECT_EQ(timeline.firstDivergence->seq, 0);
  EXPECT_DOUBLE_EQ(*r0.divergentAt, 0.2);
  EXPECT_DOUBLE_EQ(*r1.divergentAt, 1.1);
  report::Page page;
  page.timeline = timeline;
  const std::string html = report::renderHtml(page);
  // rank 0 waits 0.8 of 2.5 s (32%), rank 1 1.4 of 3 s (47%).
  EXPECT_TRUE(has(html, "Rank 1 failed at 3 s in all_reduce #1, never completed; rank 1 waited 47% of its time."))
      << html;
  EXPECT_TRUE(has(html, "rank 0: compute 1.7 s, wait 0.8 s (32% waiting), 2 steps, 4 collectives; ended normally at "
                        "2.5 s after all_reduce #3"))
      << html;
}

// With every header's wall clock (start_unix) the lanes share one time line: rank 1's recorder
// started 0.25 s after rank 0's, so its lane starts there. Without one on some rank: all from 0.
TEST(AuditRankLanes, HeaderClocksPutTheLanesOnOneTimeLine) {
  auto withClock = [](std::string text, const char* startUnix) {
    const std::string header = "\"world_size\":2";
    return text.insert(text.find(header) + header.size(), std::string(",\"start_unix\":") + startUnix);
  };
  TempDir dir("ddph-audit-trace");
  std::ofstream(dir.path() + "/rank-0.jsonl") << withClock(kTimedRank0, "1000.5");
  std::ofstream(dir.path() + "/rank-1.jsonl") << withClock(kTimedRank1, "1000.75");
  const auto timeline = audit::timelineOf(trace::readTrace(dir.path()), {});
  ASSERT_EQ(timeline.lanes.size(), 2u);
  EXPECT_EQ(spansText(timeline.lanes[0]),
            "c 0.000-0.200 w 0.200-0.500 c 0.500-1.300 w 1.300-1.500 c 1.500-1.900 w 1.900-2.200 c 2.200-2.500");
  EXPECT_EQ(spansText(timeline.lanes[1]), "c 0.250-1.350 w 1.350-1.750 c 1.750-2.250 w 2.250-3.250");
  EXPECT_DOUBLE_EQ(timeline.lanes[1].endsAt, 3.25);
  ASSERT_TRUE(timeline.lanes[1].divergentAt);
  EXPECT_DOUBLE_EQ(*timeline.lanes[1].divergentAt, 1.35);
  TempDir partly("ddph-audit-trace");
  std::ofstream(partly.path() + "/rank-0.jsonl") << withClock(kTimedRank0, "1000.5");
  std::ofstream(partly.path() + "/rank-1.jsonl") << kTimedRank1;
  const auto unaligned = audit::timelineOf(trace::readTrace(partly.path()), {});
  ASSERT_EQ(unaligned.lanes.size(), 2u);
  EXPECT_EQ(spansText(unaligned.lanes[1]), "c 0.000-1.100 w 1.100-1.500 c 1.500-2.000 w 2.000-3.000");
}

// A killed rank (no end line) inside a collective never completed: stopped there; elsewhere:
// stopped without an end; no "t" on a collective: no lane.
TEST(AuditRankLanes, HowATraceWithoutAnEndStops) {
  std::string hung = kTimedRank1;
  hung.erase(hung.find("{\"ev\":\"error\""));
  EXPECT_EQ(audit::rankLaneOf(timedRank(hung.c_str()), std::nullopt)->end, report::LaneEnd::kInCollective);
  std::string between = kTimedRank1;
  between.erase(between.find("{\"ev\":\"coll\",\"t\":2.0"));
  EXPECT_EQ(audit::rankLaneOf(timedRank(between.c_str()), std::nullopt)->end, report::LaneEnd::kStopped);
  trace::LaunchedRank killed;
  killed.rank = 1;
  killed.outcome = "signaled";
  killed.signal = 9;
  EXPECT_EQ(audit::rankLaneOf(timedRank(hung.c_str()), std::nullopt, &killed)->end, report::LaneEnd::kFailed);
  std::string untimed = kTimedRank1;
  untimed.replace(untimed.find("\"t\":1.1,"), 8, "");
  EXPECT_FALSE(audit::rankLaneOf(timedRank(untimed.c_str()), std::nullopt));
}

// ddp-sim launch --audit's progress: read while the files grow, a line cut in the middle counted
// once it is whole, joined = a completed collective, epochs = loader 0's passes ended on every rank.
TEST(AuditTraceProgress, CountsWhatTheGrowingFilesSaySoFar) {
  TempDir dir("ddph-audit-trace");
  trace::TraceProgress progress(dir.path(), 2);
  EXPECT_EQ(progress.read().joined, 0);  // no file yet
  std::ofstream r0(dir.path() + "/rank-0.jsonl"), r1(dir.path() + "/rank-1.jsonl");
  const auto write = [](std::ofstream& f, const std::string& text) { f << text << std::flush; };
  write(r0, R"({"ev":"header","t":0.0,"trace":"ddph-audit","version":1,"rank":0,"world_size":2})" "\n"
            R"({"ev":"coll","t":0.1,"group":"0","seq":0,"op":"broadcast"})" "\n"
            R"({"ev":"coll_done","t":0.2,"gr)");
  auto counts = progress.read();
  EXPECT_EQ(counts.joined, 0);  // the completion is still being written
  write(r0, R"(oup":"0","seq":0})" "\n"
            R"({"ev":"epoch_end","t":1.0,"loader":0,"iter":0,"batches":3})" "\n"
            R"({"ev":"epoch_end","t":1.1,"loader":1,"iter":0,"batches":1})" "\n");
  counts = progress.read();
  EXPECT_EQ(counts.joined, 1);
  EXPECT_EQ(counts.epochsDone, 0);  // rank 1 has ended none
  write(r1, R"({"ev":"coll_done","t":0.2,"group":"0","seq":0})" "\n"
            R"({"ev":"epoch_end","t":1.0,"loader":0,"iter":0,"batches":3})" "\n"
            R"({"ev":"epoch_end","t":2.0,"loader":0,"iter":1,"batches":3})" "\n");
  counts = progress.read();
  EXPECT_EQ(counts.joined, 2);
  EXPECT_EQ(counts.epochsDone, 1);  // loader 0: rank 0 ended 1 pass, rank 1 two; loader 1 not counted
  write(r0, R"({"ev":"epoch_end","t":2.0,"loader":0,"iter":1,"batches":3})" "\n" "not json\n");
  EXPECT_EQ(progress.read().epochsDone, 2);
  // A file reserved ahead of its lines (the Python recorder): NUL bytes are not read yet...
  write(r1, R"({"ev":"epoch_end","t":3.0,"load)" + std::string(64, '\0'));
  EXPECT_EQ(progress.read().epochsDone, 2);
  // ... and once the line is there, over them, it counts.
  r1.seekp(-64, std::ios::end);
  write(r1, R"(er":0,"iter":2,"batches":3})" "\n");
  r0 << R"({"ev":"epoch_end","t":3.0,"loader":0,"iter":2,"batches":3})" "\n" << std::flush;
  EXPECT_EQ(progress.read().epochsDone, 3);
}

}  // namespace
}  // namespace ddph::test_support
