#include "loadgen/driver.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace maitre::loadgen {
namespace {

// What the driving thread and the completion callbacks share. Callbacks may
// outlive the driver's call (a late answer after the drain gave up), so they
// hold it by shared_ptr and do nothing once it is closed.
class RunState {
 public:
  RunState(Transport* transport, const Clock* clock) : transport_(transport), clock_(clock) {}

  // A new record, or null once the run is closed. The deque never moves its
  // elements, so callbacks may keep the pointer.
  RequestRecord* Begin(Nanos scheduled) {
    absl::MutexLock lock(&mu_);
    if (closed_) return nullptr;
    records_.emplace_back();
    records_.back().scheduled = scheduled;
    ++started_;
    max_in_flight_ = std::max(max_in_flight_, started_ - answered_ - failed_);
    return &records_.back();
  }

  // Stores an outcome; ignored once the run is closed.
  void Finish(RequestRecord* record, CallResult&& result) {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    record->sent = result.sent_at;
    record->done = result.done_at;
    record->ok = result.ok;
    record->server = result.server;
    if (result.ok) {
      ++answered_;
      return;
    }
    ++failed_;
    auto it = std::find(kinds_.begin(), kinds_.end(), result.error_kind);
    if (it == kinds_.end()) {
      kinds_.push_back(std::move(result.error_kind));
      examples_.push_back(result.error_message);
      it = kinds_.end() - 1;
    }
    record->error = static_cast<int32_t>(it - kinds_.begin());
    auto known = message_index_.find(result.error_message);
    if (known == message_index_.end()) {
      if (messages_.size() >= kMaxErrorMessages) return;
      known = message_index_
                  .emplace(result.error_message, static_cast<int32_t>(messages_.size()))
                  .first;
      messages_.push_back(std::move(result.error_message));
    }
    record->message = known->second;
  }

  // Closed loop: starts one worker's next request, or retires the worker
  // when the load phase is over.
  static void IssueNext(const std::shared_ptr<RunState>& state) {
    const Nanos now = state->clock_->Now();
    RequestRecord* record = nullptr;
    {
      absl::MutexLock lock(&state->mu_);
      if (!state->closed_ && now < state->stop_at_) {
        state->records_.emplace_back();
        record = &state->records_.back();
        record->scheduled = now;
        ++state->started_;
        state->max_in_flight_ =
            std::max(state->max_in_flight_, state->started_ - state->answered_ - state->failed_);
      } else {
        --state->active_workers_;
        return;
      }
    }
    const size_t index = state->next_payload_.fetch_add(1, std::memory_order_relaxed);
    state->transport_->Start(index, [state, record](CallResult result) {
      state->Finish(record, std::move(result));
      IssueNext(state);
    });
  }

  void SetClosedLoop(int workers, Nanos stop_at) {
    absl::MutexLock lock(&mu_);
    active_workers_ = workers;
    stop_at_ = stop_at;
  }

  Progress Snapshot(Nanos start) {
    absl::MutexLock lock(&mu_);
    return SnapshotLocked(start);
  }

  // Waits until `done` holds or the deadline passes, reporting progress on
  // the way. Returns whether `done` held.
  template <typename Pred>
  bool WaitFor(Pred done, Nanos deadline, const DriverOptions& options, Nanos start,
               Nanos* next_progress) {
    absl::MutexLock lock(&mu_);
    auto thunk = [this, &done]() { return done(*this); };
    absl::Condition cond(&thunk);
    while (true) {
      Nanos until = deadline;
      if (options.progress) until = std::min(until, *next_progress);
      if (clock_->AwaitWithDeadline(&mu_, cond, until)) return true;
      const Nanos now = clock_->Now();
      if (now >= deadline) return false;
      if (options.progress && now >= *next_progress) {
        Progress p = SnapshotLocked(start);
        *next_progress = now + options.progress_every;
        mu_.Unlock();
        options.progress(p);
        mu_.Lock();
      }
    }
  }

