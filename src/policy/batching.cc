#include "policy/batching.h"

#include "absl/strings/str_cat.h"
#include "policy/batching_timeout.h"

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

absl::StatusOr<std::unique_ptr<BatchingPolicy>> CreateBatchingPolicy(
    const BatchingOptions& options, const Profile& profile) {
  if (options.max_batch < 1) return absl::InvalidArgumentError("max_batch must be at least 1");
  if (options.policy == "timeout") {
    return std::make_unique<TimeoutBatching>(options.max_batch, options.max_queue_delay);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown batching policy \"", options.policy,
      "\"; choose timeout, proteus, clipper-aimd, nexus or mark"));
}

}  // namespace maitre::policy
