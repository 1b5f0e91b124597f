// Fuzz target: the line-protocol sampler's answer parser (NOTE [Sampler line protocol]), the
// code that reads whatever an external sampler prints. The input is its stdout: each line is
// parsed as one answer. A ProtocolError is the expected verdict on a bad line.
#include <cstdint>
#include <string_view>

#include "ddph/common/error.h"
#include "ddph/sampler/line_protocol_sampler.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view out(reinterpret_cast<const char*>(data), size);
  while (!out.empty()) {
    const std::size_t nl = out.find('\n');
    const std::string_view line = out.substr(0, nl);
    out.remove_prefix(nl == std::string_view::npos ? out.size() : nl + 1);
    try {
      const ddph::sampler::LineProtocolAnswer answer = ddph::sampler::parseLineProtocolAnswer(line);
      // An answer is either the sampler's error or indices (and maybe a length), never both.
      if (answer.error && (!answer.indices.empty() || answer.length)) __builtin_trap();
    } catch (const ddph::common::ProtocolError&) {
    }
  }
  return 0;
}
