// Offline jobs in the simulator (SimJob in simulator.h): the controller's
// throttle rule (policy/job_throttle.h), fed the simulated workers' reports,
// and chunks routed like online queries.
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
  // The workers as the throttle sees them: the jobs' share of each one's
  // time, and each instance's arrivals less the job's chunks (known
  // exactly here, so no own queries are left to subtract).
  std::vector<policy::ThrottleWorker> seen;
  for (const Worker& w : workers_) {
    if (!w.up || w.removed) continue;
    policy::ThrottleWorker t;
    t.id = w.id;
    t.cores = setup_.worker_types[w.type].type.cores;
    t.utilisation = w.utilisation;
    t.own_busy = w.job_utilisation;
    for (int32_t i : w.instances) {
      const SimInstance& inst = instances_[i];
      t.instances.push_back({setup_.variants[inst.variant].key.ToString(), inst.online_qps, 0,
                             inst.history.state});
    }
    seen.push_back(std::move(t));
  }
  const policy::ThrottleSignals signals =
      policy::MeasureThrottleSignals(seen, setup_.job_throttle);
  double busiest_whole = 0;
  for (const policy::ThrottleWorker& t : seen) {
    if (t.id == signals.busiest_worker) busiest_whole = t.utilisation;
  }
  const bool was_paused = job_throttle_.paused;
  job_throttle_ = policy::NextThrottleState(job_throttle_, signals, now_, setup_.job_throttle);
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

void Simulator::OnJobChunkLost() {
  // Nothing of it is done: the same rows go again.
  job_chunk_in_flight_ = false;
}

}  // namespace maitre::sim
