#include "ddph/trace/trace_writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ddph/trace/trace.h"
#include "ddph/common/environment.h"
#include "ddph/common/error.h"
#include "index_list.h"
#include "trace_schema.h"

namespace ddph::trace {

using sampler::Index;

namespace ts = trace_schema;
using nlohmann::ordered_json;

namespace {

double monotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double unixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// torchrun's restarts of this process's ranks so far ($TORCHELASTIC_RESTART_COUNT); 0 when unset
// or not a count.
int restartAttempt() {
  const char* text = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (!text || !*text) return 0;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(text, &end, 10);
  return errno == 0 && *end == '\0' && n > 0 && n < 1000000 ? static_cast<int>(n) : 0;
}

template <class T>
void putOptional(ordered_json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

}  // namespace

TraceWriter::TraceWriter(const std::filesystem::path& dir, int rank, int worldSize,
                         std::string runId, std::vector<std::string> argv, std::string producer,
                         int attempt, bool reportFailures)
    : path_(dir / fmt::format("rank-{}.jsonl", rank)),
      start_(monotonicSeconds()),
      reportFailures_(reportFailures) {
  namespace f = ts::header;
  file_ = std::fopen(path_.c_str(), "w");
  DDPH_CHECK(file_ != nullptr, "cannot write the audit trace '{}': {}", path_.string(),
             std::strerror(errno));
  ordered_json j = {{ts::kEv, f::kEvent}, {ts::kT, 0.0}, {f::kTrace, ts::kTraceName},
                    {f::kVersion, ts::kFormatVersion}, {f::kRank, rank}, {f::kWorldSize, worldSize},
                    {f::kRunId, runId}, {f::kAttempt, attempt}, {f::kStartUnix, unixSeconds()},
                    {f::kPid, static_cast<long>(::getpid())},
                    {f::kProducer, producer}, {f::kRuntime, "C++ (LibTorch)"}, {f::kArgv, argv}};
  line(j.dump());
}

TraceWriter::~TraceWriter() {
  if (file_) std::fclose(file_);
}

std::unique_ptr<TraceWriter> TraceWriter::fromEnvironment(int rank, int worldSize,
                                                          std::string producer,
                                                          const std::filesystem::path& orDir) {
  const char* env = std::getenv(common::env::kAuditDir);
  std::filesystem::path dir = env && *env ? std::filesystem::path(env) : orDir;
  if (dir.empty()) return nullptr;
  const int attempt = restartAttempt();
  dir = attemptFolder(dir, attempt);
  if (!env || !*env || attempt > 0) {
    std::error_code ec;  // every rank may create it: an existing folder is fine
    std::filesystem::create_directories(dir, ec);
  }
  std::vector<std::string> argv;
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  for (std::string arg; std::getline(cmdline, arg, '\0');) argv.push_back(arg);
  const char* runId = std::getenv(common::env::kAuditRunId);
  if (!runId || !*runId) runId = std::getenv("TORCHELASTIC_RUN_ID");
  return std::make_unique<TraceWriter>(dir, rank, worldSize, runId ? runId : "", std::move(argv),
                                       std::move(producer), attempt);
}

double TraceWriter::now() const { return monotonicSeconds() - start_; }

void TraceWriter::line(const std::string& json) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) return;
  const std::string text = json + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) {
    failed_ = true;
    failure_ = fmt::format("cannot write '{}' ({})", path_.string(), std::strerror(errno));
    if (reportFailures_) {
      std::fprintf(stderr, "ddph audit: %s: this rank's trace stops here\n", failure_.c_str());
    }
  }
}

namespace {
// {"ev":…, "t":…, the rest}: the order of the format's examples.
std::string eventLine(const ordered_json& fields, double t) {
  ordered_json j = {{ts::kEv, fields.at(ts::kEv)}, {ts::kT, t}};
  for (const auto& [key, value] : fields.items()) {
    if (key != ts::kEv) j[key] = value;
  }
  return j.dump();
}
}  // namespace

std::int64_t TraceWriter::addSampler(const SamplerInfo& s) {
  namespace f = ts::sampler;
  const std::int64_t id = samplers_++;
  ordered_json j = {{ts::kEv, f::kEvent}, {f::kId, id}, {f::kClass, s.className},
                    {f::kDatasetLen, s.datasetLen}};
  putOptional(j, f::kNumReplicas, s.numReplicas);
  putOptional(j, f::kRank, s.rank);
  putOptional(j, f::kSeed, s.seed);
  putOptional(j, f::kShuffle, s.shuffle);
  putOptional(j, f::kDropLast, s.dropLast);
  j[f::kOrder] = s.order;
  line(eventLine(j, now()));
  return id;
}

void TraceWriter::setEpoch(std::int64_t sampler, std::int64_t epoch) {
  namespace f = ts::set_epoch;
  line(eventLine({{ts::kEv, f::kEvent}, {f::kSampler, sampler}, {f::kEpoch, epoch}}, now()));
}

