#include "controller/dataplane/call_coalescer.h"

#include <algorithm>
#include <iterator>

namespace maitre::controller {

std::vector<OutgoingQuery> CallCoalescer::Offer(const VariantKey& key, OutgoingQuery query) {
  std::vector<OutgoingQuery> send;
  absl::MutexLock lock(&mu_);
  Lane& lane = lanes_[key];
  if (lane.calls < options_.calls_per_instance) {
    ++lane.calls;
    send.push_back(std::move(query));
  } else {
    lane.waiting.push_back(std::move(query));
  }
  return send;
}

CallCoalescer::Next CallCoalescer::CallReturned(const VariantKey& key, Nanos now) {
  Next next;
  absl::MutexLock lock(&mu_);
  auto it = lanes_.find(key);
  if (it == lanes_.end()) return next;
  Lane& lane = it->second;
  auto take = lane.waiting.begin();
  while (take != lane.waiting.end() &&
         static_cast<int>(next.send.size()) < options_.max_queries_per_call) {
    if (take->deadline <= now) {
      next.expired.push_back(std::move(*take));
    } else {
      next.send.push_back(std::move(*take));
    }
    ++take;
  }
  lane.waiting.erase(lane.waiting.begin(), take);
  if (next.send.empty()) {
    --lane.calls;
    // An idle instance keeps no entry: instances come and go.
    if (lane.calls == 0 && lane.waiting.empty()) lanes_.erase(it);
  }
  return next;
}

int CallCoalescer::Waiting() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [key, lane] : lanes_) n += static_cast<int>(lane.waiting.size());
  return n;
}

}  // namespace maitre::controller
