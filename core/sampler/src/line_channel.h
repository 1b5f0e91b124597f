#pragma once
// LineChannel: lines of text to and from a child process over its stdin and stdout pipes, the
// transport under the sampler line protocol (NOTE [Sampler line protocol] in
// ddph/sampler/line_protocol_sampler.h). It knows lines, bytes and deadlines, nothing of JSON.
//
// Sent lines are queued and written while readLine waits, so a peer that answers as it reads
// never deadlocks against us however many lines are queued. Not thread-safe: one owner.

#include <chrono>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/common/error.h"

namespace ddph::sampler {

/// Why a LineChannel call could not go on; the owner turns it into a message with its context.
class LineChannelError : public common::Error {
 public:
  enum class Kind {
    kTimeout,             ///< no complete line before the deadline
    kEndOfStream,         ///< the peer closed its end of the receiving pipe
    kPeerStoppedReading,  ///< writing failed: the peer closed (or broke) the sending pipe
    kReceiveFailed,       ///< reading failed (detail: strerror)
    kLineTooLong,         ///< a line (or an unfinished one) longer than maxLineBytes
    kTooMuchReceived,     ///< more bytes received in all than the cap (capBytesReceived)
  };
  LineChannelError(Kind kind, const std::string& detail);
  Kind kind() const { return kind_; }
  /// Whether the peer went away (rather than misbehaved while running).
  bool peerEnded() const;

 private:
  Kind kind_;
};

class LineChannel {
 public:
  using Clock = std::chrono::steady_clock;

  /// Takes ownership of both pipe ends (made non-blocking; closed by the destructor).
  LineChannel(int sendFd, int receiveFd, std::size_t maxLineBytes);
  ~LineChannel();
  LineChannel(const LineChannel&) = delete;
  LineChannel& operator=(const LineChannel&) = delete;

  /// Queues `line` and a '\n'; it is written while readLine waits.
  void send(std::string_view line);
  /// The next line received (without its '\n'), writing queued lines meanwhile. Throws
  /// LineChannelError, or Error when poll itself fails.
  std::string readLine(Clock::time_point deadline);

  /// What the peer sent that no readLine took, without waiting: bytes buffered or already in
  /// the pipe, and whether the pipe is at its end.
  struct Unrequested {
    std::string bytes;
    bool endOfStream = false;
  };
  Unrequested unrequested();

  /// readLine throws kTooMuchReceived once more than `limit` bytes have been received in all.
  void capBytesReceived(std::size_t limit) { receiveCap_ = limit; }
  std::size_t bytesReceived() const { return bytesReceived_; }

  /// Closes the sending pipe (the peer reads EOF); queued lines are dropped. Idempotent.
  void closeSending();
  /// Closes both pipes. Idempotent.
  void close();

 private:
  bool takeBufferedLine(std::string& line);
  void waitForTraffic(Clock::time_point deadline);
  void sendSome();
  void receiveSome();

  int sendFd_;
  int receiveFd_;
  std::size_t maxLineBytes_;
  std::string unsent_;
  std::size_t unsentFrom_ = 0;
  std::string received_;
  std::size_t lineStart_ = 0;  // received_ before it is taken
  std::size_t scanned_ = 0;    // received_ before it holds no '\n'
  std::size_t bytesReceived_ = 0;
  std::size_t receiveCap_ = std::numeric_limits<std::size_t>::max();
  std::vector<char> chunk_;
};

}  // namespace ddph::sampler
