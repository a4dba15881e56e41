#include "metrics/text_format.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "gtest/gtest.h"

namespace maitre::metrics {
namespace {

TEST(FormatDoubleTest, MatchesGoShortestG) {
  // Expected strings are what strconv.FormatFloat(v, 'g', -1, 64) prints.
  struct Case {
    double value;
    const char* text;
  };
  const Case cases[] = {
      {0, "0"},
      {-0.0, "-0"},
      {1, "1"},
      {-2.5, "-2.5"},
      {42, "42"},
      {123.456, "123.456"},
      {0.005, "0.005"},
      {0.0001, "0.0001"},
      {0.00025, "0.00025"},
      {0.00001, "1e-05"},
      {100000, "100000"},
      {999999, "999999"},
      {1e6, "1e+06"},
      {1234567.5, "1.2345675e+06"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1e21, "1e+21"},
      {1e100, "1e+100"},
      {-1.5e-7, "-1.5e-07"},
      {5e-324, "5e-324"},
      {std::numeric_limits<double>::max(), "1.7976931348623157e+308"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FormatDouble(c.value), c.text) << c.text;
  }
}

TEST(FormatDoubleTest, SpecialValuesAreSpelledAsPrometheusParsesThem) {
  EXPECT_EQ(FormatDouble(std::nan("")), "NaN");
  EXPECT_EQ(FormatDouble(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatDouble(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(FormatDoubleTest, RoundTrips) {
  const double values[] = {0.1, 1.0 / 3, 2.0 / 3 * 1e10, 6.02214076e23, 1e-300, 12345.678901234};
  for (double v : values) {
    std::string text = FormatDouble(v);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
  }
}

TEST(AppendUintTest, ExactPastDoublePrecision) {
  std::string out;
  AppendUint(18446744073709551615u, &out);
  EXPECT_EQ(out, "18446744073709551615");
}

TEST(EscapeTest, LabelValueEscapesBackslashQuoteAndNewline) {
  std::string out;
  AppendEscapedLabelValue("a\\b\"c\nd'e\tf", &out);
  EXPECT_EQ(out, "a\\\\b\\\"c\\nd'e\tf");
}

TEST(EscapeTest, HelpEscapesBackslashAndNewlineButNotQuotes) {
  std::string out;
  AppendEscapedHelp("say \"hi\"\\\nbye", &out);
  EXPECT_EQ(out, "say \"hi\"\\\\\\nbye");
}

TEST(SanitizeUtf8Test, KeepsValidText) {
  const std::string text = "fmnist-cnn \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // é € 😀
  EXPECT_EQ(SanitizeUtf8(text), text);
}

TEST(SanitizeUtf8Test, ReplacesEachInvalidByte) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(SanitizeUtf8("a\xFF" "b"), "a" + replacement + "b");
  // A truncated sequence at the end.
  EXPECT_EQ(SanitizeUtf8("x\xE2\x82"), "x" + replacement + replacement);
  // Overlong encoding of '/' and an encoded UTF-16 surrogate.
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), replacement + replacement);
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), replacement + replacement + replacement);
  // Above U+10FFFF.
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80"),
            replacement + replacement + replacement + replacement);
}

TEST(AppendSampleTest, WithoutLabels) {
  std::string out;
  AppendSample("up", "", {}, {}, "", "", "1", &out);
  EXPECT_EQ(out, "up 1\n");
}

TEST(AppendSampleTest, WithLabelsAndExtraLabel) {
  std::string out;
  AppendSample("lat_seconds", "_bucket", {"model", "variant"}, {"m\"1", "v"}, "le", "0.5", "3",
               &out);
  EXPECT_EQ(out, "lat_seconds_bucket{model=\"m\\\"1\",variant=\"v\",le=\"0.5\"} 3\n");
}

TEST(AppendSampleTest, OnlyExtraLabel) {
  std::string out;
  AppendSample("h", "_bucket", {}, {}, "le", "+Inf", "0", &out);
  EXPECT_EQ(out, "h_bucket{le=\"+Inf\"} 0\n");
}

}  // namespace
}  // namespace maitre::metrics
