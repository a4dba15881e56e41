#include "core/arrivals.h"

#include <gtest/gtest.h>

#include <cmath>

namespace maitre {
namespace {

std::vector<Arrival> Drain(ArrivalSource& source) {
  std::vector<Arrival> out;
  Arrival a;
  while (source.Next(&a)) out.push_back(a);
  return out;
}

std::vector<Arrival> Generate(const GeneratorSpec& spec) {
  auto source = CreateGenerator(spec);
  EXPECT_TRUE(source.ok()) << source.status();
  if (!source.ok()) return {};
  return Drain(**source);
}

// Coefficient of variation of the inter-arrival gaps.
double GapCv(const std::vector<Arrival>& a) {
  double sum = 0, sum2 = 0;
  int n = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    double g = static_cast<double>(a[i].time - a[i - 1].time);
    sum += g;
    sum2 += g * g;
    ++n;
  }
  double mean = sum / n;
  return std::sqrt(sum2 / n - mean * mean) / mean;
}

void ExpectSorted(const std::vector<Arrival>& a, Nanos duration) {
  for (size_t i = 1; i < a.size(); ++i) ASSERT_LE(a[i - 1].time, a[i].time);
  if (!a.empty()) {
    EXPECT_GE(a.front().time, 0);
    EXPECT_LT(a.back().time, duration);
  }
}

TEST(TraceTest, UniformIsEvenlySpaced) {
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kUniform;
  spec.rate_qps = 250;
  spec.duration = 2 * kSecond;
  std::vector<Arrival> a = Generate(spec);
  ASSERT_EQ(a.size(), 500u);
  EXPECT_EQ(a[0].time, 0);
  EXPECT_EQ(a[1].time, 4 * kMillisecond);
  EXPECT_EQ(a[499].time, 1996 * kMillisecond);
}

TEST(TraceTest, PoissonAndGammaHaveTheirRateAndCv) {
  GeneratorSpec spec;
  spec.rate_qps = 1000;
  spec.duration = 200 * kSecond;
  spec.seed = 3;
  spec.kind = GeneratorKind::kPoisson;
  std::vector<Arrival> p = Generate(spec);
  ExpectSorted(p, spec.duration);
  EXPECT_NEAR(p.size(), 200000, 2000);
  EXPECT_NEAR(GapCv(p), 1.0, 0.02);

  spec.kind = GeneratorKind::kGamma;
  spec.cv = 2;
  std::vector<Arrival> g = Generate(spec);
  ExpectSorted(g, spec.duration);
  EXPECT_NEAR(g.size(), 200000, 4000);
  EXPECT_NEAR(GapCv(g), 2.0, 0.1);
}

TEST(TraceTest, SameSeedSameTraceOtherSeedOther) {
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kGamma;
  spec.rate_qps = 500;
  spec.cv = 4.47;
  spec.duration = 10 * kSecond;
  std::vector<Arrival> a = Generate(spec), b = Generate(spec);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i].time, b[i].time);
  spec.seed = 2;
  std::vector<Arrival> c = Generate(spec);
  EXPECT_TRUE(c.size() != a.size() || c[10].time != a[10].time);
}

TEST(TraceTest, MmppSwitchesBetweenRates) {
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kMmpp;
  spec.mmpp_rates_qps = {100, 1000};
  spec.mmpp_mean_dwell = {kSecond, kSecond};
  spec.duration = 400 * kSecond;
  std::vector<Arrival> a = Generate(spec);
  ExpectSorted(a, spec.duration);
  // Half the time at each rate on average: about 550 qps, burstier than Poisson.
  EXPECT_NEAR(a.size() / 400.0, 550, 60);
  EXPECT_GT(GapCv(a), 1.1);
}

TEST(TraceTest, DiurnalFollowsItsCurveAndSpikes) {
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kDiurnal;
  spec.rate_qps = 1000;
  spec.amplitude = 0.5;
  spec.period = 100 * kSecond;
  spec.duration = 100 * kSecond;
  spec.spikes = {{80 * kSecond, 5 * kSecond, 4}};
  std::vector<Arrival> a = Generate(spec);
  ExpectSorted(a, spec.duration);
  std::vector<int> per_second(100, 0);
  for (const Arrival& x : a) ++per_second[x.time / kSecond];
  EXPECT_NEAR(per_second[25], 1500, 150);  // the sine's peak
  EXPECT_NEAR(per_second[75], 500, 100);   // its trough
  EXPECT_NEAR(per_second[82], 4 * 1000 * (1 + 0.5 * std::sin(2 * M_PI * 0.825)), 250);
}

TEST(TraceTest, DiurnalAppPhasesShiftTheMixOverTheDay) {
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kDiurnal;
  spec.rate_qps = 2000;
  spec.amplitude = 0.8;
  spec.period = 100 * kSecond;
  spec.duration = 100 * kSecond;
  spec.app_shares = {1, 1};
  spec.app_phases = {0, 0.5};  // app 1 peaks when app 0 bottoms out
  std::vector<Arrival> a = Generate(spec);
  ExpectSorted(a, spec.duration);
  std::vector<std::vector<int>> per_second(2, std::vector<int>(100, 0));
  for (const Arrival& x : a) ++per_second[x.app][x.time / kSecond];
  EXPECT_NEAR(per_second[0][25], 1800, 150);  // app 0's peak: 1000·(1 + 0.8)
  EXPECT_NEAR(per_second[1][25], 200, 60);    // app 1's trough
  EXPECT_NEAR(per_second[0][75], 200, 60);
  EXPECT_NEAR(per_second[1][75], 1800, 150);
  spec.app_phases = {0};
  EXPECT_FALSE(CreateGenerator(spec).ok());  // one phase per app
}

