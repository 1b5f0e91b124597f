#include "ddph/sampler/elastic_sampler.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>

#include "ddph/common/error.h"

namespace ddph::sampler {

using common::ConfigError;

std::int64_t elasticRunStart(std::int64_t datasetSize, const std::vector<ResumePoint>& resume,
                             bool dropLast) {
  std::int64_t start = 0;
  for (std::size_t k = 0; k < resume.size(); ++k) {
    const ResumePoint& point = resume[k];
    DDPH_CHECK(point.numReplicas > 0, "resume point {}: num_replicas must be positive, got {}",
               k + 1, point.numReplicas);
    const std::int64_t length = datasetSize - start;
    const std::int64_t limit = distributedNumSamples(length, point.numReplicas, dropLast);
    DDPH_CHECK(point.consumed >= 0 && point.consumed <= limit,
               "resume point {}: a run of {} samples on {} ranks yields {} a rank; consumed {} is "
               "out of range", k + 1, length, point.numReplicas, limit, point.consumed);
    start = std::min(datasetSize, start + point.consumed * point.numReplicas);
  }
  return start;
}

std::int64_t elasticNumSamples(const ShardRequest& request, bool dropLast) {
  validateShardRequest(request);
  const std::int64_t start = elasticRunStart(request.datasetSize, request.resume, dropLast);
  return distributedNumSamples(request.datasetSize - start, request.numReplicas, dropLast);
}

std::vector<Index> elasticShard(const std::vector<Index>& order, const ShardRequest& request,
                                bool dropLast) {
  validateShardRequest(request);
  return runShard(order, elasticRunStart(request.datasetSize, request.resume, dropLast), request,
                  dropLast);
}

std::string formatResumePoints(const std::vector<ResumePoint>& resume) {
  std::string out;
  for (const auto& p : resume) out += fmt::format("{}{}:{}", out.empty() ? "" : ",", p.numReplicas, p.consumed);
  return out;
}

std::vector<ResumePoint> parseResumePoints(std::string_view text) {
  std::vector<ResumePoint> resume;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    ResumePoint p;
    const auto colon = part.find(':');
    const char* end = part.data() + part.size();
    const bool ok = colon != std::string_view::npos &&
                    std::from_chars(part.data(), part.data() + colon, p.numReplicas).ptr ==
                        part.data() + colon &&
                    std::from_chars(part.data() + colon + 1, end, p.consumed).ptr == end &&
                    colon + 1 < part.size() && p.numReplicas > 0 && p.consumed >= 0;
    DDPH_CHECK(ok, "'{}' is not W:consumed (a positive world size, a non-negative count)", part);
    resume.push_back(p);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    DDPH_CHECK(comma == std::string_view::npos || !text.empty(), "a resume list ends with ','");
  }
  return resume;
}

std::vector<ResumePoint> ElasticState::resumeHistory() const {
  std::vector<ResumePoint> all = history;
  all.push_back({numReplicas, consumed});
  return all;
}

std::string ElasticState::toJson() const {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& p : history) runs.push_back({p.numReplicas, p.consumed});
  return nlohmann::json{{"version", 1},          {"epoch", epoch},       {"seed", seed},
                        {"num_replicas", numReplicas}, {"consumed", consumed}, {"history", runs}}
      .dump();
}

ElasticState ElasticState::fromJson(std::string_view text) {
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  DDPH_CHECK(json.is_object(), "elastic sampler state: not a JSON object");
  DDPH_CHECK(json.value("version", 0) == 1, "elastic sampler state: unknown version {}",
             json.contains("version") ? json["version"].dump() : "(none)");
  ElasticState state;
  try {
    state.epoch = json.at("epoch").get<std::int64_t>();
    state.seed = json.at("seed").get<std::int64_t>();
    state.numReplicas = json.at("num_replicas").get<std::int64_t>();
    state.consumed = json.at("consumed").get<std::int64_t>();
    for (const auto& run : json.at("history")) {
      state.history.push_back({run.at(0).get<std::int64_t>(), run.at(1).get<std::int64_t>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("elastic sampler state: {}", e.what()));
  }
  DDPH_CHECK(state.numReplicas > 0 && state.consumed >= 0,
             "elastic sampler state: num_replicas {} and consumed {} must be positive and "
             "non-negative", state.numReplicas, state.consumed);
  return state;
}

ElasticSampler::ElasticSampler(DistributedSamplerOptions options) : options_(options) {}

std::string ElasticSampler::name() const { return samplerName("elastic", options_); }

std::vector<Index> ElasticSampler::indices(const ShardRequest& request) {
  validateShardRequest(request);
  const auto order =
      distributedEpochOrder(request.datasetSize, request.seed, request.epoch, options_);
  return elasticShard(order, request, options_.dropLast);
}

std::optional<std::int64_t> ElasticSampler::declaredLength(const ShardRequest& request) {
  return elasticNumSamples(request, options_.dropLast);
}

}  // namespace ddph::sampler
