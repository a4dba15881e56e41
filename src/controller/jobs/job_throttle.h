// When offline jobs yield to online traffic (INFaaS: jobs use spare
// capacity and are throttled above 40% utilisation; here a job pauses while
// worker utilisation is above 40%, or while online latencies run above their
// profiles; docs/policies.md, "Offline job throttle"). MeasureThrottleSignals
// describes the cluster's view and the jobs' own recent traffic to the pure
// rule in policy/job_throttle.h, which measures the signals and decides.
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
#include "policy/job_throttle.h"

namespace maitre::jobs {

using policy::NextThrottleState;
using policy::ThrottlePolicy;
using policy::ThrottleSignals;
using policy::ThrottleState;

// The jobs' own traffic, at its peak over recent report-sized intervals.
struct OwnLoad {
  // By worker id: the fraction of time its executors spent on job chunks
  // (the sum of their compute times over the interval's length).
  std::map<std::string, double> busy_by_worker;
  // By (worker id, variant): job queries per second sent there.
  std::map<std::pair<std::string, VariantKey>, double> qps_by_instance;
};

ThrottleSignals MeasureThrottleSignals(const std::vector<controller::WorkerView>& workers,
                                       const OwnLoad& own, const ThrottlePolicy& policy);

}  // namespace maitre::jobs
