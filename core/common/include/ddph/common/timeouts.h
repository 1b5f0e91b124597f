#pragma once
// The longest wait a user may ask for. A timeout is read as a double of seconds and later turned
// into integral milliseconds (std::chrono): inf, NaN or 1e300 there is undefined behaviour, so
// every timeout read from a file or a command line is checked with isSaneTimeout first.

#include <string_view>

#include "ddph/common/error.h"

namespace ddph::common {

/// A week, in seconds: longer than any run the harness is meant for, far inside int64 milliseconds.
inline constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600.0;

/// True for a finite timeout in (0, kMaxTimeoutSeconds]; false for 0, negatives, NaN and inf.
constexpr bool isSaneTimeout(double seconds) {
  return seconds > 0 && seconds <= kMaxTimeoutSeconds;
}

/// The command-line check: ConfigError "OPTION must be positive and at most 604800 s (a week),
/// got X" unless isSaneTimeout(seconds).
inline void checkTimeoutOption(std::string_view option, double seconds) {
  DDPH_CHECK(isSaneTimeout(seconds), "{} must be positive and at most {} s (a week), got {}",
             option, kMaxTimeoutSeconds, seconds);
}

}  // namespace ddph::common
