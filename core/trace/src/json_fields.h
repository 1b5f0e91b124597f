#pragma once
// Typed values of the trace's JSON (rank files and launch.json), with errors naming the key: what
// the reader (trace_reader.cpp) and launch.json's reader (launch_record.cpp) share.

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>
#include <vector>

#include "ddph/common/error.h"

namespace ddph::trace::json_fields {

using nlohmann::json;

// One value of an event, typed, with an error naming the key. nlohmann's get<integer>() converts
// any number with a static_cast: a float out of the type's range is undefined behaviour and a large
// integer wraps (world_size 2^32 + 4 read as 4), so an integral field takes an integer in range.
template <class T>
T valueAs(const json& v, const char* key) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    DDPH_CHECK(v.is_number_integer(), "\"{}\" has the wrong type", key);
    const bool inRange =
        v.is_number_unsigned()
            ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
            : v.get<std::int64_t>() >= std::numeric_limits<T>::min() &&
                  v.get<std::int64_t>() <= std::numeric_limits<T>::max();
    DDPH_CHECK(inRange, "\"{}\" is out of range: {}", key, v.dump());
    return static_cast<T>(v.get<std::int64_t>());
  } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
    DDPH_CHECK(v.is_array(), "\"{}\" has the wrong type", key);
    T out;
    for (const auto& item : v) out.push_back(valueAs<std::int64_t>(item, key));
    return out;
  } else {
    try {
      return v.get<T>();
    } catch (const json::exception&) {
      throw common::ConfigError(fmt::format("\"{}\" has the wrong type", key));
    }
  }
}

template <class T>
T field(const json& j, const char* key) {
  auto it = j.find(key);
  DDPH_CHECK(it != j.end(), "missing \"{}\"", key);
  return valueAs<T>(*it, key);
}

template <class T>
std::optional<T> optionalField(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return valueAs<T>(*it, key);
}

}  // namespace ddph::trace::json_fields
