// MArk's batching (Zhang et al., USENIX ATC '19, §4.3): a batch is sent when
// N_batch queries are queued or the oldest has waited W_batch, with
// (W_batch, N_batch) tuned from the profile instead of by hand.
//
// MArk tunes them per instance from a light profile (§4.3): with µ*_nb the
// instance's best rate without batching (1 / T_1), it grows the batch size
// b from 1 while both of these hold, T_b being the service time of a batch
// of b (the profile's p99 at b, as RTmax is a tail objective):
//   (1) W + T_b <= RTmax: a query that opens a batch waits at most W and then
//       runs for T_b, and must still be answered within the response-time
//       objective RTmax (the SLO);
//   (2) W + T_b <= b / µ*_nb = b·T_1: waiting for and serving a batch of b
//       takes no longer than serving its b queries one by one, so batching
//       never lowers the throughput.
// For each b the longest wait both allow is W = min(RTmax, b·T_1) − T_b; the
// tuner stops at the first b for which it would be negative (or at
// max_batch) and keeps the last b that fitted, with its W. If even b = 1
// misses RTmax it falls back to b = 1, W = 0.
//
// An earlier version read µ as the arrival rate the instance expects; the
// paper's µ*_nb is a property of the instance, which needs no rate forecast.
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
MarkParams TuneMark(const LatencyTable& table, Nanos rt_max, int32_t max_batch,
                    bool plan_with_p99);

class MarkBatching final : public BatchingPolicy {
 public:
  // `slo` may be 0: the parameters are then tuned per decision from the head
  // query's own budget (deadline - arrival).
  MarkBatching(int32_t max_batch, Nanos slo, LatencyTable table, bool plan_with_p99);
  absl::string_view name() const override { return "mark"; }
  BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos now) const override;

  const MarkParams& params() const { return fixed_; }

 private:
  int32_t max_batch_;
  Nanos slo_;
  LatencyTable table_;
  bool p99_;
  MarkParams fixed_;  // tuned for slo_ when slo_ > 0
};

}  // namespace maitre::policy
