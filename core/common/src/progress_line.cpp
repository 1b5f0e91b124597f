#include "ddph/common/progress_line.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "ddph/common/write_all.h"

namespace ddph::common {
namespace {

// Columns of the terminal on `fd`; a line as wide wraps and '\r' no longer returns to its start.
std::size_t columns(int fd) {
  winsize size{};
  if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 1) return size.ws_col;
  return 80;
}

}  // namespace

ProgressLine::ProgressLine(int fd, Status status, std::chrono::milliseconds interval)
    : fd_(fd), status_(std::move(status)), interval_(interval) {
  if (::isatty(fd_) == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draw();
  }
  thread_ = std::thread([this] { run(); });
}

ProgressLine::~ProgressLine() { stop(); }

void ProgressLine::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) draw();
}

void ProgressLine::draw() {
  std::string text = status_();
  const std::size_t width = columns(fd_) - 1;
  if (text.size() > width) text.resize(width);
  writeAll(fd_, "\r" + text + "\x1b[K");
  drawn_ = true;
}

void ProgressLine::clear() {
  if (drawn_) writeAll(fd_, "\r\x1b[K");
  drawn_ = false;
}

void ProgressLine::printAbove(const std::function<void()>& write) {
  if (!active()) {
    write();
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  clear();
  write();
  if (!stopping_) draw();
}

void ProgressLine::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  clear();
}

std::string ProgressLine::formatElapsed(std::chrono::steady_clock::duration elapsed) {
  const auto total = std::chrono::duration_cast<std::chrono::seconds>(elapsed).count();
  const auto h = total / 3600, m = (total / 60) % 60, s = total % 60;
  if (h > 0) return fmt::format("{}:{:02}:{:02}", h, m, s);
  return fmt::format("{}:{:02}", m, s);
}

}  // namespace ddph::common
