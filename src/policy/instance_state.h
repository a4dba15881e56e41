// The INFaaS instance state machine (docs/policies.md, "Instance state
// machine") as a pure step function: from an instance's previous state and a
// small history value, plus its worker's latest monitoring report, its profile
// on the worker's type and the SLO used for saturation, to its next state and
// history.
//
//   Inactive ──report with replicas ≥ 1──► Active
//   Active ──saturated, or queue grew N reports running──► Overloaded
//   Active ──slower than the profile's p99 by the margin, K reports──► Interfered
//   Overloaded ──R calm reports──► Active (or Interfered, if slow meanwhile)
//   Interfered ──overload evidence──► Overloaded
//   Interfered ──R reports back within the margin──► Active
//   Interfered ──P reports with no query served──► Active (probe again)
//   any ──report with replicas = 0──► Inactive
//
// The exact conditions are in NextInstanceState's comment and in
// docs/policies.md, "Instance state machine". The controller keeps one
// InstanceHistory per instance, calls NextInstanceState on every report for
// it and copies the resulting state into the selection's live view
// (selection_live.h). Selection avoids Overloaded instances, and
// Interfered ones unless, at their measured speed, they answer sooner than
// the healthy pick; the model autoscaler migrates Interfered ones.
//
// Thread-safety: pure functions over values; safe from any thread.
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"
#include "core/profile.h"

namespace maitre::policy {

enum class InstanceState : uint8_t {
  kInactive,    // not serving: not loaded, or its load has not finished
  kActive,      // loaded and healthy
  kOverloaded,  // at or past its saturation throughput, or its queue keeps growing
  kInterfered,  // slower than its profile says while not overloaded
};
absl::string_view InstanceStateName(InstanceState state);  // "inactive", "active", ...

// What one monitoring report says about one instance over the worker's last
// interval (the transport-free form of maitre.worker.v1 InstanceReport).
struct InstanceObservation {
  int32_t replicas = 0;      // 0: not loaded (unloaded, or still loading)
  int32_t queue_length = 0;  // queries waiting at the end of the interval
  double arrival_qps = 0;
  double served_qps = 0;
  double latency_p50_ms = 0;  // total latency at the worker: queue + batching + compute
  double latency_p99_ms = 0;
  double compute_p50_ms = 0;  // execution time of one batch
  double compute_p99_ms = 0;  // 0 when the worker does not report it
  double mean_batch = 0;      // rows per batch; 0 when no batch ran
  double dropped_qps = 0;     // queries answered DEADLINE_EXCEEDED unserved
};

// Which observed figure is compared with the profile's p99 at the observed
// mean batch to detect interference.
enum class InterferenceSignal : uint8_t {
  // The median execution time of a batch. The default: execution time is
  // what a profile measures, and a median that has moved past the profiled
  // tail is robust evidence (one slow batch does not trigger it).
  kComputeP50,
  // The tail execution time; needs a worker that reports compute_p99_ms.
  kComputeP99,
  // The tail total latency (INFaaS's literal signal). It includes the time a
  // query waits for its batch to form and for the batch ahead of it, which
  // profiles do not measure, so it wants a larger margin.
  kLatencyP99,
};

struct InstanceStateOptions {
  // Overloaded when served_qps >= overload_fraction × saturation, where
  // saturation = Profile::SaturationQps(slo_ms) × replicas ("serves at or
  // above its saturation throughput" is overload_fraction = 1).
  double overload_fraction = 1.0;
  // ... or when the queue grew in each of this many consecutive reports.
  int32_t growing_queue_reports = 3;
  // ... or when, in this many consecutive reports, at least this fraction
  // of arrivals expired unserved. With deadlines, an overloaded queue does
  // not keep growing: expiry trims it, and the drops are the same signal.
  double overload_drop_fraction = 0.05;
  int32_t dropping_reports = 2;
  // Leaving Overloaded needs calm_reports_to_recover consecutive reports
  // with served_qps below release_fraction × saturation and a queue that did
  // not grow. The gap to overload_fraction keeps an instance that hovers at
  // saturation from flapping.
  double release_fraction = 0.9;
  int32_t calm_reports_to_recover = 2;
  // Interference evidence: signal > (1 + interference_margin) × P99At(b),
  // b the observed mean batch rounded (at least 1), in a report in which the
  // instance served queries.
  double interference_margin = 0.5;
  InterferenceSignal interference_signal = InterferenceSignal::kComputeP50;
  // ... and only in a report in which the replicas were busy at least this
  // fraction of the interval (batches per second × the observed compute p50,
  // per replica). A batch that runs now and then runs on cold caches and a
  // core that was asleep: on the 2-core development VM the wide zoo CNN's
  // 32-row batches took 8.6 ms at 20 requests/s, 6.1 ms back to back, and
  // its profiled p99 was 4.2 ms, so a lightly loaded instance was called
  // Interfered and selection loaded more instances for a load one served
  // easily. Slowness at such a load costs neither capacity nor the SLO.
  // 0 counts every report that served queries.
  double interference_min_busy = 0.25;
  // Consecutive reports with evidence before Active becomes Interfered.
  int32_t interfered_after_reports = 2;
  // Selection sends an Interfered instance no queries while a healthy copy
  // answers sooner (at light load, always), so it produces no evidence
  // either way. After this many consecutive reports in which it
  // served nothing it returns to Active, and the next queries probe it.
  // 0 keeps it Interfered until evidence clears it (or it is migrated).
  int32_t probe_after_idle_reports = 5;
};

// What the machine remembers about one instance between reports. Start from
// the default value (Inactive) when the controller creates the instance.
struct InstanceHistory {
  InstanceState state = InstanceState::kInactive;
  int32_t last_queue = 0;         // queue_length in the previous report
  int32_t growing_streak = 0;     // consecutive reports in which the queue grew
  int32_t dropping_streak = 0;    // consecutive reports that dropped queries
  int32_t interfered_streak = 0;  // consecutive reports with interference evidence
  int32_t calm_streak = 0;        // consecutive reports clearing the current bad state
  int32_t idle_streak = 0;        // consecutive reports with nothing served
};

// Why the state is what it is after a step.
enum class StateReason : uint8_t {
  kUnchanged,
  kLoaded,             // Inactive → Active
  kUnloaded,           // → Inactive
  kSaturated,          // → Overloaded: served at or above saturation
  kDropping,           // → Overloaded: keeps expiring a share of its arrivals
  kQueueGrowing,       // → Overloaded: the queue grew growing_queue_reports times running
  kSlowerThanProfile,  // → Interfered
  kRecovered,          // Overloaded/Interfered → Active (or Overloaded → Interfered)
  kProbe,              // Interfered → Active after idle reports
};
absl::string_view StateReasonName(StateReason reason);

struct InstanceStateStep {
  InstanceHistory history;  // history.state is the next state
  StateReason reason = StateReason::kUnchanged;
  // The figures the decision used, for logs and the repository index.
  double saturation_qps = 0;      // SaturationQps(slo) × replicas; 0 when unknown
  double interference_ratio = 0;  // signal / P99At(b); 0 without evidence

