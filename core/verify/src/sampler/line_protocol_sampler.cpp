#include "ddph/verify/line_protocol_sampler.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <thread>

#include "ddph/common/child_process.h"
#include "ddph/common/error.h"

namespace ddph {
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

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// NOTE [SIGPIPE]
// Writing to a sampler that has exited raises SIGPIPE, which would kill the checker. Rather than
// ignoring SIGPIPE for the whole process (and for every child it starts), the signal is blocked
// around each write and a pending one is consumed, so the write fails with EPIPE instead.
ssize_t writeNoSigpipe(int fd, const char* data, std::size_t size) {
  sigset_t pipeSet, old;
  sigemptyset(&pipeSet);
  sigaddset(&pipeSet, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipeSet, &old);
  const ssize_t n = ::write(fd, data, size);
  const int savedErrno = errno;
  if (n < 0 && savedErrno == EPIPE) {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipeSet, nullptr, &zero) > 0) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = savedErrno;
  return n;
}

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

// The running command and our ends of its pipes. Owned by one LineProtocolSampler.
struct LineProtocolSampler::Process {
  std::unique_ptr<ChildProcess> child;  // leads its own process group
  int in = -1;         // write end of its stdin
  int out = -1;        // read end of its stdout
  std::string buffer;  // bytes read, not yet consumed as lines
  bool answeredOnce = false;
  std::int64_t answered = 0;
  std::size_t totalBytes = 0;
  std::optional<std::string> failure;
  // The last exchange's requests and declared lengths, for declaredLength().
  std::vector<ShardRequest> lastRequests;
  std::vector<std::optional<std::int64_t>> lastLengths;

  bool running() const { return child && child->pid() > 0; }

