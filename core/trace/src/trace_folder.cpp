// The folders of a run's trace (docs/trace-format.md): one folder read into a Trace (its rank
// files, launch.json, the spawners' files, torchrun's later attempts beside it), and the folders of
// one run read together (its nodes' folders merged into one job, its resumed jobs in order).
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "ddph/trace/trace.h"
#include "ddph/common/error.h"
#include "ddph/trace/launch_record.h"
#include "loader_ids.h"
#include "trace_schema.h"

namespace ddph::trace {

using common::ConfigError;

namespace fs = std::filesystem;
namespace ts = trace_schema;
using nlohmann::json;

fs::path attemptFolder(const fs::path& dir, int attempt) {
  return attempt == 0 ? dir : dir / fmt::format("attempt-{}", attempt);
}

namespace {

// The files `<kind>-<N>.jsonl` in `dir` (kind "rank": by rank; "spawner": by pid).
std::map<int, fs::path> filesIn(const fs::path& dir, const std::regex& pattern, std::error_code& ec) {
  std::map<int, fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, pattern)) files[std::stoi(m[1].str())] = entry.path();
  }
  return files;
}

std::map<int, fs::path> rankFilesIn(const fs::path& dir, std::error_code& ec) {
  static const std::regex kRankFile(R"(rank-(\d{1,9})\.jsonl)");
  return filesIn(dir, kRankFile, ec);
}

// The spawners' files (torch.multiprocessing.spawn in a launched process), read.
std::vector<RankTrace> readSpawners(const fs::path& dir) {
  static const std::regex kSpawnerFile(R"(spawner-(\d{1,9})\.jsonl)");
  std::error_code ec;
  std::vector<RankTrace> spawners;
  for (const auto& [pid, file] : filesIn(dir, kSpawnerFile, ec)) {
    spawners.push_back(readRankTrace(file));
  }
  return spawners;
}

// The ranks the spawners started, together.
std::int64_t spawnedRanks(const Trace& trace) {
  std::int64_t spawned = 0;
  for (const auto& s : trace.spawners) spawned += s.spawnedRanks;
  return spawned;
}

std::string spawnNote(const Trace& trace, std::int64_t spawned) {
  const std::string method = trace.spawners.front().spawnMethod;
  return fmt::format("the program started its own ranks: {} process{} started {} rank{} "
                     "(torch.multiprocessing, start method {})",
                     trace.spawners.size(), trace.spawners.size() == 1 ? "" : "es", spawned,
                     spawned == 1 ? "" : "s", method.empty() ? "spawn" : method);
}

// The run id in the header of `file` (its first line), or nullopt when it cannot be read.
std::optional<std::string> headerRunId(const fs::path& file) {
  std::ifstream in(file);
  std::string first;
  if (!std::getline(in, first)) return std::nullopt;
  const json header = json::parse(first, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object() || header.find(ts::kEv) == header.end() ||
      header[ts::kEv] != ts::header::kEvent) {
    return std::nullopt;
  }
  const auto id = header.find(ts::header::kRunId);
  return id != header.end() && id->is_string() ? id->get<std::string>() : "";
}

// The attempts after `attempt` of run `runId` whose folders (attemptFolder(base, K)) hold a rank
// file, in order. A folder left by another run (its run id differs) is not one of them.
std::vector<int> laterAttemptsIn(const fs::path& base, int attempt, const std::string& runId) {
  static const std::regex kAttemptFolder(R"(attempt-(\d{1,9}))");
  std::vector<int> later;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, kAttemptFolder) || !entry.is_directory(ec)) continue;
    std::error_code listed;
    const int k = std::stoi(m[1].str());
    const auto files = rankFilesIn(entry.path(), listed);
    if (k <= attempt || files.empty()) continue;
    if (runId.empty() || headerRunId(files.begin()->second) == runId) later.push_back(k);
  }
  std::sort(later.begin(), later.end());
  return later;
}

// The folder that holds `dir` ("t/attempt-1/", "." inside it: the same folder above).
fs::path folderAbove(const fs::path& dir) {
  std::error_code ec;
  fs::path clean = fs::absolute(dir, ec).lexically_normal();
  if (!clean.has_filename()) clean = clean.parent_path();  // a trailing separator
  return clean.parent_path();
}

