// Every transition of the instance state machine, table-driven.
#include "policy/instance_state.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/selection_testing.h"

namespace maitre::policy {
namespace {

using S = InstanceState;
using R = StateReason;

// p50(b) = 4 + b ms, p99 = 1.2·p50: p99(1) = 6 ms, p99(8) = 14.4 ms.
const Profile& TestProfile() {
  static const Profile p = selection_testing::LinearProfile(4, 1, 100, 200);
  return p;
}
constexpr double kSlo = 40;
double Sat() { return TestProfile().SaturationQps(kSlo); }  // one replica

InstanceHistory In(S state, int last_queue = 0, int growing = 0, int interfered = 0, int calm = 0,
                   int idle = 0) {
  InstanceHistory h;
  h.state = state;
  h.last_queue = last_queue;
  h.growing_streak = growing;
  h.interfered_streak = interfered;
  h.calm_streak = calm;
  h.idle_streak = idle;
  return h;
}

// A loaded instance serving at `load` × saturation, at batch 1, as fast as
// its profile, with `queue` waiting.
InstanceObservation Report(double load, int queue = 0) {
  InstanceObservation r;
  r.replicas = 1;
  r.served_qps = load * Sat();
  r.arrival_qps = r.served_qps;
  r.queue_length = queue;
  r.mean_batch = load > 0 ? 1 : 0;
  r.compute_p50_ms = load > 0 ? 5 : 0;
  r.compute_p99_ms = load > 0 ? 6 : 0;
  r.latency_p50_ms = load > 0 ? 8 : 0;
  r.latency_p99_ms = load > 0 ? 12 : 0;
  return r;
}

InstanceObservation Slow(InstanceObservation r, double compute_p50_ms) {
  r.compute_p50_ms = compute_p50_ms;
  return r;
}

struct Case {
  std::string name;
  InstanceHistory previous;
  InstanceObservation report;
  S want;
  R why;
  InstanceStateOptions options = {};
  double slo = kSlo;
  bool empty_profile = false;
};

std::vector<Case> Cases() {
  InstanceStateOptions no_probe;
  no_probe.probe_after_idle_reports = 0;
  InstanceStateOptions latency_signal;
  latency_signal.interference_signal = InterferenceSignal::kLatencyP99;
  latency_signal.interfered_after_reports = 1;
  InstanceStateOptions compute_p99_signal;
  compute_p99_signal.interference_signal = InterferenceSignal::kComputeP99;
  compute_p99_signal.interfered_after_reports = 1;

  InstanceObservation unloaded;  // replicas = 0
  InstanceObservation two_replicas = Report(1.5);
  two_replicas.replicas = 2;
  InstanceObservation big_batch = Slow(Report(0.5), 20);  // 20 < 1.5 × p99(8) = 21.6
  big_batch.mean_batch = 8;
  InstanceObservation big_batch_slow = Slow(Report(0.5), 22);
  big_batch_slow.mean_batch = 8;
  InstanceObservation slow_total = Report(0.5);
  slow_total.latency_p99_ms = 9.1;  // > 1.5 × 6
  InstanceObservation slow_tail = Report(0.5);
  slow_tail.compute_p99_ms = 9.1;
  InstanceObservation at_max_batch;  // no SLO: saturation = throughput at batch 32
  at_max_batch.replicas = 1;
  at_max_batch.served_qps = TestProfile().ThroughputAt(32);

  return {
      {"inactive stays inactive without replicas", In(S::kInactive), unloaded, S::kInactive,
       R::kUnchanged},
      {"inactive becomes active once loaded", In(S::kInactive), Report(0), S::kActive, R::kLoaded},
      {"inactive straight to overloaded", In(S::kInactive), Report(1.2), S::kOverloaded,
       R::kSaturated},
      {"first report after load does not count queue growth", In(S::kInactive, 0, 2),
       Report(0.5, 50), S::kActive, R::kLoaded},
      {"active unloaded", In(S::kActive), unloaded, S::kInactive, R::kUnloaded},
      {"overloaded unloaded", In(S::kOverloaded), unloaded, S::kInactive, R::kUnloaded},
      {"interfered unloaded", In(S::kInterfered), unloaded, S::kInactive, R::kUnloaded},
      {"active at saturation", In(S::kActive), Report(1.0), S::kOverloaded, R::kSaturated},
      {"active just below saturation", In(S::kActive), Report(0.99), S::kActive, R::kUnchanged},
      {"saturation scales with replicas", In(S::kActive), two_replicas, S::kActive, R::kUnchanged},
      {"queue grew a third time", In(S::kActive, 10, 2), Report(0.5, 11), S::kOverloaded,
       R::kQueueGrowing},
      {"queue grew a second time", In(S::kActive, 10, 1), Report(0.5, 11), S::kActive,
       R::kUnchanged},
      {"queue steady resets the streak", In(S::kActive, 10, 2), Report(0.5, 10), S::kActive,
       R::kUnchanged},
      {"slow a second time", In(S::kActive, 0, 0, 1), Slow(Report(0.5), 9.1), S::kInterfered,
       R::kSlowerThanProfile},
      {"slow once", In(S::kActive), Slow(Report(0.5), 9.1), S::kActive, R::kUnchanged},
      {"within the margin", In(S::kActive, 0, 0, 1), Slow(Report(0.5), 9.0), S::kActive,
       R::kUnchanged},
      {"overload wins over interference", In(S::kActive, 0, 0, 1), Slow(Report(1.0), 20),
       S::kOverloaded, R::kSaturated},
      {"idle says nothing about speed", In(S::kActive, 0, 0, 1), Report(0), S::kActive,
       R::kUnchanged},
      {"profile read at the mean batch", In(S::kActive, 0, 0, 1), big_batch, S::kActive,
       R::kUnchanged},
      {"slow at the mean batch", In(S::kActive, 0, 0, 1), big_batch_slow, S::kInterfered,
       R::kSlowerThanProfile},
      {"total-latency signal", In(S::kActive), slow_total, S::kInterfered, R::kSlowerThanProfile,
       latency_signal},
      {"total latency ignored by the default signal", In(S::kActive, 0, 0, 1), slow_total,
       S::kActive, R::kUnchanged},
      {"compute-p99 signal", In(S::kActive), slow_tail, S::kInterfered, R::kSlowerThanProfile,
       compute_p99_signal},
      {"overloaded, second calm report", In(S::kOverloaded, 0, 0, 0, 1), Report(0.5), S::kActive,
       R::kRecovered},
      {"overloaded, first calm report", In(S::kOverloaded), Report(0.5), S::kOverloaded,
       R::kUnchanged},
      {"overloaded, between release and overload", In(S::kOverloaded, 0, 0, 0, 1), Report(0.95),
       S::kOverloaded, R::kUnchanged},
      {"overloaded, calm rate but queue grew", In(S::kOverloaded, 5, 0, 0, 1), Report(0.5, 6),
       S::kOverloaded, R::kUnchanged},
      {"overloaded recovers into interfered", In(S::kOverloaded, 0, 0, 1, 1),
       Slow(Report(0.5), 9.1), S::kInterfered, R::kRecovered},
      {"interfered then saturated", In(S::kInterfered, 0, 0, 2), Report(1.0), S::kOverloaded,
       R::kSaturated},
      {"interfered then queue grows", In(S::kInterfered, 3, 2, 2), Report(0.2, 4), S::kOverloaded,
       R::kQueueGrowing},
      {"interfered, second fast report", In(S::kInterfered, 0, 0, 0, 1), Report(0.3), S::kActive,
       R::kRecovered},
      {"interfered, first fast report", In(S::kInterfered, 0, 0, 2, 0), Report(0.3), S::kInterfered,
       R::kUnchanged},
      {"interfered, still slow", In(S::kInterfered, 0, 0, 2, 1), Slow(Report(0.3), 10),
       S::kInterfered, R::kUnchanged},
      {"interfered, idle keeps the calm count", In(S::kInterfered, 0, 0, 0, 1, 0), Report(0),
       S::kInterfered, R::kUnchanged},
      {"interfered, idle long enough to probe", In(S::kInterfered, 0, 0, 0, 0, 4), Report(0),
       S::kActive, R::kProbe},
      {"interfered, probing disabled", In(S::kInterfered, 0, 0, 0, 0, 40), Report(0),
       S::kInterfered, R::kUnchanged, no_probe},
      {"no SLO: saturation at the largest batch",
       In(S::kActive),
       at_max_batch,
       S::kOverloaded,
       R::kSaturated,
       {},
       0},
      {"empty profile: rate cannot overload",
       In(S::kActive),
       Report(5),
       S::kActive,
       R::kUnchanged,
       {},
       kSlo,
       true},
      {"empty profile: queue still can",
       In(S::kActive, 1, 2),
       Report(5, 2),
       S::kOverloaded,
       R::kQueueGrowing,
       {},
       kSlo,
       true},
  };
}

TEST(InstanceStateTest, Transitions) {
  const Profile empty;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    InstanceStateStep step = NextInstanceState(
        c.previous, c.report, c.empty_profile ? empty : TestProfile(), c.slo, c.options);
    EXPECT_EQ(InstanceStateName(step.state()), InstanceStateName(c.want));
    EXPECT_EQ(StateReasonName(step.reason), StateReasonName(c.why));
  }
}

TEST(InstanceStateTest, StreaksAndFigures) {
  // A queue that grows three reports running, from a fresh load.
  InstanceHistory h;
  h = NextInstanceState(h, Report(0.5, 1), TestProfile(), kSlo).history;
  EXPECT_EQ(h.state, S::kActive);
  EXPECT_EQ(h.growing_streak, 0);
  for (int q = 2; q <= 3; ++q) {
    h = NextInstanceState(h, Report(0.5, q), TestProfile(), kSlo).history;
    EXPECT_EQ(h.state, S::kActive);
  }
  EXPECT_EQ(h.growing_streak, 2);
  InstanceStateStep step = NextInstanceState(h, Report(0.5, 4), TestProfile(), kSlo);
  EXPECT_EQ(step.state(), S::kOverloaded);
  EXPECT_EQ(step.reason, R::kQueueGrowing);
  EXPECT_DOUBLE_EQ(step.saturation_qps, Sat());
  // The queue drains and the rate is low: two calm reports bring it back.
  h = step.history;
  h = NextInstanceState(h, Report(0.2, 2), TestProfile(), kSlo).history;
  EXPECT_EQ(h.state, S::kOverloaded);
  step = NextInstanceState(h, Report(0.2, 0), TestProfile(), kSlo);
  EXPECT_EQ(step.state(), S::kActive);
  EXPECT_EQ(step.history.calm_streak, 0);
  // The interference ratio is the signal over the profiled p99 at batch 1.
  step = NextInstanceState(step.history, Slow(Report(0.5), 12), TestProfile(), kSlo);
  EXPECT_DOUBLE_EQ(step.interference_ratio, 2.0);
  EXPECT_EQ(step.history.interfered_streak, 1);
}

TEST(InstanceStateTest, SlownessAtALightLoadIsNotInterference) {
  // busy = batches/s x observed compute p50 per replica: at batch 1 and
  // 9.1 ms, a quarter of the time is 27.5 queries/s.
  const double quarter_busy_qps = 0.25 / 0.0091;
  ASSERT_LT(quarter_busy_qps, Sat());
  auto at = [](double qps, int replicas = 1) {
    InstanceObservation r = Slow(Report(0.5), 9.1);
    r.served_qps = r.arrival_qps = qps;
    r.replicas = replicas;
    return r;
  };
  const InstanceHistory slow_once = In(S::kActive, 0, 0, 1);
  InstanceStateStep step = NextInstanceState(slow_once, at(0.99 * quarter_busy_qps),
                                             TestProfile(), kSlo);
  EXPECT_EQ(step.state(), S::kActive);
  EXPECT_EQ(step.history.interfered_streak, 0);
  EXPECT_EQ(NextInstanceState(slow_once, at(1.01 * quarter_busy_qps), TestProfile(), kSlo).state(),
            S::kInterfered);
  // Two replicas share the batches: each is half as busy.
  EXPECT_EQ(
      NextInstanceState(slow_once, at(1.5 * quarter_busy_qps, 2), TestProfile(), kSlo).state(),
      S::kActive);
  // 0 counts every report that served queries.
  InstanceStateOptions every_report;
  every_report.interference_min_busy = 0;
  EXPECT_EQ(NextInstanceState(slow_once, at(1), TestProfile(), kSlo, every_report).state(),
            S::kInterfered);
}

TEST(InstanceStateTest, UnloadResetsHistory) {
  InstanceHistory h = In(S::kInterfered, 7, 2, 3, 1, 2);
  InstanceStateStep step = NextInstanceState(h, InstanceObservation{}, TestProfile(), kSlo);
  EXPECT_EQ(step.state(), S::kInactive);
  EXPECT_EQ(step.history.last_queue, 0);
  EXPECT_EQ(step.history.growing_streak, 0);
  EXPECT_EQ(step.history.interfered_streak, 0);
}

}  // namespace
}  // namespace maitre::policy