  void closeIn() {
    if (in >= 0) ::close(in);
    in = -1;
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
    if (out >= 0) ::close(out);
    out = -1;
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
  process_->in = process_->child->takePipe(0);
  process_->out = process_->child->takePipe(1);
  setNonBlocking(process_->in);
  setNonBlocking(process_->out);
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

namespace {

// One answer line, or a failure naming `request` (NOTE [Sampler line protocol]).
template <typename Fail>
LineProtocolAnswer parseAnswer(std::string_view line, const std::string& request, Fail&& fail) {
  try {
    return parseLineProtocolAnswer(line);
  } catch (const ProtocolError& e) {
    fail(fmt::format("answered {} with {}", request, e.what()), false);
    throw;  // fail throws; for the compiler
  }
}

// Output nobody asked for (more lines than requests, buffered or still in the pipe) fails the
// exchange before it can be mistaken for an answer; so does an EOF between requests where
// `eofIsFailure`.
template <typename Fail>
void refuseSurplus(int out, const std::string& buffer, bool eofIsFailure, Fail&& fail) {
  if (!buffer.empty()) {
    fail(fmt::format("printed more lines than requests: '{}'", excerpt(buffer)), false);
  }
  pollfd pending{out, POLLIN, 0};
  if (::poll(&pending, 1, 0) <= 0) return;
  char chunk[256];
  const ssize_t n = ::read(out, chunk, sizeof chunk);
  if (n > 0) {
    fail(fmt::format("printed more lines than requests: '{}'",
                     excerpt(std::string_view(chunk, static_cast<std::size_t>(n)))),
         false);
  }
  if (n == 0 && eofIsFailure) fail("closed its stdout between requests", true);
}

// One exchange: writes every request, reads one answer a request, enforcing the deadlines and
// limits. `fail` kills the command and throws.
template <typename Fail>
std::vector<LineProtocolAnswer> exchangeLines(int in, int out, std::string& buffer, bool& answeredOnce,
                             std::size_t& totalBytes, const std::vector<ShardRequest>& requests,
                             const LineProtocolOptions& options, Fail&& fail) {
  // Output nobody asked for (a previous answer had more lines than requests, or the command
  // exited between requests) is caught before it can be mistaken for an answer.
  refuseSurplus(out, buffer, /*eofIsFailure=*/true, fail);

  std::string payload;
  for (const auto& r : requests) {
    payload += requestJson(r);
    payload += '\n';
  }
  std::size_t written = 0;
  std::vector<LineProtocolAnswer> answers;
  answers.reserve(requests.size());
  std::size_t batchBytes = 0;
  std::size_t scanned = 0;  // bytes of buffer known to hold no newline
  auto deadline = Clock::now() + (answeredOnce ? options.requestTimeout : options.startupTimeout);
  std::vector<char> chunk(1 << 18);

  auto describeRequest = [&](std::size_t k) {
    return fmt::format("request {} of {} ({})", k + 1, requests.size(), requestJson(requests[k]));
  };

  auto takeLine = [&](std::string_view line) {
    answers.push_back(parseAnswer(line, describeRequest(answers.size()), fail));
    answeredOnce = true;
    deadline = Clock::now() + options.requestTimeout;
  };

  while (answers.size() < requests.size()) {
    pollfd fds[2] = {{out, POLLIN, 0}, {in, POLLOUT, 0}};
    const nfds_t count = written < payload.size() ? 2 : 1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      const auto limit = answeredOnce ? options.requestTimeout : options.startupTimeout;
      fail(fmt::format("did not answer {} within {:.3g} s", describeRequest(answers.size()),
                       limit.count() / 1000.0),
           false);
    }
    const int ready = ::poll(fds, count, static_cast<int>(std::min<long>(left.count() + 1, 1 << 30)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("poll on the sampler's pipes failed: {}", std::strerror(errno)));
    }
    if (count == 2 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = writeNoSigpipe(in, payload.data() + written, payload.size() - written);
      if (n > 0) {
        written += static_cast<std::size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        fail(fmt::format("stopped reading its stdin at {}", describeRequest(answers.size())), true);
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::read(out, chunk.data(), chunk.size());
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        fail(fmt::format("its stdout failed: {}", std::strerror(errno)), true);
      }
      if (n == 0) {
        fail(fmt::format("closed its stdout after answering {} of {} requests (next: {})",
                         answers.size(), requests.size(), requestJson(requests[answers.size()])),
             true);
      }
      totalBytes += static_cast<std::size_t>(n);
      batchBytes += static_cast<std::size_t>(n);
      if (totalBytes > options.maxTotalBytes) {
        fail(fmt::format("printed more than {} in all", mib(options.maxTotalBytes)), false);
      }
      if (batchBytes > options.maxBatchBytes) {
        fail(fmt::format("answered {} requests with more than {}", requests.size(),
                         mib(options.maxBatchBytes)),
             false);
      }
      buffer.append(chunk.data(), static_cast<std::size_t>(n));
      std::size_t start = 0;
      while (true) {
        const std::size_t nl = buffer.find('\n', std::max(start, scanned));
        if (nl == std::string::npos) break;
        if (answers.size() == requests.size()) {
          fail(fmt::format("printed more lines than requests: '{}'",
                           excerpt(std::string_view(buffer).substr(start))),
               false);
        }
        if (nl - start > options.maxLineBytes) {
          fail(fmt::format("answered {} with a line longer than {}",
                           describeRequest(answers.size()), mib(options.maxLineBytes)),
               false);
        }
        takeLine(std::string_view(buffer).substr(start, nl - start));
        start = nl + 1;
      }
      buffer.erase(0, start);
      scanned = buffer.size();
      if (buffer.size() > options.maxLineBytes) {
        fail(fmt::format("answered {} with a line longer than {}",
                         describeRequest(answers.size()), mib(options.maxLineBytes)),
             false);
      }
    }
  }
  // Surplus already in the pipe is caught now rather than before the next request (an EOF is
  // left for the next request to report).
  refuseSurplus(out, buffer, /*eofIsFailure=*/false, fail);
  return answers;
}

}  // namespace

std::vector<std::vector<Index>> LineProtocolSampler::exchange(
    const std::vector<ShardRequest>& requests) {
  Process& p = *process_;
  if (p.failure) throw ProtocolError(*p.failure);
  // Kills the command and throws; `ended` says it went away by itself, so its exit status is
  // worth a short wait.
  auto fail = [&](const std::string& what, bool ended) {
    std::string status;
    if (ended) {
      p.closeIn();
      if (auto s = p.waitFor(std::chrono::milliseconds(1000))) status = "; it " + s->describe();
    }
    const bool stillRunning = p.running();
    p.kill();
    p.failure = fmt::format("sampler `{}` {}{}{}", name(), what, status,
                            stillRunning ? "; killed it" : "");
    throw ProtocolError(*p.failure);
  };
  std::vector<LineProtocolAnswer> answers = exchangeLines(p.in, p.out, p.buffer, p.answeredOnce, p.totalBytes,
                                               requests, options_, fail);
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

}  // namespace ddph
