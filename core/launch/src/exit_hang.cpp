// ExitHangWatch: NOTE [Hung at exit] in exit_hang.h.
#include "exit_hang.h"

#include <sys/syscall.h>

#include <fstream>
#include <string>

namespace ddph::launch {

std::optional<std::uint64_t> mainThreadFutex(pid_t pid) {
  // "202 0x7f4926534990 0x109 …": the system call's number, then its arguments (the futex's
  // address first); "running" or "-1 …" when it is in none.
  std::ifstream in("/proc/" + std::to_string(pid) + "/syscall");
  long number = -1;
  std::string address;
  if (!(in >> number >> address) || number != SYS_futex) return std::nullopt;
  try {
    return std::stoull(address, nullptr, 16);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool ExitHangWatch::hung(pid_t pid, Clock::time_point now) {
  const auto futex = wait_(pid);
  if (!futex) {
    seen_.erase(pid);
    return false;
  }
  auto [it, first] = seen_.try_emplace(pid, Wait{*futex, now});
  if (first) return false;
  if (it->second.futex != *futex) {
    it->second = Wait{*futex, now};
    return false;
  }
  return now - it->second.since >= settle_;
}

}  // namespace ddph::launch
