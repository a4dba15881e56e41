// A small SVG line-chart writer for the simulator's plot.svg: stacked panels
// that share a time axis, each with its own y axis, grid and legend. Written
// here so that a plot needs no external tool; output is deterministic text.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace maitre::sim {

struct ChartSeries {
  std::string name;
  std::string color;      // any SVG colour, e.g. "#1f77b4"
  std::vector<double> y;  // y[i] is at x0 + i·x_step; NaN leaves a gap
};

struct ChartPanel {
  std::string title;
  std::string y_label;
  std::vector<ChartSeries> series;
  bool y_from_zero = true;  // false: fit the axis to the data (e.g. accuracy)
};

struct ChartOptions {
  std::string title;
  std::string x_label = "time (s)";
  double x0 = 0;
  double x_step = 1;
  int width = 960;
  int panel_height = 200;
  // Longer series are averaged down to this many points per series.
  int max_points = 1200;
};

std::string RenderLineChart(const ChartOptions& options, const std::vector<ChartPanel>& panels);

// Tick positions covering [lo, hi] at a "nice" step (1, 2 or 5 × 10^k),
// about `target` of them.
std::vector<double> NiceTicks(double lo, double hi, int target);

}  // namespace maitre::sim
