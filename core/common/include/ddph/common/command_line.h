#pragma once
// The command-line parse every ddp-harness tool does the same way (CLI11): --help and --version
// print and exit 0; a bad argument is one line on stderr and exit 2 (kExitUsage). The line names
// the bad token as users of other command lines expect ("unknown option '--audti'; did you mean
// '--audit'?", "unknown subcommand 'lauch'; did you mean 'launch'? …") where CLI11's own message
// would not ("The following arguments were not expected: -- --audti"). Header-only, for the
// executables: it needs CLI11, which ddph::core's other headers do not.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/common/error.h"

namespace ddph::common {

namespace command_line_detail {

// Levenshtein distance: insertions, deletions and substitutions.
inline std::size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The one name `token` most likely meant: the nearest within two edits (and less than half its
// length), else the only name it is a prefix of; nothing when none stands out.
inline std::optional<std::string> closestName(std::string_view token,
                                              const std::vector<std::string>& names) {
  std::optional<std::string> best;
  std::size_t bestDistance = 3;
  bool tie = false;
  for (const auto& name : names) {
    const std::size_t d = editDistance(token, name);
    if (d * 2 >= name.size()) continue;
    if (d < bestDistance) {
      best = name;
      bestDistance = d;
      tie = false;
    } else if (d == bestDistance && best != name) {
      tie = true;
    }
  }
  if (best && !tie) return best;
  std::optional<std::string> prefixed;
  for (const auto& name : names) {
    if (token.size() < 3 || name.rfind(token, 0) != 0) continue;
    if (prefixed) return std::nullopt;
    prefixed = name;
  }
  return prefixed;
}

inline std::vector<std::string> optionNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// The subcommands a user is shown (a subcommand in the group "" is hidden: a test helper).
inline std::vector<CLI::App*> visibleSubcommands(CLI::App& app) {
  return app.get_subcommands([](CLI::App* sub) { return !sub->get_group().empty(); });
}

inline bool isNumber(std::string_view token) {
  if (token.size() < 2 || token[0] != '-') return false;
  return token.find_first_not_of("0123456789.eE+-") == std::string_view::npos;
}

// The one line for a command line CLI11 refused, when a token in it is an unknown option or
// subcommand; nothing when the fault is elsewhere (a missing value, a bad number: CLI11 says it).
inline std::optional<std::string> diagnoseCommandLine(CLI::App& app, int argc, char** argv,
                                                      std::string_view tool) {
  CLI::App* current = &app;
  std::string where(tool);
  bool subcommandChosen = false;
  bool afterPositional = false;
  const auto subcommandNames = [&] {
    std::vector<std::string> names;
    for (CLI::App* sub : visibleSubcommands(app)) names.push_back(sub->get_name());
    return names;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string token = argv[i];
    if (token == "--") break;  // the rest is a program's own arguments
    if (token.size() > 1 && token[0] == '-' && !isNumber(token)) {
      const bool isLong = token.rfind("--", 0) == 0;
      const std::string name = isLong ? token.substr(0, token.find('=')) : token.substr(0, 2);
      const CLI::Option* opt = current->get_option_no_throw(name);
      if (!opt) {
        const auto meant = closestName(name, optionNames(*current));
        return meant ? fmt::format("unknown option '{}'; did you mean '{}'?", name, *meant)
                     : fmt::format("unknown option '{}' ({} --help lists the options{})", name, where,
                                   afterPositional ? "; a program's own arguments go after --" : "");
      }
      const bool takesValue = opt->get_type_size_max() > 0 && opt->get_expected_max() > 0;
      const bool valueAttached = isLong ? token.find('=') != std::string::npos : token.size() > 2;
      if (takesValue && !valueAttached && opt->get_expected_max() == 1) ++i;
      continue;
    }
    if (subcommandChosen || visibleSubcommands(app).empty()) {  // a positional argument
      afterPositional = true;
      continue;
    }
    CLI::App* chosen = nullptr;
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->check_name(token)) chosen = sub;
    }
    if (!chosen) {
      const std::vector<std::string> names = subcommandNames();
      const auto meant = closestName(token, names);
      return fmt::format("unknown subcommand '{}'{} (the subcommands: {})", token,
                         meant ? fmt::format("; did you mean '{}'?", *meant) : std::string(),
                         fmt::join(names, ", "));
    }
    current = chosen;
    where = fmt::format("{} {}", tool, chosen->get_name());
    subcommandChosen = true;
  }
  if (!subcommandChosen && app.get_require_subcommand_min() > 0) {
    return fmt::format("no subcommand given; the subcommands: {} ({} --help says what each does)",
                       fmt::join(subcommandNames(), ", "), tool);
  }
  return std::nullopt;
}

}  // namespace command_line_detail

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
    const auto named = command_line_detail::diagnoseCommandLine(app, argc, argv, tool);
    fmt::print(stderr, "{}: error: {}\n", tool, named.value_or(e.what()));
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace ddph::common
