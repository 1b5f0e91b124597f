// A pass's sampler as the data checks' findings name it (data_checks.h): its class's own name,
// its id and full class, and what serve_sampler takes to run it alone.
#include <fmt/format.h>

#include "data_checks.h"

namespace ddph::audit {

std::string samplerClass(const RankPass& rp) {
  const SamplerRecord* s = samplerOf(*rp.trace, rp.pass->loader);
  if (!s) return "its sampler";
  const auto dot = s->className.rfind('.');
  return dot == std::string::npos ? s->className : s->className.substr(dot + 1);
}

std::string samplerName(const RankPass& rp) {
  const SamplerRecord* s = samplerOf(*rp.trace, rp.pass->loader);
  if (!s) return "its sampler";
  return fmt::format("sampler {} ({})", s->id, s->className);
}

std::string serveSpec(const RankPass& rp) {
  const SamplerRecord* s = samplerOf(*rp.trace, rp.pass->loader);
  const std::string name = s ? s->className : "";
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return "module:Class";
  const std::string module = name.substr(0, dot), cls = name.substr(dot + 1);
  if (module != "__main__") return module + ":" + cls;
  const auto& argv = rp.trace->argv;
  const bool script = !argv.empty() && argv[0].size() > 3 &&
                      argv[0].compare(argv[0].size() - 3, 3, ".py") == 0;
  return (script ? argv[0] : std::string("script.py")) + ":" + cls;
}

}  // namespace ddph::audit
