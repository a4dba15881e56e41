// Offline jobs in the simulator (SimJob in simulator.h): the same throttle
// rule as the controller's job runner (policy/job_throttle.h), fed from the
// simulated workers' reports, and chunks routed like online queries.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sim/simulator.h"

namespace maitre::sim {

namespace {
// A chunk has no objective of its own: its deadline is far enough that it
// never expires in a run.
constexpr Nanos kJobDeadline = 3600 * kSecond;
}  // namespace

void Simulator::RunJobs() {
  if (setup_.jobs.empty()) return;
  // The throttle's signals, as the controller measures them: per worker,
  // its utilisation less the jobs' share; it serves online traffic when an
  // instance had arrivals beyond the jobs' own; slow = an online instance
  // the state machine calls Overloaded or Interfered.
  const policy::ThrottlePolicy& rule = setup_.job_throttle;
  policy::ThrottleSignals signals;
  double busiest_whole = 0;
  for (const Worker& w : workers_) {
    if (!w.up || w.removed) continue;
    bool serves_online = false;
    for (int32_t i : w.instances) {
      const SimInstance& inst = instances_[i];
      if (inst.online_qps <= rule.min_online_qps) continue;
      serves_online = true;
      signals.online_qps += inst.online_qps;
      const policy::InstanceState state = inst.history.state;
      if (state == policy::InstanceState::kOverloaded ||
          state == policy::InstanceState::kInterfered) {
        if (signals.slow_online_instances++ == 0) {
          signals.slow_instance = absl::StrCat(setup_.variants[inst.variant].key.ToString(),
                                               " on ", w.id, " is ",
                                               policy::InstanceStateName(state));
        }
      }
    }
    const double online = std::max(0.0, w.utilisation - w.job_utilisation);
    if (serves_online &&
        (signals.busiest_worker.empty() || online > signals.busiest_online_utilisation)) {
      signals.busiest_worker = w.id;
      signals.busiest_online_utilisation = online;
      busiest_whole = w.utilisation;
    }
  }
  const bool was_paused = job_throttle_.paused;
  job_throttle_ = policy::NextThrottleState(job_throttle_, signals, now_, rule);
  if (job_throttle_.paused != was_paused) {
    Log(job_throttle_.paused ? absl::StrCat("jobs pause: ", job_throttle_.reason)
                             : std::string("jobs resume"));
  }
  int64_t done = 0;
  for (const JobProgress& j : job_progress_) done += j.done_rows;
  job_samples_.push_back(
      {now_, signals.busiest_online_utilisation, busiest_whole, job_throttle_.paused, done});
  SendJobChunk();
}

void Simulator::SendJobChunk() {
  if (job_chunk_in_flight_ || job_throttle_.paused || !managed()) return;
  while (job_head_ < job_progress_.size() && job_progress_[job_head_].finished >= 0) ++job_head_;
  if (job_head_ >= job_progress_.size()) return;
  const SimJob& spec = setup_.jobs[job_head_];
  JobProgress& job = job_progress_[job_head_];
  if (now_ < spec.at) return;
  const int64_t left = job.rows - job.done_rows;
  RouteRequest request;
  request.app = spec.app;
  request.rows = static_cast<int32_t>(std::min<int64_t>(spec.chunk_rows, left));
  request.arrival = now_;
  request.deadline = now_ + kJobDeadline;
  const int32_t target = Route(request);
  if (target < 0 || target >= static_cast<int32_t>(instances_.size())) return;  // next report
  if (job.started < 0) job.started = now_;
  job_chunk_in_flight_ = true;
  Tag tag{spec.app, false};
  tag.job_rows = request.rows;
  ++instances_[target].interval_job_arrivals;
  Enqueue(target, policy::QueuedQuery{now_, request.deadline, request.rows}, tag);
}

void Simulator::OnJobChunkDone(int32_t rows) {
  job_chunk_in_flight_ = false;
  if (job_head_ >= job_progress_.size()) return;
  JobProgress& job = job_progress_[job_head_];
  job.done_rows += rows;
  if (job.done_rows >= job.rows) job.finished = now_;
  SendJobChunk();
}

void Simulator::OnJobChunkLost(int32_t rows) {
  (void)rows;  // nothing of it is done: the same rows go again
  job_chunk_in_flight_ = false;
}

}  // namespace maitre::sim
