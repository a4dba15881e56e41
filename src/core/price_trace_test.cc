// Spot price traces: each rule a bad trace breaks is refused naming the
// file and line; lookups and costs follow the step function.
#include "core/price_trace.h"

#include <gtest/gtest.h>

#include <memory>

#include "core/worker_type.h"

namespace maitre {
namespace {

absl::Status ErrorOf(absl::string_view csv) {
  return PriceTrace::Parse(csv, "spot.csv").status();
}

void ExpectRefused(absl::string_view csv, absl::string_view says) {
  const absl::Status s = ErrorOf(csv);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << csv;
  EXPECT_NE(s.message().find("spot.csv"), absl::string_view::npos) << s.message();
  EXPECT_NE(s.message().find(says), absl::string_view::npos) << s.message();
}

TEST(PriceTraceTest, ParsesHeaderCommentsAndSteps) {
  auto trace = PriceTrace::Parse(
      "time_s,price_per_hour\n# AWS, us-east-1\n0,0.034\n\n300, 0.036\n600,0.2\n", "spot.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->steps().size(), 3u);
  EXPECT_EQ(trace->steps()[1].at, 300 * kSecond);
  EXPECT_EQ(trace->steps()[1].line, 5);
  EXPECT_DOUBLE_EQ(trace->PriceAt(0), 0.034);
  EXPECT_DOUBLE_EQ(trace->PriceAt(300 * kSecond - 1), 0.034);
  EXPECT_DOUBLE_EQ(trace->PriceAt(300 * kSecond), 0.036);
  EXPECT_DOUBLE_EQ(trace->PriceAt(10000 * kSecond), 0.2);  // the last holds on
  EXPECT_DOUBLE_EQ(trace->PriceAt(-kSecond), 0.034);
}

TEST(PriceTraceTest, RefusesEachBadTraceNamingFileAndLine) {
  ExpectRefused("", "no rows");
  ExpectRefused("time_s,price_per_hour\n# nothing\n", "no rows");
  ExpectRefused("0,0.03\n60\n", "line 2: expected time_s,price_per_hour");
  ExpectRefused("0,0.03\n60,cheap\n", "line 2: expected time_s,price_per_hour");
  ExpectRefused("0,0.03,1\n", "line 1: expected");
  ExpectRefused("0,-0.01\n", "line 1: the price must be finite and not negative");
  ExpectRefused("0,0.03\n60,inf\n", "line 2: the price must be finite");
  ExpectRefused("0,0.03\n60,nan\n", "line 2: the price must be finite");
  ExpectRefused("0,0.03\ninf,0.04\n", "line 2: the time must be a finite");
  ExpectRefused("10,0.03\n", "line 1: the first row must be at time 0");
  ExpectRefused("0,0.03\n60,0.04\n60,0.05\n", "line 3: time 60 s is not after the row before");
  ExpectRefused("0,0.03\n60,0.04\n30,0.05\n", "line 3: time 30 s is not after");
}

TEST(PriceTraceTest, MustCoverTheRun) {
  auto trace = PriceTrace::Parse("0,0.03\n3600,0.04\n", "spot.csv");
  ASSERT_TRUE(trace.ok());
  EXPECT_TRUE(trace->CheckCovers(3600 * kSecond).ok());
  const absl::Status short_run = trace->CheckCovers(3601 * kSecond);
  EXPECT_EQ(short_run.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(short_run.message().find("spot.csv, line 2: the trace ends at 3600 s"),
            std::string::npos)
      << short_run.message();
}

TEST(PriceTraceTest, LoadNamesAMissingFile) {
  const absl::Status s = PriceTrace::Load("/nonexistent/spot.csv").status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/spot.csv"), std::string::npos) << s.message();
}

TEST(PriceTraceTest, DollarsBetweenIntegratesTheSteps) {
  auto trace = PriceTrace::Parse("0,0.36\n1800,0.72\n", "spot.csv");
  ASSERT_TRUE(trace.ok());
  // 900 s at $0.36/h, then 900 s at $0.72/h.
  EXPECT_NEAR(trace->DollarsBetween(900 * kSecond, 2700 * kSecond), 0.09 + 0.18, 1e-12);
  EXPECT_DOUBLE_EQ(trace->DollarsBetween(kSecond, kSecond), 0);
}

WorkerType SpotType(Nanos billing_unit, Nanos origin) {
  WorkerType t;
  t.name = "spot";
  t.price_per_hour = 100;  // unused once a trace is set
  t.market = WorkerType::Market::kSpot;
  t.billing_unit = billing_unit;
  auto trace = PriceTrace::Parse("0,0.36\n1800,0.72\n", "spot.csv");
  EXPECT_TRUE(trace.ok());
  t.price_trace = std::make_shared<const PriceTrace>(*std::move(trace));
  t.price_trace_origin = origin;
  return t;
}

TEST(WorkerTypePriceTest, FollowsTheTraceFromItsOrigin) {
  const WorkerType t = SpotType(0, 100 * kSecond);
  EXPECT_DOUBLE_EQ(t.PriceAt(1850 * kSecond), 0.36);  // 1750 s into the trace
  EXPECT_DOUBLE_EQ(t.PriceAt(1900 * kSecond), 0.72);
  WorkerType flat;
  flat.price_per_hour = 0.085;
  EXPECT_DOUBLE_EQ(flat.PriceAt(1900 * kSecond), 0.085);
}

TEST(WorkerTypePriceTest, ABlockIsChargedAtThePriceWhenItBegan) {
  // Hourly blocks from 1200 s: the first (1200-4800 s) began at $0.36, the
  // second at $0.72, whatever the price does within them.
  const WorkerType hourly = SpotType(3600 * kSecond, 0);
  EXPECT_EQ(hourly.PaidUntil(1200 * kSecond, 1300 * kSecond), 4800 * kSecond);
  EXPECT_EQ(hourly.PaidUntil(1200 * kSecond, 1200 * kSecond), 4800 * kSecond);
  EXPECT_NEAR(hourly.CostBetween(1200 * kSecond, 0, 4800 * kSecond), 0.36, 1e-12);
  EXPECT_NEAR(hourly.CostBetween(1200 * kSecond, 0, 8400 * kSecond), 0.36 + 0.72, 1e-12);
  // Pro rata where the window cuts a block: half of the first block.
  EXPECT_NEAR(hourly.CostBetween(1200 * kSecond, 3000 * kSecond, 4800 * kSecond), 0.18, 1e-12);
  // By the second, the price follows the trace within the hour.
  const WorkerType by_second = SpotType(0, 0);
  EXPECT_EQ(by_second.PaidUntil(1200 * kSecond, 1300 * kSecond), 1300 * kSecond);
  EXPECT_NEAR(by_second.CostBetween(1200 * kSecond, 0, 4800 * kSecond), 0.06 + 0.6, 1e-12);
}

}  // namespace
}  // namespace maitre
