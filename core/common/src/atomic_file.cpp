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

namespace {

// The reason a file cannot be created in `folder`, or "" when one can (made and removed).
std::string cannotCreateIn(const fs::path& folder) {
  const fs::path probe = folder / (".ddph-write-probe." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno == EEXIST ? std::string() : std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

}  // namespace

void checkWritableFile(const fs::path& path, std::string_view what) {
  std::error_code ec;
  DDPH_CHECK(!path.empty(), "cannot write the {} to '': the path is empty", what);
  DDPH_CHECK(!fs::is_directory(path, ec), "cannot write the {} to '{}': it is a folder", what,
             path.string());
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  DDPH_CHECK(fs::is_directory(folder, ec), "cannot write the {} to '{}': {} '{}'", what,
             path.string(), fs::exists(folder, ec) ? "not a folder:" : "no folder",
             folder.string());
  const std::string why = cannotCreateIn(folder);
  DDPH_CHECK(why.empty(), "cannot write the {} to '{}': cannot create a file in '{}': {}", what,
             path.string(), folder.string(), why);
}

void checkWritableFolder(const fs::path& dir, std::string_view what) {
  std::error_code ec;
  DDPH_CHECK(!dir.empty(), "cannot write the {} to '': the path is empty", what);
  fs::path existing = fs::absolute(dir, ec);
  while (!fs::exists(existing, ec) && existing.has_relative_path()) existing = existing.parent_path();
  DDPH_CHECK(fs::is_directory(existing, ec), "cannot write the {} to '{}': '{}' is not a folder",
             what, dir.string(), existing.string());
  const std::string why = cannotCreateIn(existing);
  DDPH_CHECK(why.empty(), "cannot write the {} to '{}': cannot create a file in '{}': {}", what,
             dir.string(), existing.string(), why);
}

}  // namespace ddph::common
