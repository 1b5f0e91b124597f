// rank-failure: every rank runs to its end. Where a rank did not, say how it ended (the launcher's
// record when there is one), where it stood and the collective it was in.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "audit_checks.h"
#include "ddph/common/child_process.h"

namespace ddph::audit {

using common::signalName;
using sampler::Violation;
namespace property = sampler::property;

namespace {

const LaunchedRank* launched(const Trace& trace, int rank) {
  if (!trace.launch) return nullptr;
  for (const auto& r : trace.launch->ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

// How the launcher saw the rank end, or empty when it ended well or there is no launcher record.
std::string launcherFailure(const Trace& trace, const LaunchedRank* l) {
  if (!l) return {};
  if (l->outcome == "stopped" && trace.launch->interruptedBy != 0) {
    return fmt::format("was stopped by the launcher, which was interrupted by {}",
                       signalName(trace.launch->interruptedBy));
  }
  if (l->outcome == "exited" && l->code != 0) return fmt::format("exited with code {}", l->code);
  if (l->outcome == "signaled")
    return fmt::format("was killed by signal {} ({})", l->signal, signalName(l->signal));
  if (l->outcome == "timed-out") {
    return trace.launch->deadlineS
               ? fmt::format("was still running at the launcher's timeout of {:g} s (a hang)",
                             *trace.launch->deadlineS)
               : "was still running at the launcher's timeout (a hang)";
  }
  if (l->outcome == "stopped") return "was stopped by the launcher after another rank failed";
  return {};
}

// "blocked in collective #51 on the default group: all_reduce … (entered, never completed)".
std::string collectiveState(const RankTrace& t) {
  const CollectiveRecord* c = t.lastCollective();
  if (!c) return "it had entered no collective";
  return fmt::format("{} collective {}: {}", c->done ? "its last completed" : "it was in",
                     collectiveNumber(*c), describeCollective(*c));
}

// NOTE [DDP alive at destroy_process_group] (docs/audit.md): with torch 1.13 a DDP module that
// outlives the default group holds the last reference to it; freeing the module then destroys the
// gloo group while holding the GIL, and a gloo thread freeing a tensor waits for the GIL: the
// rank hangs at exit after its work is done.
bool hungAtExitWithDdpAlive(const RankTrace& t, const LaunchedRank* l) {
  const CollectiveRecord* last = t.lastCollective();
  return l && l->outcome == "timed-out" && !t.ended && !t.errorType && t.ddpAliveAtDestroy &&
         !t.ddpAliveAtDestroy->empty() && (!last || last->done);
}

// Errors whose message alone tells their cause, by a part of torch's own wording.
struct KnownError {
  std::string_view part;
  std::string_view cause;
  std::string_view help;
};
constexpr std::string_view kPeerLost =
    "a peer rank went away while this rank waited for it in a collective, so this error is a "
    "consequence: the first failure is another rank's (one that raised another error, was killed, "
    "or ended while this rank still had a collective to run)";
constexpr KnownError kKnownErrors[] = {
    {"use_libuv was requested",
     "this torch is built without libuv (Debian's torch 2.x), which torch's TCPStore asks for by "
     "default since torch 2.4",
     "set USE_LIBUV=0 in the ranks' environment (docs/torch2.md)"},
    {"Connection closed by peer", kPeerLost, ""},                 // gloo
    {"Connection reset by peer", kPeerLost, ""},                  // gloo
    {"remote process exiting prematurely", kPeerLost, ""},        // NCCL's ncclRemoteError
};

// torch's words when a program asks for CUDA or NCCL that this torch or machine lacks.
constexpr std::string_view kNoCudaHere[] = {
    "_cuda_setDevice",  // torch.cuda.set_device on a CPU build (torch 1.13)
    "Torch not compiled with CUDA enabled",
    "Distributed package doesn't have NCCL built in",
    "Found no NVIDIA driver",
    "No CUDA GPUs are available",
    "no GPUs found",  // ProcessGroupNCCL (torch 2.x)
    "but torch.cuda.is_available() is False",  // torch.load of a CUDA checkpoint
    "only work with single-device/multiple-device GPU modules",  // DDP(device_ids=...) on the CPU
};

// A CUDA program on a machine without CUDA: rerun it with --cpu (the command, in full).
Explanation noCudaCause(const Trace& trace, const RankTrace& t) {
  const bool cuda = std::any_of(std::begin(kNoCudaHere), std::end(kNoCudaHere), [&](auto part) {
    return t.errorMessage->find(part) != std::string::npos;
  });
  if (!cuda) return {};
  if (t.emulation) {
    return {"the program uses a CUDA feature the CPU emulation (--cpu) does not serve",
            "see what is emulated and what is not in docs/cpu-emulation.md"};
  }
  RerunWith with;
  with.cpu = true;
  return {"the program asks for CUDA or NCCL, which this machine's torch does not have",
          fmt::format("rerun it with --cpu, which serves CUDA from the CPU and runs nccl on gloo "
                      "without editing the program: {}",
                      rerunCommand(trace, with))};
}

// torchvision's words when a dataset could not be fetched (MNIST's mirrors, CIFAR's download_url,
// a folder without the files and download=False).
constexpr std::string_view kNoDownload[] = {
    "Error downloading",
    "urlopen error",
    "Dataset not found. You can use download=True",
    "Dataset not found or corrupted. You can use download=True",
};

// A dataset that could not be downloaded: rerun with --stand-in-data (the command, in full),
// unless the launcher gave it already (the stand-in's own error then names what it covers).
Explanation noDownloadCause(const Trace& trace, const RankTrace& t) {
  const bool download = std::any_of(std::begin(kNoDownload), std::end(kNoDownload), [&](auto part) {
    return t.errorMessage->find(part) != std::string::npos;
  });
  if (!download || (trace.launch && trace.launch->standInData)) return {};
  RerunWith with;
  with.standInData = true;
  return {"the program's dataset could not be downloaded or found (no internet here, or not in "
          "the folder it reads)",
          fmt::format("rerun it with --stand-in-data, which serves torchvision's MNIST, "
                      "FashionMNIST, CIFAR10 and CIFAR100 with their real lengths and classes "
                      "without downloading (docs/cpu-emulation.md): {}",
                      rerunCommand(trace, with))};
}

// A device ordinal beyond the node's devices: on a second node RANK passes the node's device
// count, so set_device(RANK) (or .to(rank), device_ids=[rank]) fails there and only there.
Explanation deviceOrdinalCause(const RankTrace& t) {
  const std::string& m = *t.errorMessage;
  if (m.find("invalid device ordinal") == std::string::npos) return {};
  static const std::regex kOrdinal(R"(device (\d+) of the (\d+) stand-in devices)");
  std::smatch match;
  std::optional<long> asked, devices;
  if (std::regex_search(m, match, kOrdinal)) {
    asked = std::stol(match[1].str());
    devices = std::stol(match[2].str());
  }
  const std::string where =
      t.localRank && t.node ? fmt::format(" (local rank {} on node {})", *t.localRank, *t.node) : "";
  if (asked && t.localRank && *asked == t.rank && t.rank != *t.localRank) {
    return {fmt::format("rank {}{} asked for device {}, but its node has {}: the program picks its "
                        "device with the global RANK (torch.cuda.set_device(rank), .to(rank), "
                        "device_ids=[rank]), which passes the node's devices from the second node "
                        "on",
                        t.rank, where, *asked, *devices),
            "use the node-local LOCAL_RANK (int(os.environ[\"LOCAL_RANK\"])) for devices"};
  }
  return {fmt::format("rank {}{} asked for a device beyond its node's{}: the program's device "
                      "index is not the node-local LOCAL_RANK (or the node has fewer devices "
                      "than ranks)",
                      t.rank, where, devices ? fmt::format(" {} devices", *devices) : ""),
          "pick each rank's device with LOCAL_RANK"};
}

Explanation knownErrorCause(const Trace& trace, const RankTrace& t) {
  if (!t.errorMessage) return {};
  if (Explanation e = deviceOrdinalCause(t); !e.empty()) return e;
  if (Explanation e = noCudaCause(trace, t); !e.empty()) return e;
  if (Explanation e = noDownloadCause(trace, t); !e.empty()) return e;
  for (const auto& known : kKnownErrors) {
    if (t.errorMessage->find(known.part) != std::string::npos) {
      return {std::string(known.cause), std::string(known.help)};
    }
  }
  return {};
}

// When two or more ranks raised and their clocks are known (the header's start_unix), the rank
// that raised first and how long before the next one did: the failure the others' errors follow.
struct FirstRaised {
  int rank = -1;
  int next = -1;
  double lead = 0;  ///< seconds before `next` raised
};

FirstRaised firstRaised(const Trace& trace) {
  std::vector<std::pair<double, int>> when;
  for (const auto& t : trace.ranks) {
    if (!t || !t->errorType) continue;
    if (!t->errorT || !t->startUnix) return {};  // a rank without a clock: no order
    when.emplace_back(*t->startUnix + *t->errorT, t->rank);
  }
  if (when.size() < 2) return {};
  std::sort(when.begin(), when.end());
  return {when[0].second, when[1].second, when[1].first - when[0].first};
}

// The Python recorder writes `process_group` when init_process_group returns; a run none of whose
// Python ranks joined one was not distributed (or its ranks went unrecorded). The C++ recorders
// are made by joining the world, so their traces are not asked; nor is a run whose ranks failed
// (before joining, as a CUDA program on a machine without CUDA does): that failure is the finding.
void checkProcessGroup(const Trace& trace, std::vector<Violation>& out) {
  int python = 0;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    if (t->producer.rfind("ddph_audit", 0) != 0 || t->processGroupBackend) return;
    if (!t->endedNormally()) return;  // a rank that failed first: that failure is the finding
    ++python;
  }
  if (python == 0) return;
  Violation v;
  v.property = std::string(property::kProcessGroup);
  v.detail = fmt::format("no rank initialized a process group: {} of {} rank{} traced, none "
                         "called init_process_group, so nothing was distributed",
                         python, trace.worldSize, trace.worldSize == 1 ? "" : "s");
  v.likelyCause = "each process trained alone";
  v.help = "call torch.distributed.init_process_group in every rank (a program that starts its "
           "ranks with torch.multiprocessing.spawn is audited through them, docs/audit.md)";
  out.push_back(std::move(v));
}

// "raised ValueError: corrupt sample 28 (in a DataLoader worker) at train.py:28 in __getitem__":
// the error's own line first, where the program raised it, the wrapped traceback left out.
std::string raisedText(const RankTrace& t) {
  std::string what = t.errorLastLine ? *t.errorLastLine
                                     : fmt::format("{}: {}", *t.errorType, t.errorMessage.value_or(""));
  if (t.errorLastLine && t.errorMessage && t.errorMessage->rfind("Caught ", 0) == 0 &&
      t.errorMessage->find("DataLoader worker") != std::string::npos) {
    what += " (in a DataLoader worker process)";
  }
  if (t.errorWhere) what += " at " + *t.errorWhere;
  return "raised " + what;
}

bool isPeerLost(const RankTrace& t) {
  if (!t.errorMessage) return false;
  for (const auto& known : kKnownErrors) {
    if (known.cause == kPeerLost && t.errorMessage->find(known.part) != std::string::npos) return true;
  }
  return false;
}

// Errors whose type alone says the program could not start its work: not a distributed bug.
Explanation startupCause(const RankTrace& t) {
  if (*t.errorType == "ModuleNotFoundError" || *t.errorType == "ImportError") {
    return {"the program failed at an import, before any distributed work: the module is missing "
            "from this interpreter or misspelt; not a distributed bug",
            "install it, or run the program with the interpreter that has it"};
  }
  if (*t.errorType == "FileNotFoundError" || *t.errorType == "PermissionError") {
    return {"the program failed to open a file it needs on this machine (a path or a "
            "permission); not a distributed bug",
            ""};
  }
  return {};
}

// Every rank that raised raised the same error at the same place: the program's own error.
Explanation sameErrorCause(const RankTrace& t) {
  if (Explanation e = startupCause(t); !e.empty()) return e;
  return {"the ranks raised the same error at the same place, so it comes from the program's own "
          "code, data or environment, not from one rank's state or from the distribution",
          "fix it there (the program run once on its own shows the full traceback)"};
}

int raisedCount(const Trace& trace) {
  return static_cast<int>(std::count_if(trace.ranks.begin(), trace.ranks.end(),
                                        [](const auto& t) { return t && t->errorType; }));
}

// A rank that failed without raising, whose way of ending names no cause of its own: what its
// ending says and the candidates it leaves (never the catalogue's generic "OOM kill, exception").
Explanation endingCause(const Trace& trace, const RankTrace* t, const LaunchedRank* l) {
  if (!t) {
    return {"the trace holds nothing of this rank, so what ended it is in the rank's own output "
            "(the error it printed before the recorder started: the interpreter, an import, the "
            "launcher), or its trace went to another folder",
            ""};
  }
  if (l && l->outcome == "signaled" && l->signal == 9) {
    return {"SIGKILL comes from outside the program: the kernel's out-of-memory killer (dmesg, "
            "the job's memory limit), a scheduler's limit or a person; the trace cannot tell which",
            ""};
  }
  if (l && l->outcome == "signaled") {
    return {fmt::format("a crash in native code ({}): torch, an extension, or a DataLoader "
                        "worker's shared memory (SIGBUS when /dev/shm is full)",
                        signalName(l->signal)),
            fmt::format("run the rank with {} -X faulthandler to see where", interpreterOf(trace))};
  }
  const bool hung = (l && l->outcome == "timed-out") || (!l && trace.launch && trace.launch->timedOut);
  const CollectiveRecord* last = t->lastCollective();
  if (hung && last && !last->done) {
    return {"it waited in a collective that a peer never completed: a peer that failed, hung or "
            "left its loop, or collectives that differ across ranks (any such finding above is "
            "the cause)",
            ""};
  }
  if (hung && !t->groupCalls.empty() && t->groupCalls.back().line == t->lines) {
    return {fmt::format("it hung inside {}, the last thing it did: a call of the whole world "
                        "that the other ranks did not make alike (the collective-mismatch finding "
                        "above, if any, is the cause)",
                        describeGroupCall(t->groupCalls.back())),
            ""};
  }
  if (hung) {
    return {"it hung outside any collective: in the program's own code, a DataLoader worker or "
            "at exit; the trace cannot tell where",
            "dump its stack (py-spy dump, or faulthandler.dump_traceback_later) when it hangs"};
  }
  if (t->ended) {
    return {fmt::format("the program ended with exit code {} without an exception (sys.exit or "
                        "os._exit on this rank)",
                        t->endCode),
            ""};
  }
  if (l && l->outcome == "exited") {  // the launcher saw a plain exit: no signal, no crash
    return {fmt::format("the process exited with code {} without running Python's exit "
                        "handlers: os._exit({}) in the program or a library, or exit() from "
                        "native code, at the point shown",
                        l->code, l->code),
            ""};
  }
  return {"its trace has no end: killed (SIGKILL, the out-of-memory killer), crashed in native "
          "code, or still running when the trace was read; the trace cannot tell which",
          "check the rank's log and exit status"};
}

// A rank that raised an error no known cause explains, other than on every rank alike.
Explanation raisedCause(const std::vector<std::int64_t>& ranks) {
  const bool one = ranks.size() == 1;
  return {fmt::format("{} raised the error {} (the line above), and the ranks waiting for {} in "
                      "a collective fail or hang after it; the trace cannot tell why {} raised it "
                      "(data, state or environment that differ per rank)",
                      rankList(ranks), one ? "itself" : "themselves", one ? "it" : "them",
                      one ? "this rank" : "these ranks"),
          "read the full traceback in the rank's log"};
}

// NOTE [The rank that never arrived] (docs/audit.md "A rank that never arrived"): ranks that
// failed or hung inside collective #k of a group waited for the members that never entered #k;
// ranks that raised a timeout in a collective the recorder does not see (one torch makes itself,
// as DDP's bucket rebuild in forward) waited for the ranks behind them. Such a rank that neither
// finished nor failed on its own is what they waited for: one finding names it, the collective and
// what the waiting ranks saw; the waiting ranks' own failures follow from it. Not when the
// launcher was interrupted: it stopped every rank wherever it was.
struct NeverArrived {
  bool found = false;
  const CollectiveRecord* collective = nullptr;  ///< as a waiting rank recorded it; null: unseen
  std::vector<std::int64_t> waiting, missing;
};

bool failedOnItsOwn(const Trace& trace, const RankTrace& t, const LaunchedRank* l) {
  if (l && l->outcome == "signaled") return false;
  return !t.endedNormally() || !launcherFailure(trace, l).empty();
}

bool inUnfinishedCollective(const RankTrace& t) {
  const CollectiveRecord* c = t.lastCollective();
  return c && !c->done;
}

bool raisedTimeout(const RankTrace& t) {
  if (!t.errorMessage) return false;
  return t.errorMessage->find("Timed out") != std::string::npos ||
         t.errorMessage->find("timed out") != std::string::npos;
}

bool enteredCollective(const RankTrace& t, const CollectiveRecord& c) {
  const auto it = t.collectives.find(c.group);
  if (it == t.collectives.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](const CollectiveRecord& mine) { return mine.seq == c.seq; });
}

// (epoch, step) of the last batch the rank was handed; (-1, -1) before its first.
std::pair<std::int64_t, std::int64_t> position(const RankTrace& t) {
  const PassRecord* p = lastBatchPass(t);
  if (!p) return {-1, -1};
  return {p->iter, p->batches.back().seq};
}

// A rank alive elsewhere while the others waited: a trace without an end or an error, in no
// collective (blocked in another would be a desync), ended by the launcher (or no record).
bool aliveElsewhere(const Trace& trace, int r) {
  const auto& t = trace.ranks[static_cast<std::size_t>(r)];
  const LaunchedRank* l = launched(trace, r);
  const bool endedByLauncher = !l || l->outcome == "stopped" || l->outcome == "timed-out";
  return t && !t->ended && !t->errorType && endedByLauncher && !inUnfinishedCollective(*t);
}

// Members of `c`'s group alive elsewhere that never entered `c`.
std::vector<std::int64_t> absentFrom(const Trace& trace, const RankTrace& waiter,
                                     const CollectiveRecord& c) {
  std::vector<std::int64_t> members;
  if (const auto g = waiter.groups.find(c.group); g != waiter.groups.end()) {
    members = g->second;
  } else {
    for (int r = 0; r < trace.worldSize; ++r) members.push_back(r);
  }
  std::vector<std::int64_t> absent;
  for (std::int64_t r : members) {
    if (r < 0 || r >= trace.worldSize || !aliveElsewhere(trace, static_cast<int>(r))) continue;
    if (!enteredCollective(*trace.ranks[static_cast<std::size_t>(r)], c)) absent.push_back(r);
  }
  return absent;
}

// Ranks waiting inside a recorded collective, by collective: the one with most waiting ranks
// whose group has an absent member.
NeverArrived inRecordedCollective(const Trace& trace) {
  NeverArrived found;
  std::map<std::pair<std::string, std::int64_t>, NeverArrived> byCollective;
  for (int r = 0; r < trace.worldSize; ++r) {
    const auto& t = trace.ranks[static_cast<std::size_t>(r)];
    if (!t || !inUnfinishedCollective(*t) || !failedOnItsOwn(trace, *t, launched(trace, r)))
      continue;
    const CollectiveRecord* c = t->lastCollective();
    NeverArrived& n = byCollective[{c->group, c->seq}];
    if (!n.collective) {
      n.collective = c;
      n.missing = absentFrom(trace, *t, *c);
    }
    n.waiting.push_back(r);
  }
  for (auto& [key, n] : byCollective) {
    if (!n.missing.empty() && (!found.found || n.waiting.size() > found.waiting.size())) {
      found = std::move(n);
      found.found = true;
    }
  }
  return found;
}

// Ranks that raised a timeout outside every recorded collective, and the ranks alive elsewhere
// behind all of them (an earlier batch).
NeverArrived inUnseenCollective(const Trace& trace) {
  NeverArrived n;
  for (int r = 0; r < trace.worldSize; ++r) {
    const auto& t = trace.ranks[static_cast<std::size_t>(r)];
    if (t && raisedTimeout(*t) && !inUnfinishedCollective(*t)) n.waiting.push_back(r);
  }
  if (n.waiting.empty()) return n;
  for (int r = 0; r < trace.worldSize; ++r) {
    if (!aliveElsewhere(trace, r)) continue;
    const auto mine = position(*trace.ranks[static_cast<std::size_t>(r)]);
    const bool behind = std::all_of(n.waiting.begin(), n.waiting.end(), [&](std::int64_t w) {
      return mine < position(*trace.ranks[static_cast<std::size_t>(w)]);
    });
    if (behind) n.missing.push_back(r);
  }
  n.found = !n.missing.empty();
  return n;
}

NeverArrived findNeverArrived(const Trace& trace) {
  if (trace.launch && trace.launch->interruptedBy != 0) return {};
  NeverArrived n = inRecordedCollective(trace);
  return n.found ? n : inUnseenCollective(trace);
}

// What the first waiting rank that raised saw ("rank 0 raised TimeoutError: … timed out after
// 5000 ms"), else how the launcher saw the first one end; empty when that is its deadline (said
// already).
std::string whatTheWaitingSaw(const Trace& trace, const NeverArrived& n) {
  for (std::int64_t r : n.waiting) {
    const RankTrace& t = *trace.ranks[static_cast<std::size_t>(r)];
    if (t.errorType) return fmt::format("rank {} {}", r, raisedText(t));
  }
  if (trace.launch && trace.launch->timedOut) return {};
  const int first = static_cast<int>(n.waiting.front());
  return fmt::format("rank {} {}", first, launcherFailure(trace, launched(trace, first)));
}

// Why the ranks never arrived: stopped (state T), alive elsewhere, or what their trace cannot say.
Explanation neverArrivedCause(const Trace& trace, const std::vector<std::int64_t>& frozen, bool one,
                              bool deadline) {
  const std::string until =
      deadline ? "until the run's deadline stopped them" : "until their collective timed out";
  if (!frozen.empty()) {
    return {fmt::format("{} stopped (SIGSTOP, a debugger, a frozen host or container) and never "
                        "answered, so the others waited for {} in the collective {}; a hang, not "
                        "a crash",
                        rankList(frozen), frozen.size() == 1 ? "it" : "them", until),
            "look at what stopped it"};
  }
  if (trace.launch) {
    return {fmt::format("{} alive elsewhere while the others waited {}: hung or slow outside any "
                        "collective (in the program's own code, data loading, I/O or a lock); "
                        "the trace cannot tell where",
                        one ? "it was" : "they were", until),
            "dump its stack (py-spy dump, or faulthandler.dump_traceback_later) when it hangs"};
  }
  return {"its trace has no end and it never entered the collective: killed, crashed, or hung "
          "outside any collective",
          "check its log and exit status"};
}

Violation neverArrivedFinding(const Trace& trace, const NeverArrived& n) {
  Violation v;
  v.property = std::string(property::kRankFailure);
  v.ranks = n.missing;
  const bool one = n.missing.size() == 1;
  const RankTrace& first = *trace.ranks[static_cast<std::size_t>(n.missing.front())];
  std::tie(v.epoch, v.step) = position(first);
  std::vector<std::int64_t> frozen;
  for (std::int64_t r : n.missing) {
    const LaunchedRank* l = launched(trace, static_cast<int>(r));
    if (l && l->wasStopped) frozen.push_back(r);
  }
  const std::string stopped =
      frozen.empty() ? ""
                     : fmt::format(
                           " ({} {} stopped, not crashed: state T, as after a SIGSTOP, a "
                           "debugger or a frozen host)",
                           rankList(frozen), frozen.size() == 1 ? "was" : "were");
  const bool deadline = trace.launch && trace.launch->timedOut && trace.launch->deadlineS;
  const std::string saw = whatTheWaitingSaw(trace, n);
  const RankTrace& waiter = *trace.ranks[static_cast<std::size_t>(n.waiting.front())];
  const std::string which =
      n.collective
          ? fmt::format("{}: {}", collectiveNumber(*n.collective),
                        describeCollective(*n.collective))
          : fmt::format("one inside torch that the trace does not record ({} timed out{}, {})",
                        n.waiting.size() == 1 ? "it" : "they",
                        waiter.errorWhere ? " at " + *waiter.errorWhere : "",
                        whereRankStood(waiter));
  v.detail = fmt::format(
      "{} never reached the collective the others waited in, {}{}; {} stood {}; {} waited in "
      "it{}{}",
      rankList(n.missing), which, stopped, one ? "it" : fmt::format("rank {}", n.missing.front()),
      whereRankStood(first), rankList(n.waiting),
      deadline ? fmt::format(" until the run outlived its deadline of {:g} s and every rank was "
                             "stopped",
                             *trace.launch->deadlineS)
               : "",
      saw.empty() ? "" : ": " + saw);
  explain(v, neverArrivedCause(trace, frozen, one, deadline));
  return v;
}

struct RankFinding {
  Violation v;
  std::string key;     ///< what must agree for ranks to share one finding (empty: never shared)
  std::string shared;  ///< the shared finding's text after its list of ranks
  /// -1 a rank killed by a signal or that never arrived, 0 the first rank to raise, 1 the others,
  /// 2 consequences (peer lost)
  int order = 1;
};

// The same error, at the same place, on several ranks: one finding naming them all.
std::vector<RankFinding> mergeSameFailures(std::vector<RankFinding> found, const Trace& trace) {
  std::vector<RankFinding> merged;
  for (auto& f : found) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const RankFinding& m) {
      return !f.key.empty() && m.key == f.key;
    });
    if (it == merged.end()) {
      merged.push_back(std::move(f));
      continue;
    }
    it->v.ranks.push_back(f.v.ranks.front());
    it->order = std::min(it->order, f.order);
  }
  for (auto& m : merged) {
    if (m.v.ranks.size() < 2) continue;
    const RankTrace& t = *trace.ranks[static_cast<std::size_t>(m.v.ranks.front())];
    m.v.detail = fmt::format("{} {}", rankList(m.v.ranks), m.shared);  // "it stood": "they stood"
    for (const auto& [one, all] : {std::pair<std::string, std::string>{"; it stood", "; they stood"},
                                   {"before its first batch", "before their first batch"},
                                   {"; it had entered no collective", "; none had entered a collective"},
                                   {"; it was in collective", "; they were in collective"}}) {
      if (const auto at = m.v.detail.find(one); at != std::string::npos) m.v.detail.replace(at, one.size(), all);
    }
    if (m.v.likelyCause.empty() && static_cast<int>(m.v.ranks.size()) == raisedCount(trace)) {
      explain(m.v, sameErrorCause(t));
    }
  }
  return merged;
}

