#pragma once
// What every fuzz target shares: the libFuzzer entry point's declaration, and the input read as a
// command line (one argument a line) for the argument-parsing targets.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace ddph::fuzz {

/// The input as arguments: one a line ('\n'), the program's name first. A file of a corpus reads
/// like the command line it stands for.
inline std::vector<std::string> argumentsOf(const std::uint8_t* data, std::size_t size,
                                            const std::string& program) {
  std::vector<std::string> args{program};
  std::string current;
  for (std::size_t k = 0; k < size; ++k) {
    if (data[k] == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[k]);
    }
  }
  if (!current.empty()) args.push_back(current);
  return args;
}

}  // namespace ddph::fuzz
