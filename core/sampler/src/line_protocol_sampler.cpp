#include "ddph/sampler/line_protocol_sampler.h"

#include <signal.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "ddph/common/child_process.h"
#include "ddph/common/error.h"
#include "line_channel.h"

namespace ddph::sampler {

using common::ChildOptions;
using common::ChildProcess;
using common::ConfigError;
using common::Error;
using common::ExitStatus;
using common::ProtocolError;
using common::StreamTarget;

using Clock = std::chrono::steady_clock;

namespace {

// The first bytes of `text`, printable, for error messages.
std::string excerpt(std::string_view text, std::size_t limit = 80) {
  std::string out;
  for (char ch : text.substr(0, limit)) {
    out += (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ? '?' : ch;
  }
  if (text.size() > limit) out += fmt::format("… ({} bytes)", text.size());
  return out;
}

std::string mib(std::size_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

}  // namespace

std::string requestJson(const ShardRequest& r) {
  std::string resume;  // only when resumed: a request without it is the protocol's first form
  if (!r.resume.empty()) {
    std::vector<std::string> points;
    for (const auto& p : r.resume) {
      points.push_back(fmt::format(R"({{"num_replicas":{},"consumed":{}}})", p.numReplicas,
                                   p.consumed));
    }
    resume = fmt::format(R"(,"resume":[{}])", fmt::join(points, ","));
  }
  return fmt::format(R"({{"dataset_size":{},"num_replicas":{},"rank":{},"epoch":{},"seed":{}{}}})",
                     r.datasetSize, r.numReplicas, r.rank, r.epoch, r.seed, resume);
}

std::string responseJson(const std::vector<Index>& indices,
                         const std::optional<std::int64_t>& declaredLength) {
  if (declaredLength) {
    return fmt::format(R"({{"indices":[{}],"length":{}}})", fmt::join(indices, ","),
                       *declaredLength);
  }
  return fmt::format(R"({{"indices":[{}]}})", fmt::join(indices, ","));
}

LineProtocolAnswer parseLineProtocolAnswer(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw ProtocolError(fmt::format("a line that is not JSON: '{}'", excerpt(line)));
  }
  LineProtocolAnswer a;
  if (j.is_object() && j.contains("error")) {
    a.error = j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
    return a;
  }
  if (!j.is_object() || !j.contains("indices") || !j["indices"].is_array()) {
    throw ProtocolError(fmt::format(
        "JSON that has neither \"indices\" (an array) nor \"error\": '{}'", excerpt(line)));
  }
  const auto& arr = j["indices"];
  a.indices.reserve(arr.size());
  for (const auto& v : arr) {
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX))) {
      throw ProtocolError(fmt::format("a non-integer index {}", excerpt(v.dump())));
    }
    a.indices.push_back(v.get<std::int64_t>());
  }
  if (j.contains("length")) {
    const auto& length = j["length"];
    if (!length.is_number_integer() ||
        (length.is_number_unsigned() && length.get<std::uint64_t>() > std::uint64_t(INT64_MAX))) {
      throw ProtocolError(
          fmt::format("a non-integer \"length\" {}", excerpt(length.dump())));
    }
    a.length = length.get<std::int64_t>();
  }
  return a;
}

std::string shellQuote(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("@%+=:,./_-", c) != nullptr;
  });
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// The running command and the line channel over its stdin and stdout. Owned by one
// LineProtocolSampler.
struct LineProtocolSampler::Process {
  std::unique_ptr<ChildProcess> child;  // leads its own process group
  std::unique_ptr<LineChannel> channel;
  bool answeredOnce = false;
  std::int64_t answered = 0;
  std::optional<std::string> failure;
  // The last exchange's requests and declared lengths, for declaredLength().
  std::vector<ShardRequest> lastRequests;
  std::vector<std::optional<std::int64_t>> lastLengths;

  bool running() const { return child && child->pid() > 0; }

  void closeIn() {
    if (channel) channel->closeSending();
  }

  // Gives the command up to `grace` to end by itself; how it ended if it did.
  std::optional<ExitStatus> waitFor(std::chrono::milliseconds grace) {
    if (!running()) return std::nullopt;
    auto status = child->waitUntil(Clock::now() + grace);
    if (status) child->signalGroup(SIGKILL);  // whatever it started in its group
    return status;
  }

  // Kills the command's whole process group, reaps it and closes the pipes. Idempotent.
  void kill() {
    closeIn();
    if (child) child->kill();
    if (channel) channel->close();
  }

