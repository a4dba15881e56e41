#include "control/delivered_capacity.h"

#include <algorithm>
#include <set>

namespace maitre::control {

namespace {

// Whether an Overloaded instance's report shows a backlog drained, not a
// limit: it was offered less than it served and its worker was busy less
// than half of the report. The state trails the load, so the report after
// the router moved its queries elsewhere still says Overloaded; in the
// simulated steady-load runs such reports said 18-23 qps for a replica
// that had served 250-304 the second before, and that figure, the least of
// the hold, kept a worker that could go for 30 minutes. The worker's CPU,
// not its replicas' compute time: on the 2-core host a worker's limit is
// its data path, and torch-opt at that limit computed about 0.4 of the
// time, so a compute share read every such report as drained and left
// consolidation the profile, 6-9x what a worker delivers (docs/policies.md,
// observed capacity).
bool Drained(const ObservedWorker& worker, const ObservedInstance& inst) {
  return inst.arrival_qps < inst.served_qps && worker.cpu_utilisation < 0.5;
}

}  // namespace

DeliveredCapacity::Options DeliveredCapacityOptions(const AllocatorOptions& options) {
  DeliveredCapacity::Options o;
  o.latest_for = options.observed_capacity_memory;
  // Held as long as a spread is remembered, so that consolidation and the
  // figures it judges by forget together.
  o.held_for = std::max(options.observed_capacity_memory, options.consolidation.spread_memory);
  o.saturated_cpu_utilisation = options.saturated_cpu_utilisation;
  o.model_period = options.model_period;
  return o;
}

std::optional<double> DeliveredCapacity::Read(const Figure& figure, Nanos now,
                                              Reading reading) const {
  // To keep, the latest figure is believed for `latest_for`; after that,
  // until `held_for`, the most any figure of the hold said, rather than the
  // profile. Relief is not evidence of more capacity: had the figures
  // lapsed back to the profile after 30 s, the replica or worker added for
  // the overload would be given up under the same load and added back at
  // the next overload (on the 2-core host, six times in 15 minutes at 70%
  // of capacity). The most, not the latest, because one report of an
  // instance at its limit can show little served (a burst at low load, a
  // replica starting): held for 30 minutes, 19 qps against a profile of 400
  // wanted 15 replicas. Nor is an instance serving more below its limit
  // evidence: on a host whose cores the workers share, a worker left alone
  // serves more than it can beside its neighbour, and raising the figure on
  // that made each give-up look safer than the last (17 cycles in 15
  // minutes). To give up, the least of the hold (Reading).
  std::optional<double> most, least, latest;
  for (const auto& [at, capacity] : figure) {
    if (now - at >= options_.held_for) continue;
    most = std::max(most.value_or(capacity), capacity);
    least = std::min(least.value_or(capacity), capacity);
  }
  if (!figure.empty() && now - figure.back().first < options_.latest_for) {
    latest = figure.back().second;
  }
  if (reading == Reading::kToGiveUp && least.has_value()) return least;
  return latest.has_value() ? latest : most;
}

void DeliveredCapacity::Remember(const Observation& observation) {
  std::set<std::string> present;
  for (const ObservedWorker& w : observation.workers) present.insert(w.id);
  for (auto it = by_worker_.begin(); it != by_worker_.end();) {
    it = present.count(it->first.first) == 0 ? by_worker_.erase(it) : std::next(it);
  }
  for (auto* book : {&by_worker_, &by_type_}) {
    for (auto it = book->begin(); it != book->end();) {
      Figure& figure = it->second;
      while (!figure.empty() && observation.now - figure.front().first >= options_.held_for) {
        figure.pop_front();
      }
      it = figure.empty() ? book->erase(it) : std::next(it);
    }
  }
  for (const ObservedWorker& w : observation.workers) {
    for (const ObservedInstance& inst : w.instances) {
      double capacity = 0;
      if (inst.state == policy::InstanceState::kOverloaded && inst.served_qps > 0 &&
          !Drained(w, inst)) {
        capacity = inst.served_qps / std::max(1, inst.ready);
      } else if (inst.state == policy::InstanceState::kInterfered && inst.compute_p50_ms > 0) {
        const ModelOption* m = observation.FindModel(inst.key.model);
        const VariantOption* v = m != nullptr ? m->Find(inst.key.variant, w.type) : nullptr;
        if (v != nullptr && v->profile != nullptr) {
          const int batch = std::max(1, static_cast<int>(inst.mean_batch + 0.5));
          const double slowdown =
              std::max(1.0, inst.compute_p50_ms / v->profile->LatencyAt(batch));
          capacity = v->profile->ThroughputAt(batch) / slowdown;
        }
      }
      if (std::optional<double> limit = AtCpuLimit(observation, w, inst)) {
        by_type_[{w.type, inst.key.ToString()}].emplace_back(observation.now, *limit);
        capacity = capacity > 0 ? std::min(capacity, *limit) : *limit;
      }
      if (capacity <= 0) continue;
      by_worker_[{w.id, inst.key.ToString()}].emplace_back(observation.now, capacity);
    }
  }
}

std::optional<double> DeliveredCapacity::AtCpuLimit(const Observation& observation,
                                                    const ObservedWorker& worker,
                                                    const ObservedInstance& inst) const {
  // The state machine judges each instance against its profile, and a
  // worker whose data path (receiving, decoding and answering queries) is
  // its limit shows no queue and no slow batch: on the 2-core host on
  // 2026-11-27 the worker carrying a steady 4,335 qps was never Overloaded,
  // so consolidation took torch-opt's profile, 40,112 qps, and gave the
  // other worker up at 70% of capacity, five times in 15 minutes. Its CPU
  // shows the limit. The instance serving most of the worker's queries is
  // credited with what it served (one serving little beside it shows nothing
  // of its own limit). Not what it served over the CPU share: on the real
  // server that said 6,534 qps (5,500 served at 85% during a load step, with
  // 18% of queries late or failed, since the controller's half of the data
  // path is not in the worker's CPU), and a worker was given up at a peak
  // of 5,039. Not while a replica loads or winds down, nor within two rounds
  // of a load's end: a load's CPU would read as the queries'.
  if (!(worker.cpu_utilisation >= options_.saturated_cpu_utilisation) ||
      !inst.takes_queries || inst.ready < 1 || !(inst.served_qps > 0)) {
    return std::nullopt;
  }
  double served = 0;
  for (const ObservedInstance& other : worker.instances) {
    if (other.loading > 0 || other.winding_down > 0 ||
        observation.now - other.ready_since < 2 * options_.model_period) {
      return std::nullopt;
    }
    served += other.served_qps;
  }
  if (inst.served_qps < served / 2) return std::nullopt;
  return inst.served_qps / inst.ready;
}

std::optional<double> DeliveredCapacity::Least(const std::string* worker, const std::string& type,
                                               const VariantKey& key, Nanos now,
                                               Reading reading) const {
  std::optional<double> least;
  auto take = [&](const std::map<Where, Figure>& seen, const std::string& where) {
    auto it = seen.find({where, key.ToString()});
    if (it == seen.end()) return;
    if (std::optional<double> at = Read(it->second, now, reading)) {
      least = std::min(least.value_or(*at), *at);
    }
  };
  if (worker != nullptr) take(by_worker_, *worker);
  take(by_type_, type);
  return least;
}

double DeliveredCapacity::Delivered(const std::string* worker, const std::string& type,
                                    const ModelOption& model, const VariantOption& variant,
                                    Nanos now, Reading reading) const {
  if (variant.profile == nullptr) return 0;
  // What an observed instance delivers is what this worker delivers: the
  // data path, the neighbours and the shared cores slow every variant, not
  // only the one that showed it. So the variants not observed here get the
  // same share of their profiles as the least observed one, and an
  // allocator does not take a variant it has seen at its limit for slower
  // than one it has not (on the 2-core host, torch-opt served at 13% of
  // its profile and was switched to torch, whose profile said more).
  double share = 1;
  for (const VariantOption& v : model.variants) {
    if (v.worker_type != type || v.profile == nullptr) continue;
    const double profiled = v.profile->SaturationQps(model.slo_ms);
    std::optional<double> seen =
        Least(worker, type, VariantKey{model.name, v.variant}, now, reading);
    if (seen.has_value() && profiled > 0) share = std::min(share, *seen / profiled);
  }
  // A variant's own figure caps it too, but does not lift it above the
  // least share: a figure held from an earlier load (another worker of
  // the type, another moment) is not evidence that this worker now
  // delivers more of that variant's profile. On the real server an old
  // figure for opencv beside torch-opt's latest, lower one switched the
  // worker to opencv and, 30 s later, back, a dozen times in 15 minutes.
  double delivered = share * variant.profile->SaturationQps(model.slo_ms);
  if (std::optional<double> seen =
          Least(worker, type, VariantKey{model.name, variant.variant}, now, reading)) {
    delivered = std::min(delivered, *seen);
  }
  return delivered;
}

double DeliveredCapacity::PerReplica(const ObservedWorker& worker, const ModelOption& model,
                                     const VariantOption& variant, Nanos now,
                                     Reading reading) const {
  return Delivered(&worker.id, worker.type, model, variant, now, reading);
}

double DeliveredCapacity::PerReplicaOnType(const std::string& type, const ModelOption& model,
                                           const VariantOption& variant, Nanos now,
                                           Reading reading) const {
  return Delivered(nullptr, type, model, variant, now, reading);
}

}  // namespace maitre::control