// How a failed rank ended, in words after "rank R ".
std::string howItEnded(const Trace& trace, const RankTrace& t, const std::string& byLauncher) {
  if (t.errorType) return raisedText(t);
  if (!byLauncher.empty()) return byLauncher;
  if (t.ended) return fmt::format("exited with code {}", t.endCode);
  if (trace.launch && trace.launch->timedOut) {  // a rank the launcher did not start
    return "was still running at the launcher's timeout (a hang)";
  }
  return "ended without finishing (killed, crashed or hung: its trace has no end)";
}

// The likely cause of rank `t`'s failure that its own trace shows, or empty.
Explanation failureCause(const Trace& trace, const RankTrace& t, const LaunchedRank* l) {
  Explanation e = knownErrorCause(trace, t);
  if (e.empty() && t.errorType) e = startupCause(t);
  if (e.empty() && !t.errorType) e = endingCause(trace, &t, l);
  return e;
}

// A hang at exit with DDP modules alive at destroy_process_group (torch 1.13): said, and its cause.
void nameHangAtExit(Violation& v, const RankTrace& t, const LaunchedRank* l) {
  if (!hungAtExitWithDdpAlive(t, l)) return;
  v.detail += fmt::format("; it had destroyed its process group with DDP module {} still alive",
                          fmt::join(*t.ddpAliveAtDestroy, ", "));
  v.likelyCause =
      "a hang at exit (torch 1.13): a DDP module that outlives destroy_process_group holds the "
      "last reference to the gloo group, and freeing it deadlocks on the GIL";
  v.help = "delete the DDP module (del model) before dist.destroy_process_group()";
}

