#include "ddph/common/private_folder.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "ddph/common/error.h"

namespace ddph::common {

PrivateFolder::PrivateFolder(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      fmt::format("{}/{}XXXXXX", base != nullptr && *base != '\0' ? base : "/tmp", prefix);
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw ConfigError(fmt::format("cannot create a folder {}: {}", pattern, std::strerror(errno)));
  }
  path_ = std::move(pattern);
}

PrivateFolder::~PrivateFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace ddph::common
