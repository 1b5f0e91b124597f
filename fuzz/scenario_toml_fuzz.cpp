// Fuzz target: the TOML scenario loader (ddph::scenario::parseScenario, what `ddp-sim run FILE`
// reads). A ConfigError is the expected verdict on a bad file; a scenario that parsed must be valid
// (scenario_file.h: nothing is checked later), so validateScenario may not throw on it.
#include <cstdint>
#include <optional>
#include <string_view>

#include "ddph/common/error.h"
#include "ddph/scenario/scenario_file.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<ddph::scenario::Scenario> scenario;
  try {
    scenario = ddph::scenario::parseScenario(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml");
  } catch (const ddph::common::ConfigError&) {
    return 0;
  }
  ddph::scenario::validateScenario(*scenario);  // outside the try: an error here escapes, a finding
  return 0;
}
