// ddp-sim check-sampler: checks a contract against anyone's sampler (a command speaking the line
// protocol, see NOTE [Sampler line protocol]) or a built-in one, with RapidCheck generation and
// shrinking, and prints for each violated property the minimal failing requests, the answers and
// a command that replays them.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <iostream>
#include <map>

#include "commands.h"
#include "ddph/common/timeouts.h"
#include "ddph/common/error.h"
#include "ddph/common/progress_line.h"
#include "ddph/launch/python_program.h"
#include "ddph/verify/contract.h"
#include "ddph/sampler/elastic_sampler.h"
#include "ddph/report/html_report.h"
#include "ddph/report/verdict.h"
#include "ddph/sampler/property.h"
#include "ddph/sampler/builtin_samplers.h"
#include "ddph/sampler/line_protocol_sampler.h"

namespace ddph::sim {

using common::checkTimeoutOption;
using common::kExitOk;
using common::kExitUsage;
using common::kExitViolation;
using common::ProgressLine;
using common::ProtocolError;
using sampler::findProperty;
using sampler::formatCase;
using sampler::formatResumePoints;
using sampler::formatViolation;
using sampler::Index;
using sampler::likelyCauseOf;
using sampler::LineProtocolOptions;
using sampler::LineProtocolSampler;
using sampler::makeBuiltinSampler;
using sampler::PropertyInfo;
using sampler::requestJson;
using sampler::responseJson;
using sampler::Sampler;
using sampler::SamplerCase;
using sampler::samplerProperties;
using sampler::shellQuote;
using sampler::Violation;
using verify::builtinContracts;
using verify::Contract;
using verify::Exchange;
using verify::findContract;
using verify::recordCase;
using verify::searchCounterexample;
using verify::SearchOptions;
using verify::SearchResult;
using verify::validateContract;

namespace {

struct CheckSamplerArgs {
  std::string contract = "pytorch";
  std::string propertyList;
  std::vector<std::string> properties;  // propertyList split at commas
  int cases = 100;
  std::uint64_t seed = 0;
  double timeout = 10.0;
  double startupTimeout = 60.0;
  std::int64_t maxDatasetSize = SearchOptions{}.maxDatasetSize;
  std::int64_t maxReplicas = SearchOptions{}.maxReplicas;
  std::int64_t maxEpoch = SearchOptions{}.maxEpoch;
  std::optional<std::string> builtin;
  std::optional<std::string> htmlPath;
  bool noShuffle = false;
  bool list = false;
  std::vector<std::string> command;
};

constexpr std::size_t kShownIndices = 24;  // the head of a long answer
constexpr std::size_t kShownWhole = 64;    // answers up to this long are shown whole

// RapidCheck writes to std::cerr on its own: its global configuration ("Using configuration:
// seed=…") on first use and, at exit, an RC_PARAMS="reproduce=…" line for every failed search.
// Neither applies to ddp-sim (the search is repeated with --seed, the minimal case replayed with
// the printed command), so std::cerr is sent nowhere for the rest of the process; ddp-sim's own
// messages go through stdio and are unaffected.
void silenceRapidCheck() { std::cerr.rdbuf(nullptr); }  // badbit: every write is dropped

// An answer as the protocol line it came as, whole up to kShownWhole indices, else cut after
// kShownIndices. When it differs
// from `previous` (the same rank's answer before it) only past the cut, the indices around the
// first difference are shown too, so the failure can be seen in the report.
std::string shownResponse(const Exchange& x, const Exchange* previous) {
  if (x.indices.size() <= kShownWhole) return responseJson(x.indices, x.declaredLength);
  std::vector<Index> head(x.indices.begin(), x.indices.begin() + kShownIndices);
  std::string around;
  if (previous && previous->indices != x.indices) {
    const auto at = static_cast<std::size_t>(
        std::mismatch(x.indices.begin(), x.indices.end(), previous->indices.begin(),
                      previous->indices.end())
            .first -
        x.indices.begin());
    if (at >= kShownIndices && at < x.indices.size()) {
      const std::size_t from = std::max(at - 4, kShownIndices);
      const std::size_t to = std::min(at + 12, x.indices.size());
      std::vector<Index> window(x.indices.begin() + static_cast<std::ptrdiff_t>(from),
                                x.indices.begin() + static_cast<std::ptrdiff_t>(to));
      around = fmt::format(",…[{}:] {}", from, fmt::join(window, ","));
    }
    if (at >= kShownIndices) {
      return fmt::format(R"({{"indices":[{}{},…]}}  ({} indices{}; first differs from rank {}'s )"
                         R"(previous answer at position {}))",
                         fmt::join(head, ","), around, x.indices.size(),
                         x.declaredLength ? fmt::format(", length {}", *x.declaredLength) : "",
                         x.request.rank, at);
    }
  }
  return fmt::format(R"({{"indices":[{},…]}}  ({} indices{}))", fmt::join(head, ","),
                     x.indices.size(),
                     x.declaredLength ? fmt::format(", length {}", *x.declaredLength) : "");
}

std::string commandLine(const std::vector<std::string>& argv) {
  std::vector<std::string> quoted;
  for (const auto& a : argv) quoted.push_back(shellQuote(a));
  return fmt::format("{}", fmt::join(quoted, " "));
}

// The command line that repeats this whole search (same cases, same shrinking).
std::string searchCommand(const CheckSamplerArgs& a) {
  std::string line = fmt::format("ddp-sim check-sampler --contract {}", a.contract);
  if (!a.properties.empty()) line += fmt::format(" --properties {}", fmt::join(a.properties, ","));
  if (a.noShuffle) line += " --no-shuffle";
  line += fmt::format(" --cases {} --seed {}", a.cases, a.seed);
  const SearchOptions defaults;
  if (a.maxDatasetSize != defaults.maxDatasetSize) line += fmt::format(" --max-dataset-size {}", a.maxDatasetSize);
  if (a.maxReplicas != defaults.maxReplicas) line += fmt::format(" --max-replicas {}", a.maxReplicas);
  if (a.maxEpoch != defaults.maxEpoch) line += fmt::format(" --max-epoch {}", a.maxEpoch);
  if (a.builtin) return line + " --builtin " + *a.builtin;
  return line + " -- " + commandLine(a.command);
}

void printList() {
  fmt::print("contracts:\n");
  for (const auto& c : builtinContracts()) {
    fmt::print("  {:<17} {}\n  {:<17} properties: {}{}\n", c.name, c.summary, "",
               fmt::join(c.properties, ", "), c.expectations.dropLast ? " (drop_last)" : "");
  }
  fmt::print("properties (compose your own contract with --properties a,b,c):\n");
  for (const auto& p : samplerProperties()) fmt::print("  {:<17} {}\n", p.name, p.summary);
}

// The command that replays the minimal case: ddp-sim sampler for a built-in sampler, else the
// recorded requests piped into the user's command.
std::string replayCommand(const CheckSamplerArgs& a, const Contract& contract, const SamplerCase& c,
                          const std::vector<Exchange>& exchanges) {
  if (a.builtin) {
    return fmt::format("ddp-sim sampler --sampler {} -N {} -W {} --epoch {} --seed {}{}{}{}",
                       *a.builtin, c.datasetSize, c.numReplicas, c.epoch, c.seed,
                       contract.expectations.dropLast ? " --drop-last" : "",
                       contract.expectations.shuffle ? "" : " --no-shuffle",
                       c.resume.empty() ? " --check" : " --resume " + formatResumePoints(c.resume));
  }
  std::string requests;
  for (const auto& x : exchanges) requests += " " + shellQuote(requestJson(x.request));
  return fmt::format("printf '%s\\n'{} | {}", requests, commandLine(a.command));
}

// The minimal case for the HTML page: a row per answer (rank and epoch), the indices that occur
// more than once among the answers of one epoch highlighted.
report::Counterexample pageCase(const SearchResult& r, const std::vector<Exchange>& exchanges,
                                std::string replay) {
  report::Counterexample out;
  out.property = r.property;
  out.detail = r.violation ? formatViolation(*r.violation) : "";
  out.parameters = formatCase(*r.counterexample);
  std::map<std::pair<std::int64_t, std::int64_t>, std::map<Index, int>> seen;  // (epoch, seed)
  for (const auto& x : exchanges) {
    out.perRank.push_back(std::vector<std::int64_t>(x.indices.begin(), x.indices.end()));
    out.rowLabels.push_back(fmt::format("rank {}, epoch {}", x.request.rank, x.request.epoch));
    auto& counts = seen[{x.request.epoch, x.request.seed}];
    for (Index i : x.indices) ++counts[i];
  }
  for (const auto& [key, counts] : seen) {
    for (const auto& [i, n] : counts) {
      if (n > 1) out.highlighted.push_back(i);
    }
  }
  out.replayCommand = std::move(replay);
  return out;
}

// Shows what the minimal case asked and got, and how to replay it; returns it for the page.
report::Counterexample printMinimalCase(Sampler& sampler, const CheckSamplerArgs& a,
                                        const Contract& contract, const SearchResult& r) {
  std::optional<Violation> again;
  const auto exchanges =
      recordCase(sampler, *r.counterexample, contract.expectations, r.property, &again);
  if (!again) {
    fmt::print("       (asked again, the sampler did not repeat this failure: it is not "
               "deterministic)\n");
  }
  fmt::print("       requests and responses ({}):\n", exchanges.size());
  for (std::size_t i = 0; i < exchanges.size(); ++i) {
    const Exchange* previous = nullptr;  // the same rank's answer before this one
    for (std::size_t j = i; j-- > 0;) {
      if (exchanges[j].request.rank == exchanges[i].request.rank) {
        previous = &exchanges[j];
        break;
      }
    }
    fmt::print("         {}\n           -> {}\n", requestJson(exchanges[i].request),
               shownResponse(exchanges[i], previous));
  }
  std::string replay = replayCommand(a, contract, *r.counterexample, exchanges);
  fmt::print("       replay: {}\n", replay);
  return pageCase(r, exchanges, std::move(replay));
}

// Refuses contradictory or out-of-range options before anything starts.
void checkArgs(const CheckSamplerArgs& a) {
  DDPH_CHECK(a.builtin.has_value() != !a.command.empty(),
             "give either --builtin NAME or a sampler command after --, not {}",
             a.builtin ? "both" : "neither");
  DDPH_CHECK(a.cases > 0, "--cases must be positive, got {}", a.cases);
  checkTimeoutOption("--timeout", a.timeout);
  checkTimeoutOption("--startup-timeout", a.startupTimeout);
  DDPH_CHECK(a.maxDatasetSize >= 0, "--max-dataset-size must be non-negative");
  DDPH_CHECK(a.maxReplicas >= 1, "--max-replicas must be at least 1");
  DDPH_CHECK(a.maxEpoch >= 1, "--max-epoch must be at least 1");
  if (a.htmlPath) report::checkReportPath(*a.htmlPath);
}

// The contract named by --contract, with --properties and --no-shuffle applied.
Contract contractOf(const CheckSamplerArgs& a) {
  Contract contract = findContract(a.contract);
  if (!a.properties.empty()) {
    contract.name = fmt::format("{} with properties {}", a.contract, fmt::join(a.properties, ","));
    contract.properties = a.properties;
  }
  if (a.noShuffle) contract.expectations.shuffle = false;
  validateContract(contract);
  return contract;
}

SearchOptions searchOptionsOf(const CheckSamplerArgs& a) {
  SearchOptions options;
  options.cases = a.cases;
  options.seed = a.seed;
  options.maxDatasetSize = a.maxDatasetSize;
  options.maxReplicas = a.maxReplicas;
  options.maxEpoch = a.maxEpoch;
  return options;
}

// A Python sampler command finds this harness's own packages (`-m ddph_audit.serve_sampler`,
// ddph_elastic) as launch's ranks do: their folder ahead of the user's PYTHONPATH. Set in this
// process's environment, which the command inherits, before any thread is started.
void putPackagesOnPythonPath(const std::vector<std::string>& command) {
  if (command.empty() || !launch::isPythonInterpreter(command.front())) return;
  std::string path = pythonPackageDir().string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += std::string(":") + old;
  ::setenv("PYTHONPATH", path.c_str(), 1);
}

// The sampler under check: a built-in one, or the user's command over the line protocol.
std::unique_ptr<Sampler> samplerOf(const CheckSamplerArgs& a, const Contract& contract) {
  if (a.builtin) {
    return makeBuiltinSampler(*a.builtin, contract.expectations.shuffle,
                              contract.expectations.dropLast);
  }
  putPackagesOnPythonPath(a.command);
  LineProtocolOptions protocol;
  protocol.requestTimeout = std::chrono::milliseconds(static_cast<long>(a.timeout * 1000));
  protocol.startupTimeout = std::chrono::milliseconds(static_cast<long>(a.startupTimeout * 1000));
  return std::make_unique<LineProtocolSampler>(a.command, protocol);
}

// The HTML page before the search: its title, the command that repeats it, the properties.
report::Page pageFor(const CheckSamplerArgs& a, const Contract& contract, const Sampler& sampler) {
  report::Page page;
  page.title = fmt::format("ddp-sim check-sampler: {}",
                           a.builtin ? "builtin " + *a.builtin : sampler.name());
  page.command = searchCommand(a);
  for (const auto& property : contract.properties) {
    const PropertyInfo* info = findProperty(property);
    page.verdict.properties.push_back({property, info ? std::string(info->summary) : ""});
  }
  return page;
}

// One property's line ("ok" or "FAIL" with its minimal case), added to the page when violated.
void reportSearch(Sampler& sampler, const CheckSamplerArgs& a, const Contract& contract,
                  const SearchResult& r, std::size_t width, report::Page& page) {
  if (r.passed) {
    fmt::print("  ok   {:<{}} {} cases\n", r.property, width, r.casesPassed);
    return;
  }
  fmt::print("  FAIL {:<{}} minimal case {} (after {} passing cases)\n", r.property, width,
             formatCase(*r.counterexample), r.casesPassed);
  fmt::print("       {}\n", formatViolation(*r.violation));
  fmt::print("       likely cause: {}\n", likelyCauseOf(*r.violation));
  for (const auto& note : r.violation->notes) fmt::print("       note: {}\n", note);
  const std::string help = sampler::helpOf(*r.violation);
  if (!help.empty()) fmt::print("       help: {}\n", help);
  page.counterexamples.push_back(printMinimalCase(sampler, a, contract, r));
  report::ViolationRow row = report::violationRow(*r.violation);
  row.property = r.property;  // the searched property, as the line above names it
  page.verdict.violations.push_back(std::move(row));
}

// Searches each property of the contract in turn, printing its line as it ends; returns the
// violated ones. On a terminal a progress line says which property is searched. Throws
// ProtocolError when an external sampler breaks the protocol.
std::vector<std::string> searchEveryProperty(Sampler& sampler, const CheckSamplerArgs& a,
                                             const Contract& contract, report::Page& page) {
  const SearchOptions options = searchOptionsOf(a);
  std::size_t width = 15;  // the property column
  for (const auto& property : contract.properties) width = std::max(width, property.size());
  const auto start = std::chrono::steady_clock::now();
  std::atomic<std::size_t> searching{0};
  ProgressLine progress(STDERR_FILENO, [&] {
    if (contract.properties.empty()) return std::string("ddp-sim check-sampler");
    const std::size_t k = std::min(searching.load(), contract.properties.size() - 1);
    return fmt::format("ddp-sim check-sampler: property {} of {} ({}), {}", k + 1,
                       contract.properties.size(), contract.properties[k],
                       ProgressLine::formatElapsed(std::chrono::steady_clock::now() - start));
  });
  std::vector<std::string> violated;
  for (const auto& property : contract.properties) {
    const SearchResult r = searchCounterexample(sampler, property, contract.expectations, options);
    progress.printAbove([&] {
      if (!r.passed) violated.push_back(property);
      reportSearch(sampler, a, contract, r, width, page);
      std::fflush(stdout);
    });
    ++searching;
  }
  return violated;
}

// The closing line (PASSED, or FAILED with the command that repeats the search) and the page.
int printVerdict(const CheckSamplerArgs& a, const Contract& contract, const Sampler& sampler,
                 const std::vector<std::string>& violated, double seconds, report::Page& page) {
  const auto* external = dynamic_cast<const LineProtocolSampler*>(&sampler);
  const std::string requests =
      external ? fmt::format("{} requests in ", external->requestsAnswered()) : "";
  page.verdict.passed = violated.empty();
  page.subtitle = fmt::format("contract '{}': {} properties x {} cases, seed {}: {}", contract.name,
                              contract.properties.size(), a.cases, a.seed,
                              violated.empty() ? "PASSED" : "FAILED");
  if (a.htmlPath) report::writeHtmlReport(*a.htmlPath, page);
  if (violated.empty()) {
    fmt::print("check-sampler: PASSED: contract '{}' holds ({} properties x {} cases, {}{:.1f} s)\n",
               contract.name, contract.properties.size(), a.cases, requests, seconds);
    return kExitOk;
  }
  fmt::print("check-sampler: FAILED: {} of {} properties of contract '{}' violated ({}) "
             "({}{:.1f} s)\n  repeat this search: {}\n",
             violated.size(), contract.properties.size(), contract.name, fmt::join(violated, ", "),
             requests, seconds, searchCommand(a));
  return kExitViolation;
}

int run(const CheckSamplerArgs& a) {
  if (a.list) {
    printList();
    return kExitOk;
  }
  checkArgs(a);
  const Contract contract = contractOf(a);
  const std::unique_ptr<Sampler> sampler = samplerOf(a, contract);
  fmt::print("check-sampler: contract '{}' ({} properties), {} cases each, seed {}, sampler {}\n",
             contract.name, contract.properties.size(), a.cases, a.seed,
             a.builtin ? "builtin " + *a.builtin : sampler->name());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  report::Page page = pageFor(a, contract, *sampler);
  silenceRapidCheck();
  std::vector<std::string> violated;
  try {
    violated = searchEveryProperty(*sampler, a, contract, page);
  } catch (const ProtocolError& e) {  // the progress line is gone with its scope
    std::fflush(stdout);
    fmt::print(stderr, "ddp-sim: error: {}\n", e.what());
    return kExitUsage;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return printVerdict(a, contract, *sampler, violated, seconds, page);
}

}  // namespace

Command addCheckSamplerCommand(CLI::App& app) {
  auto args = std::make_shared<CheckSamplerArgs>();
  CLI::App* sub = app.add_subcommand(
      "check-sampler",
      "Check a sampler against a contract: a command speaking the line protocol (after --) or a "
      "built-in sampler. Each request is one JSON line on the command's stdin, "
      "{\"dataset_size\":N,\"num_replicas\":W,\"rank\":R,\"epoch\":E,\"seed\":S}; it answers each "
      "with one line {\"indices\":[...]} (optionally \"length\") or {\"error\":\"...\"}.");
  sub->footer(exitCodesFooter(
      {"the contract holds", "a property was violated (its minimal counterexample printed)",
       "bad arguments, or a sampler that cannot start, breaks the line protocol or misses a "
       "deadline (one line; it is killed)",
       "an internal error", ""}));
  sub->add_option("--contract", args->contract,
                  fmt::format("{} (see --list)", fmt::join(verify::contractNames(), " | ")))
      ->capture_default_str();
  // One string, split here: a vector option would take a following `--` as its own end and let
  // the sampler's arguments be parsed as ours.
  sub->add_option("--properties", args->propertyList,
                  "check these properties (comma-separated) with the contract's expectations");
  sub->add_option("--cases", args->cases, "generated cases per property")->capture_default_str();
  sub->add_option("--seed", args->seed, "RapidCheck seed: the same seed checks the same cases")
      ->capture_default_str();
  sub->add_option("--timeout", args->timeout, "seconds the sampler may take to answer a request")
      ->capture_default_str();
  sub->add_option("--startup-timeout", args->startupTimeout,
                  "seconds the sampler may take to answer its first request")
      ->capture_default_str();
  sub->add_option("--max-dataset-size", args->maxDatasetSize, "largest N generated")
      ->capture_default_str();
  sub->add_option("--max-replicas", args->maxReplicas, "largest W generated")->capture_default_str();
  sub->add_option("--max-epoch", args->maxEpoch, "largest epoch generated")->capture_default_str();
  sub->add_option("--builtin", args->builtin,
                  "check a built-in sampler: pytorch | libtorch-random | libtorch-sequential");
  sub->add_flag("--no-shuffle", args->noShuffle,
                "expect the order 0..N-1 (and build built-in samplers without shuffle)");
  sub->add_option("--html", args->htmlPath,
                  "also write a self-contained HTML report here: the verdict and each minimal "
                  "counterexample as a table, with its replay command (docs/html-report.md)");
  sub->add_flag("--list", args->list, "list the contracts and properties, and exit");
  sub->add_option("command", args->command, "the sampler command and its arguments (after --)");
  return {sub, [args] {
            std::stringstream list(args->propertyList);
            for (std::string name; std::getline(list, name, ',');) {
              if (!name.empty()) args->properties.push_back(name);
            }
            return run(*args);
          }};
}

}  // namespace ddph::sim
