#pragma once
// For the engines (comm, libtorch, ddp): maps what c10d or Gloo threw to ddph's typed errors, so that every
// communicator names the operation and the step the same way (communicator.h, "Errors").

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>
#include <string>
#include <string_view>

#include "ddph/common/error.h"

namespace ddph::comm::detail {

inline bool looksLikeTimeout(const std::string& message) {
  std::string lower(message);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("timed out") != std::string::npos ||
         lower.find("timeout") != std::string::npos;
}

inline std::string firstLine(const std::string& message) {
  const auto end = message.find('\n');
  return end == std::string::npos ? message : message.substr(0, end);
}

/// A timeout (by its message: neither c10d 1.13 nor Gloo has a distinct type for every timeout)
/// becomes TimeoutError, anything else ProtocolError (a peer died or broke the connection).
[[noreturn]] inline void rethrowTyped(const std::exception& e, std::string_view operation,
                                      std::string_view step, std::chrono::milliseconds timeout) {
  const std::string what = firstLine(e.what());
  if (looksLikeTimeout(what)) {
    throw common::TimeoutError(
        fmt::format("{} at {} timed out after {} ms: {}", operation, step, timeout.count(), what));
  }
  throw common::ProtocolError(
      fmt::format("{} at {} failed (a peer died or left): {}", operation, step, what));
}

}  // namespace ddph::comm::detail
