// The queue of one instance: waiting queries ordered by deadline, earliest
// first (ties keep arrival order). Batching policies read the deadlines as a
// contiguous span; the payloads travel alongside.
//
// Because the order is by deadline, every query that has expired forms a
// prefix, and a dispatch or drop always takes a prefix.
//
// Thread-safety: not synchronised; the owning Instance guards it.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "policy/batching.h"

namespace maitre::worker {

template <typename Payload>
class DeadlineQueue {
 public:
  size_t size() const { return meta_.size() - head_; }
  bool empty() const { return size() == 0; }
  absl::Span<const policy::QueuedQuery> View() const {
    return absl::MakeConstSpan(meta_.data() + head_, size());
  }
  const policy::QueuedQuery& front() const { return meta_[head_]; }

  void Push(const policy::QueuedQuery& query, Payload payload) {
    // Deadlines mostly arrive in order, so the insertion point is almost
    // always the end; the search from the back keeps that case O(1).
    size_t pos = meta_.size();
    while (pos > head_ && meta_[pos - 1].deadline > query.deadline) --pos;
    meta_.insert(meta_.begin() + pos, query);
    payload_.insert(payload_.begin() + pos, std::move(payload));
  }

  // Removes the first `n` entries and returns their payloads.
  std::vector<Payload> PopFront(size_t n) {
    n = std::min(n, size());
    std::vector<Payload> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(std::move(payload_[head_ + i]));
    head_ += n;
    // Compact once the dead prefix dominates, so memory stays bounded while
    // pops stay O(n) amortised.
    if (head_ > 64 && head_ * 2 > meta_.size()) {
      meta_.erase(meta_.begin(), meta_.begin() + head_);
      payload_.erase(payload_.begin(), payload_.begin() + head_);
      head_ = 0;
    }
    return out;
  }

  // How many leading entries have a deadline at or before `now`.
  size_t ExpiredCount(Nanos now) const {
    size_t n = 0;
    while (head_ + n < meta_.size() && meta_[head_ + n].deadline <= now) ++n;
    return n;
  }

 private:
  std::vector<policy::QueuedQuery> meta_;
  std::vector<Payload> payload_;
  size_t head_ = 0;
};

}  // namespace maitre::worker
