#pragma once
// An audit trace read back: what each rank of a real program did, as its recorder wrote it.
//
// The format (one `rank-<R>.jsonl` per rank, plus the launcher's optional `launch.json`) is
// specified in docs/trace-format.md. This is its in-memory form: per rank the samplers, loaders,
// loader passes with their batches, collectives per group, DDP modules, and how the rank ended.
// Every event keeps its line number, which orders events within one rank.

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ddph/sampler/sampler.h"

namespace ddph::trace {

/// The trace format version this reader understands.
inline constexpr int kTraceVersion = 1;
/// The largest world a trace may declare (the reader keeps a slot per rank).
inline constexpr int kMaxTraceWorldSize = 1 << 16;
/// The most indices one index list may expand to (a run of 2^34 would ask for 128 GiB).
inline constexpr std::int64_t kMaxListedIndices = std::int64_t{1} << 26;

/// How the reader can know a sampler's full order for an epoch (see "sampler" in the format).
enum class OrderKind {
  kTorchDistributed,  ///< torch's DistributedSampler.__iter__: recomputed from its parameters
  kSequential,        ///< 0..N-1
  kRecorded,          ///< only the indices drawn are known (batch lines carry them)
};

/// One call of a sampler's set_epoch.
struct SetEpochCall {
  std::int64_t epoch = 0;
  std::int64_t line = 0;
};

struct SamplerRecord {
  std::int64_t id = 0;
  std::string className;
  std::int64_t datasetLen = 0;
  OrderKind order = OrderKind::kRecorded;
  std::optional<std::int64_t> numReplicas, rank, seed;
  std::optional<bool> shuffle, dropLast;
  /// Draws with replacement (RandomSampler(replacement=True), WeightedRandomSampler): judged by
  /// the `with-replacement` contract, not by coverage (docs/audit.md).
  std::optional<bool> replacement;
  /// The framework that built it where the program did not ("lightning": the DistributedSampler
  /// Lightning puts under a loader), or empty.
  std::string via;
  /// A sampler class of the program's own that defines set_epoch (`takes_epoch`): its order is
  /// meant to change with the epoch.
  bool takesEpoch = false;
  std::vector<SetEpochCall> setEpochCalls;  ///< in call order
  std::int64_t line = 0;  ///< the line that first described it
};

/// One part of a ConcatDataset, in the order the ConcatDataset holds it ("dataset_parts").
struct DatasetPart {
  std::string dataset;      ///< its class
  std::int64_t len = -1;    ///< -1: not known
  std::string name;         ///< the name the program gave it (a file name, a split), or empty
  std::string fingerprint;  ///< its listing's fingerprint, or empty
  std::string items;        ///< a TensorDataset's first, middle and last rows, hashed, or empty
  std::string content;      ///< a TensorDataset's rows hashed in no order, or empty
};

struct LoaderRecord {
  std::int64_t id = 0;
  std::int64_t sampler = -1;
  std::string dataset;
  std::int64_t datasetLen = 0;
  std::int64_t batchSize = 0;  ///< 0: not known (a batch_sampler without a batch_size)
  bool dropLast = false;
  bool torchBatching = true;  ///< batches are consecutive slices of the sampler's order
  std::int64_t numWorkers = 0;
  bool persistentWorkers = false;  ///< its workers (and their copy of the dataset) live across passes
  std::string builtAt;  ///< the program's line that made it ("train.py:45 in train_dataloader"), or empty
  std::string datasetFingerprint;  ///< the order the dataset lists its samples in (may be empty)
  std::string datasetItems;    ///< a TensorDataset's first, middle and last rows, hashed (may be empty)
  std::string datasetContent;  ///< a TensorDataset's rows hashed in no order (may be empty)
  /// A map-style dataset of the program's own holding its samples as column tensors: their
  /// names, and their rows hashed as datasetItems and datasetContent are (all may be empty).
  std::vector<std::string> datasetColumns;
  std::string columnItems, columnContent;
  std::vector<DatasetPart> datasetParts;  ///< a ConcatDataset's parts in order (empty: not one)
  /// A Subset's indices into its base dataset of `subsetOf` samples (the loader line's
  /// subset_indices): which samples of the base this rank's dataset holds.
  std::optional<std::vector<sampler::Index>> subsetIndices;
  std::int64_t subsetOf = 0;
  /// Iterators that yielded batches no training step used (`next(iter(loader))` for the batch
  /// size): not epochs, and not among the passes (docs/audit.md, "Passes and epochs").
  std::int64_t peeks = 0;
};

struct BatchRecord {
  std::int64_t seq = 0;
  std::int64_t size = 0;
  bool grad = true;
  /// present for recorded orders / custom batching
  std::optional<std::vector<sampler::Index>> indices;
  std::string fingerprint;  ///< content hash of a batch from an iterable dataset ("fp"), or empty
  std::vector<std::string> rows;  ///< each of its samples' content hash ("rows"), or none
  std::int64_t line = 0;
  std::optional<double> t;  ///< seconds since the rank's recorder started (the line's "t")
};

/// The hash of one DDP module's state, and how many backward passes it had run by then.
struct ParamsSnapshot {
  std::string hash;
  std::int64_t backwards = 0;
  /// At the end (`params`): each parameter's name and hash, those that do not train, and the
  /// weights of nn.Embedding(max_norm=…); empty where the recorder did not say.
  std::vector<std::pair<std::string, std::string>> parts;
  std::vector<std::string> frozen, renorm;
};

/// One pass over a loader: `iter(loader)` up to StopIteration or until it was dropped.
struct PassRecord {
  std::int64_t loader = 0;
  std::int64_t iter = 0;  ///< the loader's epoch: its passes counted from 0, peeks left out
  // The sampler's state when the pass started; samplerEpoch is the epoch its order was drawn with
  // (a `draw` line: set_epoch called between iter() and the first next() of a single-process
  // loader), epochAtIter the one at iter().
  std::optional<std::int64_t> samplerEpoch, epochAtIter, seed, numReplicas, rank;
  std::optional<bool> shuffle, dropLast;
  /// An iterable dataset's epoch: its last set_epoch's argument before the pass (`dataset_epoch`).
  std::optional<std::int64_t> datasetEpoch;
  std::int64_t datasetLen = 0;
  std::optional<std::int64_t> declaredBatches;      ///< len(loader)
  std::map<std::int64_t, ParamsSnapshot> params;    ///< DDP module id -> state at the start
  std::vector<BatchRecord> batches;
  bool ended = false;  ///< ran to StopIteration, or handed out len(loader) batches
  bool leftAtItsLength = false;  ///< ended by handing out len(loader) batches, no StopIteration seen
  /// The global generators its recorded order's first draw advanced ("torch", "random",
  /// "numpy": `global_draw`): its randomness comes from them.
  std::vector<std::string> globalDraws;
  /// An iterable dataset's forked workers: "worker generator fingerprint" for each generator a
  /// worker's first batch advanced, its state once worker_init_fn had run (`worker_rng`).
  std::vector<std::string> workerRng;
  std::int64_t startLine = 0;
  std::int64_t endLine = 0;  ///< line of epoch_end, or of the next pass / end of trace
};

struct CollectiveRecord {
  std::string group;
  std::int64_t seq = 0;
  std::string op, dtype;
  std::int64_t numel = 0;
  std::string src;  ///< "ddp" or "user"
  std::int64_t ddp = -1, bucket = -1, backward = -1, peer = -1;
  /// broadcast, reduce, gather, scatter and their *_object forms: the root rank, or -1.
  std::int64_t root = -1;
  /// A DDP bucket allreduce of zeros by a rank that ran out of inputs under torch's Join,
  /// shadowing the others' backward ("shadow").
  bool shadow = false;
  /// broadcast_object_list given a list display: the receiving ranks' results are thrown away.
  bool discarded = false;
  /// A program's DDP comm hook (op "comm_hook"): its qualified name ("post_localSGD_hook").
  std::string hook;
  /// A program's own call ("user"): the innermost frame of its own code that made it, and the
  /// framework the call went through from there ("lightning"), when the recorder said.
  std::string at, via;
  /// A synchronous all_reduce of at most 16 elements: its result (`coll_done`'s values), or none.
  std::vector<double> values;
  bool done = false;
  std::int64_t line = 0;
  std::optional<double> t, doneT;  ///< when it was entered and completed (the lines' "t")
  // Where the program stood: the most recent batch handed out before the call.
  std::int64_t loader = -1, iter = -1, batchSeq = -1;
};

struct DdpRecord {
  std::int64_t id = 0;
  std::string module;
  std::int64_t parameters = 0;
  std::int64_t forwards = 0;
  std::int64_t backwards = 0;
  /// Forwards with gradients enabled, outside and inside no_sync() (the `forward` line's "sync").
  std::int64_t syncedGradForwards = 0, unsyncedGradForwards = 0;
  std::int64_t gradFreeForwards = 0;  ///< forwards under no_grad (an evaluation, a logging pass)
  /// The buffers its forward broadcasts from rank 0 (a collective in every forward); unknown
  /// when the recorder did not say.
  std::optional<std::int64_t> broadcastBuffers;
  /// "all_reduce": not a DDP module but an optimizer's parameters, whose gradients the program
  /// all-reduces itself ("averaged_by"); empty for DDP.
  std::string averagedBy;
  /// Not a DDP module but the trainable parameters an optimizer steps that no DDP module holds
  /// (`outside_ddp`): nothing averages their gradients.
  bool outsideDdp = false;
  std::optional<ParamsSnapshot> atEnd;
};

/// What the CPU emulation of CUDA served a rank (an `emulation` line: `ddp-sim launch --cpu`).
struct EmulationRecord {
  std::string askedBackend;  ///< what the program passed to init_process_group ("nccl", …)
  std::int64_t gpus = 0;     ///< the stand-in devices torch.cuda.device_count() reported
  std::string autocast;      ///< "off" (float32) or "bf16" (CPU autocast)
};

/// A value logged through the framework with a reduction across ranks (`logged`).
struct LoggedValue {
  std::string name;
  std::string at;  ///< the program's own line ("train.py:41 in on_validation_epoch_end"), or empty
  std::int64_t line = 0;
};

/// A global random generator seeded by the program (`seed`).
struct SeedCall {
  std::string generator;  ///< "torch", "random", "numpy"
  std::optional<std::int64_t> value;
  std::string at;  ///< the program's line, or empty
  std::int64_t line = 0;
};

/// A call of new_group the program made (`group_call`, written before the call).
struct GroupCall {
  std::vector<std::int64_t> ranks;  ///< the global ranks asked for, sorted
  std::string at;                   ///< the program's line, or empty
  std::int64_t line = 0;
};

/// An averaged model (torch.optim.swa_utils.AveragedModel: SWA, EMA) as one rank updated and ran
/// it (`averaged`, `averaged_use`).
struct AveragedModelRecord {
  struct Use {
    std::int64_t updates = 0;  ///< the updates it had had on this rank then
    std::string hash;          ///< its parameters then
    std::string at;            ///< the program's line that ran it, or empty
  };
  std::int64_t updates = 0;  ///< update_parameters calls on this rank
  std::string updateAt;      ///< the program's line of its first update, or empty
  std::vector<Use> uses;     ///< its first forward after each update (or at all), in order
};

/// Everything one rank recorded.
struct RankTrace {
  std::filesystem::path file;
  int rank = 0;
  int worldSize = 0;
  std::string runId, producer, runtime;
  int attempt = 0;  ///< torchrun's restarts of the ranks before this one (header "attempt")
  std::vector<std::string> argv;
  /// Where it ran, as its launcher said (header): LOCAL_RANK, LOCAL_WORLD_SIZE, its node's rank
  /// (GROUP_RANK / NODE_RANK) and the host name it saw; unknown when the header has none.
  std::optional<int> localRank, localWorldSize, node;
  std::string hostname;
  std::map<std::int64_t, SamplerRecord> samplers;
  std::map<std::int64_t, LoaderRecord> loaders;
  std::vector<PassRecord> passes;  ///< in the order they started
  std::map<std::pair<std::int64_t, std::int64_t>, std::size_t> passIndex;  ///< (loader, iter) -> passes[i]
  std::map<std::string, std::vector<CollectiveRecord>> collectives;  ///< by group, in seq order
  std::map<std::string, std::vector<std::int64_t>> groups;           ///< non-default groups
  std::map<std::int64_t, DdpRecord> ddp;
  /// The lines of forwards with gradients of its DDP modules, ascending: a batch followed by none
  /// before the next batch trained nothing (a resumed job skipping what its checkpoint holds).
  std::vector<std::int64_t> gradForwardLines;
  /// Whether each of those forwards reduced its gradients (false: under no_sync()), in step.
  std::vector<bool> gradForwardSynced;
  /// The lines of its optimizers' step() calls (`step`), ascending; empty when not recorded.
  std::vector<std::int64_t> stepLines;
  /// The learning rate of each of those steps (its optimizer's first parameter group), when said.
  std::vector<std::optional<double>> stepLr;
  /// The hash of each live DDP module's gradients at those steps, on the sampled ones (steps 1 to
  /// 4 and every power of two), by module id; empty maps elsewhere.
  std::vector<std::map<std::int64_t, std::string>> stepGrads;
  /// How many parameters the optimizer held state for before each of those steps, on the sampled
  /// ones; nothing elsewhere.
  std::vector<std::optional<std::int64_t>> stepState;
  /// The training framework that drove its loop ("lightning 2.1.4"), or empty.
  std::string framework;
  /// Values logged through the framework with a reduction across ranks (`logged`: Lightning's
  /// self.log(..., sync_dist=True)), once per name and call site, in the order first logged.
  std::vector<LoggedValue> loggedWithSync;
  std::map<std::int64_t, AveragedModelRecord> averagedModels;  ///< by id
  std::vector<SeedCall> seeds;  ///< in call order
  std::vector<GroupCall> groupCalls;  ///< its new_group calls, in call order
  std::optional<std::string> errorType, errorMessage;
  /// The innermost frame of the program's own code ("train.py:28 in __getitem__"), and the error's
  /// own line when the message is a wrapped traceback (a DataLoader worker's).
  std::optional<std::string> errorWhere, errorLastLine;
  std::optional<double> errorT;     ///< the error line's "t"
  std::optional<double> startUnix;  ///< wall-clock seconds (Unix epoch) at "t" = 0 (header)
  /// DDP modules still alive when the program destroyed its default process group (`destroy`).
  std::optional<std::vector<std::int64_t>> ddpAliveAtDestroy;
  /// It ended inside destroy_process_group: stopped there by the launcher (another rank had
  /// failed) after its training was done. Counted as an `end` with code 0.
  bool stoppedInDestroy = false;
  /// Its work was done (its `end`, or its DDP modules freed after destroy_process_group) and its
  /// process hung at exit: `ddp-sim launch --audit` ended it (launch.json "hung-at-exit"; NOTE
  /// [Hung at exit]). Counted as an `end` with code 0 when it had none.
  bool hungAtExit = false;
  bool ended = false;  ///< an `end` line: the program exited normally
  std::int64_t endCode = 0;
  std::optional<EmulationRecord> emulation;  ///< the run was emulated (--cpu)
  /// The `process_group` line: the backend the rank's default process group runs on.
  std::optional<std::string> processGroupBackend;
  /// The line of that `process_group` event (init_process_group returned), or 0.
  std::int64_t processGroupLine = 0;
  std::int64_t spawnedRanks = 0;    ///< `spawn` lines: the ranks this process started
  std::string spawnMethod;          ///< their start method ("spawn", "fork")
  bool truncatedTail = false;  ///< the last line was cut short (a kill while writing)
  std::int64_t lines = 0;
  std::optional<double> lastT;  ///< the latest "t" of any line: when the rank was last heard of

