// What workers cost from their lifecycle events: whole billing blocks
// begun, or by the second; running workers' hourly price now.
#include "controller/provision/cost_meter.h"

#include <gtest/gtest.h>

#include <memory>
#include <utility>

namespace maitre::controller {
namespace {

WorkerTypeTable Types() {
  auto types = WorkerTypeTable::Parse("hourly:1:100:0.36:3600,spot:1:100:0.09:0:spot");
  EXPECT_TRUE(types.ok());
  return *types;
}

WorkerEvent Event(WorkerEvent::Kind kind, const std::string& type, const std::string& token,
                  Nanos at) {
  WorkerEvent e;
  e.kind = kind;
  e.type = type;
  e.launch_token = token;
  e.at = at;
  return e;
}

TEST(CostMeterTest, WholeBlocksBegunOrBySecond) {
  using K = WorkerEvent::Kind;
  // An hour's block is paid at the launch, and a second block once begun.
  for (const auto& [held_s, cost] : {std::pair{0, 0.36}, {3600, 0.36}, {3601, 0.72}}) {
    CostMeter meter(Types());
    meter.Record(Event(K::kStarted, "hourly", "a", 0));
    meter.Record(Event(K::kRetired, "hourly", "a", held_s * kSecond));
    EXPECT_DOUBLE_EQ(meter.At(9000 * kSecond).cost, cost) << held_s;
  }
  CostMeter meter(Types());
  meter.Record(Event(K::kStarted, "spot", "b", 0));
  EXPECT_DOUBLE_EQ(meter.At(1800 * kSecond).cost, 0.045);
}

TEST(CostMeterTest, CostsByTypeAndMarket) {
  CostMeter meter(Types());
  using K = WorkerEvent::Kind;
  meter.Record(Event(K::kStarted, "hourly", "a", 0));
  meter.Record(Event(K::kStarted, "spot", "b", 0));
  meter.Record(Event(K::kReady, "spot", "b", 10 * kSecond));
  meter.Record(Event(K::kInterrupted, "spot", "b", 900 * kSecond));
  meter.Record(Event(K::kStarted, "spot", "c", 900 * kSecond));  // its replacement
  meter.Record(Event(K::kLost, "spot", "b", 1800 * kSecond));
  meter.Record(Event(K::kStarted, "gpu", "x", 0));  // not in the table: ignored

  const CostReport r = meter.At(2700 * kSecond);
  ASSERT_EQ(r.lines.size(), 2u);
  EXPECT_EQ(r.lines[0].type, "hourly");
  EXPECT_EQ(r.lines[0].market, "on-demand");
  EXPECT_EQ(r.lines[0].running, 1);
  EXPECT_DOUBLE_EQ(r.lines[0].cost, 0.36);
  EXPECT_DOUBLE_EQ(r.lines[0].per_hour, 0.36);
  EXPECT_EQ(r.lines[1].market, "spot");
  EXPECT_EQ(r.lines[1].running, 1);
  EXPECT_EQ(r.lines[1].ended, 1);
  // b for half an hour (0 to 1800 s), c for half an hour so far (900 s on).
  EXPECT_DOUBLE_EQ(r.lines[1].cost, 0.09);
  EXPECT_DOUBLE_EQ(r.lines[1].per_hour, 0.09);
  EXPECT_DOUBLE_EQ(r.cost, 0.36 + 0.09);
  EXPECT_DOUBLE_EQ(r.per_hour, 0.45);
}

TEST(CostMeterTest, ASpotWorkerPaysThePriceInForce) {
  // Spot at $0.09/h for the first half hour of the trace, then $0.36/h;
  // the trace starts at the server's start, 100 s on the clock.
  auto types = WorkerTypeTable::Parse("spot:1:100:0.09:0:spot,minutely:1:100:0.09:60:spot");
  ASSERT_TRUE(types.ok());
  auto trace = PriceTrace::Parse("0,0.09\n1800,0.36\n", "spot.csv");
  ASSERT_TRUE(trace.ok());
  std::vector<WorkerType> priced = types->types();
  for (WorkerType& t : priced) {
    t.price_trace = std::make_shared<const PriceTrace>(*trace);
    t.price_trace_origin = 100 * kSecond;
  }
  CostMeter meter{WorkerTypeTable(priced)};
  using K = WorkerEvent::Kind;
  meter.Record(Event(K::kStarted, "spot", "a", 1000 * kSecond));
  // Minute blocks from 1870 s: the one begun at 1870 s (trace 1770 s) at
  // $0.09, the next (trace 1830 s) at $0.36.
  meter.Record(Event(K::kStarted, "minutely", "b", 1870 * kSecond));
  meter.Record(Event(K::kRetired, "minutely", "b", 1990 * kSecond));
  const CostReport r = meter.At(2800 * kSecond);
  // a: 900 s at $0.09/h (to trace 1800 s), then 900 s at $0.36/h.
  EXPECT_NEAR(r.lines[0].cost, 0.0225 + 0.09, 1e-12);
  EXPECT_DOUBLE_EQ(r.lines[0].per_hour, 0.36);
  EXPECT_NEAR(r.lines[1].cost, (0.09 + 0.36) / 60, 1e-12);
  EXPECT_EQ(r.lines[1].ended, 1);
}

TEST(CostMeterTest, ABurstWorkerPaysByTheQueryBesidesItsLifetime) {
  WorkerType burst{"burst", 1, 100, 0.036};
  burst.market = WorkerType::Market::kBurst;
  burst.price_per_request = 0.001;
  CostMeter meter{WorkerTypeTable({burst})};
  meter.Record(Event(WorkerEvent::Kind::kStarted, "burst", "a", 0));
  for (int i = 0; i < 3; ++i) meter.ChargeRequest("burst");
  meter.ChargeRequest("unknown");  // not in the table: ignored
  const CostReport r = meter.At(100 * kSecond);
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_EQ(r.lines[0].market, "burst");
  EXPECT_EQ(r.lines[0].requests, 3);
  EXPECT_DOUBLE_EQ(r.lines[0].request_cost, 0.003);
  EXPECT_DOUBLE_EQ(r.lines[0].cost, 0.001 + 0.003);  // 100 s at $0.036/h, 3 queries
  EXPECT_DOUBLE_EQ(r.cost, 0.004);
}

}  // namespace
}  // namespace maitre::controller
