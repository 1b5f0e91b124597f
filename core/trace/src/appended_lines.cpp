#include "appended_lines.h"

#include <fstream>

namespace ddph::trace {

void AppendedLines::read(const std::function<void(std::string_view line)>& line) {
  std::ifstream in(file_, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk;
  char block[1 << 16];
  while (in.read(block, sizeof block), in.gcount() > 0) {
    const std::string_view got(block, static_cast<std::size_t>(in.gcount()));
    const auto nul = got.find('\0');
    chunk.append(got.substr(0, nul));
    if (nul != std::string_view::npos) break;
  }
  offset_ += chunk.size();
  partial_ += chunk;
  std::size_t start = 0;
  for (std::size_t end; (end = partial_.find('\n', start)) != std::string::npos; start = end + 1) {
    line(std::string_view(partial_.data() + start, end - start));
  }
  partial_.erase(0, start);
}

std::string quotedEvent(const char* name) { return std::string("\"") + name + "\""; }

}  // namespace ddph::trace
