#include "sim/simulator.h"

#include <gtest/gtest.h>

#include "policy/batching_clipper.h"
#include "sim/testing/setups.h"

namespace maitre::sim {
namespace {

using policy::BatchDecision;
using policy::QueuedQuery;
constexpr Nanos kMs = kMillisecond;

std::unique_ptr<Simulator> Make(SimulationSetup setup, std::vector<Arrival> arrivals) {
  Nanos horizon = setup.horizon;
  auto sim = Simulator::Create(std::move(setup), CreateReplay(std::move(arrivals), horizon));
  EXPECT_TRUE(sim.ok()) << sim.status();
  return sim.ok() ? *std::move(sim) : nullptr;
}

std::vector<Arrival> At(std::vector<Nanos> times) {
  std::vector<Arrival> out;
  for (Nanos t : times) out.push_back({t, 0, -1, -1});
  return out;
}

void ExpectEveryQueryResolved(const Simulator& sim) {
  const Counters& c = sim.metrics().total;
  EXPECT_EQ(c.arrived, c.resolved());
  EXPECT_EQ(c.completed, c.on_time + c.late);
}

TEST(SimulatorTest, ServesABatchAtTheProfileTime) {
  // timeout: 2 queries, max delay 5 ms, so one batch of 2 starts at 5 ms and
  // takes p50(2) = 8 ms.
  SimulationSetup s = testing::LinearSetup("timeout");
  s.batching.max_queue_delay = 5 * kMs;
  auto sim = Make(s, At({0, kMs}));
  ASSERT_TRUE(sim->Run().ok());
  const SimMetrics& m = sim->metrics();
  EXPECT_EQ(m.total.on_time, 2);
  EXPECT_EQ(m.batches, 1);
  EXPECT_EQ(m.batch_rows, 2);
  EXPECT_EQ(m.end_time, 13 * kMs);
  EXPECT_EQ(m.latency.max(), 13 * kMs);
  EXPECT_DOUBLE_EQ(m.total.accuracy_sum, 1.5);
  ExpectEveryQueryResolved(*sim);
}

TEST(SimulatorTest, DropsQueuedQueriesAtTheirDeadline) {
  // The first query holds the executor for p50(1) = 6 ms; the second, with a
  // 3 ms SLO of its own, expires while queued and is dropped at 4 ms.
  SimulationSetup s = testing::LinearSetup("clipper-aimd");
  std::vector<Arrival> a = At({0, kMs});
  a[1].latency = 3 * kMs;
  auto sim = Make(s, a);
  ASSERT_TRUE(sim->RunUntil(4 * kMs - 1).ok());
  EXPECT_EQ(sim->metrics().total.dropped, 0);
  ASSERT_TRUE(sim->RunUntil(4 * kMs).ok());
  EXPECT_EQ(sim->metrics().total.dropped, 1);
  ASSERT_TRUE(sim->Run().ok());
  EXPECT_EQ(sim->metrics().total.on_time, 1);
  ExpectEveryQueryResolved(*sim);
}

TEST(SimulatorTest, LateQueriesAreCountedLate) {
  // 40 ms SLO, but each query takes 6 ms and 20 arrive at once: clipper
  // (starting at batch 1) runs them one by one, and the tail is late or dropped.
  SimulationSetup s = testing::LinearSetup("clipper-aimd");
  std::vector<Arrival> a = At(std::vector<Nanos>(20, 0));
  auto sim = Make(s, a);
  ASSERT_TRUE(sim->Run().ok());
  const Counters& c = sim->metrics().total;
  EXPECT_GT(c.violations(), 0);
  EXPECT_GT(c.on_time, 0);
  ExpectEveryQueryResolved(*sim);
}

TEST(SimulatorTest, RoutesToTheLeastQueuedInstance) {
  SimulationSetup s = testing::LinearSetup("clipper-aimd", /*instances=*/2);
  auto sim = Make(s, At({0, 0}));
  ASSERT_TRUE(sim->Run().ok());
  // Both ran at once on different instances: done at p50(1) = 6 ms.
  EXPECT_EQ(sim->metrics().end_time, 6 * kMs);
  EXPECT_EQ(sim->metrics().batches, 2);
}

TEST(SimulatorTest, RejectsQueriesOfAnAppWithoutInstances) {
  SimulationSetup s = testing::LinearSetup("proteus");
  s.apps.push_back({"orphan", 40 * kMs, 0});
  std::vector<Arrival> a = At({0, 0});
  a[1].app = 1;
  auto sim = Make(s, a);
  ASSERT_TRUE(sim->Run().ok());
  EXPECT_EQ(sim->metrics().total.rejected, 1);
  EXPECT_EQ(sim->metrics().per_app[1].rejected, 1);
  ExpectEveryQueryResolved(*sim);
}

TEST(SimulatorTest, CountsQueriesServedBelowTheirMinimumAccuracy) {
  SimulationSetup s = testing::LinearSetup("proteus");
  std::vector<Arrival> a = At({0, 0});
  a[0].min_accuracy = 0.9;  // the only variant has 0.75
  auto sim = Make(s, a);
  ASSERT_TRUE(sim->Run().ok());
  EXPECT_EQ(sim->metrics().total.below_min_accuracy, 1);
}

TEST(SimulatorTest, ReportsBatchOutcomesToThePolicy) {
  SimulationSetup s = testing::LinearSetup("clipper-aimd");
  policy::ClipperAimdBatching* clipper = nullptr;
  s.policy_factory = [&clipper](int32_t) {
    auto p = std::make_unique<policy::ClipperAimdBatching>(policy::ClipperAimdBatching::Options{});
    clipper = p.get();
    return p;
  };
  std::vector<Nanos> times;
  for (int i = 0; i < 5; ++i) times.push_back(i * 100 * kMs);
  auto sim = Make(s, At(times));
  ASSERT_TRUE(sim->Run().ok());
  ASSERT_NE(clipper, nullptr);
  EXPECT_EQ(clipper->current_max_batch(), 6);  // five batches without a miss
}

// A policy that breaks the contract in a chosen way.
class BrokenPolicy final : public policy::BatchingPolicy {
 public:
  explicit BrokenPolicy(int mode) : mode_(mode) {}
  absl::string_view name() const override { return "broken"; }
  BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos now) const override {
    switch (mode_) {
      case 0:
        return BatchDecision::Wait(now);  // a wake-up already due
      case 1:
        return BatchDecision::Dispatch(static_cast<int32_t>(queue.size()) + 1);
      default:
        // Waits past the head's deadline, then dispatches it expired.
        if (now < queue[0].deadline + kMs) return BatchDecision::Wait(queue[0].deadline + kMs);
        return BatchDecision::Dispatch(1);
    }
  }

