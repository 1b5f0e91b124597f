#include "ddph/common/atomic_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include "ddph/common/error.h"

namespace ddph {

namespace fs = std::filesystem;

fs::path tempPathFor(const fs::path& path) {
  fs::path temp = path;
  temp += ".tmp." + std::to_string(::getpid());
  return temp;
}

void commitTempFile(const fs::path& temp, const fs::path& path) {
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw Error(fmt::format("cannot write '{}': {}", path.string(), ec.message()));
  }
}

void writeFileAtomically(const fs::path& path, std::string_view content) {
  const fs::path temp = tempPathFor(path);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw ConfigError(fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
    }
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      out.close();
      std::error_code ignored;
      fs::remove(temp, ignored);
      throw Error(fmt::format("cannot write '{}'", path.string()));
    }
  }
  commitTempFile(temp, path);
}

}  // namespace ddph
