#pragma once
// Errors and exit codes shared by every ddp-harness tool.
//
// Two tiers, as in c10d and Gloo: DDPH_CHECK for caller errors (bad arguments, bad files, bad
// requests) throws a typed ddph::common::Error with a one-line message; DDPH_ASSERT is for internal
// invariants and names the file and line. Every error type leaves the object that threw it in a
// valid state; none is retried internally.

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ddph::common {

/// Base of every error ddp-harness throws on purpose. `what()` is one line, meant for users.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad input from the caller: command-line arguments, a scenario file, a sampler request.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// A wait ran past its deadline. The message names the operation.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

/// A peer (rank process, external sampler) broke the protocol, crashed or answered garbage.
class ProtocolError : public Error {
 public:
  using Error::Error;
};

/// Documented exit codes of the ddp-harness executables.
enum ExitCode : int {
  kExitOk = 0,         ///< ran and every checked property held
  kExitViolation = 1,  ///< ran and a property was violated (or a rank failed)
  kExitUsage = 2,      ///< bad arguments, bad file or bad request; nothing was run
  kExitRuntime = 3,    ///< the tool itself failed (I/O error, internal error)
};

}  // namespace ddph::common

/// Caller error: throws ddph::common::ConfigError with a formatted one-line message.
#define DDPH_CHECK(cond, ...)                                                 \
  do {                                                                        \
    if (!(cond)) throw ::ddph::common::ConfigError(fmt::format(__VA_ARGS__)); \
  } while (0)

/// Internal invariant: a failure is a bug in ddp-harness.
#define DDPH_ASSERT(cond)                                                        \
  do {                                                                           \
    if (!(cond))                                                                 \
      throw ::ddph::common::Error(                                               \
          fmt::format("internal error: {} ({}:{})", #cond, __FILE__, __LINE__)); \
  } while (0)