  InstanceState state() const { return history.state; }
};

// One step of the machine. Conditions, evaluated in this order:
//  1. replicas <= 0 → Inactive (history reset).
//  2. Evidence from this report:
//     saturated  = saturation > 0 and served_qps >= overload_fraction × saturation;
//     growing    = the instance was loaded in the previous report and
//                  queue_length > previous queue_length (streak counted);
//     overload   = saturated or growing_streak >= growing_queue_reports;
//     slow       = served_qps > 0, busy >= interference_min_busy and the
//                  signal > (1 + margin) × P99At(b), where busy =
//                  served_qps / max(1, mean_batch) × compute_p50 / replicas;
//     calm (for Overloaded) = served_qps < release_fraction × saturation (or
//                  saturation unknown) and the queue did not grow.
//  3. From Inactive the instance first becomes Active, then the Active rules
//     apply to the same report.
//     Active:     overload → Overloaded; else interfered_streak >= K → Interfered.
//     Overloaded: R calm reports running → Interfered if interfered_streak >= K,
//                 else Active.
//     Interfered: overload → Overloaded; R reports running that served queries
//                 without being slow → Active; else P idle reports → Active.
// `slo_ms` <= 0 means no SLO: saturation is then the throughput at the
// profile's largest batch. An empty profile disables both profile-based
// tests (saturation and interference); the growing queue still applies.
InstanceStateStep NextInstanceState(const InstanceHistory& previous,
                                    const InstanceObservation& report, const Profile& profile,
                                    double slo_ms, const InstanceStateOptions& options = {});

}  // namespace maitre::policy
