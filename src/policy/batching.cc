#include "policy/batching.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "policy/batching_clipper.h"
#include "policy/batching_mark.h"
#include "policy/batching_nexus.h"
#include "policy/batching_proteus.h"
#include "policy/batching_timeout.h"
#include "policy/latency_table.h"

namespace maitre::policy {

int32_t RowsIn(absl::Span<const QueuedQuery> queue, int32_t count) {
  int32_t rows = 0;
  for (int32_t i = 0; i < count; ++i) rows += queue[i].rows;
  return rows;
}

int32_t PrefixWithin(absl::Span<const QueuedQuery> queue, int32_t max_rows) {
  int32_t rows = 0;
  int32_t n = 0;
  for (const QueuedQuery& q : queue) {
    if (n > 0 && rows + q.rows > max_rows) break;
    rows += q.rows;
    ++n;
  }
  return n;
}

BatchDecision DecideForInstance(BatchingPolicy& policy, absl::Span<const QueuedQuery> queue,
                                size_t with_objective, int32_t max_rows, Nanos now) {
  BatchDecision d = with_objective == 0 && !queue.empty()
                        ? BatchDecision::Dispatch(static_cast<int32_t>(queue.size()))
                        : policy.Decide(queue, now);
  // A count outside the queue is left for the caller to refuse (the
  // simulator stops the run on it).
  if (d.action == BatchDecision::Action::kDispatch && d.count >= 1 &&
      d.count <= static_cast<int32_t>(queue.size())) {
    d.count = std::min(d.count, std::max(1, PrefixWithin(queue, max_rows)));
  }
  return d;
}

absl::StatusOr<std::unique_ptr<BatchingPolicy>> CreateBatchingPolicy(const BatchingOptions& options,
                                                                     const Profile& profile) {
  if (options.max_batch < 1) return absl::InvalidArgumentError("max_batch must be at least 1");
  if (options.max_queue_delay < 0 || options.slo < 0) {
    return absl::InvalidArgumentError(
        "max_queue_delay and slo must not be negative");
  }
  const bool p99 = !options.plan_with_median;
  auto needs_profile = [&]() -> absl::Status {
    if (profile.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batching policy \"", options.policy, "\" plans with service times and needs a profile"));
    }
    return absl::OkStatus();
  };
  if (options.policy == "timeout") {
    if (profile.empty()) {
      return std::make_unique<TimeoutBatching>(options.max_batch, options.max_queue_delay);
    }
    return std::make_unique<TimeoutBatching>(options.max_batch, options.max_queue_delay,
                                             LatencyTable::Build(profile, options.max_batch, options.dispatch_margin), p99);
  }
  if (options.policy == "proteus") {
    if (auto s = needs_profile(); !s.ok()) return s;
    if (!(options.demand_headroom >= 0)) {
      return absl::InvalidArgumentError("demand_headroom must be 0 (off) or positive");
    }
    return std::make_unique<ProteusBatching>(
        options.max_batch, options.slo,
        LatencyTable::Build(profile, options.max_batch, options.dispatch_margin), p99,
        ThroughputByBatch(profile, options.max_batch), options.demand_headroom);
  }
  if (options.policy == "nexus") {
    if (auto s = needs_profile(); !s.ok()) return s;
    return std::make_unique<NexusBatching>(options.max_batch, options.slo,
                                           LatencyTable::Build(profile, options.max_batch, options.dispatch_margin));
  }
  if (options.policy == "mark") {
    if (auto s = needs_profile(); !s.ok()) return s;
    return std::make_unique<MarkBatching>(
        options.max_batch, options.slo,
        LatencyTable::Build(profile, options.max_batch, options.dispatch_margin), p99);
  }
  if (options.policy == "clipper-aimd") {
    if (!(options.aimd_step > 0) || !(options.aimd_decrease > 0 && options.aimd_decrease < 1) ||
        options.aimd_initial_batch < 1) {
      return absl::InvalidArgumentError(
          "clipper-aimd needs aimd_step > 0, 0 < aimd_decrease < 1 and aimd_initial_batch >= 1");
    }
    ClipperAimdBatching::Options o;
    o.max_batch = options.max_batch;
    o.initial_batch = options.aimd_initial_batch;
    o.step = options.aimd_step;
    o.decrease = options.aimd_decrease;
    o.batch_latency_signal = options.aimd_batch_latency_signal;
    o.slo = options.slo;
    if (o.batch_latency_signal && o.slo <= 0) {
      return absl::InvalidArgumentError("clipper-aimd's batch-latency signal needs an slo");
    }
    return std::make_unique<ClipperAimdBatching>(o);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown batching policy \"", options.policy,
                   "\"; choose timeout, proteus, clipper-aimd, nexus or mark"));
}

}  // namespace maitre::policy