namespace maitre::policy {
namespace {

TEST(InstanceStateTest, PersistentDropsMeanOverloaded) {
  InstanceHistory h{InstanceState::kActive};
  Profile profile = *Profile::Create({{1, 1, 1.2}, {8, 4, 5}}, 10, 10);
  InstanceObservation dropping;
  dropping.replicas = 1;
  dropping.arrival_qps = 100;
  dropping.served_qps = 80;
  dropping.dropped_qps = 20;
  dropping.compute_p50_ms = 1;
  dropping.mean_batch = 1;
  InstanceStateStep first = NextInstanceState(h, dropping, profile, 1000);
  EXPECT_EQ(first.history.state, InstanceState::kActive);  // one report is not a trend
  InstanceStateStep second = NextInstanceState(first.history, dropping, profile, 1000);
  EXPECT_EQ(second.history.state, InstanceState::kOverloaded);
  EXPECT_EQ(second.reason, StateReason::kDropping);
  // A few drops below the fraction are not overload.
  InstanceObservation few = dropping;
  few.dropped_qps = 1;
  EXPECT_EQ(NextInstanceState(NextInstanceState(h, few, profile, 1000).history, few, profile, 1000)
                .history.state,
            InstanceState::kActive);
  // Recovery needs calm reports without drops.
  InstanceObservation calm = dropping;
  calm.dropped_qps = 0;
  calm.served_qps = 100;
  InstanceStateStep s = NextInstanceState(second.history, calm, profile, 1000);
  s = NextInstanceState(s.history, calm, profile, 1000);
  EXPECT_EQ(s.history.state, InstanceState::kActive);
}

}  // namespace
}  // namespace maitre::policy
