// Which cores a thread may run on, and pinning a thread to some of them.
// Worker processes pin themselves to their type's cores; the controller
// pins its deadline timer's lanes to different cores.
//
// Thread-safety: thread-safe (each call reads or sets the calling thread's
// own affinity).
#pragma once

#include <pthread.h>

#include <vector>

#include "absl/status/status.h"

namespace maitre {

// The cores the calling thread may run on, in increasing order (empty if
// the kernel will not say).
std::vector<int> AllowedCores();

// Restricts `thread` (and threads it starts afterwards) to `cores`; an
// empty list changes nothing.
absl::Status PinThread(pthread_t thread, const std::vector<int>& cores);
inline absl::Status PinCallingThread(const std::vector<int>& cores) {
  return PinThread(pthread_self(), cores);
}

}  // namespace maitre
