// The page skeleton: escaping, the document around the sections, its style and its script.
// NOTE [Self-contained page]: nothing the page uses comes from outside it — no link, no src, no
// url(), no fonts, no fetch — so it renders the same from a CI artifact, an email or an offline
// machine; the html_report test fails on any reference that leaves the file.
#include <fmt/format.h>

#include <cmath>

#include "sections.h"

namespace ddph::report::detail {
namespace {

constexpr std::string_view kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 28px}
header h1{font-size:20px;margin:0 0 4px}
header p{margin:0;color:#c9cfdb}
header code{color:#fff}
main{padding:8px 28px 40px;max-width:1180px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:16px 0;padding:12px 18px}
h2{font-size:16px;margin:4px 0 6px}
h3{font-size:14px;margin:12px 0 4px}
.reading{margin:0 0 10px;color:#39404f;font-style:italic}
.badge{display:inline-block;font-weight:700;border-radius:4px;padding:2px 10px;margin-right:8px}
.pass{background:#d8f3dc;color:#1b5e20}.fail{background:#fde2e1;color:#a11}.na{background:#eceff1;color:#455a64}
table{border-collapse:collapse;margin:6px 0}
td,th{border:1px solid #dde1e8;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.violation{border-left:4px solid #d62728;background:#fff6f6;padding:6px 10px;margin:8px 0}
.violation .cause{color:#5a3b00;margin-top:4px}
.violation .finding-note{color:#444;margin-top:2px}
.violation .help{color:#0b5d1e;margin-top:2px}
.note{color:#555}
figure{margin:6px 0}
figcaption{font-size:12px;color:#555}
.hover{font-size:12px;color:#1d2330;min-height:1.4em;font-family:ui-monospace,monospace}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
svg.chart{display:block;max-width:100%;height:auto}
svg.chart text{font:11px system-ui,sans-serif;fill:#39404f}
pre{background:#f0f2f5;padding:8px 10px;border-radius:4px;overflow-x:auto}
td.hit{background:#fde2e1;font-weight:700}
)";

// Echoes the hovered bin's <title> under its chart: the detail of an aggregated bin.
constexpr std::string_view kScript = R"(
(function(){
  document.querySelectorAll('figure').forEach(function(f){
    var out=f.querySelector('.hover');
    if(!out)return;
    f.addEventListener('mouseover',function(e){
      for(var el=e.target;el&&el!==f;el=el.parentNode){
        var t=el.querySelector?el.querySelector(':scope > title'):null;
        if(t){out.textContent=t.textContent;break;}
      }
    });
  });
})();
)";

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string rangesText(const std::vector<std::int64_t>& sorted, std::size_t shown) {
  std::string out;
  std::size_t runs = 0;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (runs == shown) {
      out += fmt::format(", … ({} in all)", sorted.size());
      break;
    }
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]);
    ++runs;
    i = j + 1;
  }
  return out;
}

std::string shortNumber(double value) {
  if (!std::isfinite(value)) return "-";
  return fmt::format("{:.4g}", value);
}

std::string section(std::string_view id, std::string_view heading, std::string_view reading,
                    std::string_view body) {
  return fmt::format("<section id=\"{}\"><h2>{}</h2><p class=\"reading\">{}</p>{}</section>\n",
                     escape(id), escape(heading), escape(reading), body);
}

std::string pageHtml(const Page& page, std::string_view body) {
  std::string out;
  out.reserve(body.size() + 4096);
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += fmt::format("<title>{}</title>\n<style>{}</style>\n</head><body>\n", escape(page.title),
                     kStyle);
  out += fmt::format("<header><h1>{}</h1><p>{}</p>", escape(page.title), escape(page.subtitle));
  if (!page.command.empty()) out += fmt::format("<p><code>{}</code></p>", escape(page.command));
  out += "</header>\n<main>\n";
  out += body;
  out += fmt::format("</main>\n<script>{}</script>\n</body></html>\n", kScript);
  return out;
}

}  // namespace ddph::report::detail
