// WorldStop: NOTE [Stopping a world] in world_stop.h.
#include "world_stop.h"

#include <signal.h>

#include <fstream>
#include <string>

namespace ddph::launch {

bool WorldStop::begin(pid_t group) {
  if (stopping_) return false;
  stopping_ = true;
  killAt_ = Clock::now() + grace_;
  if (group != 0) {
    ::killpg(group, SIGTERM);
    ::killpg(group, SIGCONT);
  }
  return true;
}

bool WorldStop::kill(pid_t group) {
  if (!stopping_ || killSent_) return false;
  if (group != 0) ::killpg(group, SIGKILL);
  killSent_ = true;
  return true;
}

bool WorldStop::endedByStop(int signal) const {
  return stopping_ && (signal == SIGTERM || (signal == SIGKILL && killSent_));
}

bool inStopState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < line.size() &&
         (line[close + 2] == 'T' || line[close + 2] == 't');
}

}  // namespace ddph::launch