 private:
  int mode_;
};

TEST(SimulatorTest, PolicyContractViolationsStopTheRun) {
  for (int mode = 0; mode < 3; ++mode) {
    SimulationSetup s = testing::LinearSetup("proteus");
    s.policy_factory = [mode](int32_t) { return std::make_unique<BrokenPolicy>(mode); };
    auto sim = Make(s, At({0}));
    absl::Status status = sim->Run();
    if (mode == 2) {
      // The mechanism drops the query at its deadline first: nothing is left
      // to dispatch late, and the run is fine.
      EXPECT_TRUE(status.ok()) << status;
      EXPECT_EQ(sim->metrics().total.dropped, 1);
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << "mode " << mode;
    }
  }
}

// Drops everything it is shown.
class DropAllPolicy final : public policy::BatchingPolicy {
 public:
  absl::string_view name() const override { return "drop-all"; }
  BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos) const override {
    return BatchDecision::Drop(static_cast<int32_t>(queue.size()));
  }
};

TEST(SimulatorTest, ADroppedQueryThatCanStillMeetItsDeadlineIsServedBestEffort) {
  // As in the worker (policy::ServeDroppedBestEffort): the policy gives each
  // query up at once, but with 40 ms left and a few ms of service each is
  // then served as soon as possible, and in time.
  SimulationSetup s = testing::LinearSetup("proteus");
  s.policy_factory = [](int32_t) { return std::make_unique<DropAllPolicy>(); };
  auto sim = Make(s, At({0, 100 * kMs, 200 * kMs}));
  ASSERT_TRUE(sim->Run().ok());
  EXPECT_EQ(sim->metrics().total.dropped, 0);
  EXPECT_EQ(sim->metrics().total.on_time, 3);
}

TEST(SimulatorTest, ChecksTheSetup) {
  SimulationSetup s = testing::LinearSetup("proteus", 2);
  s.worker_types[0].count = 1;  // two instances, one worker
  EXPECT_FALSE(Simulator::Create(s, CreateReplay({}, kSecond)).ok());
  s = testing::LinearSetup("fifo");
  EXPECT_FALSE(Simulator::Create(s, CreateReplay({}, kSecond)).ok());
  s = testing::LinearSetup("proteus");
  s.instances[0].variant = 7;
  EXPECT_FALSE(Simulator::Create(s, CreateReplay({}, kSecond)).ok());
  s = testing::LinearSetup("proteus");
  EXPECT_FALSE(Simulator::Create(s, nullptr).ok());
}

TEST(SimulatorTest, NoiseKeepsTheMedianAndReachesTheP99) {
  // One query at a time, far apart: service times are the batch-1 draws.
  SimulationSetup s = testing::LinearSetup("clipper-aimd");
  s.service_noise = true;
  s.horizon = 2000 * kSecond;
  std::vector<Nanos> times;
  for (int i = 0; i < 20000; ++i) times.push_back(i * 100 * kMs);
  auto sim = Make(s, At(times));
  ASSERT_TRUE(sim->Run().ok());
  const LatencyHistogram& h = sim->metrics().latency;
  EXPECT_NEAR(ToMillis(h.Percentile(50)), 6.0, 0.1);
  EXPECT_NEAR(ToMillis(h.Percentile(99)), 6.6, 0.12);
}

}  // namespace
}  // namespace maitre::sim