// Ranks that lost their peer in the same collective share one finding whatever the address in
// their message; other errors when they are the same error at the same place.
void shareSameFailure(RankFinding& f, int r, const RankTrace& t, const std::string& how,
                      const std::string& rest, bool peerLost) {
  if (peerLost) {
    const std::string at = t.errorWhere ? " at " + *t.errorWhere : "";
    f.key = "peer lost: " + *t.errorType + at + rest;
    f.shared = fmt::format("raised {}{}: their connection to a peer closed or reset (rank {}: "
                           "{}){}",
                           *t.errorType, at, r, t.errorMessage.value_or(""), rest);
  } else if (t.errorType) {
    f.key = f.shared = how + rest;
  }
}

// The finding of rank `r`, which left a trace and failed.
RankFinding failedRank(const Trace& trace, int r, const RankTrace& t, const LaunchedRank* l,
                       const std::string& byLauncher, bool stoppedByOthers,
                       const FirstRaised& first) {
  Violation v;
  v.property = std::string(property::kRankFailure);
  v.ranks = {r};
  const std::string how = howItEnded(trace, t, byLauncher);
  const CollectiveRecord* last = t.lastCollective();
  std::tie(v.epoch, v.step) =
      last && !last->done ? std::make_pair(last->iter, last->batchSeq) : position(t);
  const std::string launcherSide = t.errorType && !byLauncher.empty() && !stoppedByOthers
                                       ? fmt::format(" ({})", byLauncher)
                                       : "";
  const std::string rest = fmt::format("; it stood {}; {}", whereRankStood(t), collectiveState(t));
  const bool peerLost = isPeerLost(t);
  const bool raisedFirst = t.errorType && r == first.rank && !peerLost;
  v.detail = fmt::format("rank {} {}{}{}{}", r, how,
                         raisedFirst ? fmt::format(" (the first rank to raise, {:.3f} s before "
                                                   "rank {})",
                                                   first.lead, first.next)
                                     : "",
                         launcherSide, rest);
  explain(v, failureCause(trace, t, l));
  nameHangAtExit(v, t, l);
  // A rank killed by a signal failed of its own (the launcher's stops are "stopped"): first.
  const bool killed = l && l->outcome == "signaled";
  RankFinding f{std::move(v), {}, {}, killed ? -1 : raisedFirst ? 0 : (peerLost ? 2 : 1)};
  shareSameFailure(f, r, t, how, rest, peerLost);
  return f;
}

