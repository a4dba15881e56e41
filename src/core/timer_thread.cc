#include "core/timer_thread.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace maitre {

TimerThread::TimerThread(const Clock* clock) : clock_(clock) {
  thread_ = std::thread([this] { Loop(); });
}

TimerThread::~TimerThread() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

absl::Status TimerThread::RaiseToRealtime() {
  sched_param param{};
  param.sched_priority = sched_get_priority_min(SCHED_FIFO);
  const int rc = pthread_setschedparam(thread_.native_handle(), SCHED_FIFO, &param);
  if (rc != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot give the timer thread real-time priority: ", std::strerror(rc)));
  }
  return absl::OkStatus();
}

TimerThread::Handle TimerThread::Schedule(Nanos at, absl::AnyInvocable<void() &&> fire) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return {};
  const Handle handle{at, next_seq_++};
  entries_.emplace(std::make_pair(at, handle.seq), std::move(fire));
  return handle;
}

void TimerThread::Cancel(Handle handle) {
  if (handle.seq == 0) return;
  absl::MutexLock lock(&mu_);
  entries_.erase(std::make_pair(handle.at, handle.seq));
}

size_t TimerThread::pending() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

void TimerThread::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (!entries_.empty() && entries_.begin()->first.first <= clock_->Now()) {
      absl::AnyInvocable<void() &&> fire = std::move(entries_.begin()->second);
      entries_.erase(entries_.begin());
      mu_.Unlock();
      std::move(fire)();
      mu_.Lock();
      continue;
    }
    // Wake for the earliest entry, an earlier one scheduled meanwhile, or
    // the stop.
    const Nanos wake = entries_.empty() ? kInfiniteFuture : entries_.begin()->first.first;
    auto changed = [this, wake]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || (!entries_.empty() && entries_.begin()->first.first < wake);
    };
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&changed), wake);
  }
}

}  // namespace maitre
