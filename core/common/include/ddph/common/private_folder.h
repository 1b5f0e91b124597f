#pragma once
// A folder of one's own for a run: created under $TMPDIR (else /tmp) by mkdtemp, so only its user
// can enter it (0700), and removed with everything in it when the object is destroyed.

#include <string>
#include <string_view>

namespace ddph::common {

class PrivateFolder {
 public:
  /// Creates `<TMPDIR>/<prefix>XXXXXX`; throws ConfigError (one line) when it cannot.
  explicit PrivateFolder(std::string_view prefix);
  ~PrivateFolder();
  PrivateFolder(const PrivateFolder&) = delete;
  PrivateFolder& operator=(const PrivateFolder&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ddph::common
