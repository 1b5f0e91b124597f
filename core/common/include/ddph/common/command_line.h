#pragma once
// The command-line parse every ddp-harness tool does the same way (CLI11): --help and --version
// print and exit 0; a bad argument is one line on stderr and exit 2 (kExitUsage). Header-only, for
// the executables: it needs CLI11, which ddph::core's other headers do not.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <optional>
#include <string_view>

#include "ddph/common/error.h"

namespace ddph::common {

/// Parses argv into `app`. Returns the exit code when the program must stop here, nullopt when it
/// goes on: 0 after --help or --version, kExitUsage after "TOOL: error: ..." on stderr.
inline std::optional<int> parseCommandLine(CLI::App& app, int argc, char** argv,
                                           std::string_view tool) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "{}: error: {}\n", tool, e.what());
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace ddph::common