std::int64_t TraceWriter::addLoader(const LoaderInfo& l) {
  namespace f = ts::loader;
  const std::int64_t id = loaders_++;
  ordered_json j = {{ts::kEv, f::kEvent}, {f::kId, id}, {f::kSampler, l.sampler}, {f::kDataset, l.dataset},
                    {f::kDatasetLen, l.datasetLen}, {f::kBatchSize, l.batchSize},
                    {f::kDropLast, l.dropLast}, {f::kNumWorkers, 0},
                    {f::kBatching, l.torchBatching ? "torch" : "custom"}};
  if (!l.datasetFingerprint.empty()) j[f::kDatasetFingerprint] = l.datasetFingerprint;
  line(eventLine(j, now()));
  return id;
}

void TraceWriter::startPass(const PassInfo& p) {
  namespace f = ts::epoch;
  ordered_json j = {{ts::kEv, f::kEvent}, {f::kLoader, p.loader}, {f::kIter, p.iter}};
  putOptional(j, f::kSamplerEpoch, p.samplerEpoch);
  putOptional(j, f::kSeed, p.seed);
  putOptional(j, f::kNumReplicas, p.numReplicas);
  putOptional(j, f::kRank, p.rank);
  putOptional(j, f::kShuffle, p.shuffle);
  putOptional(j, f::kDropLast, p.dropLast);
  j[f::kDatasetLen] = p.datasetLen;
  putOptional(j, f::kBatches, p.batches);
  ordered_json params = ordered_json::object();
  for (const auto& [id, hash] : p.params) params[std::to_string(id)] = hash;
  j[f::kParams] = params;
  line(eventLine(j, now()));
}

void TraceWriter::batch(std::int64_t loader, std::int64_t iter, std::int64_t seq, std::int64_t size,
                        bool grad, const std::vector<Index>* indices) {
  namespace f = ts::batch;
  ordered_json j = {{ts::kEv, f::kEvent}, {f::kLoader, loader}, {f::kIter, iter}, {f::kSeq, seq},
                    {f::kSize, size}, {f::kGrad, grad}};
  if (indices) j[f::kIdx] = encodeIndexList(*indices);
  line(eventLine(j, now()));
}

void TraceWriter::endPass(std::int64_t loader, std::int64_t iter, std::int64_t batches) {
  namespace f = ts::epoch_end;
  line(eventLine({{ts::kEv, f::kEvent}, {f::kLoader, loader}, {f::kIter, iter}, {f::kBatches, batches}}, now()));
}

std::int64_t TraceWriter::addDdp(const std::string& module, std::int64_t parameters) {
  namespace f = ts::ddp;
  const std::int64_t id = ddps_++;
  line(eventLine({{ts::kEv, f::kEvent}, {f::kId, id}, {f::kModule, module}, {f::kParameters, parameters},
              {f::kDevice, "cpu"}}, now()));
  return id;
}

void TraceWriter::forward(std::int64_t ddp, std::int64_t n, bool training, bool grad) {
  namespace f = ts::forward;
  line(eventLine({{ts::kEv, f::kEvent}, {f::kDdp, ddp}, {f::kN, n}, {f::kTraining, training}, {f::kGrad, grad}}, now()));
}

std::int64_t TraceWriter::enterCollective(const Collective& c) {
  namespace f = ts::coll;
  std::int64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq = collectives_++;
  }
  ordered_json j = {{ts::kEv, f::kEvent}, {f::kGroup, "0"}, {f::kSeq, seq}, {f::kOp, c.op},
                    {f::kDtype, c.dtype}, {f::kNumel, c.numel}, {f::kSrc, c.ddp ? "ddp" : "user"}};
  if (c.ddp) {
    j[f::kDdp] = c.module;
    j[f::kBucket] = c.bucket;
    j[f::kBackward] = c.backward;
  }
  line(eventLine(j, now()));
  return seq;
}

void TraceWriter::collectiveDone(std::int64_t seq) {
  namespace f = ts::coll_done;
  line(eventLine({{ts::kEv, f::kEvent}, {f::kGroup, "0"}, {f::kSeq, seq}}, now()));
}

void TraceWriter::params(std::int64_t ddp, const std::string& hash) {
  namespace f = ts::params;
  line(eventLine({{ts::kEv, f::kEvent}, {f::kDdp, ddp}, {f::kHash, hash}, {f::kAt, "end"}}, now()));
}

void TraceWriter::error(const std::string& type, const std::string& message) {
  namespace f = ts::error;
  line(eventLine({{ts::kEv, f::kEvent}, {f::kType, type}, {f::kMessage, message}}, now()));
}

std::string TraceWriter::failure() {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void TraceWriter::end(int code) {
  namespace f = ts::end;
  line(eventLine({{ts::kEv, f::kEvent}, {f::kCode, code}}, now()));
}

}  // namespace ddph::trace
