// When offline jobs yield to online traffic: the pure rule of the job
// throttle (docs/policies.md, "Offline job throttle"; INFaaS §4.4 and
// §6.3.2: jobs use spare capacity and are throttled above 40% utilisation).
// Both worlds describe their workers as ThrottleWorkers (the controller in
// controller/jobs/job_throttle.h, the simulator from its reports);
// MeasureThrottleSignals turns them into signals and NextThrottleState
// decides.
//
// The signals, per worker as in INFaaS: a worker's online utilisation is its
// utilisation less the jobs' own share of it; an instance serves online
// traffic when its arrivals exceed the jobs' own queries there by more than
// min_online_qps + own_qps_tolerance × the jobs' own; a worker serves online
// traffic when one of its instances does; an instance serving online
// traffic that the state machine calls Overloaded or Interfered is slow.
//
// Pausing is immediate; resuming needs the signals calm (every worker with
// online traffic at or below `resume_below`, no slow instance) for
// `resume_after` without a break. The gap between the two thresholds and the
// hold keep a job from flapping on a load that hovers near 40%, and the hold
// outlasts a worker report interval, so a paused job's own last chunks have
// left the figures before it is judged again.
//
// Thread-safety: pure functions over values; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "core/time.h"
#include "policy/instance_state.h"

namespace maitre::policy {

struct ThrottlePolicy {
  double pause_above = 0.40;   // a worker's online utilisation that pauses jobs (INFaaS)
  double resume_below = 0.30;  // low enough, on every worker, to resume
  Nanos resume_after = 2 * kSecond;
  // An instance serves online traffic when its arrivals exceed the jobs'
  // own by more than min_online_qps + own_qps_tolerance × the jobs' own.
  // The tolerance is wide because the two rates are measured over different
  // intervals, and the selection policy moves a job's chunks between
  // instances from one moment to the next: measured here, a job alone showed
  // up to 60% more arrivals on one instance than its own count. Online load
  // on an instance the job also uses is seen once it is the larger share.
  double min_online_qps = 1.0;
  double own_qps_tolerance = 1.0;
};

struct ThrottleSignals {
  // The busiest worker serving online traffic, by online utilisation
  // (0..1, its utilisation less the jobs' share); empty when none serves any.
  std::string busiest_worker;
  double busiest_online_utilisation = 0;
  double online_qps = 0;  // arrivals beyond the jobs' own, summed over instances
  int slow_online_instances = 0;
  std::string slow_instance;  // one of them, for people
  // For people and logs: the busy fraction of all the workers' cores, and
  // the jobs' estimated part of it.
  double utilisation = 0;
  double own_utilisation = 0;
};

// One instance as the throttle sees it.
struct ThrottleInstance {
  std::string name;  // "model:variant", for people
  double arrival_qps = 0;
  double own_qps = 0;  // the jobs' own queries among the arrivals
  InstanceState state = InstanceState::kInactive;
};

// One worker as the throttle sees it.
struct ThrottleWorker {
  std::string id;
  int cores = 1;
  double utilisation = 0;  // 0..1, as reported
  double own_busy = 0;     // the jobs' share of its time, 0..1
  std::vector<ThrottleInstance> instances;
};

ThrottleSignals MeasureThrottleSignals(const std::vector<ThrottleWorker>& workers,
                                       const ThrottlePolicy& policy);

struct ThrottleState {
  bool paused = false;
  Nanos calm_since = -1;  // while paused: when the signals became calm; -1: not calm
  std::string reason;     // while paused: why, for people
};

ThrottleState NextThrottleState(const ThrottleState& previous, const ThrottleSignals& signals,
                                Nanos now, const ThrottlePolicy& policy);

}  // namespace maitre::policy
