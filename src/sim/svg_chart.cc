#include "sim/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::sim {
namespace {

constexpr double kLeft = 72;  // room for y tick labels and the y label
constexpr double kRight = 24;
constexpr double kTop = 28;     // panel title and legend
constexpr double kBottom = 34;  // x tick labels
constexpr double kHeader = 36;  // chart title

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Number(double v) {
  if (std::fabs(v) < 1e-12) return "0";
  return absl::StrFormat("%g", v);
}

// Averages runs of `factor` values, ignoring NaNs (a run of NaNs stays NaN).
std::vector<double> Downsample(const std::vector<double>& y, size_t factor) {
  if (factor <= 1) return y;
  std::vector<double> out;
  for (size_t i = 0; i < y.size(); i += factor) {
    double sum = 0;
    int n = 0;
    for (size_t k = i; k < std::min(y.size(), i + factor); ++k) {
      if (!std::isnan(y[k])) {
        sum += y[k];
        ++n;
      }
    }
    out.push_back(n > 0 ? sum / n : std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

// Where one panel's plot area is, and how data coordinates map into it.
struct PanelFrame {
  double top = 0;     // of the plot area
  double plot_w = 0;  // plot area size
  double plot_h = 0;
  double x_lo = 0, x_hi = 1;  // data range shown
  double lo = 0, hi = 1;

  double X(double x) const { return kLeft + (x - x_lo) / (x_hi - x_lo) * plot_w; }
  double Y(double y) const { return top + plot_h - (y - lo) / (hi - lo) * plot_h; }
};

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || target < 1) return {lo};
  double raw = (hi - lo) / target;
  double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double norm = raw / magnitude;
  double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

namespace {

// The y range of one panel's (downsampled) series `ys` into frame->lo and
// frame->hi: padded so that a flat series does not run along the frame, from
// zero when the panel asks, and widened to whole ticks. Returns the ticks.
std::vector<double> FitYRange(const ChartPanel& panel, const std::vector<std::vector<double>>& ys,
                              PanelFrame* frame) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const std::vector<double>& y : ys) {
    for (double v : y) {
      if (std::isnan(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (panel.y_from_zero) lo = std::min(0.0, lo);
  // Headroom, so that a flat series does not run along the frame.
  if (panel.y_from_zero && hi > lo) hi += (hi - lo) * 0.05;
  if (hi - lo < 1e-9) {
    double pad = std::max(std::fabs(hi) * 0.05, 1e-3);
    lo = panel.y_from_zero ? lo : lo - pad;
    hi += pad;
  } else if (!panel.y_from_zero) {
    double pad = (hi - lo) * 0.05;
    lo -= pad;
    hi += pad;
  }
  std::vector<double> yticks = NiceTicks(lo, hi, 4);
  frame->lo = std::min(lo, yticks.front());
  frame->hi = std::max(hi, yticks.back());
  return yticks;
}

// The panel's title, grid lines with tick labels, frame and axis labels (the
// x label only under the last panel).
void AppendPanelAxes(const ChartOptions& options, const ChartPanel& panel, const PanelFrame& f,
                     const std::vector<double>& yticks, bool last, std::string* svg) {
  absl::StrAppendFormat(
      svg, "<g>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">%s</text>\n",
      kLeft, f.top - 10, Escape(panel.title));
  for (double t : yticks) {
    absl::StrAppendFormat(
        svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#444\">%s</text>\n",
        kLeft, f.Y(t), kLeft + f.plot_w, f.Y(t), kLeft - 6, f.Y(t) + 4, Number(t));
  }
  for (double t : NiceTicks(f.x_lo, f.x_hi, 10)) {
    absl::StrAppendFormat(
        svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#f0f0f0\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#444\">%s</text>\n",
        f.X(t), f.top, f.X(t), f.top + f.plot_h, f.X(t), f.top + f.plot_h + 14, Number(t));
  }
  absl::StrAppendFormat(
      svg,
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
      "stroke=\"#888\"/>\n",
      kLeft, f.top, f.plot_w, f.plot_h);
  absl::StrAppendFormat(
      svg,
      "<text transform=\"translate(14,%.1f) rotate(-90)\" text-anchor=\"middle\" "
      "fill=\"#444\">%s</text>\n",
      f.top + f.plot_h / 2, Escape(panel.y_label));
  if (last) {
    absl::StrAppendFormat(
        svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#444\">%s</text>\n",
        kLeft + f.plot_w / 2, f.top + f.plot_h + 28, Escape(options.x_label));
  }
}

// The legend, right-aligned above the plot.
void AppendLegend(const ChartPanel& panel, const PanelFrame& f, std::string* svg) {
  double lx = kLeft + f.plot_w;
  for (size_t si = panel.series.size(); si-- > 0;) {
    const ChartSeries& s = panel.series[si];
    double text_w = 7.0 * s.name.size();
    lx -= text_w + 36;
    absl::StrAppendFormat(svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"2.5\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          lx, f.top - 14, lx + 18, f.top - 14, s.color, lx + 22, f.top - 10,
                          Escape(s.name));
  }
}

// One polyline per run of values of each series; a NaN breaks the line.
// Each value covers [x, x + x_step) and is drawn at the middle.
void AppendSeriesLines(const ChartOptions& options, const ChartPanel& panel,
                       const std::vector<std::vector<double>>& ys, double x_step,
                       const PanelFrame& f, std::string* svg) {
  for (size_t si = 0; si < panel.series.size(); ++si) {
    const std::vector<double>& y = ys[si];
    std::string points;
    auto flush = [&]() {
      if (points.empty()) return;
      absl::StrAppendFormat(svg,
                            "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                            "stroke-linejoin=\"round\" points=\"%s\"/>\n",
                            panel.series[si].color, points);
      points.clear();
    };
    for (size_t i = 0; i < y.size(); ++i) {
      if (std::isnan(y[i])) {
        flush();
        continue;
      }
      double x = options.x0 + (static_cast<double>(i) + 0.5) * x_step;
      absl::StrAppendFormat(&points, "%s%.1f,%.1f", points.empty() ? "" : " ", f.X(x), f.Y(y[i]));
    }
    flush();
  }
}

}  // namespace

std::string RenderLineChart(const ChartOptions& options, const std::vector<ChartPanel>& panels) {
  const double width = options.width;
  const double ph = options.panel_height;
  const double height = kHeader + panels.size() * ph;
  const double plot_w = width - kLeft - kRight;
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      options.width, static_cast<int>(height), options.width, static_cast<int>(height));
  absl::StrAppend(&svg, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  absl::StrAppendFormat(
      &svg, "<text x=\"%.1f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">%s</text>\n", kLeft,
      Escape(options.title));

  // The x range is shared by every panel.
  size_t longest = 0;
  for (const ChartPanel& p : panels) {
    for (const ChartSeries& s : p.series) longest = std::max(longest, s.y.size());
  }
  const size_t factor =
      options.max_points > 0 ? (longest + options.max_points - 1) / options.max_points : 1;
  const double x_step = options.x_step * std::max<size_t>(1, factor);
  const double x_lo = options.x0;
  const double x_hi =
      options.x0 + std::max<double>(1, static_cast<double>(longest)) * options.x_step;

  for (size_t pi = 0; pi < panels.size(); ++pi) {
    const ChartPanel& panel = panels[pi];
    PanelFrame frame;
    frame.top = kHeader + pi * ph + kTop;
    frame.plot_w = plot_w;
    frame.plot_h = ph - kTop - kBottom;
    frame.x_lo = x_lo;
    frame.x_hi = x_hi;
    std::vector<std::vector<double>> ys;
    for (const ChartSeries& s : panel.series) ys.push_back(Downsample(s.y, factor));
    std::vector<double> yticks = FitYRange(panel, ys, &frame);
    AppendPanelAxes(options, panel, frame, yticks, pi + 1 == panels.size(), &svg);
    AppendLegend(panel, frame, &svg);
    AppendSeriesLines(options, panel, ys, x_step, frame, &svg);
    absl::StrAppend(&svg, "</g>\n");
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace maitre::sim
