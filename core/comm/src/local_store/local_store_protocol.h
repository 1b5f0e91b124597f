#pragma once
// The local store's frames (NOTE [Local store]). Both ends are processes of one machine: integers
// travel in host byte order.
//   request: op (1 byte) | key length (u32) | key | set: value length (u32) | value
//                                                 | add: delta (i64)
//   reply:   get: value length (u32) | value;  add: the new value (i64);  set: none
// A request that breaks these rules closes its connection.

#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "ddph/common/error.h"

namespace ddph::comm::local_store {

enum class Op : char { kSet = 'S', kGet = 'G', kAdd = 'A' };

inline constexpr std::size_t kMaxKeyBytes = 4096;
inline constexpr std::size_t kMaxValueBytes = std::size_t{64} << 20;

template <typename T>
void appendRaw(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

template <typename T>
T readRaw(const char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

inline void appendBytes(std::string& out, std::string_view bytes) {
  appendRaw(out, static_cast<std::uint32_t>(bytes.size()));
  out.append(bytes);
}

/// The request frame of `op` on `key`; `value` is the set's value, `delta` the add's.
inline std::string encodeRequest(Op op, std::string_view key, std::string_view value = {},
                                 std::int64_t delta = 0) {
  std::string frame(1, static_cast<char>(op));
  appendBytes(frame, key);
  if (op == Op::kSet) appendBytes(frame, value);
  if (op == Op::kAdd) appendRaw(frame, delta);
  return frame;
}

/// The socket address of `path`; ConfigError when the path does not fit in one.
inline sockaddr_un socketAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  DDPH_CHECK(path.size() < sizeof(address.sun_path),
             "the store's socket path {} is longer than {} bytes: set TMPDIR to a shorter folder",
             path, sizeof(address.sun_path) - 1);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

}  // namespace ddph::comm::local_store