  /// An `end` line with code 0 and no exception raised before it: a rank that ran out of work,
  /// not one that failed (Python writes `end` with the exit code after an uncaught exception).
  bool endedNormally() const { return ended && endCode == 0 && !errorType; }
  /// The pass of `loader` with iteration `iter`, or nullptr.
  const PassRecord* findPass(std::int64_t loader, std::int64_t iter) const;
  /// The last collective entered on any group (the highest line), or nullptr.
  const CollectiveRecord* lastCollective() const;
};

/// How the launcher saw one rank end (launch.json).
struct LaunchedRank {
  int rank = 0;
  long pid = 0;
  std::string outcome;  ///< "exited", "signaled", "timed-out", "stopped", "hung-at-exit"
  int code = 0;
  int signal = 0;
  /// It was in the stop state (T: SIGSTOP, a debugger, a frozen host) when the launcher ended it.
  bool wasStopped = false;
};

struct LaunchRecord {
  std::string launcher;  ///< "ddp-sim launch", "ddp-sim run"
  int worldSize = 0;
  int exitCode = 0;
  bool timedOut = false;
  std::optional<double> deadlineS;  ///< the launcher's deadline for the whole run, when it had one
  int interruptedBy = 0;
  std::vector<LaunchedRank> ranks;
  /// What the user ran (`ddp-sim launch`'s command after --, its interpreter as typed) and the
  /// launch options a rerun repeats; empty for `ddp-sim run` and older records.
  std::vector<std::string> command;
  bool cpu = false;           ///< --cpu
  std::optional<int> gpus;    ///< --gpus
  bool standInData = false;   ///< --stand-in-data
  /// Where the program depends on each process's own string hashing ("train.py:32 calls
  /// hash()"), as the launcher found it; empty when it did not.
  std::string hashDependence;
};

/// A whole trace folder.
struct Trace {
  std::filesystem::path dir;
  int worldSize = 0;
  std::vector<std::optional<RankTrace>> ranks;  ///< [r]: empty when rank r left no file
  std::optional<LaunchRecord> launch;
  /// The processes that started the ranks themselves (`spawner-<pid>.jsonl`:
  /// torch.multiprocessing.spawn); when there are any, launch.json describes them, not the ranks.
  std::vector<RankTrace> spawners;
  int attempt = 0;  ///< which attempt of the run this is (torchrun restarts; 0: the first)
  /// The later attempts' folders beside this one (attemptFolder(first, K), K > attempt), in order.
  std::vector<std::filesystem::path> laterAttempts;
  std::vector<std::string> notes;  ///< what the reader tolerated (cut last lines, …)
  /// The folders read into this trace: `dir` alone, or a job's nodes' folders merged (readRun).
  std::vector<std::filesystem::path> folders;
};

/// Where attempt `attempt` of a run writes its rank files: `dir` for the first, `dir/attempt-<K>`
/// after torchrun's K-th restart of the ranks, so a restart never replaces the trace of the
/// failure that caused it (docs/trace-format.md).
std::filesystem::path attemptFolder(const std::filesystem::path& dir, int attempt);

/// Reads `dir`. Throws ConfigError (one line naming the file and line) when the folder holds no
/// trace, a line is not JSON or not a valid event, versions or world sizes disagree, or two runs
/// or attempts are mixed. A last line cut short is tolerated and noted, and so are later
/// attempts of the run in `dir` (their folders are named, not read).
Trace readTrace(const std::filesystem::path& dir);

/// Reads the folders of one run (`ddp-sim audit DIR…`), in the order given, into its jobs:
/// consecutive folders that hold disjoint ranks of one world and one run id are the nodes of one
/// job (each torchrun agent writing its own folder) and are merged; a folder whose ranks the job
/// already holds starts the next job, one resumed from the job before it (docs/audit.md, "A run
/// of several jobs"). ConfigError (one line naming both folders) for folders of different runs:
/// nodes whose run ids or world sizes differ, or jobs of different programs.
std::vector<Trace> readRun(const std::vector<std::filesystem::path>& dirs);

/// Reads one rank's file (exposed for tests and fuzzing).
RankTrace readRankTrace(const std::filesystem::path& file);

/// Reads one rank's trace from `in` (no file needed: fuzz/audit_trace_fuzz.cpp); `file` names it
/// in errors and becomes RankTrace::file.
RankTrace readRankTrace(std::istream& in, const std::filesystem::path& file);

}  // namespace ddph::trace
