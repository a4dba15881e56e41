// Clipper's adaptive batching (Crankshaw et al., NSDI '17, §4.3): work-
// conserving, with a maximum batch size tuned by AIMD. After a batch without
// a miss the maximum grows additively; after a batch with a miss it shrinks
// multiplicatively (Clipper: +1 and -10%). It does not read the profile: the
// feedback loop is the whole mechanism.
//
// A miss is, by default, a batch in which some query finished after its
// deadline (as in the Proteus artifact's AIMD). The Clipper paper's own signal
// is a batch whose service time exceeded the latency objective
// (`batch_latency_signal`, needs `slo`); it ignores queueing, so under a
// backlog it keeps batches large where the deadline signal shrinks them to one.
//
// The only deadline rule it follows is the universal one: expired queries at
// the head are dropped, never dispatched.
//
// Thread-safety: see batching.h. Observe() changes the maximum batch.
#pragma once

#include "policy/batching.h"

namespace maitre::policy {

class ClipperAimdBatching final : public BatchingPolicy {
 public:
  struct Options {
    int32_t max_batch = 64;  // the AIMD maximum never exceeds this
    int32_t initial_batch = 1;
    double step = 1;
    double decrease = 0.9;  // in (0, 1)
    bool batch_latency_signal = false;
    Nanos slo = 0;  // for batch_latency_signal
  };
  explicit ClipperAimdBatching(const Options& options);

  absl::string_view name() const override { return "clipper-aimd"; }
  BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos now) const override;
  void Observe(const BatchOutcome& outcome) override;

  // The current AIMD maximum, in rows.
  int32_t current_max_batch() const { return static_cast<int32_t>(limit_); }

 private:
  Options options_;
  double limit_;  // kept fractional so that repeated -10% steps compound
};

}  // namespace maitre::policy