// The finding of rank `r`, or nothing: it ended normally, or its end follows from another's.
std::optional<RankFinding> rankFinding(const Trace& trace, int r, const FirstRaised& first) {
  const LaunchedRank* l = launched(trace, r);
  const std::string byLauncher = launcherFailure(trace, l);
  const auto& t = trace.ranks[static_cast<std::size_t>(r)];
  // A rank the launcher stopped because another failed is that failure's consequence, not a
  // finding of its own (whether it had finished its work, or even opened its trace, first is a
  // race): only a rank that raised an error itself is reported.
  const bool stoppedByOthers = l && l->outcome == "stopped" && trace.launch->interruptedBy == 0;
  if (!t && stoppedByOthers) return std::nullopt;
  // A rank stopped because the user interrupted the launcher (Ctrl-C) failed at nothing: the
  // report's note and the launcher's one line say where the run was (docs/audit.md).
  const bool stoppedByUser = l && l->outcome == "stopped" && trace.launch->interruptedBy != 0;
  if (stoppedByUser && !(t && t->errorType)) return std::nullopt;
  if (!t) {
    Violation v;
    v.property = std::string(property::kRankFailure);
    v.ranks = {r};
    v.detail = fmt::format(
        "rank {} left no trace{}: it never ran the recorder (it failed before importing torch, "
        "or is not a program the audit watches) or its trace folder is not the others'",
        r, byLauncher.empty() ? "" : "; it " + byLauncher);
    explain(v, endingCause(trace, nullptr, l));
    return RankFinding{std::move(v), {}, {}, 1};
  }
  if (stoppedByOthers && !t->errorType) return std::nullopt;
  const bool failed = !t->endedNormally() || !byLauncher.empty();
  if (!failed) return std::nullopt;
  return failedRank(trace, r, *t, l, byLauncher, stoppedByOthers, first);
}

