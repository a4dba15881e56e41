// The queue of one instance: waiting queries ordered by the deadline the
// batching policy plans with, earliest first (ties keep arrival order).
// Policies read those deadlines as a contiguous span; the payloads travel
// alongside. A dispatch or a policy's drop always takes a prefix; expiry,
// which the owner judges by each payload's own hard deadline, may take any
// entries (TakeWhere).
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

  // Removes and returns every entry whose payload satisfies `pred`, keeping
  // the others in order. O(size).
  template <typename Pred>
  std::vector<Payload> TakeWhere(Pred pred) {
    std::vector<Payload> taken;
    size_t kept = head_;
    for (size_t i = head_; i < meta_.size(); ++i) {
      if (pred(payload_[i])) {
        taken.push_back(std::move(payload_[i]));
      } else {
        if (kept != i) {
          meta_[kept] = meta_[i];
          payload_[kept] = std::move(payload_[i]);
        }
        ++kept;
      }
    }
    meta_.resize(kept);
    payload_.resize(kept);
    return taken;
  }

  // Applies `f` to every payload (oldest position first).
  template <typename F>
  void ForEach(F f) const {
    for (size_t i = head_; i < meta_.size(); ++i) f(payload_[i]);
  }

 private:
  std::vector<policy::QueuedQuery> meta_;
  std::vector<Payload> payload_;
  size_t head_ = 0;
};

}  // namespace maitre::worker