std::string attemptsNote(const Trace& t, const fs::path& base) {
  std::string later;
  for (const auto& folder : t.laterAttempts) {
    later += fmt::format("{}{}", later.empty() ? "" : ", ", folder.string());
  }
  const std::string which =
      t.attempt == 0 ? "this report judges the run's first attempt"
                     : fmt::format("this report judges attempt {} of the run (torchrun restarted "
                                   "its ranks {} time(s) before; the first attempt is in {})",
                                   t.attempt, t.attempt, base.string());
  if (later.empty()) return which;
  return fmt::format("{}; torchrun restarted the ranks after it: audit the later attempts with "
                     "ddp-sim audit {}",
                     which, later);
}

// A rank killed while it created its file leaves it empty, or its header line cut short before
// its '\n' (the rest NUL bytes, the writer's reserved tail).
bool headerCutShort(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string first;
  std::getline(in, first);
  return in.eof() || first.find('\0') != std::string::npos;
}

// A rank whose program had destroyed its default process group, and raised nothing, when the
// launcher stopped it because another rank had failed: it had left its training normally
// (destroying the group closes its connections, so its peers may fail first; the rank may still
// be exiting, or stuck in torch 1.13's exit with a DDP module alive). Not after a timeout: a rank
// still there then hung, in destroy_process_group or elsewhere.
void markStoppedInDestroy(Trace& trace) {
  if (!trace.launch || trace.launch->timedOut) return;
  for (const auto& launched : trace.launch->ranks) {
    if (launched.outcome != "stopped" || launched.rank < 0 ||
        launched.rank >= static_cast<int>(trace.ranks.size()))
      continue;
    auto& t = trace.ranks[static_cast<std::size_t>(launched.rank)];
    if (!t || t->ended || t->errorType || !t->ddpAliveAtDestroy) continue;
    t->ended = true;
    t->endCode = 0;
    t->stoppedInDestroy = true;
  }
}

// A rank the launcher ended as hung at exit after its work (NOTE [Hung at exit]): what its trace
// says it did stands, and it ended normally unless its own `end` says otherwise.
void markHungAtExit(Trace& trace) {
  if (!trace.launch) return;
  for (const auto& launched : trace.launch->ranks) {
    if (launched.outcome != "hung-at-exit" || launched.rank < 0 ||
        launched.rank >= static_cast<int>(trace.ranks.size()))
      continue;
    auto& t = trace.ranks[static_cast<std::size_t>(launched.rank)];
    if (!t || t->errorType) continue;
    t->hungAtExit = true;
    if (!t->ended) {
      t->ended = true;
      t->endCode = 0;
    }
  }
}

// The rank files of `dir`, read; a file whose header was cut short (its rank ended while it
// created it) is left out with a note.
std::vector<RankTrace> readRankFiles(const std::map<int, fs::path>& files, Trace& trace) {
  std::vector<RankTrace> read;
  for (const auto& [rank, file] : files) {
    if (headerCutShort(file)) {
      trace.notes.push_back(
          fmt::format("rank {}: {} has no whole first line (the rank ended while "
                      "it created the file), read as a rank that left no trace",
                      rank, file.filename().string()));
      continue;
    }
    RankTrace t = readRankTrace(file);
    DDPH_CHECK(t.rank == rank, "{} says it is rank {}", file.string(), t.rank);
    read.push_back(std::move(t));
  }
  return read;
}

