#include "runtime/process_stats.h"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace maitre::runtime {
namespace {

constexpr double kBytesPerMb = 1024.0 * 1024.0;

double SecondsOn(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The /proc files are opened once and re-read with pread: a worker confines
// itself (core/sandbox.h) after its first reading, and may then no longer
// open anything under /proc.
int ProcSelfFile(const char* name) {
  static const int statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  static const int status = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  return std::strcmp(name, "statm") == 0 ? statm : status;
}

// The file's current contents, up to 4 KiB ("" when unreadable).
std::string ReadProcSelf(const char* name) {
  const int fd = ProcSelfFile(name);
  if (fd < 0) return "";
  char buf[4096];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

double ResidentMemoryMb() {
  const std::string statm = ReadProcSelf("statm");
  long long size_pages = 0, resident_pages = 0;
  if (std::sscanf(statm.c_str(), "%lld %lld", &size_pages, &resident_pages) != 2) return 0;
  return static_cast<double>(resident_pages) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
         kBytesPerMb;
}

double PeakResidentMemoryMb() {
  const std::string status = ReadProcSelf("status");
  const size_t at = status.find("\nVmHWM:");
  long long kb = 0;
  if (at == std::string::npos || std::sscanf(status.c_str() + at + 7, "%lld", &kb) != 1) return 0;
  return static_cast<double>(kb) / 1024.0;
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