  bool AllAnswered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return answered_ + failed_ == started_;
  }
  bool WorkersRetired() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return active_workers_ <= 0 && answered_ + failed_ == started_;
  }

  // Ends the run: later callbacks are ignored, and the records are copied out.
  void Close(Nanos start, Nanos load_end, RunResult* out) {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    out->start = start;
    out->load_duration = load_end - start;
    out->records.assign(records_.begin(), records_.end());
    out->error_kinds = kinds_;
    out->error_examples = examples_;
    out->error_messages = messages_;
    out->max_in_flight = max_in_flight_;
    Nanos end = load_end;
    bool unfinished = false;
    for (const RequestRecord& r : records_) {
      if (r.done == 0) {
        unfinished = true;
      } else {
        end = std::max(end, r.done);
      }
    }
    out->end = unfinished ? std::max(end, clock_->Now()) : end;
  }

 private:
  Progress SnapshotLocked(Nanos start) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Progress p;
    p.elapsed = clock_->Now() - start;
    p.started = started_;
    p.answered = answered_;
    p.failed = failed_;
    p.in_flight = started_ - answered_ - failed_;
    return p;
  }

  Transport* const transport_;
  const Clock* const clock_;
  std::atomic<size_t> next_payload_{0};

  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<RequestRecord> records_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> kinds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> examples_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int32_t> message_index_ ABSL_GUARDED_BY(mu_);
  int64_t started_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int active_workers_ ABSL_GUARDED_BY(mu_) = 0;
  Nanos stop_at_ ABSL_GUARDED_BY(mu_) = 0;
};

// Linux lets a sleeping thread wake up to 50 µs late by default ("timer
// slack"), which would show up as client lag on every request of an open
// loop. The scheduler asks for precise wake-ups while it runs and gives the
// caller's setting back after.
class PreciseWakeups {
 public:
  PreciseWakeups() : previous_(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) {
    if (previous_ > 0) prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
  }
  ~PreciseWakeups() {
    if (previous_ > 0) prctl(PR_SET_TIMERSLACK, previous_, 0, 0, 0);
  }
  PreciseWakeups(const PreciseWakeups&) = delete;
  PreciseWakeups& operator=(const PreciseWakeups&) = delete;

 private:
  const int previous_;
};

const Clock* ClockOf(const DriverOptions& options) {
  return options.clock ? options.clock : SteadyClock::Get();
}

}  // namespace

RunResult RunOpenLoop(Transport& transport, ArrivalSource& arrivals,
                      const DriverOptions& options) {
  const Clock* clock = ClockOf(options);
  PreciseWakeups precise_wakeups;
  auto state = std::make_shared<RunState>(&transport, clock);
  const size_t payloads = std::max<size_t>(1, transport.num_payloads());
  const Nanos start = clock->Now();
  Nanos next_progress = start + options.progress_every;
  size_t index = 0;
  Nanos last_sent = start;
  Arrival arrival;
  while (arrivals.Next(&arrival) && arrival.time < options.duration) {
    const Nanos due = start + arrival.time;
    if (clock->Now() < due) clock->SleepUntil(due);
    last_sent = clock->Now();
    RequestRecord* record = state->Begin(due);
    transport.Start(index++ % payloads, [state, record](CallResult result) {
      state->Finish(record, std::move(result));
    });
    if (options.progress && clock->Now() >= next_progress) {
      next_progress = clock->Now() + options.progress_every;
      options.progress(state->Snapshot(start));
    }
  }
  // The load phase lasts the whole duration even when the arrivals end
  // early, so throughput is over the same window whatever the trace; it
  // ends later only when sending fell behind the schedule. It is read from
  // the time the last request left, not from the clock now: by now its
  // answer may be due, and the drain deadline must not move with it.
  const Nanos load_end = std::max(last_sent, start + options.duration);
  if (clock->Now() < load_end) clock->SleepUntil(load_end);
  state->WaitFor([](RunState& s) { return s.AllAnswered(); },
                 load_end + options.drain_timeout, options, start, &next_progress);
  RunResult result;
  state->Close(start, load_end, &result);
  return result;
}

RunResult RunClosedLoop(Transport& transport, int concurrency, const DriverOptions& options) {
  const Clock* clock = ClockOf(options);
  auto state = std::make_shared<RunState>(&transport, clock);
  const Nanos start = clock->Now();
  const Nanos stop_at = start + options.duration;
  Nanos next_progress = start + options.progress_every;
  state->SetClosedLoop(concurrency, stop_at);
  for (int i = 0; i < concurrency; ++i) RunState::IssueNext(state);
  state->WaitFor([](RunState& s) { return s.WorkersRetired(); },
                 stop_at + options.drain_timeout, options, start, &next_progress);
  RunResult result;
  state->Close(start, std::min(clock->Now(), stop_at), &result);
  return result;
}

}  // namespace maitre::loadgen
