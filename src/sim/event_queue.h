// The simulator's agenda: a flat binary min-heap of small events ordered by
// (time, sequence number). The sequence number is the order of scheduling,
// so events at the same nanosecond run in the order they were scheduled and
// every run of the same inputs takes the same path (docs/architecture.md,
// "Policies and one clock").
//
// Thread-safety: not synchronised; owned by one Simulator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/time.h"

namespace maitre::sim {

struct Event {
  Nanos time = 0;
  uint64_t seq = 0;
  uint32_t kind = 0;    // the owner's event type
  uint32_t target = 0;  // e.g. the instance the event is for

  bool Before(const Event& o) const { return time != o.time ? time < o.time : seq < o.seq; }
};

class EventQueue {
 public:
  void Reserve(size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }

  void Push(Nanos time, uint32_t kind, uint32_t target) {
    Event e{time, next_seq_++, kind, target};
    // Sift up with a hole instead of swaps.
    size_t i = heap_.size();
    heap_.push_back(e);
    while (i > 0) {
      size_t parent = (i - 1) / 2;
      if (!e.Before(heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  // A sequence number for an event the owner keeps outside the heap (the
  // simulator holds its next arrival aside), so it orders exactly like one
  // pushed here.
  uint64_t TakeSeq() { return next_seq_++; }

  // Removes and returns the earliest event. The queue must not be empty.
  Event Pop() {
    Event result = heap_.front();
    Event last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n > 0) {
      size_t i = 0;
      while (true) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && heap_[child + 1].Before(heap_[child])) ++child;
        if (!heap_[child].Before(last)) break;
        heap_[i] = heap_[child];
        i = child;
      }
      heap_[i] = last;
    }
    return result;
  }

 private:
  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace maitre::sim