// Refuses rank files of different worlds, runs or attempts in one folder; notes a rank file
// whose last line was cut short.
void checkOneRun(const std::vector<RankTrace>& read, Trace& trace) {
  for (const auto& t : read) {
    const RankTrace& first = read.front();
    DDPH_CHECK(t.worldSize == first.worldSize, "{} has world size {} but {} has {}",
               t.file.filename().string(), t.worldSize, first.file.filename().string(),
               first.worldSize);
    DDPH_CHECK(t.runId == first.runId,
               "{} and {} come from different runs (run ids '{}' and '{}'): one trace folder "
               "per run",
               first.file.filename().string(), t.file.filename().string(), first.runId, t.runId);
    DDPH_CHECK(t.attempt == first.attempt,
               "{} and {} come from different attempts of the run ({} and {}): one folder per "
               "attempt",
               first.file.filename().string(), t.file.filename().string(), first.attempt,
               t.attempt);
    if (t.truncatedTail) {
      trace.notes.push_back(fmt::format("rank {}: the last line of {} was cut short (the rank was "
                                        "killed while writing it) and is ignored",
                                        t.rank, t.file.filename().string()));
    }
  }
}

// The run's world size: the ranks' own, else the spawned ranks', else the launcher's; and
// launch.json held to it (a spawners' folder: its processes are not the ranks).
void settleWorldSize(const std::vector<RankTrace>& read, Trace& trace) {
  const std::int64_t spawned = spawnedRanks(trace);
  trace.worldSize = !read.empty()           ? read.front().worldSize
                    : !trace.spawners.empty() ? static_cast<int>(std::max<std::int64_t>(spawned, 1))
                                              : trace.launch->worldSize;
  if (!trace.spawners.empty()) {
    // launch.json's processes are the spawners, so its outcomes are not the ranks'; what stays
    // is how the launch as a whole ended.
    if (trace.launch) trace.launch->ranks.clear();
    trace.notes.push_back(spawnNote(trace, spawned));
  } else {
    DDPH_CHECK(!trace.launch || trace.launch->worldSize == trace.worldSize,
               "launch.json says {} ranks but the traces say {}",
               trace.launch ? trace.launch->worldSize : 0, trace.worldSize);
  }
}

// Which attempt of a torchrun-restarted run `dir` holds, and the later attempts' folders.
void findAttempts(const fs::path& dir, const std::vector<RankTrace>& read, Trace& trace) {
  trace.attempt = read.empty() ? 0 : read.front().attempt;
  const fs::path base = trace.attempt == 0 ? dir : folderAbove(dir);
  for (int k : laterAttemptsIn(base, trace.attempt, read.empty() ? "" : read.front().runId)) {
    trace.laterAttempts.push_back(attemptFolder(base, k));
  }
  if (trace.attempt > 0 || !trace.laterAttempts.empty()) {
    trace.notes.push_back(attemptsNote(trace, base));
  }
}

// A folder with no rank file, no launch record and no spawner: none of a first attempt's.
[[noreturn]] void refuseEmptyFolder(const fs::path& dir) {
  const std::vector<int> attempts = laterAttemptsIn(dir, 0, "");
  DDPH_CHECK(attempts.empty(),
             "'{}' holds no trace of the run's first attempt (no rank-<R>.jsonl file), only "
             "later attempts: audit one with ddp-sim audit {}",
             dir.string(), attemptFolder(dir, attempts.front()).string());
  throw ConfigError(fmt::format("'{}' holds no trace (no rank-<R>.jsonl file)", dir.string()));
}

}  // namespace

Trace readTrace(const fs::path& dir) {
  std::error_code ec;
  DDPH_CHECK(fs::is_directory(dir, ec), "'{}' is not a folder", dir.string());
  const std::map<int, fs::path> files = rankFilesIn(dir, ec);
  DDPH_CHECK(!ec, "cannot list '{}': {}", dir.string(), ec.message());
  Trace trace;
  trace.dir = dir;
  trace.folders = {dir};
  trace.launch = readLaunchRecord(dir / trace_schema::launch_record::kFile);
  trace.spawners = readSpawners(dir);
  // A launched run whose ranks all died before recording anything is still a run to report.
  if (files.empty() && !trace.launch && trace.spawners.empty()) refuseEmptyFolder(dir);
  std::vector<RankTrace> read = readRankFiles(files, trace);
  DDPH_CHECK(!read.empty() || trace.launch || !trace.spawners.empty(),
             "'{}' holds no trace (every rank-<R>.jsonl file is empty)", dir.string());
  checkOneRun(read, trace);
  settleWorldSize(read, trace);
  findAttempts(dir, read, trace);
  trace.ranks.resize(static_cast<std::size_t>(trace.worldSize));
  for (auto& t : read) trace.ranks[static_cast<std::size_t>(t.rank)] = std::move(t);
  markStoppedInDestroy(trace);
  markHungAtExit(trace);
  alignLoaderIds(trace);
  return trace;
}

