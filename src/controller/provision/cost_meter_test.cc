// What workers cost from their lifecycle events: whole billing blocks
// begun, or by the second; running workers' hourly price now.
#include "controller/provision/cost_meter.h"

#include <gtest/gtest.h>

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

TEST(BilledCostTest, WholeBlocksBegunOrBySecond) {
  const WorkerTypeTable types = Types();
  // An hour's block is paid at the launch, and a second block once begun.
  EXPECT_DOUBLE_EQ(BilledCost(*types.Find("hourly"), 0), 0.36);
  EXPECT_DOUBLE_EQ(BilledCost(*types.Find("hourly"), 3600 * kSecond), 0.36);
  EXPECT_DOUBLE_EQ(BilledCost(*types.Find("hourly"), 3601 * kSecond), 0.72);
  EXPECT_DOUBLE_EQ(BilledCost(*types.Find("spot"), 1800 * kSecond), 0.045);
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

}  // namespace
}  // namespace maitre::controller
