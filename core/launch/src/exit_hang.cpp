// ExitHangWatch: NOTE [Hung at exit] in exit_hang.h.
#include "exit_hang.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace ddph::launch {

std::optional<std::uint64_t> cpuTicks(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  const auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return std::nullopt;
  // After the name: state (field 3) … utime (14), stime (15).
  std::istringstream fields(line.substr(close + 1));
  std::string skip;
  for (int field = 3; field < 14; ++field) fields >> skip;
  std::uint64_t user = 0, system = 0;
  if (!(fields >> user >> system)) return std::nullopt;
  return user + system;
}

long clockTicksPerSecond() {
  const long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? ticks : 100;
}

bool ExitHangWatch::idle(pid_t pid, Clock::time_point now) {
  const auto ticks = cpu_(pid);
  if (!ticks) return false;  // gone: it is being reaped
  auto [it, first] = seen_.try_emplace(pid, Window{*ticks, now});
  if (first) return false;
  Window& window = it->second;
  const auto length = now - window.since;
  if (length < settle_) return false;
  // At most 1 % of a core over the window: used / ticksPerSecond <= seconds / 100.
  const double seconds = std::chrono::duration<double>(length).count();
  const double used = static_cast<double>(*ticks - window.ticks);
  if (used * 100.0 <= seconds * static_cast<double>(ticksPerSecond_)) return true;
  window = Window{*ticks, now};
  return false;
}

}  // namespace ddph::launch
