// A training run: loss per step and throughput per step (line charts, at most 1000 points each),
// then each dataset's seen / never seen / seen twice per epoch (stacked bars).
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "sections.h"

namespace ddph::report::detail {
namespace {

constexpr int kWidth = 960, kHeight = 180, kLeft = 56, kBottom = 18;

std::string lineChart(const std::vector<TrainingStep>& steps, const std::function<double(const TrainingStep&)>& value,
                      const std::string& name, const std::string& unit) {
  double lo = value(steps.front()), hi = lo;
  for (const auto& s : steps) lo = std::min(lo, value(s)), hi = std::max(hi, value(s));
  if (hi <= lo) hi = lo + 1;
  const std::size_t stride = std::max<std::size_t>(1, (steps.size() + 999) / 1000);
  const double plotW = kWidth - kLeft - 8, plotH = kHeight - kBottom - 8;
  const double n = static_cast<double>(std::max<std::size_t>(1, steps.size() - 1));
  std::string points;
  for (std::size_t i = 0; i < steps.size(); i += stride) {
    const double x = kLeft + plotW * static_cast<double>(i) / n;
    const double y = 4 + plotH * (1 - (value(steps[i]) - lo) / (hi - lo));
    points += fmt::format("{:.1f},{:.1f} ", x, y);
  }
  std::string svg = fmt::format(
      "<svg class=\"chart {}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\" aria-label=\"{} per step\">\n",
      escape(name), kWidth, kHeight, kWidth, kHeight, escape(name));
  svg += fmt::format("<line x1=\"{}\" y1=\"4\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>", kLeft, kLeft, 4 + plotH);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>", kLeft, 4 + plotH, kWidth - 8, 4 + plotH);
  svg += fmt::format("<text x=\"{}\" y=\"12\" text-anchor=\"end\">{}</text>", kLeft - 4, shortNumber(hi));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", kLeft - 4, 4 + plotH, shortNumber(lo));
  svg += fmt::format("<text x=\"{}\" y=\"{}\">step {}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">step {}</text>",
                     kLeft, kHeight - 4, steps.front().step, kWidth - 8, kHeight - 4, steps.back().step);
  svg += fmt::format("<polyline fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1.5\" points=\"{}\"><title>{} per step "
                     "({}), {} to {}</title></polyline>\n",
                     points, escape(name), escape(unit), shortNumber(lo), shortNumber(hi));
  svg += "</svg>\n";
  return svg;
}

// The loss per step, then the throughput per step when the steps were timed.
std::string stepCharts(const std::vector<TrainingStep>& steps) {
  const auto& first = steps.front();
  const auto& last = steps.back();
  std::string body =
      fmt::format("<h3>Loss</h3><p class=\"reading\">{}</p><figure>{}<div class=\"hover\"></div></figure>",
                  escape(fmt::format("The loss went from {} at step {} to {} at step {}.", shortNumber(first.loss),
                                     first.step, shortNumber(last.loss), last.step)),
                  lineChart(steps, [](const TrainingStep& s) { return s.loss; }, "loss", "mean over ranks"));
  std::vector<double> rates;
  for (const auto& s : steps) {
    if (s.samplesPerSecond > 0) rates.push_back(s.samplesPerSecond);
  }
  if (!rates.empty()) {
    std::sort(rates.begin(), rates.end());
    body += fmt::format(
        "<h3>Throughput</h3><p class=\"reading\">{}</p><figure>{}<div class=\"hover\"></div></figure>",
        escape(fmt::format("Median {} samples/s over all ranks (slowest step {}, fastest {}).",
                           shortNumber(rates[rates.size() / 2]), shortNumber(rates.front()), shortNumber(rates.back()))),
        lineChart(steps, [](const TrainingStep& s) { return s.samplesPerSecond; }, "throughput", "samples/s"));
  }
  return body;
}

// A bar per dataset and epoch: its seen samples, then those never seen.
std::string seenBars(const std::vector<DatasetEpochSummary>& datasets) {
  constexpr int kBarW = 700, kRow = 20;
  const int height = static_cast<int>(datasets.size()) * kRow + 4;
  std::string svg = fmt::format(
      "<svg class=\"chart datasets\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"seen per dataset and epoch\">\n",
      kBarW + 200, height, kBarW + 200, height);
  for (std::size_t i = 0; i < datasets.size(); ++i) {
    const auto& d = datasets[i];
    const int y = static_cast<int>(i) * kRow;
    const double size = static_cast<double>(std::max<std::int64_t>(1, d.size));
    const double seenW = kBarW * static_cast<double>(d.seen) / size;
    const double neverW = kBarW * static_cast<double>(d.neverSeen) / size;
    svg += fmt::format("<g><title>{} epoch {}: {} seen, {} never seen, {} seen twice or more (of {})</title>",
                       escape(d.dataset), d.epoch, d.seen, d.neverSeen, d.seenTwice, d.size);
    svg += fmt::format("<text x=\"0\" y=\"{}\">{} e{}</text>", y + 14, escape(d.dataset), d.epoch);
    svg += fmt::format("<rect x=\"190\" y=\"{}\" width=\"{:.1f}\" height=\"15\" fill=\"#2ca02c\"/>", y + 2, seenW);
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"15\" fill=\"#d62728\"/></g>\n", 190 + seenW, y + 2,
                       neverW);
  }
  svg += "</svg>\n";
  return svg;
}

// The dataset epoch with the most samples never seen (the first of equals), "" when none missed any.
std::string mostMissed(const std::vector<DatasetEpochSummary>& datasets) {
  std::string worst;
  std::int64_t worstNever = -1;
  for (const auto& d : datasets) {
    if (d.neverSeen > worstNever) {
      worstNever = d.neverSeen;
      worst = fmt::format("{} in epoch {}: {} of {} never seen, {} seen twice or more", d.dataset, d.epoch,
                          d.neverSeen, d.size, d.seenTwice);
    }
  }
  return worstNever > 0 ? worst : "";
}

}  // namespace

std::string trainingSection(const Training& t) {
  std::string body;
  std::string reading;
  if (!t.steps.empty()) {
    body += stepCharts(t.steps);
    reading = fmt::format("{} steps; loss {} to {}", t.steps.size(), shortNumber(t.steps.front().loss),
                          shortNumber(t.steps.back().loss));
  }
  if (!t.datasets.empty()) {
    const std::string worst = mostMissed(t.datasets);
    body += fmt::format("<h3>Seen per dataset and epoch</h3><p class=\"reading\">{}</p><figure><div class=\"legend\">"
                        "<span><i style=\"background:#2ca02c\"></i>seen</span><span><i style=\"background:#d62728\">"
                        "</i>never seen</span></div>{}<div class=\"hover\"></div></figure>",
                        escape(!worst.empty() ? "Most missed: " + worst + "." : "Every dataset was seen whole in every epoch."),
                        seenBars(t.datasets));
    if (!reading.empty()) reading += "; ";
    reading += !worst.empty() ? "most missed: " + worst : "every dataset seen whole";
  }
  return section("training", "Training", reading, body);
}

}  // namespace ddph::report::detail
