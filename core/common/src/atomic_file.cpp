#include "ddph/common/atomic_file.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "ddph/common/error.h"
#include "ddph/common/write_all.h"

namespace ddph::common {

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
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    throw ConfigError(fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
  }
  // Every byte written and on the disk before the rename: a full disk (or a file-size limit) fails
  // here, and the file the user had is still the one at `path`.
  int error = writeAll(fd, content);
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw Error(fmt::format("cannot write '{}': {}", path.string(), std::strerror(error)));
  }
  commitTempFile(temp, path);
}

}  // namespace ddph::common
