// The model autoscaler's snapshot and the arithmetic on it that the
// autoscaler, its callers and its tests share: validation, names, figures
// derived from profiles and worker types (cost, capacity, cores and memory
// in use), the load history, and applying actions. The decision rules
// themselves are in autoscaling_model.cc (docs/policies.md, "Model
// autoscaler").
#include "policy/autoscaling_model.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace maitre::policy {

absl::string_view ModelScaleCauseName(ModelScaleAction::Cause cause) {
  switch (cause) {
    case ModelScaleAction::Cause::kHeadroom:
      return "headroom";
    case ModelScaleAction::Cause::kCapacity:
      return "capacity";
    case ModelScaleAction::Cause::kSavings:
      return "savings";
  }
  return "unknown";
}

absl::string_view ModelScaleActionKindName(ModelScaleAction::Kind kind) {
  switch (kind) {
    case ModelScaleAction::Kind::kReplicate:
      return "replicate";
    case ModelScaleAction::Kind::kAddVariant:
      return "add-variant";
    case ModelScaleAction::Kind::kUpgrade:
      return "upgrade";
    case ModelScaleAction::Kind::kDowngrade:
      return "downgrade";
    case ModelScaleAction::Kind::kRemoveReplica:
      return "remove-replica";
    case ModelScaleAction::Kind::kNeedsPlacement:
      return "needs-placement";
  }
  return "unknown";
}

absl::Status ValidateScalingSnapshot(const ModelScalingSnapshot& s) {
  if (s.cores < 0 || s.memory_mb < 0 || s.reserved_cores < 0 || s.reserved_memory_mb < 0) {
    return absl::InvalidArgumentError("worker resources must be non-negative");
  }
  std::set<std::string> models;
  for (const ScalingModel& m : s.models) {
    if (!models.insert(m.model).second) {
      return absl::InvalidArgumentError(absl::StrCat("model ", m.model, " appears twice"));
    }
    if (!(m.load_qps >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("model ", m.model, " has a negative load"));
    }
    if (!(m.busy >= 0 && m.busy <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", m.model, " has a busy share outside 0..1"));
    }
    std::set<std::string> variants;
    for (const ScalingVariant& v : m.variants) {
      if (!variants.insert(v.variant).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("variant ", m.model, ":", v.variant, " appears twice"));
      }
      if (!(v.saturation_qps >= 0) || !(v.load_s >= 0) || !(v.cores >= 0) ||
          !(v.memory_mb >= 0) || !(v.cost_per_s >= 0) || v.replicas < 0 || v.loading < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variant ", m.model, ":", v.variant, " has a negative figure"));
      }
    }
  }
  return absl::OkStatus();
}

double ReplicaCostPerSecond(const WorkerType& type, double cores, double memory_mb) {
  double share = 0;
  if (type.cores > 0) share = std::max(share, cores / type.cores);
  if (type.memory_mb > 0) share = std::max(share, memory_mb / static_cast<double>(type.memory_mb));
  return type.price_per_hour / 3600.0 * share;
}

ScalingVariant MakeScalingVariant(std::string variant, double accuracy, const Profile& profile,
                                  double slo_ms, const WorkerType& type,
                                  double cores_per_replica) {
  ScalingVariant v;
  v.variant = std::move(variant);
  v.accuracy = accuracy;
  v.saturation_qps = profile.SaturationQps(slo_ms);
  v.load_s = profile.load_ms() / 1000.0;
  v.cores = cores_per_replica;
  v.memory_mb = profile.memory_mb();
  v.cost_per_s = ReplicaCostPerSecond(type, v.cores, v.memory_mb);
  return v;
}

std::optional<double> PeakLoadOver(const std::vector<ModelAutoscalerState::LoadSample>& history,
                                   Nanos now, Nanos window) {
  if (history.empty() || history.front().at > now - window) return std::nullopt;
  double peak = 0;
  for (const auto& sample : history) {
    if (sample.at >= now - window) peak = std::max(peak, sample.load_qps);
  }
  return peak;
}

std::vector<ModelAutoscalerState::LoadSample> AppendLoadSample(
    std::vector<ModelAutoscalerState::LoadSample> history,
    const ModelAutoscalerState::LoadSample& sample, Nanos horizon) {
  const Nanos now = sample.at;
  if (!history.empty() && history.back().at > now) history.clear();  // the clock went back
  if (!history.empty() && history.back().at == now) history.pop_back();
  history.push_back(sample);
  // The newest sample at or before the horizon stays: it proves coverage.
  size_t drop = 0;
  while (drop + 1 < history.size() && history[drop + 1].at <= now - horizon) ++drop;
  history.erase(history.begin(), history.begin() + drop);
  return history;
}

double ModelCapacityQps(const ScalingModel& model) {
  double qps = 0;
  for (const ScalingVariant& v : model.variants) qps += (v.replicas + v.loading) * v.saturation_qps;
  return qps;
}

double UsedCores(const ModelScalingSnapshot& snapshot) {
  double cores = snapshot.reserved_cores;
  for (const ScalingModel& m : snapshot.models) {
    for (const ScalingVariant& v : m.variants) cores += (v.replicas + v.loading) * v.cores;
  }
  return cores;
}

double UsedMemoryMb(const ModelScalingSnapshot& snapshot) {
  double mb = snapshot.reserved_memory_mb;
  for (const ScalingModel& m : snapshot.models) {
    for (const ScalingVariant& v : m.variants) mb += (v.replicas + v.loading) * v.memory_mb;
  }
  return mb;
}

ModelScalingSnapshot ApplyModelScaleActions(const ModelScalingSnapshot& snapshot,
                                            const std::vector<ModelScaleAction>& actions,
                                            bool completed) {
  ModelScalingSnapshot next = snapshot;
  for (const ModelScaleAction& a : actions) {
    if (a.kind == ModelScaleAction::Kind::kNeedsPlacement) continue;
    for (ScalingModel& m : next.models) {
      if (m.model != a.model) continue;
      for (ScalingVariant& v : m.variants) {
        if (v.variant == a.to_variant) (completed ? v.replicas : v.loading) += a.add;
        if (!completed) continue;
        if (v.variant == a.from_variant) v.replicas = std::max(0, v.replicas - a.remove);
        for (const auto& [name, n] : a.also_remove) {
          if (v.variant == name) v.replicas = std::max(0, v.replicas - n);
        }
      }
    }
  }
  return next;
}

}  // namespace maitre::policy
