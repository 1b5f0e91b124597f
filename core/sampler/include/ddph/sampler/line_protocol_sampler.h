#pragma once
// LineProtocolSampler: a Sampler answered by a child process over the line protocol of
// `ddp-sim check-sampler`, so samplers written in any language can be checked.
//
// NOTE [Sampler line protocol]
// The command is started once and serves every request of the run. Each request is one JSON
// object on one line of its stdin:
//   {"dataset_size":N,"num_replicas":W,"rank":R,"epoch":E,"seed":S}
// with, only when the epoch is resumed (the `elastic` contract), the earlier runs of the epoch:
//   …,"resume":[{"num_replicas":W1,"consumed":c1},…]}   (oldest first; NOTE [Elastic resume])
// and the sampler answers each, in order, with one line on its stdout:
//   {"indices":[…]}                       (optionally "length": what len(sampler) says)
//   {"error":"…"}                         (it rejects the request)
// All W requests of a partition are written before the answers are read (the pipes carry them
// concurrently), so a sampler must not wait for more input before answering a line. stderr is
// left to the user. A sampler that prints something that is not such a line, answers too few or
// too many lines, exits, does not answer within the per-request timeout, or sends a line longer
// than the limits is killed (its whole process group) and reaped, and the call throws
// ProtocolError; every later call throws the same error without asking again.
//
// The command runs in its own process group (so a kill reaches what it starts) with
// PR_SET_PDEATHSIG=SIGKILL: it dies with the thread that constructed the sampler, so no sampler
// outlives a crashed checker. Construct it on a thread that lives as long as the sampler is used.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/sampler/sampler.h"

namespace ddph::sampler {

struct LineProtocolOptions {
  /// Deadline for each answer, counted from the request (or the previous answer).
  std::chrono::milliseconds requestTimeout{10'000};
  /// Deadline for the first answer, which includes the command's start-up (e.g. `import torch`).
  std::chrono::milliseconds startupTimeout{60'000};
  std::size_t maxLineBytes = std::size_t{64} << 20;    ///< one response line
  std::size_t maxBatchBytes = std::size_t{512} << 20;  ///< the answers to one partition
  std::size_t maxTotalBytes = std::size_t{4} << 30;    ///< everything the command prints
  /// Grace the command gets to exit by itself after its stdin is closed, before it is killed.
  std::chrono::milliseconds exitGrace{500};
};

/// The line-protocol request for `request`, without the newline.
std::string requestJson(const ShardRequest& request);
/// The line-protocol response: {"indices":[…]} and, when given, "length".
std::string responseJson(const std::vector<Index>& indices,
                         const std::optional<std::int64_t>& declaredLength = std::nullopt);

/// One answer line of the protocol: the indices (and "length" when sent), or the sampler's error.
struct LineProtocolAnswer {
  std::vector<Index> indices;
  std::optional<std::int64_t> length;
  std::optional<std::string> error;  ///< {"error": …}: the sampler rejected the request
};

/// Parses one answer line (without its '\n'; a trailing '\r' is dropped). Throws ProtocolError
/// saying what the line is ("a line that is not JSON: '…'"); the sampler prefixes the request.
/// Pure: the exchange's parser, exposed for fuzzing (fuzz/line_protocol_fuzz.cpp).
LineProtocolAnswer parseLineProtocolAnswer(std::string_view line);

class LineProtocolSampler final : public Sampler {
 public:
  /// Starts `command` (argv; the program is searched on PATH when it has no '/'). Throws
  /// ConfigError when it cannot be started.
  explicit LineProtocolSampler(std::vector<std::string> command, LineProtocolOptions options = {});
  /// Closes the command's stdin, waits `exitGrace`, then kills its process group and reaps it.
  ~LineProtocolSampler() override;

  LineProtocolSampler(const LineProtocolSampler&) = delete;
  LineProtocolSampler& operator=(const LineProtocolSampler&) = delete;

  /// The command line, shell-quoted.
  std::string name() const override;
  std::vector<Index> indices(const ShardRequest& request) override;
  /// The "length" of the last answer for this request, if the sampler sent one.
  std::optional<std::int64_t> declaredLength(const ShardRequest& request) override;
  /// Sends the W requests of the partition in one write and reads the W answers.
  Partition partition(const SamplerCase& c) override;

  const std::vector<std::string>& command() const { return command_; }
  /// Requests answered so far.
  std::int64_t requestsAnswered() const;
  /// Whether the command is still running and has not broken the protocol.
  bool alive() const;
  /// Ends the command now (as the destructor does). Later calls throw ProtocolError.
  void close();

 private:
  struct Process;
  class Exchange;
  /// One request a line, one answer a line; throws ProtocolError (and kills the command) when the
  /// protocol breaks, ConfigError when the sampler answers {"error":…}.
  std::vector<std::vector<Index>> exchange(const std::vector<ShardRequest>& requests);

  std::vector<std::string> command_;
  LineProtocolOptions options_;
  std::unique_ptr<Process> process_;
};

/// `arg` quoted for a POSIX shell (unchanged when it needs no quoting).
std::string shellQuote(const std::string& arg);

}  // namespace ddph::sampler
