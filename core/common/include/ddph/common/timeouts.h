#pragma once
// The longest wait a user may ask for. A timeout is read as a double of seconds and later turned
// into integral milliseconds (std::chrono): inf, NaN or 1e300 there is undefined behaviour, so
// every timeout read from a file or a command line is checked with isSaneTimeout first.

namespace ddph {

/// A week, in seconds: longer than any run the harness is meant for, far inside int64 milliseconds.
inline constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600.0;

/// True for a finite timeout in (0, kMaxTimeoutSeconds]; false for 0, negatives, NaN and inf.
constexpr bool isSaneTimeout(double seconds) {
  return seconds > 0 && seconds <= kMaxTimeoutSeconds;
}

}  // namespace ddph
