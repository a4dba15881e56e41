// Properties every batching policy must keep, over random queues, profiles
// and options (docs/architecture.md, "Tests and benchmarks"): counts are in
// range, nothing expired is run, a queue is never left without a wake-up, and a
// query that can still make its deadline is never held past the point where it
// could.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "policy/batching.h"
#include "policy/batching_clipper.h"
#include "policy/batching_nexus.h"
#include "policy/batching_proteus.h"
#include "policy/latency_table.h"

namespace maitre::policy {
namespace {

using Action = BatchDecision::Action;
constexpr Nanos kMs = kMillisecond;
const char* const kPolicies[] = {"proteus", "clipper-aimd", "nexus", "timeout", "mark"};

// Integer draws straight from the engine, so the cases are the same on
// every standard library.
class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_(seed) {}
  int64_t Int(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng_() % (hi - lo + 1)); }
  double Real(double lo, double hi) { return lo + (hi - lo) * (rng_() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return Real(0, 1) < p; }

 private:
  std::mt19937_64 rng_;
};

Profile RandomProfile(Draw& d) {
  std::vector<LatencyPoint> points;
  int batch = static_cast<int>(d.Int(1, 2));
  double p50 = d.Real(0.05, 10);
  int n = static_cast<int>(d.Int(1, 6));
  for (int i = 0; i < n; ++i) {
    points.push_back({batch, p50, p50 * d.Real(1, 1.6)});
    batch += static_cast<int>(d.Int(1, 16));
    p50 = std::max(0.01, p50 + d.Real(-0.5, 12));  // mostly growing, sometimes a dip
  }
  return *Profile::Create(points, 0, 0);
}

std::vector<QueuedQuery> RandomQueue(Draw& d, Nanos now) {
  std::vector<QueuedQuery> q(d.Int(0, 40));
  for (QueuedQuery& x : q) {
    x.arrival = now - d.Int(0, 100 * kMs);
    x.deadline = x.arrival + d.Int(0, 150 * kMs);
    x.rows = d.Chance(0.8) ? 1 : static_cast<int32_t>(d.Int(1, 4));
  }
  std::stable_sort(q.begin(), q.end(), [](const QueuedQuery& a, const QueuedQuery& b) {
    return a.deadline < b.deadline;
  });
  return q;
}

BatchingOptions RandomOptions(Draw& d, const char* policy) {
  BatchingOptions o;
  o.policy = policy;
  o.max_batch = static_cast<int32_t>(d.Int(1, 64));
  o.max_queue_delay = d.Int(0, 20 * kMs);
  o.slo = d.Chance(0.5) ? 0 : d.Int(kMs, 150 * kMs);
  o.plan_with_median = d.Chance(0.3);
  return o;
}

// Whether a Drop of the first `count` queries is allowed for this policy.
void CheckDrop(const std::string& policy, const BatchingOptions& o, const LatencyTable& table,
               absl::Span<const QueuedQuery> q, Nanos now, int32_t count) {
  for (int32_t i = 0; i < count; ++i) {
    if (q[i].deadline <= now) continue;  // expired: always allowed
    if (policy == "proteus" || policy == "nexus") {
      // Both give a query up only when the batch it would ride in (the queue
      // from it on, up to the policy's batch size) would finish late.
      const Nanos slo = o.slo > 0 ? o.slo : q[i].deadline - q[i].arrival;
      int32_t size = policy == "nexus"
                         ? NexusBatching(o.max_batch, o.slo, table).TargetBatch(slo)
                         : ProteusBatching(o.max_batch, o.slo, table, true, {}, 0).MaxBatchFor(slo);
      auto window = q.subspan(i);
      int32_t rows = RowsIn(window, PrefixWithin(window, size));
      EXPECT_GT(now + table.P50(rows), q[i].deadline)
          << policy << " dropped a query its batch fits";
    } else {
      ADD_FAILURE() << policy << " dropped an unexpired query";
    }
  }
}

void CheckDecision(const std::string& policy, const BatchingOptions& o, const LatencyTable& table,
                   absl::Span<const QueuedQuery> q, Nanos now, const BatchDecision& d) {
  const int32_t size = static_cast<int32_t>(q.size());
  switch (d.action) {
    case Action::kDispatch:
      ASSERT_GE(d.count, 1);
      ASSERT_LE(d.count, size);
      EXPECT_GT(q[0].deadline, now) << policy << " dispatched an expired query";
      if (d.count > 1) EXPECT_LE(RowsIn(q, d.count), o.max_batch) << policy;
      break;
    case Action::kDrop:
      ASSERT_GE(d.count, 1);
      ASSERT_LE(d.count, size);
      CheckDrop(policy, o, table, q, now, d.count);
      break;
    case Action::kWait:
      if (size == 0) break;
      EXPECT_GT(d.wake_at, now) << policy << " asked to wait until a time already past";
      EXPECT_LT(d.wake_at, kInfiniteFuture) << policy << " left a queue without a wake-up";
      EXPECT_NE(policy, "nexus") << "nexus is work-conserving";
      EXPECT_NE(policy, "clipper-aimd") << "clipper is work-conserving";
      // The batcher never lets a feasible query expire: if the head can make
      // its deadline now, at the wake-up it still can.
      const bool p99 = !o.plan_with_median;
      if (now + table.At(q[0].rows, p99) <= q[0].deadline) {
        EXPECT_LE(d.wake_at, q[0].deadline - table.At(q[0].rows, p99))
            << policy << " would hold a feasible head past its last chance";
      }
      break;
  }
}

TEST(BatchingPropertyTest, SingleDecisions) {
  Draw draw(20240601);
  for (int iter = 0; iter < 4000; ++iter) {
    const Profile profile = RandomProfile(draw);
    const Nanos now = kSecond;
    const std::vector<QueuedQuery> queue = RandomQueue(draw, now);
    for (const char* name : kPolicies) {
      BatchingOptions o = RandomOptions(draw, name);
      auto p = CreateBatchingPolicy(o, profile);
      ASSERT_TRUE(p.ok()) << p.status();
      if (o.policy == "clipper-aimd") {
        for (int k = draw.Int(0, 20); k > 0; --k)
          (*p)->Observe({1, 0, 1, draw.Chance(0.3) ? 1 : 0});
      }
      // Any demand, from idle to past what the instance can serve.
      if (draw.Chance(0.5)) (*p)->ObserveDemand(draw.Chance(0.2) ? 0 : draw.Int(1, 20000));
      LatencyTable table = LatencyTable::Build(profile, o.max_batch);
      BatchDecision d = (*p)->Decide(queue, now);
      CheckDecision(o.policy, o, table, queue, now, d);
      if (HasFatalFailure() || HasFailure()) {
        FAIL() << "iteration " << iter << " policy " << name << " queue " << queue.size();
      }
    }
  }
}

// Drive each policy as the mechanism would, with no further arrivals and a
// busy executor after each dispatch: every step must keep the properties,
// time must move forward, and the queue must drain.
TEST(BatchingPropertyTest, DrainsWithoutLettingFeasibleQueriesExpire) {
  Draw draw(77);
  for (int iter = 0; iter < 1500; ++iter) {
    const Profile profile = RandomProfile(draw);
    for (const char* name : kPolicies) {
      BatchingOptions o = RandomOptions(draw, name);
      auto p = CreateBatchingPolicy(o, profile);
      ASSERT_TRUE(p.ok()) << p.status();
      if (draw.Chance(0.5)) (*p)->ObserveDemand(draw.Int(0, 20000));
      LatencyTable table = LatencyTable::Build(profile, o.max_batch);
      Nanos now = kSecond;
      std::vector<QueuedQuery> queue = RandomQueue(draw, now);
      int steps = 0;
      while (!queue.empty()) {
        ASSERT_LT(++steps, 10000) << name << " does not drain";
        BatchDecision d = (*p)->Decide(queue, now);
        CheckDecision(o.policy, o, table, queue, now, d);
        if (HasFailure()) FAIL() << "iteration " << iter << " policy " << name;
        if (d.action == Action::kWait) {
          now = d.wake_at;
          continue;
        }
        int32_t rows = RowsIn(queue, d.count);
        if (d.action == Action::kDispatch) {
          Nanos finish = now + table.P50(rows);
          int32_t missed = 0;
          for (int32_t i = 0; i < d.count; ++i) missed += finish > queue[i].deadline;
          (*p)->Observe({rows, now, finish, missed});
          now = finish;
        }
        queue.erase(queue.begin(), queue.begin() + d.count);
      }
    }
  }
}

}  // namespace
}  // namespace maitre::policy
