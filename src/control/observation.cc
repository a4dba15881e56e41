#include "control/observation.h"

#include "absl/strings/str_cat.h"
#include "control/action_sink.h"

namespace maitre::control {

const VariantOption* ModelOption::Find(const std::string& variant,
                                       const std::string& worker_type) const {
  for (const VariantOption& v : variants) {
    if (v.variant == variant && v.worker_type == worker_type) return &v;
  }
  return nullptr;
}

const ModelOption* Observation::FindModel(const std::string& name) const {
  for (const ModelOption& m : models) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

const WorkerType* Observation::FindType(const std::string& name) const {
  for (const WorkerType& t : types) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const ObservedWorker* Observation::FindWorker(const std::string& id) const {
  for (const ObservedWorker& w : workers) {
    if (w.id == id) return &w;
  }
  return nullptr;
}

std::map<std::string, double> OfferedByApp(const Observation& observation,
                                           double refused_over_s) {
  std::map<std::string, double> qps;
  for (const ModelOption& m : observation.models) qps[m.app] += 0;
  for (const ObservedWorker& w : observation.workers) {
    for (const ObservedInstance& inst : w.instances) {
      const ModelOption* model = observation.FindModel(inst.key.model);
      if (model != nullptr) qps[model->app] += inst.arrival_qps;
    }
  }
  for (const auto& [app, leaving] : observation.leaving_qps) qps[app] += leaving;
  if (refused_over_s > 0) {
    for (const auto& [app, rows] : observation.refused_rows) qps[app] += rows / refused_over_s;
  }
  return qps;
}

void CountLeaving(Observation& observation, const std::string& model, double arrival_qps) {
  if (const ModelOption* m = observation.FindModel(model); m != nullptr) {
    observation.leaving_qps[m->app] += arrival_qps;
  }
}

std::string DecisionLine(const Decision& d) {
  std::string line = absl::StrCat(d.kind, " ", d.worker);
  if (!d.target.empty()) absl::StrAppend(&line, " ", d.target);
  if (d.replicas != 0) absl::StrAppend(&line, " x", d.replicas);
  if (!d.for_worker.empty()) absl::StrAppend(&line, " for ", d.for_worker);
  if (!d.reason.empty()) absl::StrAppend(&line, ": ", d.reason);
  return line;
}

}  // namespace maitre::control
