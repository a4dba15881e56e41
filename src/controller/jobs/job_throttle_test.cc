#include "controller/jobs/job_throttle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace maitre::jobs {
namespace {

using ::testing::HasSubstr;

const VariantKey kMlp{"mlp", "torch"};

controller::WorkerView Worker(const std::string& id, double utilisation, int cores = 1) {
  controller::WorkerView w;
  w.id = id;
  w.type.cores = cores;
  w.cpu_utilisation = utilisation;
  return w;
}

controller::InstanceView Instance(double arrival_qps,
                                  policy::InstanceState state = policy::InstanceState::kActive,
                                  VariantKey key = kMlp) {
  controller::InstanceView inst;
  inst.key = key;
  inst.phase = controller::InstancePhase::kReady;
  inst.state = state;
  inst.stats.arrival_qps = arrival_qps;
  return inst;
}

TEST(MeasureThrottleSignalsTest, TheBusiestWorkerWithOnlineTrafficNotCountingTheJobs) {
  auto a = Worker("w1", 0.8);
  a.instances.push_back(Instance(50));
  auto b = Worker("w2", 0.9);  // busier, but with no online traffic (profiling, say)
  auto c = Worker("w3", 0.2);
  c.instances.push_back(Instance(30, policy::InstanceState::kActive, VariantKey{"cnn", "torch"}));
  OwnLoad own;
  own.busy_by_worker["w1"] = 0.3;
  own.busy_by_worker["w3"] = 0.5;  // more than the worker reported: capped at 0.2
  own.qps_by_instance[{"w1", kMlp}] = 10;
  ThrottleSignals s = MeasureThrottleSignals({a, b, c}, own, ThrottlePolicy{});
  EXPECT_EQ(s.busiest_worker, "w1");
  EXPECT_DOUBLE_EQ(s.busiest_online_utilisation, 0.5);
  EXPECT_DOUBLE_EQ(s.online_qps, 40 + 30);
  EXPECT_EQ(s.slow_online_instances, 0);
  EXPECT_NEAR(s.utilisation, 1.9 / 3, 1e-12);
  EXPECT_NEAR(s.own_utilisation, 0.5 / 3, 1e-12);
}

TEST(MeasureThrottleSignalsTest, ClusterUtilisationIsTheBusyFractionOfAllCores) {
  // A 2-core worker at 72% and an idle 1-core one: 1.44 of 3 cores busy.
  ThrottleSignals s =
      MeasureThrottleSignals({Worker("w1", 0.0, 1), Worker("w2", 0.72, 2)}, OwnLoad{}, {});
  EXPECT_DOUBLE_EQ(s.utilisation, 0.48);
  EXPECT_EQ(s.busiest_worker, "");  // no online traffic anywhere
}

TEST(MeasureThrottleSignalsTest, OnlyInstancesWithOnlineTrafficCount) {
  ThrottlePolicy policy;  // min_online_qps 1, tolerance 1 x own
  auto w = Worker("w1", 0.9);
  // Only the job's own queries (within the tolerance for window skew).
  w.instances.push_back(Instance(21, policy::InstanceState::kOverloaded));
  // Online traffic, and slower than profiled.
  w.instances.push_back(
      Instance(30, policy::InstanceState::kInterfered, VariantKey{"cnn", "torch"}));
  // Still loading: no figures yet.
  auto loading = Instance(99, policy::InstanceState::kOverloaded, VariantKey{"cnn", "opencv"});
  loading.phase = controller::InstancePhase::kLoading;
  w.instances.push_back(loading);
  OwnLoad own;
  own.qps_by_instance[{"w1", kMlp}] = 10;
  ThrottleSignals s = MeasureThrottleSignals({w}, own, policy);
  EXPECT_DOUBLE_EQ(s.online_qps, 30);
  EXPECT_EQ(s.slow_online_instances, 1);
  EXPECT_THAT(s.slow_instance, HasSubstr("cnn:torch on w1 is interfered"));
  EXPECT_THAT(s.slow_instance, HasSubstr("30 qps"));

  // The job's own traffic alone: nothing online, however busy the worker.
  w.instances.resize(1);
  s = MeasureThrottleSignals({w}, own, policy);
  EXPECT_EQ(s.busiest_worker, "");
  EXPECT_EQ(s.slow_online_instances, 0);
}

TEST(MeasureThrottleSignalsTest, NoWorkersMeansNoLoad) {
  ThrottleSignals s = MeasureThrottleSignals({}, OwnLoad{}, ThrottlePolicy{});
  EXPECT_EQ(s.utilisation, 0);
  EXPECT_EQ(s.online_qps, 0);
  EXPECT_EQ(s.busiest_worker, "");
}

// Signals with one worker serving online traffic at `online` utilisation
// (or none, when `online` is negative).
ThrottleSignals Signals(double online, int slow = 0) {
  ThrottleSignals s;
  if (online >= 0) {
    s.busiest_worker = "w1";
    s.busiest_online_utilisation = online;
    s.online_qps = 50;
  }
  s.slow_online_instances = slow;
  s.slow_instance = "mlp:torch on w1 is overloaded";
  return s;
}

TEST(NextThrottleStateTest, PausesAndResumesByTheTable) {
  ThrottlePolicy p;  // pause above 40%, resume at or below 30% held 2 s
  const ThrottleState running;
  ThrottleState paused;
  paused.paused = true;
  paused.reason = "earlier";
  ThrottleState calming = paused;
  calming.calm_since = 10 * kSecond;
  struct Row {
    const char* name;
    ThrottleState previous;
    ThrottleSignals signals;
    Nanos now;
    bool paused;
    Nanos calm_since;
  };
  const Row table[] = {
      {"idle cluster keeps running", running, Signals(-1), 0, false, -1},
      {"online load at 40% keeps running", running, Signals(0.4), 0, false, -1},
      {"online load above 40% pauses", running, Signals(0.41), 0, true, -1},
      {"a slow online instance pauses whatever the utilisation", running, Signals(0.1, 1), 0, true,
       -1},
      {"between the thresholds stays paused, not calm", calming, Signals(0.35), 11 * kSecond, true,
       -1},
      {"calm starts the hold", paused, Signals(0.3), 10 * kSecond, true, 10 * kSecond},
      {"calm, held too briefly", calming, Signals(0.1), 11 * kSecond, true, 10 * kSecond},
      {"calm, held long enough resumes", calming, Signals(0.1), 12 * kSecond, false, -1},
      {"online traffic gone is calm", calming, Signals(-1), 12 * kSecond, false, -1},
      {"busy again while calming restarts", calming, Signals(0.5), 11 * kSecond, true, -1},
  };
  for (const Row& row : table) {
    ThrottleState next = NextThrottleState(row.previous, row.signals, row.now, p);
    EXPECT_EQ(next.paused, row.paused) << row.name;
    EXPECT_EQ(next.calm_since, row.calm_since) << row.name;
    if (next.paused) {
      EXPECT_FALSE(next.reason.empty()) << row.name;
    } else {
      EXPECT_TRUE(next.reason.empty()) << row.name;
    }
  }
}

TEST(NextThrottleStateTest, ReasonsSayWhy) {
  ThrottlePolicy p;
  ThrottleState s = NextThrottleState({}, Signals(0.7), 0, p);
  EXPECT_THAT(s.reason, HasSubstr("worker w1 is 70% busy"));
  EXPECT_THAT(s.reason, HasSubstr("40%"));
  s = NextThrottleState({}, Signals(0, 2), 0, p);
  EXPECT_THAT(s.reason, HasSubstr("slower than profiled"));
  EXPECT_THAT(s.reason, HasSubstr("mlp:torch on w1"));
}

// A load that hovers around 40% must not make the job flap every tick.
TEST(NextThrottleStateTest, HysteresisAbsorbsALoadHoveringAtTheThreshold) {
  ThrottlePolicy p;
  ThrottleState s;
  int transitions = 0;
  bool was_paused = false;
  for (int tick = 0; tick < 100; ++tick) {
    double utilisation = tick % 2 == 0 ? 0.42 : 0.36;
    s = NextThrottleState(s, Signals(utilisation), tick * 100 * kMillisecond, p);
    transitions += s.paused != was_paused ? 1 : 0;
    was_paused = s.paused;
  }
  EXPECT_EQ(transitions, 1);  // paused once, never resumed while it hovered
}

}  // namespace
}  // namespace maitre::jobs
