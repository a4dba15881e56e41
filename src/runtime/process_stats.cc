#include "runtime/process_stats.h"

#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace maitre::runtime {
namespace {

constexpr double kBytesPerMb = 1024.0 * 1024.0;

double SecondsOn(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

double ResidentMemoryMb() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long size_pages = 0, resident_pages = 0;
  int got = std::fscanf(f, "%lld %lld", &size_pages, &resident_pages);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<double>(resident_pages) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
         kBytesPerMb;
}

double PeakResidentMemoryMb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double mb = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    long long kb = 0;
    if (std::strncmp(line, "VmHWM:", 6) == 0 && std::sscanf(line + 6, "%lld", &kb) == 1) {
      mb = static_cast<double>(kb) / 1024.0;
      break;
    }
  }
  std::fclose(f);
  return mb;
}

double HeapInUseMb() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd) / kBytesPerMb;
}

double ProcessCpuSeconds() { return SecondsOn(CLOCK_PROCESS_CPUTIME_ID); }

std::function<double()> CallingThreadCpuClock() {
  clockid_t clock;
  if (pthread_getcpuclockid(pthread_self(), &clock) != 0) return [] { return 0.0; };
  return [clock] { return SecondsOn(clock); };
}

int CallingThreadCores() {
  cpu_set_t cores;
  if (sched_getaffinity(0, sizeof(cores), &cores) != 0) return 1;
  return CPU_COUNT(&cores);
}

}  // namespace maitre::runtime
