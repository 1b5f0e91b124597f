#include "index_list.h"

#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/binary_from_base64.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <array>
#include <cstring>
#include <limits>
#include <utility>
#include <string>

#include "ddph/trace/trace.h"
#include "ddph/common/error.h"

namespace ddph::trace {

using common::ConfigError;
using sampler::Index;

namespace {

// Boost.Archive's base64 iterators decode 4 characters to 3 bytes; '=' padding is cut first and the
// bytes it stands for are dropped after.
std::string decodeBase64(std::string text) {
  using namespace boost::archive::iterators;
  using Decoder = transform_width<binary_from_base64<std::string::const_iterator>, 8, 6>;
  DDPH_CHECK(text.size() % 4 == 0, "base64 of length {} is not a multiple of 4", text.size());
  std::size_t padding = 0;
  while (!text.empty() && text.back() == '=' && padding < 2) {
    text.pop_back();
    ++padding;
  }
  for (char c : text) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '+' || c == '/';
    DDPH_CHECK(ok, "invalid base64 character '{}'", c);
  }
  std::string bytes(Decoder(text.cbegin()), Decoder(text.cend()));
  const std::size_t size = (text.size() + padding) / 4 * 3 - padding;
  bytes.resize(size);
  return bytes;
}

std::vector<Index> decodeRuns(const nlohmann::json& runs) {
  DDPH_CHECK(runs.is_array(), "\"runs\" is not an array");
  std::vector<std::pair<std::int64_t, std::int64_t>> parsed;
  std::int64_t total = 0;
  for (const auto& run : runs) {
    DDPH_CHECK(run.is_array() && run.size() == 2 && run[0].is_number_integer() &&
                   run[1].is_number_integer(),
               "a run is not [start, length]");
    for (const auto& v : run) {  // beyond int64: out of range, not wrapped round
      DDPH_CHECK(!v.is_number_unsigned() || v.get<std::uint64_t>() <= std::uint64_t(INT64_MAX),
                 "a run holds {}, out of range", v.dump());
    }
    const auto start = run[0].get<std::int64_t>();
    const auto length = run[1].get<std::int64_t>();
    // The list is expanded in memory: its total length is bounded, and a run may not pass the
    // largest index (start + length - 1 would overflow).
    DDPH_CHECK(length >= 0 && length <= kMaxListedIndices - total,
               "a run has length {} (an index list holds at most {} indices)", length,
               kMaxListedIndices);
    DDPH_CHECK(length == 0 || start <= std::numeric_limits<std::int64_t>::max() - (length - 1),
               "the run [{}, {}] passes the largest index", start, length);
    total += length;
    parsed.emplace_back(start, length);
  }
  std::vector<Index> out;
  out.reserve(static_cast<std::size_t>(total));
  for (const auto& [start, length] : parsed) {
    for (std::int64_t k = 0; k < length; ++k) out.push_back(start + k);
  }
  return out;
}

std::vector<Index> decodeInt64(const nlohmann::json& text) {
  DDPH_CHECK(text.is_string(), "\"i64\" is not a string");
  const std::string bytes = decodeBase64(text.get<std::string>());
  DDPH_CHECK(bytes.size() % 8 == 0, "\"i64\" holds {} bytes, not a multiple of 8", bytes.size());
  std::vector<Index> out(bytes.size() / 8);
  for (std::size_t k = 0; k < out.size(); ++k) {
    std::uint64_t v = 0;
    for (int b = 7; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>(bytes[k * 8 + b]);
    out[k] = static_cast<Index>(v);
  }
  return out;
}

std::string encodeBase64(const std::string& bytes) {
  using namespace boost::archive::iterators;
  using Encoder = base64_from_binary<transform_width<std::string::const_iterator, 6, 8>>;
  std::string text(Encoder(bytes.cbegin()), Encoder(bytes.cend()));
  text.append((3 - bytes.size() % 3) % 3, '=');
  return text;
}

}  // namespace

nlohmann::ordered_json encodeIndexList(const std::vector<Index>& indices) {
  constexpr std::size_t kShort = 16;
  if (indices.size() <= kShort) return nlohmann::ordered_json(indices);
  std::vector<std::array<Index, 2>> runs;
  for (Index i : indices) {
    if (!runs.empty() && runs.back()[0] + runs.back()[1] == i) {
      ++runs.back()[1];
    } else {
      runs.push_back({i, 1});
      if (runs.size() * 4 > indices.size()) break;  // does not compress: base64 below
    }
  }
  if (runs.size() * 4 <= indices.size()) return {{"runs", runs}};
  std::string bytes(indices.size() * 8, '\0');
  for (std::size_t k = 0; k < indices.size(); ++k) {
    auto v = static_cast<std::uint64_t>(indices[k]);
    for (int b = 0; b < 8; ++b) bytes[k * 8 + b] = static_cast<char>((v >> (8 * b)) & 0xff);
  }
  return {{"i64", encodeBase64(bytes)}};
}

std::vector<Index> decodeIndexList(const nlohmann::json& value) {
  if (value.is_array()) {
    std::vector<Index> out;
    out.reserve(value.size());
    for (const auto& v : value) {
      DDPH_CHECK(v.is_number_integer(), "an index is not an integer");
      out.push_back(v.get<Index>());
    }
    return out;
  }
  DDPH_CHECK(value.is_object(), "an index list is neither an array nor an object");
  if (value.contains("runs")) return decodeRuns(value["runs"]);
  if (value.contains("i64")) return decodeInt64(value["i64"]);
  throw ConfigError("an index list object has neither \"runs\" nor \"i64\"");
}

}  // namespace ddph::trace
