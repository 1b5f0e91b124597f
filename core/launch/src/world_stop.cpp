// WorldStop: NOTE [Stopping a world] in world_stop.h.
#include "world_stop.h"

#include <signal.h>

namespace ddph {

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

bool WorldStop::killIfGraceOver(pid_t group, Clock::time_point now) {
  return now >= killAt_ && kill(group);
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

}  // namespace ddph
