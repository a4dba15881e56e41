#include "policy/batching_clipper.h"

#include <algorithm>

#include "policy/latency_table.h"

namespace maitre::policy {

ClipperAimdBatching::ClipperAimdBatching(const Options& options)
    : options_(options),
      limit_(std::clamp<double>(options.initial_batch, 1, std::max(1, options.max_batch))) {}

BatchDecision ClipperAimdBatching::Decide(absl::Span<const QueuedQuery> queue, Nanos now) const {
  if (queue.empty()) return BatchDecision::Wait(kInfiniteFuture);
  int32_t expired = ExpiredPrefix(queue, now);
  if (expired > 0) return BatchDecision::Drop(expired);
  return BatchDecision::Dispatch(PrefixWithin(queue, current_max_batch()));
}

void ClipperAimdBatching::Observe(const BatchOutcome& outcome) {
  double cap = std::max(1, options_.max_batch);
  const bool miss = options_.batch_latency_signal ? outcome.finish - outcome.start > options_.slo
                                                  : outcome.missed > 0;
  if (miss) {
    limit_ = std::max(1.0, limit_ * options_.decrease);
  } else {
    limit_ = std::min(cap, limit_ + options_.step);
  }
}

}  // namespace maitre::policy
