#include "sim/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace maitre::sim {
namespace {

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

TEST(SvgChartTest, NiceTicks) {
  EXPECT_EQ(NiceTicks(0, 100, 4), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(NiceTicks(0, 1, 4), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  EXPECT_EQ(NiceTicks(0.7, 0.8, 4).front(), 0.7000000000000001);
  EXPECT_EQ(NiceTicks(5, 5, 4), (std::vector<double>{5}));
}

TEST(SvgChartTest, DrawsPanelsSeriesAndGaps) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ChartOptions options;
  options.title = "a <b> & c";
  std::vector<ChartPanel> panels = {
      {"Load", "qps", {{"demand", "#00f", {1, 2, 3, 4}}, {"served", "#0f0", {1, 2, 3, 3}}}, true},
      {"Accuracy", "acc", {{"acc", "#f0f", {0.7, nan, 0.8, 0.75}}}, false},
  };
  std::string svg = RenderLineChart(options, panels);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; c"), std::string::npos);
  // Two series in the first panel, and the NaN splits the third into two.
  EXPECT_EQ(Count(svg, "<polyline"), 4);
  EXPECT_NE(svg.find(">demand</text>"), std::string::npos);
  EXPECT_NE(svg.find(">time (s)</text>"), std::string::npos);
  EXPECT_EQ(svg, RenderLineChart(options, panels));  // deterministic
}

TEST(SvgChartTest, LongSeriesAreAveragedDown) {
  ChartOptions options;
  options.max_points = 100;
  std::vector<double> y(10000, 1.0);
  std::string svg = RenderLineChart(options, {{"p", "y", {{"s", "#000", y}}, true}});
  size_t start = svg.find("points=\"");
  size_t end = svg.find('"', start + 8);
  std::string points = svg.substr(start + 8, end - start - 8);
  EXPECT_EQ(Count(points, ","), 100);
}

}  // namespace
}  // namespace maitre::sim