TEST(TraceTest, PiecewiseFollowsItsSchedule) {
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kPiecewise;
  spec.schedule = {{0, 100}, {10 * kSecond, 0}, {20 * kSecond, 1000}};
  spec.duration = 30 * kSecond;
  std::vector<Arrival> a = Generate(spec);
  ExpectSorted(a, spec.duration);
  int first = 0, second = 0, third = 0;
  for (const Arrival& x : a) {
    if (x.time < 10 * kSecond)
      ++first;
    else if (x.time < 20 * kSecond)
      ++second;
    else
      ++third;
  }
  EXPECT_NEAR(first, 1000, 120);
  EXPECT_EQ(second, 0);
  EXPECT_NEAR(third, 10000, 400);
}

TEST(TraceTest, AppSharesSplitArrivals) {
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kPoisson;
  spec.rate_qps = 1000;
  spec.duration = 50 * kSecond;
  spec.app_shares = {1, 3};
  std::vector<Arrival> a = Generate(spec);
  int second_app = 0;
  for (const Arrival& x : a) second_app += x.app == 1;
  EXPECT_NEAR(static_cast<double>(second_app) / a.size(), 0.75, 0.01);
}

TEST(TraceTest, BadSpecsAreErrors) {
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kPoisson;
  EXPECT_FALSE(CreateGenerator(spec).ok());  // no rate
  spec.rate_qps = 10;
  spec.duration = 0;
  EXPECT_FALSE(CreateGenerator(spec).ok());
  spec.duration = kSecond;
  spec.kind = GeneratorKind::kGamma;
  spec.cv = 0;
  EXPECT_FALSE(CreateGenerator(spec).ok());
  spec.kind = GeneratorKind::kMmpp;
  spec.mmpp_rates_qps = {1, 2};
  spec.mmpp_mean_dwell = {kSecond};
  EXPECT_FALSE(CreateGenerator(spec).ok());
  spec.kind = GeneratorKind::kPiecewise;
  EXPECT_FALSE(CreateGenerator(spec).ok());  // empty schedule
  spec.kind = GeneratorKind::kDiurnal;
  spec.amplitude = 2;
  EXPECT_FALSE(CreateGenerator(spec).ok());
  EXPECT_FALSE(ParseGeneratorKind("bursty").ok());
  EXPECT_EQ(*ParseGeneratorKind("mmpp"), GeneratorKind::kMmpp);
}

TEST(TraceCsvTest, PositionalAndHeaderForms) {
  const std::vector<std::string> apps = {"a", "b"};
  auto rows = ParseTraceCsv("# comment\n5.5,b,40,0.7\n1,,,\n2\n", apps);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].time, kMillisecond);  // sorted by time
  EXPECT_EQ((*rows)[0].app, 0);
  EXPECT_EQ((*rows)[0].latency, -1);
  EXPECT_EQ((*rows)[2].time, 5'500'000);
  EXPECT_EQ((*rows)[2].app, 1);
  EXPECT_EQ((*rows)[2].latency, 40 * kMillisecond);
  EXPECT_DOUBLE_EQ((*rows)[2].min_accuracy, 0.7);

  rows = ParseTraceCsv("arrival_ms,latency_ms\n3,25\n", apps);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ((*rows)[0].latency, 25 * kMillisecond);
}

TEST(TraceCsvTest, ErrorsNameTheLine) {
  const std::vector<std::string> apps = {"a"};
  auto bad = ParseTraceCsv("1,a\n2,zzz\n", apps);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("zzz"), std::string::npos);
  EXPECT_FALSE(ParseTraceCsv("arrival_ms,colour\n", apps).ok());
  EXPECT_FALSE(ParseTraceCsv("app\n", apps).ok());
  EXPECT_FALSE(ParseTraceCsv("1,a,-4\n", apps).ok());
  EXPECT_FALSE(ParseTraceCsv("1,a,4,1.5\n", apps).ok());
  // Apps not known beforehand are learned, in order of appearance.
  std::vector<std::string> learned = {"stale"};
  auto any = ParseTraceCsvAnyApps("arrival_ms,app\n3,y\n1,x\n2,y\n4,\n", &learned);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(learned, std::vector<std::string>({"y", "x"}));
  ASSERT_EQ(any->size(), 4u);
  EXPECT_EQ((*any)[0].app, 1);  // sorted by time: 1 ms is x's
  EXPECT_EQ((*any)[1].app, 0);
  EXPECT_FALSE(ParseTraceCsv("-1\n", apps).ok());
}

TEST(TraceCsvTest, WriteThenParseRoundTrips) {
  const std::vector<std::string> apps = {"a", "b"};
  std::vector<Arrival> in = {{kMillisecond, 1, 30 * kMillisecond, 0.5},
                             {2 * kMillisecond, 0, -1, -1}};
  auto out = ParseTraceCsv(WriteTraceCsv(in, apps), apps);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].app, 1);
  EXPECT_EQ((*out)[0].latency, 30 * kMillisecond);
  EXPECT_EQ((*out)[1].latency, -1);
  EXPECT_EQ((*out)[1].min_accuracy, -1);
}

TEST(TraceCsvTest, ReplayStopsAtTheDuration) {
  auto replay = CreateReplay({{0, 0}, {kSecond, 0}, {2 * kSecond, 0}}, 2 * kSecond);
  EXPECT_EQ(Drain(*replay).size(), 2u);
}

}  // namespace
}  // namespace maitre
