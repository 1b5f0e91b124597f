// ddp-sim sampler: which indices (and batches) each rank gets, and whether the properties hold.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string_view>

#include "commands.h"
#include "ddph/common/error.h"
#include "ddph/sampler/elastic_sampler.h"
#include "ddph/sampler/sampler_checks.h"
#include "ddph/sampler/batching.h"
#include "ddph/sampler/builtin_samplers.h"
#include "ddph/sampler/distributed_sampler.h"

namespace ddph::sim {

using common::kExitOk;
using common::kExitViolation;
using sampler::BatchOptions;
using sampler::checkSampler;
using sampler::distributedNumSamples;
using sampler::distributedSamplerPropertyNames;
using sampler::elasticNumSamples;
using sampler::elasticRunStart;
using sampler::Expectations;
using sampler::findProperty;
using sampler::formatCase;
using sampler::Index;
using sampler::makeBatches;
using sampler::makeBuiltinSampler;
using sampler::parseResumePoints;
using sampler::Partition;
using sampler::ResumePoint;
using sampler::Violation;

namespace {

struct SamplerArgs {
  std::int64_t datasetSize = 0;
  std::int64_t worldSize = 1;
  std::optional<std::int64_t> rank;
  std::int64_t epoch = 0;
  std::int64_t seed = 0;
  bool dropLast = false;
  bool noShuffle = false;
  std::optional<std::int64_t> batchSize;
  bool json = false;
  bool check = false;
  std::string sampler = "pytorch";
  std::int64_t show = 16;
  std::string resume;  ///< "W:c,…": show the run after these earlier runs of the epoch
};

std::string preview(const std::vector<Index>& indices, std::int64_t limit) {
  if (limit < 0 || static_cast<std::int64_t>(indices.size()) <= limit) {
    return fmt::format("[{}]", fmt::join(indices, ", "));
  }
  return fmt::format("[{}, … {} more]", fmt::join(indices.begin(), indices.begin() + limit, ", "),
                     indices.size() - static_cast<std::size_t>(limit));
}

// NOTE [Sampler JSON]: nlohmann::json holds every index as a tree node (10^7 indices: 2 s and
// 360 MB), so the index arrays are written with std::to_chars into a 1 MiB buffer that goes to
// stdout whenever it fills; the envelope stays nlohmann's. Same bytes as nlohmann's dump().
// Figures: docs/benchmarks.md, "ddp-sim start-up and JSON".
class StdoutWriter {
 public:
  void text(std::string_view s) {
    if (used_ + s.size() > kSize) flush();
    if (s.size() > kSize) {
      write(s.data(), s.size());
      return;
    }
    std::memcpy(buffer_.get() + used_, s.data(), s.size());
    used_ += s.size();
  }

  void integer(std::int64_t value) {
    if (used_ + kMaxDigits > kSize) flush();
    used_ = static_cast<std::size_t>(
        std::to_chars(buffer_.get() + used_, buffer_.get() + kSize, value).ptr - buffer_.get());
  }

  void indexArray(const std::vector<Index>& indices) {
    text("[");
    for (std::size_t k = 0; k < indices.size(); ++k) {
      if (k != 0) text(",");
      integer(indices[k]);
    }
    text("]");
  }

  /// Writes what is buffered; throws Error where stdout refused it (a closed pipe, a full disk).
  void flush() {
    write(buffer_.get(), used_);
    used_ = 0;
    DDPH_CHECK(std::fflush(stdout) == 0 && !std::ferror(stdout),
               "writing the JSON to standard output failed");
  }

 private:
  static constexpr std::size_t kSize = std::size_t{1} << 20;
  static constexpr std::size_t kMaxDigits = 21;  // "-9223372036854775808" and a spare

  static void write(const char* data, std::size_t size) {
    DDPH_CHECK(std::fwrite(data, 1, size, stdout) == size,
               "writing the JSON to standard output failed");
  }

