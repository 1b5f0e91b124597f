// Each event's own fields read into its record, checked (docs/trace-format.md): what needs no
// other line of the file. The reader (trace_reader.cpp) places the records in the rank's trace.
#include "event_records.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ddph/common/error.h"
#include "index_list.h"
#include "json_fields.h"
#include "trace_schema.h"

namespace ddph::trace {

using common::ConfigError;
using nlohmann::json;
using json_fields::field;
using json_fields::optionalField;
namespace ts = trace_schema;

namespace {

OrderKind orderKind(const std::string& s) {
  if (s == "torch-distributed") return OrderKind::kTorchDistributed;
  if (s == "sequential") return OrderKind::kSequential;
  if (s == "recorded") return OrderKind::kRecorded;
  throw ConfigError(fmt::format("unknown sampler order \"{}\"", s));
}

constexpr std::size_t kMaxDatasetParts = 4096;

DatasetPart datasetPart(const json& p) {
  namespace f = ts::loader::dataset_parts;
  DDPH_CHECK(p.is_object(), "a \"dataset_parts\" entry must be an object");
  DatasetPart part;
  part.dataset = optionalField<std::string>(p, f::kDataset).value_or("");
  part.len = optionalField<std::int64_t>(p, f::kLen).value_or(-1);
  part.name = optionalField<std::string>(p, f::kName).value_or("");
  part.fingerprint = optionalField<std::string>(p, f::kFingerprint).value_or("");
  part.items = optionalField<std::string>(p, f::kItems).value_or("");
  part.content = optionalField<std::string>(p, f::kContent).value_or("");
  return part;
}

}  // namespace

void readHeader(const json& e, RankTrace& t) {
  namespace f = ts::header;
  DDPH_CHECK(optionalField<std::string>(e, f::kTrace).value_or("") == ts::kTraceName,
             "not a ddph-audit trace (\"trace\" is not \"ddph-audit\")");
  const auto version = field<int>(e, f::kVersion);
  DDPH_CHECK(version == kTraceVersion, "trace format version {} (this reader knows version {})",
             version, kTraceVersion);
  t.rank = field<int>(e, f::kRank);
  t.worldSize = field<int>(e, f::kWorldSize);
  DDPH_CHECK(t.worldSize > 0 && t.rank >= 0 && t.rank < t.worldSize,
             "rank {} of world size {} is not a rank", t.rank, t.worldSize);
  DDPH_CHECK(t.worldSize <= kMaxTraceWorldSize, "world size {} is above the reader's limit of {}",
             t.worldSize, kMaxTraceWorldSize);
  t.runId = optionalField<std::string>(e, f::kRunId).value_or("");
  t.attempt = optionalField<int>(e, f::kAttempt).value_or(0);
  t.startUnix = optionalField<double>(e, f::kStartUnix);
  DDPH_CHECK(!t.startUnix || std::isfinite(*t.startUnix), "start_unix is not a finite number");
  DDPH_CHECK(t.attempt >= 0, "attempt {} is not a restart count", t.attempt);
  t.producer = optionalField<std::string>(e, f::kProducer).value_or("");
  t.runtime = optionalField<std::string>(e, f::kRuntime).value_or("");
  t.argv = optionalField<std::vector<std::string>>(e, f::kArgv).value_or(std::vector<std::string>{});
  t.localRank = optionalField<int>(e, f::kLocalRank);
  t.localWorldSize = optionalField<int>(e, f::kLocalWorldSize);
  t.node = optionalField<int>(e, f::kNode);
  t.hostname = optionalField<std::string>(e, f::kHostname).value_or("");
  DDPH_CHECK(!t.localRank || *t.localRank >= 0, "local_rank {} is not a rank", *t.localRank);
  DDPH_CHECK(!t.localWorldSize || *t.localWorldSize > 0, "local_world_size {} is not a size",
             *t.localWorldSize);
  DDPH_CHECK(!t.node || *t.node >= 0, "node {} is not a node rank", *t.node);
}

SamplerRecord samplerRecord(const json& e) {
  namespace f = ts::sampler;
  SamplerRecord s;
  s.id = field<std::int64_t>(e, f::kId);
  s.className = optionalField<std::string>(e, f::kClass).value_or("");
  s.datasetLen = field<std::int64_t>(e, f::kDatasetLen);
  s.order = orderKind(field<std::string>(e, f::kOrder));
  s.numReplicas = optionalField<std::int64_t>(e, f::kNumReplicas);
  s.rank = optionalField<std::int64_t>(e, f::kRank);
  s.seed = optionalField<std::int64_t>(e, f::kSeed);
  s.shuffle = optionalField<bool>(e, f::kShuffle);
  s.dropLast = optionalField<bool>(e, f::kDropLast);
  s.replacement = optionalField<bool>(e, f::kReplacement);
  s.via = optionalField<std::string>(e, f::kVia).value_or("");
  s.takesEpoch = optionalField<bool>(e, f::kTakesEpoch).value_or(false);
  DDPH_CHECK(s.datasetLen >= 0, "dataset_len {} is negative", s.datasetLen);
  if (s.order == OrderKind::kTorchDistributed) {
    DDPH_CHECK(s.numReplicas && s.rank && s.seed && s.shuffle && s.dropLast,
               "a torch-distributed sampler needs num_replicas, rank, seed, shuffle, drop_last");
  }
  return s;
}

LoaderRecord loaderRecord(const json& e) {
  namespace f = ts::loader;
  LoaderRecord l;
  l.id = field<std::int64_t>(e, f::kId);
  l.sampler = optionalField<std::int64_t>(e, f::kSampler).value_or(-1);
  l.dataset = optionalField<std::string>(e, f::kDataset).value_or("");
  l.datasetLen = optionalField<std::int64_t>(e, f::kDatasetLen).value_or(0);
  l.batchSize = optionalField<std::int64_t>(e, f::kBatchSize).value_or(0);
  l.dropLast = optionalField<bool>(e, f::kDropLast).value_or(false);
  l.torchBatching = optionalField<std::string>(e, f::kBatching).value_or("torch") == "torch";
  l.builtAt = optionalField<std::string>(e, f::kBuiltAt).value_or("");
  l.datasetFingerprint = optionalField<std::string>(e, f::kDatasetFingerprint).value_or("");
  l.datasetItems = optionalField<std::string>(e, f::kDatasetItems).value_or("");
  l.datasetContent = optionalField<std::string>(e, f::kDatasetContent).value_or("");
  l.datasetColumns =
      optionalField<std::vector<std::string>>(e, f::kDatasetColumns).value_or(std::vector<std::string>{});
  l.columnItems = optionalField<std::string>(e, f::kColumnItems).value_or("");
  l.columnContent = optionalField<std::string>(e, f::kColumnContent).value_or("");
  if (const auto parts = e.find(f::kDatasetParts); parts != e.end() && !parts->is_null()) {
    DDPH_CHECK(parts->is_array() && parts->size() <= kMaxDatasetParts,
               "\"dataset_parts\" must be an array of at most {} parts", kMaxDatasetParts);
    for (const auto& p : *parts) l.datasetParts.push_back(datasetPart(p));
  }
  l.numWorkers = optionalField<std::int64_t>(e, f::kNumWorkers).value_or(0);
  l.persistentWorkers = optionalField<bool>(e, f::kPersistentWorkers).value_or(false);
  if (auto it = e.find(f::kSubsetIndices); it != e.end()) {
    l.subsetIndices = decodeIndexList(*it);
    l.subsetOf = field<std::int64_t>(e, f::kSubsetOf);
    DDPH_CHECK(l.subsetOf >= 0, "\"subset_of\" {} is not a length", l.subsetOf);
  }
  return l;
}

BatchRecord batchRecord(const json& e) {
  namespace f = ts::batch;
  BatchRecord b;
  b.seq = field<std::int64_t>(e, f::kSeq);
  b.size = field<std::int64_t>(e, f::kSize);
  b.grad = optionalField<bool>(e, f::kGrad).value_or(true);
  b.fingerprint = optionalField<std::string>(e, f::kFp).value_or("");
  b.rows = optionalField<std::vector<std::string>>(e, f::kRows).value_or(std::vector<std::string>{});
  DDPH_CHECK(b.size >= 0, "batch size {} is negative", b.size);
  if (auto it = e.find(f::kIdx); it != e.end()) {
    b.indices = decodeIndexList(*it);
    DDPH_CHECK(static_cast<std::int64_t>(b.indices->size()) == b.size,
               "batch {} has size {} but {} indices", b.seq, b.size, b.indices->size());
  }
  return b;
}

CollectiveRecord collectiveRecord(const json& e) {
  namespace f = ts::coll;
  CollectiveRecord c;
  c.group = field<std::string>(e, f::kGroup);
  c.seq = field<std::int64_t>(e, f::kSeq);
  c.op = field<std::string>(e, f::kOp);
  c.dtype = optionalField<std::string>(e, f::kDtype).value_or("");
  c.numel = optionalField<std::int64_t>(e, f::kNumel).value_or(0);
  c.src = optionalField<std::string>(e, f::kSrc).value_or("user");
  c.ddp = optionalField<std::int64_t>(e, f::kDdp).value_or(-1);
  c.bucket = optionalField<std::int64_t>(e, f::kBucket).value_or(-1);
  c.backward = optionalField<std::int64_t>(e, f::kBackward).value_or(-1);
  c.shadow = optionalField<bool>(e, f::kShadow).value_or(false);
  c.discarded = optionalField<bool>(e, f::kDiscarded).value_or(false);
  c.hook = optionalField<std::string>(e, f::kHook).value_or("");
  c.at = optionalField<std::string>(e, f::kAt).value_or("");
  c.via = optionalField<std::string>(e, f::kVia).value_or("");
  c.peer = optionalField<std::int64_t>(e, f::kPeer).value_or(-1);
  c.root = optionalField<std::int64_t>(e, f::kRoot).value_or(-1);
  DDPH_CHECK(c.backward >= -1 && c.backward < std::numeric_limits<std::int64_t>::max(),
             "\"backward\" {} is not a count", c.backward);
  return c;
}

}  // namespace ddph::trace
