// MArk's batching (Zhang et al., USENIX ATC '19, §4.3): a batch is sent when
// N_batch queries are queued or the oldest has waited W_batch, with
// (W_batch, N_batch) tuned from the profile instead of by hand.
//
// Our reading of MArk's two constraints, for batch size b with service time
// T_b (the profile's p99 at b, as RTmax is a tail objective):
//   (1) W + T_b <= RTmax: a query that opens a batch waits at most W and then
//       runs for T_b, and must still be answered within the response-time
//       objective RTmax (the SLO);
//   (2) W + T_b <= b / mu: mu is the arrival rate the instance expects (MArk's
//       mu for the non-burst pool). During one cycle of waiting and serving,
//       mu·(W + T_b) queries arrive, and they must fit into the next batch of
//       b, or the queue grows without bound.
// Larger batches serve more per second, so the tuner takes the largest
// b <= max_batch that satisfies both with some W >= 0, and the longest W the
// two allow for it: W = min(RTmax, b/mu) - T_b. With no expected rate (mu = 0)
// only (1) applies. If no b fits, it falls back to b = 1, W = 0.
//
// Runtime behaviour is the `timeout` rule with those parameters, including
// its guard never to hold a query past its last feasible dispatch.
//
// Thread-safety: see batching.h.
#pragma once

#include "policy/batching.h"
#include "policy/latency_table.h"

namespace maitre::policy {

struct MarkParams {
  int32_t n_batch = 1;
  Nanos w_batch = 0;
};

// `table` must not be empty.
MarkParams TuneMark(const LatencyTable& table, Nanos rt_max, double rate_qps, int32_t max_batch,
                    bool plan_with_p99);

class MarkBatching final : public BatchingPolicy {
 public:
  // `slo` may be 0: the parameters are then tuned per decision from the head
  // query's own budget (deadline - arrival).
  MarkBatching(int32_t max_batch, Nanos slo, double rate_qps, LatencyTable table,
               bool plan_with_p99);
  absl::string_view name() const override { return "mark"; }
  BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos now) const override;

  const MarkParams& params() const { return fixed_; }

 private:
  int32_t max_batch_;
  Nanos slo_;
  double rate_qps_;
  LatencyTable table_;
  bool p99_;
  MarkParams fixed_;  // tuned for slo_ when slo_ > 0
};

}  // namespace maitre::policy