  // Kills the command and throws ProtocolError naming `sampler` and `what` went wrong; `ended`
  // says it went away by itself, so its exit status is worth a short wait.
  [[noreturn]] void fail(const std::string& sampler, const std::string& what, bool ended) {
    std::string status;
    if (ended) {
      closeIn();
      if (auto s = waitFor(std::chrono::milliseconds(1000))) status = "; it " + s->describe();
    }
    const bool stillRunning = running();
    kill();
    failure = fmt::format("sampler `{}` {}{}{}", sampler, what, status,
                          stillRunning ? "; killed it" : "");
    throw ProtocolError(*failure);
  }
};

LineProtocolSampler::LineProtocolSampler(std::vector<std::string> command,
                                         LineProtocolOptions options)
    : command_(std::move(command)), options_(options), process_(std::make_unique<Process>()) {
  DDPH_CHECK(!command_.empty(), "no sampler command given");
  DDPH_CHECK(options_.requestTimeout.count() > 0, "the request timeout must be positive");
  ChildOptions child;
  child.in = child.out = StreamTarget::pipe();  // its own process group; dies with the checker
  try {
    process_->child = std::make_unique<ChildProcess>(command_, std::move(child));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("sampler command: {}", e.what()));
  } catch (const Error& e) {
    throw ConfigError(fmt::format("cannot start sampler command '{}': {}", name(), e.what()));
  }
  process_->channel = std::make_unique<LineChannel>(
      process_->child->takePipe(0), process_->child->takePipe(1), options_.maxLineBytes);
}

LineProtocolSampler::~LineProtocolSampler() { close(); }

void LineProtocolSampler::close() {
  if (!process_) return;
  Process& p = *process_;
  p.closeIn();  // EOF: a well-behaved sampler exits by itself
  p.waitFor(options_.exitGrace);
  p.kill();
  if (!p.failure) p.failure = "the sampler was closed";
}

std::string LineProtocolSampler::name() const {
  std::vector<std::string> quoted;
  for (const auto& a : command_) quoted.push_back(shellQuote(a));
  return fmt::format("{}", fmt::join(quoted, " "));
}

std::int64_t LineProtocolSampler::requestsAnswered() const { return process_->answered; }

bool LineProtocolSampler::alive() const { return !process_->failure && process_->running(); }

// One exchange: every request sent, one answer line read for each under the deadlines and
// limits of the options; any breach kills the command and throws ProtocolError (Process::fail).
class LineProtocolSampler::Exchange {
 public:
  Exchange(Process& p, const std::vector<ShardRequest>& requests,
           const LineProtocolOptions& options, std::string sampler)
      : p_(p), channel_(*p.channel), requests_(requests), options_(options),
        sampler_(std::move(sampler)) {}

  std::vector<LineProtocolAnswer> answers() {
    // Output nobody asked for (a previous answer had more lines than requests, or the command
    // exited between requests) is caught before it can be mistaken for an answer.
    refuseUnrequested(/*eofIsFailure=*/true);
    for (const auto& r : requests_) channel_.send(requestJson(r));
    channel_.capBytesReceived(std::min(
        options_.maxTotalBytes, saturatingSum(channel_.bytesReceived(), options_.maxBatchBytes)));
    std::vector<LineProtocolAnswer> answers;
    answers.reserve(requests_.size());
    while (answers.size() < requests_.size()) answers.push_back(readAnswer(answers.size()));
    // Surplus already in the pipe is caught now rather than before the next request (an EOF is
    // left for the next request to report).
    refuseUnrequested(/*eofIsFailure=*/false);
    return answers;
  }

 private:
  static std::size_t saturatingSum(std::size_t a, std::size_t b) {
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
  }

  std::string describeRequest(std::size_t k) const {
    return fmt::format("request {} of {} ({})", k + 1, requests_.size(), requestJson(requests_[k]));
  }

  std::chrono::milliseconds answerTimeout() const {
    return p_.answeredOnce ? options_.requestTimeout : options_.startupTimeout;
  }

  // The answer to request k (NOTE [Sampler line protocol]).
  LineProtocolAnswer readAnswer(std::size_t k) {
    std::string line;
    try {
      line = channel_.readLine(LineChannel::Clock::now() + answerTimeout());
    } catch (const LineChannelError& e) {
      p_.fail(sampler_, whatWentWrong(e, k), e.peerEnded());
    }
    try {
      LineProtocolAnswer answer = parseLineProtocolAnswer(line);
      p_.answeredOnce = true;
      return answer;
    } catch (const ProtocolError& e) {
      p_.fail(sampler_, fmt::format("answered {} with {}", describeRequest(k), e.what()), false);
    }
  }

