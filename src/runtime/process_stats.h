// Resource readings of the current process, for the profiler (peak memory
// of a loaded variant) and the worker monitor (utilisation). Linux only:
// they read /proc/self and the process CPU clock.
//
// Thread-safety: safe to call from any thread.
#pragma once

#include <functional>

namespace maitre::runtime {

// Current resident set size in MiB (/proc/self/statm); 0 if unreadable.
double ResidentMemoryMb();

// Peak resident set size in MiB (VmHWM in /proc/self/status); 0 if
// unreadable.
double PeakResidentMemoryMb();

// Bytes the process's malloc has handed out and not taken back, in MiB
// (glibc's mallinfo2: arena chunks in use plus mmapped chunks). Unlike the
// resident size it falls when memory is freed, so the growth across a load
// is what the loaded thing holds even where freed memory is reused.
double HeapInUseMb();

// User + system CPU seconds used by all threads of this process so far.
// Utilisation over an interval is the difference of two readings divided by
// (interval × cores).
double ProcessCpuSeconds();

// A reader of the calling thread's CPU seconds, which any thread may call
// while the calling thread lives.
std::function<double()> CallingThreadCpuClock();

// How many cores the calling thread may run on (its affinity mask).
int CallingThreadCores();

}  // namespace maitre::runtime
