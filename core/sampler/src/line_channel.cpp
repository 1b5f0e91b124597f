#include "line_channel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ddph::sampler {

using common::Error;

namespace {

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// NOTE [SIGPIPE]
// Writing to a peer that has exited raises SIGPIPE, which would kill the checker. Rather than
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

LineChannelError::LineChannelError(Kind kind, const std::string& detail)
    : Error(detail), kind_(kind) {}

bool LineChannelError::peerEnded() const {
  return kind_ == Kind::kEndOfStream || kind_ == Kind::kPeerStoppedReading ||
         kind_ == Kind::kReceiveFailed;
}

LineChannel::LineChannel(int sendFd, int receiveFd, std::size_t maxLineBytes)
    : sendFd_(sendFd), receiveFd_(receiveFd), maxLineBytes_(maxLineBytes), chunk_(1 << 18) {
  setNonBlocking(sendFd_);
  setNonBlocking(receiveFd_);
}

LineChannel::~LineChannel() { close(); }

void LineChannel::send(std::string_view line) {
  unsent_ += line;
  unsent_ += '\n';
}

std::string LineChannel::readLine(Clock::time_point deadline) {
  std::string line;
  while (!takeBufferedLine(line)) waitForTraffic(deadline);
  return line;
}

// The next complete line of received_, if any; an unfinished one may not outgrow the limit.
bool LineChannel::takeBufferedLine(std::string& line) {
  const std::size_t nl = received_.find('\n', std::max(lineStart_, scanned_));
  if (nl == std::string::npos) {
    received_.erase(0, lineStart_);
    lineStart_ = 0;
    scanned_ = received_.size();
    if (received_.size() > maxLineBytes_) {
      throw LineChannelError(LineChannelError::Kind::kLineTooLong, "an unfinished line too long");
    }
    return false;
  }
  if (nl - lineStart_ > maxLineBytes_) {
    throw LineChannelError(LineChannelError::Kind::kLineTooLong, "a line too long");
  }
  line.assign(received_, lineStart_, nl - lineStart_);
  lineStart_ = nl + 1;
  return true;
}

// Waits until either pipe is ready (sending only while lines are queued), then moves bytes.
void LineChannel::waitForTraffic(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0)
    throw LineChannelError(LineChannelError::Kind::kTimeout, "no line in time");
  pollfd fds[2] = {{receiveFd_, POLLIN, 0}, {sendFd_, POLLOUT, 0}};
  const nfds_t count = unsentFrom_ < unsent_.size() ? 2 : 1;
  const int ready = ::poll(fds, count, static_cast<int>(std::min<long>(left.count() + 1, 1 << 30)));
  if (ready < 0) {
    if (errno == EINTR) return;
    throw Error(fmt::format("poll on a line channel's pipes failed: {}", std::strerror(errno)));
  }
  if (count == 2 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) sendSome();
  if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) receiveSome();
}

void LineChannel::sendSome() {
  const ssize_t n =
      writeNoSigpipe(sendFd_, unsent_.data() + unsentFrom_, unsent_.size() - unsentFrom_);
  if (n < 0 && errno != EAGAIN && errno != EINTR) {
    throw LineChannelError(LineChannelError::Kind::kPeerStoppedReading, std::strerror(errno));
  }
  if (n > 0) unsentFrom_ += static_cast<std::size_t>(n);
  if (unsentFrom_ == unsent_.size()) {
    unsent_.clear();
    unsentFrom_ = 0;
  }
}

void LineChannel::receiveSome() {
  const ssize_t n = ::read(receiveFd_, chunk_.data(), chunk_.size());
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    throw LineChannelError(LineChannelError::Kind::kReceiveFailed, std::strerror(errno));
  }
  if (n == 0) throw LineChannelError(LineChannelError::Kind::kEndOfStream, "end of stream");
  bytesReceived_ += static_cast<std::size_t>(n);
  if (bytesReceived_ > receiveCap_) {
    throw LineChannelError(LineChannelError::Kind::kTooMuchReceived, "too much received");
  }
  received_.append(chunk_.data(), static_cast<std::size_t>(n));
}

LineChannel::Unrequested LineChannel::unrequested() {
  Unrequested u;
  pollfd pending{receiveFd_, POLLIN, 0};
  if (lineStart_ == received_.size() && ::poll(&pending, 1, 0) > 0) {
    char chunk[256];
    const ssize_t n = ::read(receiveFd_, chunk, sizeof chunk);
    if (n > 0) received_.append(chunk, static_cast<std::size_t>(n));
    u.endOfStream = n == 0;
  }
  u.bytes = received_.substr(lineStart_);
  return u;
}

void LineChannel::closeSending() {
  closeFd(sendFd_);
  unsent_.clear();
  unsentFrom_ = 0;
}

void LineChannel::close() {
  closeSending();
  closeFd(receiveFd_);
}

}  // namespace ddph::sampler
