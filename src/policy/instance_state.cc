#include "policy/instance_state.h"

#include <algorithm>
#include <cmath>

namespace maitre::policy {

absl::string_view InstanceStateName(InstanceState state) {
  switch (state) {
    case InstanceState::kInactive:
      return "inactive";
    case InstanceState::kActive:
      return "active";
    case InstanceState::kOverloaded:
      return "overloaded";
    case InstanceState::kInterfered:
      return "interfered";
  }
  return "unknown";
}

absl::string_view StateReasonName(StateReason reason) {
  switch (reason) {
    case StateReason::kUnchanged:
      return "unchanged";
    case StateReason::kLoaded:
      return "loaded";
    case StateReason::kUnloaded:
      return "unloaded";
    case StateReason::kSaturated:
      return "saturated";
    case StateReason::kDropping:
      return "dropping";
    case StateReason::kQueueGrowing:
      return "queue growing";
    case StateReason::kSlowerThanProfile:
      return "slower than profile";
    case StateReason::kRecovered:
      return "recovered";
    case StateReason::kProbe:
      return "probe";
  }
  return "unknown";
}

namespace {

double SaturationOf(const Profile& profile, double slo_ms, int32_t replicas) {
  if (profile.empty()) return 0;
  double one =
      slo_ms > 0 ? profile.SaturationQps(slo_ms) : profile.ThroughputAt(profile.max_batch());
  return one * replicas;
}

double SignalOf(const InstanceObservation& r, InterferenceSignal signal) {
  switch (signal) {
    case InterferenceSignal::kComputeP50:
      return r.compute_p50_ms;
    case InterferenceSignal::kComputeP99:
      return r.compute_p99_ms;
    case InterferenceSignal::kLatencyP99:
      return r.latency_p99_ms;
  }
  return 0;
}

}  // namespace

InstanceStateStep NextInstanceState(const InstanceHistory& previous,
                                    const InstanceObservation& report, const Profile& profile,
                                    double slo_ms, const InstanceStateOptions& options) {
  InstanceStateStep step;
  if (report.replicas <= 0) {
    step.history = InstanceHistory{};
    step.reason = previous.state == InstanceState::kInactive ? StateReason::kUnchanged
                                                             : StateReason::kUnloaded;
    return step;
  }

  const bool was_loaded = previous.state != InstanceState::kInactive;
  InstanceHistory h = was_loaded ? previous : InstanceHistory{};

  // Evidence of overload.
  step.saturation_qps = SaturationOf(profile, slo_ms, report.replicas);
  const double sat = step.saturation_qps;
  const bool saturated = sat > 0 && report.served_qps >= options.overload_fraction * sat;
  // A queue is compared only with a report from the same loaded life: the
  // first report after a load has nothing to grow from.
  const bool grew = was_loaded && report.queue_length > previous.last_queue;
  h.growing_streak = grew ? h.growing_streak + 1 : 0;
  h.last_queue = report.queue_length;
  const bool queue_growing =
      options.growing_queue_reports > 0 && h.growing_streak >= options.growing_queue_reports;
  const bool dropping = report.arrival_qps > 0 &&
                        report.dropped_qps >= options.overload_drop_fraction * report.arrival_qps;
  h.dropping_streak = dropping ? h.dropping_streak + 1 : 0;
  const bool drops_persist =
      options.dropping_reports > 0 && h.dropping_streak >= options.dropping_reports;
  const bool overload = saturated || queue_growing || drops_persist;
  const bool overload_calm =
      (sat <= 0 || report.served_qps < options.release_fraction * sat) && !grew && !dropping;

  // Evidence of interference: only a report that served queries says
  // anything about how fast the instance runs.
  const bool served = report.served_qps > 0;
  bool slow = false;
  if (served && !profile.empty()) {
    const int batch = std::max(1, static_cast<int>(std::lround(report.mean_batch)));
    const double profiled = profile.P99At(batch);
    const double signal = SignalOf(report, options.interference_signal);
    const double busy = report.served_qps / std::max(1.0, report.mean_batch) *
                        report.compute_p50_ms / 1000.0 / report.replicas;
    if (profiled > 0 && signal > 0) {
      step.interference_ratio = signal / profiled;
      slow = signal > (1 + options.interference_margin) * profiled &&
             busy >= options.interference_min_busy;
    }
  }
  h.interfered_streak = slow ? h.interfered_streak + 1 : 0;
  h.idle_streak = served ? 0 : h.idle_streak + 1;
  const bool interfered = h.interfered_streak >= std::max(1, options.interfered_after_reports);
  const int32_t calm_needed = std::max(1, options.calm_reports_to_recover);

  auto enter = [&h, &step](InstanceState next, StateReason reason) {
    h.state = next;
    h.calm_streak = 0;
    step.reason = reason;
  };

  step.reason = StateReason::kUnchanged;
  if (!was_loaded) enter(InstanceState::kActive, StateReason::kLoaded);

  switch (h.state) {
    case InstanceState::kInactive:  // unreachable: replicas > 0 made it Active
    case InstanceState::kActive:
      if (overload) {
        enter(InstanceState::kOverloaded,
              saturated        ? StateReason::kSaturated
              : queue_growing ? StateReason::kQueueGrowing
                              : StateReason::kDropping);
      } else if (interfered) {
        enter(InstanceState::kInterfered, StateReason::kSlowerThanProfile);
      }
      break;
    case InstanceState::kOverloaded:
      h.calm_streak = overload_calm ? h.calm_streak + 1 : 0;
      if (h.calm_streak >= calm_needed) {
        enter(interfered ? InstanceState::kInterfered : InstanceState::kActive,
              StateReason::kRecovered);
      }
      break;
    case InstanceState::kInterfered:
      if (overload) {
        enter(InstanceState::kOverloaded,
              saturated        ? StateReason::kSaturated
              : queue_growing ? StateReason::kQueueGrowing
                              : StateReason::kDropping);
        break;
      }
      // Reports without service neither clear nor confirm interference.
      if (served) h.calm_streak = slow ? 0 : h.calm_streak + 1;
      if (h.calm_streak >= calm_needed) {
        enter(InstanceState::kActive, StateReason::kRecovered);
      } else if (options.probe_after_idle_reports > 0 &&
                 h.idle_streak >= options.probe_after_idle_reports) {
        enter(InstanceState::kActive, StateReason::kProbe);
        h.idle_streak = 0;
      }
      break;
  }
  step.history = h;
  return step;
}

}  // namespace maitre::policy