  // The channel's failure while waiting for the answer to request k, in the protocol's words.
  std::string whatWentWrong(const LineChannelError& e, std::size_t k) const {
    using Kind = LineChannelError::Kind;
    switch (e.kind()) {
      case Kind::kTimeout:
        return fmt::format("did not answer {} within {:.3g} s", describeRequest(k),
                           answerTimeout().count() / 1000.0);
      case Kind::kEndOfStream:
        return fmt::format("closed its stdout after answering {} of {} requests (next: {})", k,
                           requests_.size(), requestJson(requests_[k]));
      case Kind::kPeerStoppedReading:
        return fmt::format("stopped reading its stdin at {}", describeRequest(k));
      case Kind::kReceiveFailed:
        return fmt::format("its stdout failed: {}", e.what());
      case Kind::kLineTooLong:
        return fmt::format("answered {} with a line longer than {}", describeRequest(k),
                           mib(options_.maxLineBytes));
      case Kind::kTooMuchReceived:
        if (channel_.bytesReceived() > options_.maxTotalBytes) {
          return fmt::format("printed more than {} in all", mib(options_.maxTotalBytes));
        }
        return fmt::format("answered {} requests with more than {}", requests_.size(),
                           mib(options_.maxBatchBytes));
    }
    return e.what();
  }

  // Output nobody asked for (more lines than requests, buffered or still in the pipe) fails the
  // exchange; so does an EOF between requests where `eofIsFailure`.
  void refuseUnrequested(bool eofIsFailure) {
    const LineChannel::Unrequested u = channel_.unrequested();
    if (!u.bytes.empty()) {
      p_.fail(sampler_, fmt::format("printed more lines than requests: '{}'", excerpt(u.bytes)),
              false);
    }
    if (u.endOfStream && eofIsFailure) {
      p_.fail(sampler_, "closed its stdout between requests", true);
    }
  }

  Process& p_;
  LineChannel& channel_;
  const std::vector<ShardRequest>& requests_;
  const LineProtocolOptions& options_;
  std::string sampler_;
};

std::vector<std::vector<Index>> LineProtocolSampler::exchange(
    const std::vector<ShardRequest>& requests) {
  Process& p = *process_;
  if (p.failure) throw ProtocolError(*p.failure);
  std::vector<LineProtocolAnswer> answers = Exchange(p, requests, options_, name()).answers();
  p.answered += static_cast<std::int64_t>(answers.size());
  p.lastRequests = requests;
  p.lastLengths.clear();
  std::vector<std::vector<Index>> shards;
  for (std::size_t k = 0; k < answers.size(); ++k) {
    if (answers[k].error) {
      // The sampler refused a request: the stream is still in step, only this question failed.
      throw ConfigError(fmt::format("sampler `{}` answered {} with error: {}", name(),
                                    requestJson(requests[k]), *answers[k].error));
    }
    p.lastLengths.push_back(answers[k].length);
    shards.push_back(std::move(answers[k].indices));
  }
  return shards;
}

std::vector<Index> LineProtocolSampler::indices(const ShardRequest& request) {
  return std::move(exchange({request}).front());
}

std::optional<std::int64_t> LineProtocolSampler::declaredLength(const ShardRequest& request) {
  const Process& p = *process_;
  for (std::size_t k = 0; k < p.lastRequests.size(); ++k) {
    if (p.lastRequests[k] == request) {
      return p.lastLengths[k];
    }
  }
  return std::nullopt;
}

Partition LineProtocolSampler::partition(const SamplerCase& c) {
  DDPH_CHECK(c.numReplicas > 0, "num_replicas must be positive, got {}", c.numReplicas);
  std::vector<ShardRequest> requests;
  requests.reserve(static_cast<std::size_t>(c.numReplicas));
  for (std::int64_t r = 0; r < c.numReplicas; ++r) requests.push_back(c.forRank(r));
  Partition p = Partition::of(c);
  p.ranks = exchange(requests);
  const auto& lengths = process_->lastLengths;
  if (std::all_of(lengths.begin(), lengths.end(), [](const auto& l) { return l.has_value(); })) {
    for (const auto& l : lengths) p.declaredLengths.push_back(*l);
  }
  return p;
}

}  // namespace ddph::sampler