// NOTE [Hung at exit] (core/launch/src/exit_hang.h): ranks the launcher ended after their work,
// hung at exit, are a note: their work is judged like any rank's, and the job did end.
void noteHungAtExit(const Trace& trace, std::vector<std::string>& notes) {
  std::vector<std::int64_t> inDdpFree, inTeardown;
  std::vector<std::int64_t> ddpAlive;
  for (int r = 0; r < trace.worldSize; ++r) {
    const auto& t = trace.ranks[static_cast<std::size_t>(r)];
    if (!t || !t->hungAtExit) continue;
    if (t->ddpAliveAtDestroy && !t->ddpAliveAtDestroy->empty()) {
      inDdpFree.push_back(r);
      if (ddpAlive.empty()) ddpAlive = *t->ddpAliveAtDestroy;
    } else {
      inTeardown.push_back(r);
    }
  }
  const auto verb = [](const std::vector<std::int64_t>& ranks) {
    return ranks.size() == 1 ? "it" : "each";
  };
  if (!inDdpFree.empty()) {
    notes.push_back(fmt::format(
        "{} hung at exit after {} work: {} had destroyed its process group with DDP module {} "
        "still alive, and freeing that module never returned (torch 1.13's gloo teardown "
        "deadlock, pytorch/pytorch#75097); the launcher ended {} once it sat blocked. Not a "
        "finding: the work is judged like every rank's. help: delete the DDP module (del model) "
        "before dist.destroy_process_group(), so that the job ends on its own",
        rankList(inDdpFree), inDdpFree.size() == 1 ? "its" : "their", verb(inDdpFree),
        fmt::join(ddpAlive, ", "), inDdpFree.size() == 1 ? "it" : "them"));
  }
  if (!inTeardown.empty()) {
    notes.push_back(fmt::format(
        "{} hung at exit after {} work: {} program had ended (its trace's last line), and the "
        "interpreter's teardown never returned; the launcher ended {} once it sat blocked. Not a "
        "finding: the work is judged like every rank's",
        rankList(inTeardown), inTeardown.size() == 1 ? "its" : "their",
        inTeardown.size() == 1 ? "its" : "each", inTeardown.size() == 1 ? "it" : "them"));
  }
}

}  // namespace

