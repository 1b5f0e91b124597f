#include "ddph/audit/trace_writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ddph/audit/trace.h"
#include "ddph/common/error.h"
#include "index_list.h"

namespace ddph::audit {
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
                         int attempt)
    : path_(dir / fmt::format("rank-{}.jsonl", rank)), start_(monotonicSeconds()) {
  file_ = std::fopen(path_.c_str(), "w");
  DDPH_CHECK(file_ != nullptr, "cannot write the audit trace '{}': {}", path_.string(),
             std::strerror(errno));
  ordered_json j = {{"ev", "header"}, {"t", 0.0}, {"trace", "ddph-audit"},
                    {"version", kTraceVersion}, {"rank", rank}, {"world_size", worldSize},
                    {"run_id", runId}, {"attempt", attempt}, {"start_unix", unixSeconds()},
                    {"pid", static_cast<long>(::getpid())},
                    {"producer", producer}, {"runtime", "C++ (LibTorch)"}, {"argv", argv}};
  line(j.dump());
}

TraceWriter::~TraceWriter() {
  if (file_) std::fclose(file_);
}

std::unique_ptr<TraceWriter> TraceWriter::fromEnvironment(int rank, int worldSize,
                                                          std::string producer,
                                                          const std::filesystem::path& orDir) {
  const char* env = std::getenv("DDPH_AUDIT_DIR");
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
  const char* runId = std::getenv("DDPH_AUDIT_RUN_ID");
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
    std::fprintf(stderr, "ddph audit: cannot write '%s' (%s): this rank's trace stops here\n",
                 path_.c_str(), std::strerror(errno));
  }
}

namespace {
// {"ev":…, "t":…, the rest}: the order of the format's examples.
std::string eventLine(const ordered_json& fields, double t) {
  ordered_json j = {{"ev", fields.at("ev")}, {"t", t}};
  for (const auto& [key, value] : fields.items()) {
    if (key != "ev") j[key] = value;
  }
  return j.dump();
}
}  // namespace

std::int64_t TraceWriter::addSampler(const SamplerInfo& s) {
  const std::int64_t id = samplers_++;
  ordered_json j = {{"ev", "sampler"}, {"id", id}, {"class", s.className},
                    {"dataset_len", s.datasetLen}};
  putOptional(j, "num_replicas", s.numReplicas);
  putOptional(j, "rank", s.rank);
  putOptional(j, "seed", s.seed);
  putOptional(j, "shuffle", s.shuffle);
  putOptional(j, "drop_last", s.dropLast);
  j["order"] = s.order;
  line(eventLine(j, now()));
  return id;
}

void TraceWriter::setEpoch(std::int64_t sampler, std::int64_t epoch) {
  line(eventLine({{"ev", "set_epoch"}, {"sampler", sampler}, {"epoch", epoch}}, now()));
}

std::int64_t TraceWriter::addLoader(const LoaderInfo& l) {
  const std::int64_t id = loaders_++;
  ordered_json j = {{"ev", "loader"}, {"id", id}, {"sampler", l.sampler}, {"dataset", l.dataset},
                    {"dataset_len", l.datasetLen}, {"batch_size", l.batchSize},
                    {"drop_last", l.dropLast}, {"num_workers", 0},
                    {"batching", l.torchBatching ? "torch" : "custom"}};
  if (!l.datasetFingerprint.empty()) j["dataset_fingerprint"] = l.datasetFingerprint;
  line(eventLine(j, now()));
  return id;
}

void TraceWriter::startPass(const PassInfo& p) {
  ordered_json j = {{"ev", "epoch"}, {"loader", p.loader}, {"iter", p.iter}};
  putOptional(j, "sampler_epoch", p.samplerEpoch);
  putOptional(j, "seed", p.seed);
  putOptional(j, "num_replicas", p.numReplicas);
  putOptional(j, "rank", p.rank);
  putOptional(j, "shuffle", p.shuffle);
  putOptional(j, "drop_last", p.dropLast);
  j["dataset_len"] = p.datasetLen;
  putOptional(j, "batches", p.batches);
  ordered_json params = ordered_json::object();
  for (const auto& [id, hash] : p.params) params[std::to_string(id)] = hash;
  j["params"] = params;
  line(eventLine(j, now()));
}

void TraceWriter::batch(std::int64_t loader, std::int64_t iter, std::int64_t seq, std::int64_t size,
                        bool grad, const std::vector<Index>* indices) {
  ordered_json j = {{"ev", "batch"}, {"loader", loader}, {"iter", iter}, {"seq", seq},
                    {"size", size}, {"grad", grad}};
  if (indices) j["idx"] = encodeIndexList(*indices);
  line(eventLine(j, now()));
}

void TraceWriter::endPass(std::int64_t loader, std::int64_t iter, std::int64_t batches) {
  line(eventLine({{"ev", "epoch_end"}, {"loader", loader}, {"iter", iter}, {"batches", batches}}, now()));
}

std::int64_t TraceWriter::addDdp(const std::string& module, std::int64_t parameters) {
  const std::int64_t id = ddps_++;
  line(eventLine({{"ev", "ddp"}, {"id", id}, {"module", module}, {"parameters", parameters},
              {"device", "cpu"}}, now()));
  return id;
}

void TraceWriter::forward(std::int64_t ddp, std::int64_t n, bool training, bool grad) {
  line(eventLine({{"ev", "forward"}, {"ddp", ddp}, {"n", n}, {"training", training}, {"grad", grad}}, now()));
}

std::int64_t TraceWriter::enterCollective(const Collective& c) {
  std::int64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq = collectives_++;
  }
  ordered_json j = {{"ev", "coll"}, {"group", "0"}, {"seq", seq}, {"op", c.op},
                    {"dtype", c.dtype}, {"numel", c.numel}, {"src", c.ddp ? "ddp" : "user"}};
  if (c.ddp) {
    j["ddp"] = c.module;
    j["bucket"] = c.bucket;
    j["backward"] = c.backward;
  }
  line(eventLine(j, now()));
  return seq;
}

void TraceWriter::collectiveDone(std::int64_t seq) {
  line(eventLine({{"ev", "coll_done"}, {"group", "0"}, {"seq", seq}}, now()));
}

void TraceWriter::params(std::int64_t ddp, const std::string& hash) {
  line(eventLine({{"ev", "params"}, {"ddp", ddp}, {"hash", hash}, {"at", "end"}}, now()));
}

void TraceWriter::error(const std::string& type, const std::string& message) {
  line(eventLine({{"ev", "error"}, {"type", type}, {"message", message}}, now()));
}

void TraceWriter::end(int code) { line(eventLine({{"ev", "end"}, {"code", code}}, now())); }

}  // namespace ddph::audit
