#include "ddph/launch/own_pss.h"

#include <fstream>
#include <sstream>
#include <string>

namespace ddph::launch {

std::optional<double> ownPssMb() {
  std::ifstream rollup("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(rollup, line)) {
    if (line.rfind("Pss:", 0) != 0) continue;
    std::istringstream fields(line.substr(4));
    double kb = 0;
    if (fields >> kb) return kb / 1024.0;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace ddph::launch