void checkRanks(const Trace& trace, std::vector<Violation>& out, std::vector<std::string>& notes) {
  noteHungAtExit(trace, notes);
  checkProcessGroup(trace, out);
  const FirstRaised first = firstRaised(trace);
  std::vector<RankFinding> found;
  const NeverArrived never = findNeverArrived(trace);
  const auto explained = [&](int r) {
    const auto in = [r](const std::vector<std::int64_t>& ranks) {
      return std::find(ranks.begin(), ranks.end(), r) != ranks.end();
    };
    return never.found && (in(never.missing) || in(never.waiting));
  };
  for (int r = 0; r < trace.worldSize; ++r) {
    if (explained(r)) continue;
    if (auto f = rankFinding(trace, r, first)) found.push_back(std::move(*f));
  }
  std::vector<RankFinding> merged = mergeSameFailures(std::move(found), trace);
  if (never.found) merged.push_back({neverArrivedFinding(trace, never), {}, {}, -1});
  // The failure the others follow from first, the ranks that lost their peer last.
  std::stable_sort(merged.begin(), merged.end(),
                   [](const RankFinding& a, const RankFinding& b) { return a.order < b.order; });
  for (auto& m : merged) {
    if (m.v.likelyCause.empty() && !m.v.ranks.empty()) explain(m.v, raisedCause(m.v.ranks));
    out.push_back(std::move(m.v));
  }
}

}  // namespace ddph::audit