  std::unique_ptr<char[]> buffer_{new char[kSize]};
  std::size_t used_ = 0;
};

void writeJson(const SamplerArgs& a, bool shuffle, const std::vector<std::int64_t>& ranks,
               const std::vector<std::vector<Index>>& shards, const BatchOptions& batching,
               const std::vector<Violation>& violations) {
  nlohmann::ordered_json head = {{"dataset_size", a.datasetSize}, {"world_size", a.worldSize},
                                 {"epoch", a.epoch},              {"seed", a.seed},
                                 {"drop_last", a.dropLast},       {"shuffle", shuffle}};
  if (a.sampler != "pytorch") head["sampler"] = a.sampler;
  std::string text = head.dump();
  text.pop_back();  // the closing brace: the ranks follow
  StdoutWriter out;
  out.text(text);
  out.text(",\"ranks\":[");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i != 0) out.text(",");
    out.text("{\"rank\":");
    out.integer(ranks[i]);
    out.text(",\"indices\":");
    out.indexArray(shards[i]);
    if (a.batchSize) {
      out.text(",\"batches\":[");
      const auto batches = makeBatches(shards[i], batching);
      for (std::size_t b = 0; b < batches.size(); ++b) {
        if (b != 0) out.text(",");
        out.indexArray(batches[b]);
      }
      out.text("]");
    }
    out.text("}");
  }
  out.text("]");
  if (a.check) {
    auto jv = nlohmann::ordered_json::array();
    for (const auto& v : violations) {
      jv.push_back({{"property", v.property}, {"ranks", v.ranks}, {"epoch", v.epoch},
                    {"detail", v.detail}});
    }
    out.text(",\"violations\":");
    out.text(jv.dump());
  }
  out.text("}\n");
  out.flush();
}

void checkArguments(const SamplerArgs& a) {
  DDPH_CHECK(a.datasetSize >= 0, "--dataset-size must be non-negative, got {}", a.datasetSize);
  DDPH_CHECK(a.worldSize > 0, "--world-size must be positive, got {}", a.worldSize);
  DDPH_CHECK(!a.rank || (*a.rank >= 0 && *a.rank < a.worldSize),
             "--rank {} is outside [0, {}]", a.rank.value_or(0), a.worldSize - 1);
  DDPH_CHECK(!a.batchSize || *a.batchSize > 0, "--batch-size must be positive, got {}",
             a.batchSize.value_or(0));
  DDPH_CHECK(a.epoch >= 0, "--epoch must be non-negative, got {}", a.epoch);
}

// The ranks shown and each one's shard.
struct Shards {
  std::vector<std::int64_t> ranks;
  std::vector<std::vector<Index>> shards;
};

// One rank: only that rank's shard (one permutation in memory). All ranks: one shared order.
Shards drawShards(sampler::Sampler& sampler, const SamplerArgs& a,
                  const std::vector<ResumePoint>& resume) {
  Shards out;
  if (a.rank) {
    out.ranks.push_back(*a.rank);
    out.shards.push_back(
        sampler.indices({a.datasetSize, a.worldSize, *a.rank, a.epoch, a.seed, resume}));
  } else {
    Partition p = sampler.partition({a.datasetSize, a.worldSize, a.epoch, a.seed, resume});
    for (std::int64_t r = 0; r < a.worldSize; ++r) out.ranks.push_back(r);
    out.shards = std::move(p.ranks);
  }
  return out;
}

// The configuration, PyTorch's sizes for it, and where a resumed run starts in the epoch's order.
void printHeader(const SamplerArgs& a, bool shuffle, const std::vector<ResumePoint>& resume) {
  const std::int64_t numSamples = distributedNumSamples(a.datasetSize, a.worldSize, a.dropLast);
  fmt::print("{} sampler: N={} W={} epoch={} seed={} shuffle={} drop_last={}\n", a.sampler,
             a.datasetSize, a.worldSize, a.epoch, a.seed, shuffle, a.dropLast);
  fmt::print("PyTorch's num_samples={} total_size={} padding={}\n", numSamples,
             numSamples * a.worldSize,
             std::max<std::int64_t>(0, numSamples * a.worldSize - a.datasetSize));
  if (!resume.empty()) {
    const std::int64_t start = elasticRunStart(a.datasetSize, resume, a.dropLast);
    fmt::print("resume after {} (W:consumed): the run is positions {}..{} of the epoch's order, "
               "{} a rank on {} ranks; {}\n",
               a.resume, start, a.datasetSize,
               elasticNumSamples({a.datasetSize, a.worldSize, 0, a.epoch, a.seed, resume}, a.dropLast),
               a.worldSize,
               a.sampler == "elastic" ? "shown below"
                                      : "this sampler ignores it and restarts the epoch");
  }
}

