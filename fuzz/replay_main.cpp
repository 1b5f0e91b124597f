// The main of a fuzz target in a build without libFuzzer: runs LLVMFuzzerTestOneInput once over
// every file of the folders (or files) given, in name order, so the seed corpus and every
// regression input run under ctest (fuzz.<target>.corpus) with any compiler. The paths after
// --may-be-missing may not exist (a target with no regression input has no folder). A crash, a sanitizer
// report or an exception escaping fails the test; the file is named on stderr before it runs.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<fs::path> files;
  bool mayBeMissing = false;
  for (int k = 1; k < argc; ++k) {
    std::error_code ec;
    const fs::path path = argv[k];
    if (path == "--may-be-missing") {
      mayBeMissing = true;
    } else if (mayBeMissing && !fs::exists(path, ec)) {
      continue;
    } else if (fs::is_directory(path, ec)) {
      for (const auto& entry : fs::directory_iterator(path, ec)) {
        if (entry.is_regular_file(ec)) files.push_back(entry.path());
      }
    } else if (fs::is_regular_file(path, ec)) {
      files.push_back(path);
    } else {
      std::fprintf(stderr, "replay: '%s' is neither a file nor a folder\n", argv[k]);
      return 2;
    }
    if (ec) {
      std::fprintf(stderr, "replay: cannot list '%s': %s\n", argv[k], ec.message().c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "replay: cannot read '%s'\n", file.c_str());
      return 2;
    }
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu inputs, none crashed\n", files.size());
  return files.empty() ? 2 : 0;
}
