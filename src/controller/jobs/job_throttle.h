// When offline jobs yield to online traffic (INFaaS: jobs use spare
// capacity and are throttled above 40% utilisation; here a job pauses while
// worker utilisation is above 40%, or while online latencies run above their
// profiles; docs/policies.md, "Offline job throttle"). Two pure functions:
// MeasureThrottleSignals reads the cluster's view and the jobs' own recent
// traffic, NextThrottleState decides.
//
// The rule, per worker as in INFaaS (where each worker's job runner checks
// its own utilisation): a job pauses while some worker that serves online
// traffic is more than 40% busy with work other than the jobs', or while an
// instance serving online traffic is slower than its profile. Chunks go
// wherever the selection policy sends online queries, so any busy worker
// may be where the next chunk lands. A job's own chunks raise the figures
// it is judged by, so it is never counted against itself:
//  - a worker's online utilisation is its CPU utilisation minus the jobs'
//    share, estimated from the executor time of their chunks there (at most
//    the worker's whole utilisation);
//  - an instance serves online traffic when its arrivals exceed the jobs'
//    own queries there (with a tolerance, see own_qps_tolerance); a worker
//    serves online traffic when one of its instances does. Work on a worker
//    without online traffic (a job alone, profiling) never pauses a job;
//  - the latency rule counts only instances serving online traffic that the
//    controller's INFaaS state machine marks Overloaded (at saturation, or
//    its queue keeps growing) or Interfered (executing slower than its
//    profile): their online queries are being served slower than profiled.
// Pausing is immediate; resuming needs the signals calm (every worker with
// online traffic at or below `resume_below`, no slow instance) for
// `resume_after` without a break. The gap between the two thresholds and the
// hold keep a job from flapping on a load that hovers near 40%, and the hold
// outlasts a worker report interval, so a paused job's own last chunks have
// left the figures before it is judged again.
//
// Thread-safety: pure functions over values; safe from any thread.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "controller/dataplane/cluster.h"
#include "core/time.h"
#include "core/variant.h"

namespace maitre::jobs {

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

// The jobs' own traffic, at its peak over recent report-sized intervals.
struct OwnLoad {
  // By worker id: the fraction of time its executors spent on job chunks
  // (the sum of their compute times over the interval's length).
  std::map<std::string, double> busy_by_worker;
  // By (worker id, variant): job queries per second sent there.
  std::map<std::pair<std::string, VariantKey>, double> qps_by_instance;
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

ThrottleSignals MeasureThrottleSignals(const std::vector<controller::WorkerView>& workers,
                                       const OwnLoad& own, const ThrottlePolicy& policy);

struct ThrottleState {
  bool paused = false;
  Nanos calm_since = -1;  // while paused: when the signals became calm; -1: not calm
  std::string reason;     // while paused: why, for people
};

ThrottleState NextThrottleState(const ThrottleState& previous, const ThrottleSignals& signals,
                                Nanos now, const ThrottlePolicy& policy);

}  // namespace maitre::jobs