void printShards(const SamplerArgs& a, const Shards& drawn, const BatchOptions& batching) {
  for (std::size_t i = 0; i < drawn.ranks.size(); ++i) {
    const auto& shard = drawn.shards[i];
    fmt::print("rank {:>3}: {} {} {}\n", drawn.ranks[i], shard.size(),
               shard.size() == 1 ? "index" : "indices", preview(shard, a.show));
    if (a.batchSize) {
      const auto batches = makeBatches(shard, batching);
      fmt::print("          {} batches of {}{}\n", batches.size(), *a.batchSize,
                 a.dropLast ? " (drop_last)" : "");
    }
  }
}

// Each property: ok with what it promises, or FAIL with the last violation's detail.
void printProperties(const SamplerArgs& a, const std::vector<Violation>& violations) {
  fmt::print("properties ({}):\n", formatCase({a.datasetSize, a.worldSize, a.epoch, a.seed}));
  for (const auto& name : distributedSamplerPropertyNames()) {
    const Violation* found = nullptr;
    for (const auto& v : violations) {
      if (v.property == name) found = &v;
    }
    if (found) {
      fmt::print("  FAIL {:<15} {}\n", name, found->detail);
    } else {
      fmt::print("  ok   {:<15} {}\n", name, findProperty(name)->summary);
    }
  }
}

int run(const SamplerArgs& a) {
  checkArguments(a);
  const bool shuffle = !a.noShuffle;
  auto sampler = makeBuiltinSampler(a.sampler, shuffle, a.dropLast);
  const std::vector<ResumePoint> resume = parseResumePoints(a.resume);
  DDPH_CHECK(resume.empty() || !a.check,
             "--check judges an epoch from its start; check resumes with ddp-sim check-sampler "
             "--contract elastic");
  const Shards drawn = drawShards(*sampler, a, resume);
  const BatchOptions batching{a.batchSize.value_or(1), a.dropLast};

  std::vector<Violation> violations;
  if (a.check) {
    Expectations e;
    e.shuffle = shuffle;
    e.dropLast = a.dropLast;
    violations = checkSampler(*sampler, {a.datasetSize, a.worldSize, a.epoch, a.seed}, e,
                              distributedSamplerPropertyNames());
  }

  if (a.json) {
    writeJson(a, shuffle, drawn.ranks, drawn.shards, batching, violations);
  } else {
    printHeader(a, shuffle, resume);
    printShards(a, drawn, batching);
    if (a.check) printProperties(a, violations);
  }
  return violations.empty() ? kExitOk : kExitViolation;
}

}  // namespace

Command addSamplerCommand(CLI::App& app) {
  auto args = std::make_shared<SamplerArgs>();
  CLI::App* sub = app.add_subcommand(
      "sampler", "Print which indices (and batches) each rank gets from a distributed sampler");
  sub->footer(exitCodesFooter({"printed (and, with --check, every property held)",
                               "a property was violated (--check)",
                               "bad arguments (one line)", "an internal error", ""}));
  sub->add_option("--dataset-size,-N", args->datasetSize, "number of samples N")->required();
  sub->add_option("--world-size,-W", args->worldSize, "number of replicas W")->required();
  sub->add_option("--rank,-r", args->rank, "print only this rank (computes one shard)");
  sub->add_option("--epoch,-e", args->epoch, "epoch passed to set_epoch")->capture_default_str();
  sub->add_option("--seed,-s", args->seed, "sampler seed")->capture_default_str();
  sub->add_flag("--drop-last", args->dropLast, "drop the tail instead of padding (and the last "
                                               "short batch)");
  sub->add_flag("--no-shuffle", args->noShuffle, "keep the order 0..N-1");
  sub->add_option("--batch-size,-b", args->batchSize, "also show DataLoader batches of this size");
  sub->add_option("--sampler", args->sampler,
                  "pytorch | elastic | libtorch-random | libtorch-sequential")->capture_default_str();
  sub->add_option("--resume", args->resume,
                  "W:consumed,…: the earlier runs of this epoch, oldest first; shows the run after "
                  "them (an elastic sampler resumes, the others restart the epoch)");
  sub->add_flag("--check", args->check, "also check every sampler property for this "
                                        "configuration (exit 1 if one is violated)");
  sub->add_option("--show", args->show, "indices shown per rank in text output (-1: all)")
      ->capture_default_str();
  sub->add_flag("--json", args->json, "print JSON instead of text");
  return {sub, [args] { return run(*args); }};
}

}  // namespace ddph::sim
