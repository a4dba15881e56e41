#include "core/timer_thread.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/cores.h"
#include "core/status_macros.h"
#include "core/thread_name.h"

namespace maitre {

TimerThread::TimerThread(const Clock* clock, int lanes) : clock_(clock) {
  for (int i = 0; i < std::max(1, lanes); ++i) lanes_.push_back(std::make_unique<Lane>());
  for (auto& lane : lanes_) {
    lane->thread = std::thread([this, l = lane.get()] {
      NameThisThread("timer");
      Loop(*l);
    });
  }
}

TimerThread::~TimerThread() {
  for (auto& lane : lanes_) {
    absl::MutexLock lock(&lane->mu);
    lane->stopping = true;
  }
  for (auto& lane : lanes_) lane->thread.join();
}

absl::Status TimerThread::RaiseToRealtime() {
  sched_param param{};
  param.sched_priority = sched_get_priority_min(SCHED_FIFO);
  for (auto& lane : lanes_) {
    const int rc = pthread_setschedparam(lane->thread.native_handle(), SCHED_FIFO, &param);
    if (rc != 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot give the timer thread real-time priority: ", std::strerror(rc)));
    }
  }
  return absl::OkStatus();
}

absl::Status TimerThread::PinLanes(const std::vector<int>& cpus) {
  for (size_t i = 0; i < lanes_.size() && i < cpus.size(); ++i) {
    MAITRE_RETURN_IF_ERROR(PinThread(lanes_[i]->thread.native_handle(), {cpus[i]}));
  }
  return absl::OkStatus();
}

TimerThread::Handle TimerThread::Schedule(Nanos at, absl::AnyInvocable<void() &&> fire) {
  const Handle handle{at, next_seq_.fetch_add(1, std::memory_order_relaxed)};
  const auto key = std::make_pair(at, handle.seq);
  if (lanes_.size() == 1) {
    absl::MutexLock lock(&lanes_[0]->mu);
    if (lanes_[0]->stopping) return {};
    lanes_[0]->entries.emplace(key, std::move(fire));
    return handle;
  }
  // The first lane to reach the closure takes it; the others find it gone.
  struct Once {
    std::atomic<bool> taken{false};
    absl::AnyInvocable<void() &&> fire;
  };
  auto once = std::make_shared<Once>();
  once->fire = std::move(fire);
  for (auto& lane : lanes_) {
    absl::MutexLock lock(&lane->mu);
    if (lane->stopping) return {};
    lane->entries.emplace(key, [once] {
      if (!once->taken.exchange(true, std::memory_order_acq_rel)) std::move(once->fire)();
    });
  }
  return handle;
}

void TimerThread::Cancel(Handle handle) {
  if (handle.seq == 0) return;
  for (auto& lane : lanes_) {
    absl::MutexLock lock(&lane->mu);
    lane->entries.erase(std::make_pair(handle.at, handle.seq));
  }
}

size_t TimerThread::pending() const {
  size_t most = 0;
  for (const auto& lane : lanes_) {
    absl::MutexLock lock(&lane->mu);
    most = std::max(most, lane->entries.size());
  }
  return most;
}

void TimerThread::Loop(Lane& lane) {
  absl::MutexLock lock(&lane.mu);
  while (!lane.stopping) {
    if (!lane.entries.empty() && lane.entries.begin()->first.first <= clock_->Now()) {
      absl::AnyInvocable<void() &&> fire = std::move(lane.entries.begin()->second);
      lane.entries.erase(lane.entries.begin());
      lane.mu.Unlock();
      std::move(fire)();
      lane.mu.Lock();
      continue;
    }
    // Wake for the earliest entry, an earlier one scheduled meanwhile, or
    // the stop.
    const Nanos wake =
        lane.entries.empty() ? kInfiniteFuture : lane.entries.begin()->first.first;
    auto changed = [&lane, wake]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu) {
      return lane.stopping || (!lane.entries.empty() && lane.entries.begin()->first.first < wake);
    };
    clock_->AwaitWithDeadline(&lane.mu, absl::Condition(&changed), wake);
  }
}

}  // namespace maitre
