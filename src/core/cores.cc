#include "core/cores.h"

#include <sched.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace maitre {

std::vector<int> AllowedCores() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  return cores;
}

absl::Status PinThread(pthread_t thread, const std::vector<int>& cores) {
  if (cores.empty()) return absl::OkStatus();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) {
    if (c < 0 || c >= CPU_SETSIZE) return absl::InvalidArgumentError(absl::StrCat("no core ", c));
    CPU_SET(c, &set);
  }
  if (const int rc = pthread_setaffinity_np(thread, sizeof(set), &set); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot pin to cores ", absl::StrJoin(cores, ","),
                                                   ": ", std::strerror(rc)));
  }
  return absl::OkStatus();
}

}  // namespace maitre
