// Spot interruptions the simulator draws (SpotInterruptions in
// sim/simulator.h; docs/operations.md, "Spot interruptions"): the notice is
// handled as the controller handles a real provider's, so that the same
// allocator meets the same event in both worlds (docs/architecture.md, "One
// control plane").
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/selection_router.h"
#include "sim/simulator.h"

namespace maitre::sim {

void Simulator::DrawInterruption(int32_t w) {
  const SpotInterruptions& spot = setup_.interruptions;
  const Worker& worker = workers_[w];
  if (!spot.enabled || setup_.worker_types[worker.type].type.market != WorkerType::Market::kSpot) {
    return;
  }
  const Nanos at =
      now_ + static_cast<Nanos>(interruption_draws_.Exponential(
                 static_cast<double>(spot.mean_between)));
  // A notice after the trace's end would only start workers nobody pays
  // attention to.
  if (at < setup_.horizon) events_.Push(at, kInterruptionNotice, static_cast<uint32_t>(w));
}

void Simulator::OnInterruptionNotice(int32_t w) {
  Worker& worker = workers_[w];
  if (worker.removed || worker.stops_at.has_value()) return;
  worker.stops_at = now_ + setup_.interruptions.lead;
  ++control_.workers_interrupted;
  Log(absl::StrFormat("%s interrupted: it stops in %.0f s; a replacement starts now", worker.id,
                      ToSeconds(setup_.interruptions.lead)));
  // No new load goes there, and it serves its share of the queries until
  // the leaving margin of each, as the controller's does
  // (control/leaving.h): it stays in the selection policy's view, not
  // accepting but for the queries it still serves, with no room. Loads
  // under way there go on, as the controller's do.
  selection_->SetLeaving(w, *worker.stops_at);
  selection_->UpdateWorker(w, worker.utilisation, FreeMemoryForSelection(worker));
  events_.Push(*worker.stops_at, kInterruptionStop, static_cast<uint32_t>(w));
  // The provider no longer counts it towards its type: a replacement.
  const SimWorkerType& type = setup_.worker_types[worker.type];
  StartWorker(worker.type, now_ + type.launch_delay);
}

void Simulator::OnInterruptionStop(int32_t w) {
  if (workers_[w].removed) return;
  const int64_t dropped = metrics_.total.dropped;
  Log(absl::StrCat(workers_[w].id, " stopped by its interruption"));
  LoseWorker(w);
  control_.queries_lost_to_interruptions += metrics_.total.dropped - dropped;
}

}  // namespace maitre::sim
