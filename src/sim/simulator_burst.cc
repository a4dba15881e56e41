// MArk's burst pool and its Bouncer in the simulator (sim/simulator.h,
// BurstPool; docs/architecture.md, "The simulator's burst pool"). The
// shape is the paper's Lambda (§3.1): a new instance in seconds rather than
// minutes, one query per instance at a time, paid per request at a premium;
// the numbers are the experiment's.
#include <algorithm>

#include "policy/admission.h"
#include "sim/selection_router.h"
#include "sim/simulator.h"

namespace maitre::sim {

bool Simulator::Admits(int32_t i, const RouteRequest& request, Nanos* estimate) const {
  *estimate = 0;
  const SimInstance& inst = instances_[i];
  // The controller's router sends a query only to an instance that can
  // start it now: not one still loading, nor one draining.
  if (inst.ready <= 0 || inst.draining) return false;
  // The instance as the controller's dispatcher sees it (policy/admission.h):
  // every query sent there and not answered yet, queued or in a running
  // batch, and its ready replicas. The simulator has no front-end overhead
  // and no measured slowdown to add.
  policy::AdmissionCandidate candidate;
  candidate.profile = &setup_.variants[inst.variant].profile;
  candidate.waiting = static_cast<int64_t>(inst.queue.size() - inst.head);
  for (int32_t id : inst.replicas) {
    if (replicas_[id].busy) candidate.waiting += static_cast<int64_t>(replicas_[id].batch.size());
  }
  candidate.replicas = inst.ready;
  candidate.max_batch = inst.max_batch;
  return policy::AnswersInTime(candidate, request.deadline - now_, request.rows, estimate);
}

int32_t Simulator::RouteWithBouncer(const RouteRequest& request, bool* bounced,
                                    Nanos* estimate) {
  *bounced = false;
  *estimate = 0;
  const int64_t refused_before = refused_[request.app];
  const int32_t target = Route(request);
  if (!setup_.burst_pool.enabled || (target >= 0 && Admits(target, request, estimate))) {
    return target;
  }
  *estimate = 0;
  if (!SendToBurstPool(request)) return target;  // full: where the router sent it
  *bounced = true;
  if (target >= 0) selection_->AddWaiting(target, -1);  // Route counted it there
  // It reached no worker: demand the allocator must see.
  if (refused_[request.app] == refused_before) ++refused_[request.app];
  return -1;
}

bool Simulator::SendToBurstPool(const RouteRequest& request) {
  const BurstPool& pool = setup_.burst_pool;
  if (burst_in_flight_ >= pool.concurrency) return false;
  while (!burst_warm_.empty() && now_ - burst_warm_.front() > pool.keep_warm) {
    burst_warm_.pop_front();  // recycled by the provider
  }
  Nanos service = pool.service;
  if (!burst_warm_.empty()) {
    burst_warm_.pop_back();  // the most recently used stays warm longest
  } else {
    service += pool.cold_start;
    ++metrics_.burst_cold_starts;
  }
  int32_t slot;
  if (!burst_free_slots_.empty()) {
    slot = burst_free_slots_.back();
    burst_free_slots_.pop_back();
  } else {
    slot = static_cast<int32_t>(burst_.size());
    burst_.emplace_back();
  }
  burst_[static_cast<size_t>(slot)] = {request.arrival, request.deadline, request.app};
  events_.Push(now_ + service, kBurstDone, static_cast<uint32_t>(slot));
  ++burst_in_flight_;
  ++metrics_.burst_requests;
  metrics_.burst_cost += pool.price_per_request;
  return true;
}

void Simulator::OnBurstDone(int32_t slot) {
  const BurstQuery q = burst_[static_cast<size_t>(slot)];
  burst_free_slots_.push_back(slot);
  --burst_in_flight_;
  burst_warm_.push_back(now_);
  // The pool runs the app's most accurate variant.
  double accuracy = 0;
  for (size_t v = 0; v < setup_.variants.size(); ++v) {
    if (variant_app_[v] == q.app) accuracy = std::max(accuracy, setup_.variants[v].accuracy);
  }
  metrics_.end_time = now_;
  Complete(q.app, q.arrival, q.deadline, accuracy, false, Second(now_));
}

}  // namespace maitre::sim
