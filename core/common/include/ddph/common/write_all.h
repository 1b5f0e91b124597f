#pragma once
// The one loop that writes a whole buffer to a file descriptor (short writes and EINTR retried).
#include <string_view>

namespace ddph::common {

/// Writes every byte of `data` to `fd`. Returns 0, or the errno of the write that failed (EIO for a
/// write that wrote nothing).
int writeAll(int fd, std::string_view data);

}  // namespace ddph::common