namespace {

// The first rank file read into `t`, or nullptr (a launch whose ranks left no file).
const RankTrace* firstRank(const Trace& t) {
  for (const auto& r : t.ranks) {
    if (r) return &*r;
  }
  return nullptr;
}

std::string runIdOf(const Trace& t) {
  const RankTrace* r = firstRank(t);
  return r ? r->runId : std::string();
}

// The program a trace ran: its script's (or executable's) file name, as the recorder saw argv.
std::string programOf(const Trace& t) {
  const RankTrace* r = firstRank(t);
  return r && !r->argv.empty() ? fs::path(r->argv.front()).filename().string() : std::string();
}

bool holdsEveryRank(const Trace& t) {
  return std::all_of(t.ranks.begin(), t.ranks.end(), [](const auto& r) { return r.has_value(); });
}

bool sharesARank(const Trace& a, const Trace& b) {
  for (std::size_t r = 0; r < a.ranks.size() && r < b.ranks.size(); ++r) {
    if (a.ranks[r] && b.ranks[r]) return true;
  }
  return false;
}

// `node`'s ranks, spawners, launch record and notes moved into `job` (a node's folder of it).
void mergeNode(Trace& job, Trace&& node) {
  for (std::size_t r = 0; r < node.ranks.size(); ++r) {
    if (node.ranks[r]) job.ranks[r] = std::move(node.ranks[r]);
  }
  for (auto& s : node.spawners) job.spawners.push_back(std::move(s));
  if (node.launch && !job.launch) {
    job.launch = std::move(node.launch);
  } else if (node.launch) {
    for (const auto& lr : node.launch->ranks) job.launch->ranks.push_back(lr);
    job.launch->exitCode = std::max(job.launch->exitCode, node.launch->exitCode);
    job.launch->timedOut = job.launch->timedOut || node.launch->timedOut;
  }
  for (auto& n : node.notes) job.notes.push_back(std::move(n));
  job.folders.push_back(node.dir);
}

}  // namespace

std::vector<Trace> readRun(const std::vector<fs::path>& dirs) {
  DDPH_CHECK(!dirs.empty(), "no trace folder given");
  std::vector<Trace> jobs;
  for (const auto& dir : dirs) {
    Trace t = readTrace(dir);
    if (jobs.empty()) {
      jobs.push_back(std::move(t));
      continue;
    }
    Trace& job = jobs.back();
    const std::string before = job.dir.string(), here = dir.string();
    const bool sameWorld = t.worldSize == job.worldSize && runIdOf(t) == runIdOf(job);
    if (!holdsEveryRank(job) && !sharesARank(job, t)) {
      // A part of the job's world: one of its nodes, which must be of the same run.
      DDPH_CHECK(sameWorld,
                 "'{}' and '{}' hold ranks of different runs (world sizes {} and {}, run ids '{}' "
                 "and '{}'): the nodes of one job share its world and run id (torchrun's "
                 "--rdzv-id)",
                 before, here, job.worldSize, t.worldSize, runIdOf(job), runIdOf(t));
      DDPH_CHECK(t.attempt == job.attempt,
                 "'{}' and '{}' hold different attempts of the run ({} and {}): give the nodes' "
                 "folders of one attempt",
                 before, here, job.attempt, t.attempt);
      mergeNode(job, std::move(t));
      continue;
    }
    // A job resumed from the one before it: the same program.
    DDPH_CHECK(programOf(t) == programOf(job),
               "'{}' and '{}' are not jobs of one run: their programs differ ({} and {})", before,
               here, programOf(job), programOf(t));
    jobs.push_back(std::move(t));
  }
  for (auto& job : jobs) alignLoaderIds(job);  // nodes merged: their ranks' loaders together
  return jobs;
}

}  // namespace ddph::trace
